"""``ppbn perturb learn nb|id3|perceptron|rules``: learn from randomized data.

Flags and printing only: the work is ``ppbn.lab.randomized_learning.learn_files``; the
group ``ppbn perturb`` is made in ppbn/commands/perturb.py.
"""

from __future__ import annotations

import argparse
import json

from ppbn.randomized.constants import LEARNER_OPTIONS

HELP = {
    "nb": "naive Bayes from randomized-response / PRAM data (Zhan, Chang and Matwin)",
    "id3": "ID3 decision tree from estimated counts (Ma 2006, Sec. 7.2)",
    "perceptron": "pocket perceptron minimising the expected cost (Ma 2006, Ch. 6)",
    "rules": "frequent itemsets and association rules, grouped randomization (Ma 2006, Sec. 7.1)",
}


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return value


def _learn(args: argparse.Namespace) -> int:
    from ppbn.lab.randomized_learning import LearnRequest, learn_files, report_lines

    options = {name: getattr(args, name) for name in LEARNER_OPTIONS if hasattr(args, name)}
    request = LearnRequest(
        args.learner,
        args.data,
        options,
        class_name=getattr(args, "class_name", None),
        test=getattr(args, "test", None),
        test_randomized=getattr(args, "test_randomized", False),
        id_column=args.id,
        mechanism_file=args.mechanism,
        theta=args.theta,
        p=args.p,
        groups=args.groups,
        randomize_class=getattr(args, "randomize_class", False),
        ignore_randomization=args.ignore_randomization,
        randomize_seed=args.randomize,
        out=args.out,
        force=args.force,
    )
    report = learn_files(request)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(report_lines(report)))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``learn`` and its learners to ``ppbn perturb``."""
    learn = sub.add_parser(
        "learn",
        help="learn naive Bayes, ID3, a pocket perceptron or association rules from randomized data",
        description="Learn from a table randomized with a known mechanism: the counts the learner "
        "needs are estimated from the randomized records and the public mechanism (moment or EM "
        "estimates), never read from original data.",
    )
    learners = learn.add_subparsers(dest="learner", metavar="LEARNER", required=True)
    for name, text in HELP.items():
        parser = learners.add_parser(name, help=text, description=text)
        _common(parser, classifier=name != "rules")
        if name == "nb":
            parser.add_argument(
                "--alpha",
                type=float,
                default=1.0,
                help="Laplace pseudo-count after clipping (default 1)",
            )
        elif name == "id3":
            parser.add_argument("--max-depth", type=int, help="depth limit (default: none)")
            parser.add_argument(
                "--min-count",
                type=float,
                default=1.0,
                help="a branch with fewer estimated records is empty: parent's majority (default 1)",
            )
        elif name == "perceptron":
            parser.add_argument(
                "--positive",
                help="class value separated from the rest (needed unless the class is binary)",
            )
            parser.add_argument(
                "--encoding",
                choices=("onehot", "ordinal"),
                default="onehot",
                help="features: one indicator per state, or the state's value (default onehot)",
            )
            parser.add_argument(
                "--cost",
                choices=("expected", "raw"),
                default="expected",
                help="expected cost under the mechanism (default), or the raw cost on the randomized records",
            )
            parser.add_argument(
                "--iterations", type=int, default=20_000, help="pocket draws (default 20000)"
            )
            parser.add_argument(
                "--seed", type=int, default=0, help="seed of the pocket's draws (default 0)"
            )
        else:
            parser.add_argument(
                "--min-support", type=_probability, default=0.05, help="default 0.05"
            )
            parser.add_argument(
                "--min-confidence", type=_probability, default=0.6, help="default 0.6"
            )
            parser.add_argument("--max-size", type=int, help="largest itemset (default: no limit)")
        parser.set_defaults(func=_learn, learner=name)


def _common(parser: argparse.ArgumentParser, classifier: bool) -> None:
    parser.add_argument(
        "--data", required=True, help="randomized table: a CSV, or a `ppbn datasets make` folder"
    )
    if classifier:
        parser.add_argument(
            "--class", dest="class_name", required=True, metavar="COLUMN", help="the class column"
        )
        parser.add_argument(
            "--test",
            help="test table, same columns: report the accuracy (original records "
            "unless --test-randomized)",
        )
        parser.add_argument(
            "--test-randomized",
            action="store_true",
            help="the --test records were randomized with the same mechanism: estimate the accuracy on "
            "their originals (Zhan, Chang and Matwin Sec. 3.5)",
        )
    parser.add_argument("--id", help="id column of a CSV to leave out")
    mechanism = parser.add_argument_group(
        "mechanism the data were randomized with: the shared mechanism file, or flags"
    )
    mechanism.add_argument(
        "--mechanism",
        metavar="FILE",
        help="the mechanism file the owners randomized with (`ppbn perturb randomize --mechanism`); "
        "its states order each column's values",
    )
    mechanism.add_argument(
        "--theta",
        type=_probability,
        help="Warner randomized response: keep with theta, flip otherwise (binary columns)",
    )
    mechanism.add_argument(
        "--p", type=_probability, help="M-category randomization: change with p to any other value"
    )
    mechanism.add_argument(
        "--groups",
        metavar="a,b:c,d",
        help="columns randomized together, one group per ':' (all: one group of every attribute); "
        "theta keeps or flips a whole group, p changes its combined value",
    )
    if classifier:
        mechanism.add_argument(
            "--randomize-class",
            action="store_true",
            help="the class was randomized too (default: not)",
        )
    mechanism.add_argument(
        "--ignore-randomization",
        action="store_true",
        help="learn as if the data were original (the uncorrected baseline; with "
        "--randomize: randomize here, then ignore it)",
    )
    parser.add_argument(
        "--randomize",
        metavar="SEED",
        help="the table holds ORIGINAL records: randomize them here with the mechanism first "
        "(experiments and demonstrations; a data miner receives randomized data)",
    )
    parser.add_argument(
        "--estimator",
        choices=("moment", "em"),
        help="count estimator (default moment; em for the perceptron)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--out", help="folder for model.json and report.json (new or empty, written whole)"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
