"""``ppbn perturb learn nb|id3|perceptron|rules``: learn from randomized data.

See ppbn.lab.randomized_learning; the group ``ppbn perturb`` is made in
ppbn/commands/perturb.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ppbn.errors import UserError

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
    from ppbn.data.outputs import atomic_output_dir, check_output_dir
    from ppbn.lab.randomized_learning import (
        FileMechanism,
        Mechanism,
        learn,
        load_tables,
        parse_groups,
    )

    if args.out:
        check_output_dir(args.out, force=args.force)
    test_path = getattr(args, "test", None)
    if getattr(args, "test_randomized", False) and not test_path:
        raise UserError(
            "--test-randomized says how the --test records were randomized: give --test"
        )
    paths = [Path(args.data)] + ([Path(test_path)] if test_path else [])
    if test_path and Path(test_path).is_dir() != Path(args.data).is_dir():
        raise UserError("--data and --test must both be CSV files or both be data folders")
    class_name = getattr(args, "class_name", None)
    file_mechanism = None
    if args.mechanism is not None:
        flags = [
            f
            for f, given in (
                ("--theta", args.theta is not None),
                ("--p", args.p is not None),
                ("--groups", bool(args.groups)),
                ("--randomize-class", getattr(args, "randomize_class", False)),
            )
            if given
        ]
        if flags:
            raise UserError(f"--mechanism describes the whole mechanism: leave out {flags[0]}")
        file_mechanism = FileMechanism.read(args.mechanism)
    tables = load_tables(paths, args.id, file_mechanism)
    train = tables[0]
    test = tables[1] if len(tables) > 1 else None
    mechanism: Mechanism | FileMechanism | None = file_mechanism
    if file_mechanism is not None or args.theta is not None or args.p is not None:
        if args.ignore_randomization and args.randomize is None:
            raise UserError(
                "--ignore-randomization learns as if the data were original: give no "
                "mechanism (or --randomize, to randomize here and then ignore it)"
            )
        if args.theta is not None and args.p is not None:
            raise UserError("give one mechanism: --theta (randomized response) or --p (PRAM)")
        if file_mechanism is None:
            candidates = [c for c in train.columns if c != class_name]
            randomized = (
                [*candidates, class_name] if getattr(args, "randomize_class", False) else candidates
            )
            mechanism = Mechanism(
                args.theta, args.p, tuple(parse_groups(args.groups, candidates)), tuple(randomized)
            )
    elif not args.ignore_randomization:
        raise UserError(
            "name the mechanism the data were randomized with (--theta, --p or --mechanism), "
            "or --ignore-randomization to learn as if they were not"
        )
    options: dict[str, Any] = {
        "estimator": args.estimator,
        "alpha": getattr(args, "alpha", 1.0),
        "max_depth": getattr(args, "max_depth", None),
        "min_count": getattr(args, "min_count", 1.0),
        "positive": getattr(args, "positive", None),
        "encoding": getattr(args, "encoding", "onehot"),
        "cost": getattr(args, "cost", "expected"),
        "iterations": getattr(args, "iterations", 20_000),
        "seed": getattr(args, "seed", 0),
        "min_support": getattr(args, "min_support", 0.05),
        "min_confidence": getattr(args, "min_confidence", 0.6),
        "max_size": getattr(args, "max_size", None),
    }
    report = learn(
        args.learner,
        train,
        test,
        class_name,
        mechanism,
        options,
        args.randomize,
        correct=not args.ignore_randomization,
        test_randomized=getattr(args, "test_randomized", False),
    )
    report["data"] = str(args.data)
    if args.out:
        with atomic_output_dir(args.out, force=args.force) as folder:
            (folder / "model.json").write_text(
                json.dumps(report["model"], indent=2) + "\n", encoding="utf-8"
            )
            (folder / "report.json").write_text(
                json.dumps(report, indent=2) + "\n", encoding="utf-8"
            )
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(_lines(report)))
    return 0


def _lines(report: dict[str, Any]) -> list[str]:
    """The report for people: the mechanism, the model in short, the accuracy."""
    how = "estimated counts" if report["corrected"] else "taken as if not randomized"
    out = [
        f"{report['learner']} on {report['records']:,} records ({how}); mechanism: {report['mechanism']}"
    ]
    gammas = sorted({_gamma(g) for g in report["privacy"]})
    if gammas:
        out.append(f"gamma-amplification per randomized block: {', '.join(gammas)}")
    model = report["model"]
    if report["learner"] == "nb":
        out.append(
            "P("
            + model["class"]
            + "): "
            + ", ".join(f"{k} {v:.3f}" for k, v in model["prior"].items())
        )
        classes = " / ".join(model["prior"])
        for name, table in model["conditionals"].items():
            cells = "; ".join(
                f"{state}: " + " / ".join(f"{p:.3f}" for p in row.values())
                for state, row in table.items()
            )
            out.append(f"P({name} | {model['class']} = {classes}) {cells}")
    elif report["learner"] == "id3":
        out.append(f"tree: {model['nodes']} nodes, depth {model['depth']}")
        out += ["  " + line for line in report["tree_lines"]]
    elif report["learner"] == "perceptron":
        out.append(
            f"w ({model['encoding']}, positive = {model['positive']}): "
            + ", ".join(f"{k} {v:g}" for k, v in model["weights"].items())
        )
        out.append(
            f"pocket weights classify {model['training_correct']:.3f} of the training weight right"
        )
    else:
        sets, rules = model["frequent_itemsets"], model["rules"]
        out.append(f"{len(sets)} frequent itemsets, {len(rules)} rules")
        for rule in rules[:15]:
            out.append(
                f"  {', '.join(rule['if'])} => {', '.join(rule['then'])}  "
                f"support {rule['support']:.3f} confidence {rule['confidence']:.3f}"
            )
        if len(rules) > 15:
            out.append(f"  ... {len(rules) - 15} more (--format json or --out for all)")
    task = f" ({report['accuracy_task']})" if "accuracy_task" in report else ""
    if "accuracy" in report:
        out.append(
            f"accuracy on {report['test_records']:,} test records{task}: {report['accuracy']:.4f}"
        )
    if "accuracy_estimated" in report:
        which = "the disguised" if "accuracy" not in report else "a copy randomized here of the"
        out.append(
            f"accuracy estimated from {which} test records (Zhan Sec. 3.5, "
            f"{report['accuracy_estimated_passes']} classifier passes){task}: "
            f"{report['accuracy_estimated']:.4f} +- {report['accuracy_estimated_se']:.4f} (standard error)"
        )
    if "accuracy_estimated_skipped" in report:
        out.append(
            f"note: no estimate from a copy of the test records randomized here: "
            f"{report['accuracy_estimated_skipped']}"
        )
    out.append(f"learned in {report['seconds']:.2f} s")
    return out


def _gamma(row: dict[str, Any]) -> str:
    if row["gamma"] != "inf":
        return f"{row['gamma']:.3g}"
    loose = row["gamma_ignoring_zeros"]
    return "inf" if loose == "inf" else f"inf ({loose:.3g} ignoring zeros)"


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
