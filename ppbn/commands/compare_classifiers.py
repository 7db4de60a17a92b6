"""``ppbn compare-classifiers``: classifiers learned from original, randomized and
reconstructed data against the privacy level (see ppbn.lab.classifier_compare)."""

from __future__ import annotations

import argparse
import sys


def _compare(args: argparse.Namespace) -> int:
    from ppbn.data.outputs import atomic_output_dir, check_output_dir
    from ppbn.lab.classifier_compare import classifier_settings, run_classifier_comparison
    from ppbn.lab.classifier_report import comparison_text, write_report

    settings = classifier_settings(
        network=args.network,
        class_name=args.class_name,
        lenses=args.lenses,
        records=args.records,
        test_records=args.test_records,
        p=args.p,
        theta=args.theta,
        one_group=args.one_group,
        secure=args.secure,
        repeats=args.repeats,
        pocket_iterations=args.pocket_iterations,
        seed=args.seed,
        attributes=args.attributes,
        randomize_class=args.randomize_class,
        max_depth=args.max_depth,
        encoding=args.encoding,
        positive=args.positive,
        perceptron_estimator=args.perceptron_estimator,
    )
    name = "lenses" if args.lenses else f"{args.network}-{args.class_name}"
    out = check_output_dir(args.out or f"compare-classifiers-{name}", force=args.force)
    quiet = args.format == "json"
    say = (lambda _m: None) if quiet else (lambda message: print(f"  {message}", file=sys.stderr))
    with atomic_output_dir(out, force=args.force) as folder:
        results = run_classifier_comparison(settings, say)
        written = [out / path.relative_to(folder) for path in write_report(results, folder)]
    if quiet:
        print((out / "results.json").read_text(encoding="utf-8"))
    else:
        print(comparison_text(results, written))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare-classifiers",
        help="naive Bayes, ID3, pocket perceptron from original, randomized and reconstructed data against p",
        description="Sample training and test records (a bnlearn network with a class variable, or "
        "the Lens data of Ma 2006 Sec. 6.3), randomize the training attributes with M-category "
        "randomization for each p, and measure on the original test records the accuracy of "
        "naive Bayes (Zhan), ID3 and the pocket perceptron (Ma 2006) learned from the original "
        "data, from the randomized data taken at face value, and from estimated counts. Writes "
        "results.json, report.md and accuracy.png.",
    )
    parser.add_argument(
        "--network", help="bnlearn network to sample from (e.g. asia, child, alarm)"
    )
    parser.add_argument("--class", dest="class_name", metavar="VARIABLE", help="the class variable")
    parser.add_argument(
        "--lenses",
        action="store_true",
        help="the Lens data of Ma 2006, Sec. 6.3 instead of a network",
    )
    parser.add_argument(
        "--records", type=int, help="training records (default 20000; 6000 with --lenses)"
    )
    parser.add_argument(
        "--test-records", type=int, default=5000, help="test records (default 5000)"
    )
    parser.add_argument("--p", help="M-category randomization levels (default 0.1,0.2,0.3,0.4)")
    parser.add_argument(
        "--theta",
        help="Warner randomized-response levels instead (binary attributes), e.g. 0,0.1,0.3,0.7,0.9,1",
    )
    parser.add_argument(
        "--one-group",
        action="store_true",
        help="with --theta: all attributes kept or flipped together (Zhan's one-group scheme)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="randomizations per p (default 5, as Ma 2006)"
    )
    parser.add_argument("--seed", type=int, default=7, help="data seed (default 7)")
    parser.add_argument(
        "--attributes",
        help="comma list of attributes (default: all other variables, or the class's Markov "
        "blanket when the perceptron's configurations would exceed 65,536)",
    )
    parser.add_argument(
        "--randomize-class", action="store_true", help="randomize the class too (default: not)"
    )
    parser.add_argument("--max-depth", type=int, help="ID3 depth limit (default: none)")
    parser.add_argument(
        "--encoding",
        choices=("onehot", "ordinal"),
        help="perceptron features (default onehot; ordinal with --lenses)",
    )
    parser.add_argument(
        "--positive",
        help="class state the perceptron separates (needed unless the class is binary)",
    )
    parser.add_argument(
        "--perceptron-estimator",
        choices=("em", "moment"),
        default="em",
        help="prior of the expected cost (default em)",
    )
    parser.add_argument(
        "--pocket-iterations",
        type=int,
        default=20_000,
        help="pocket draws per perceptron (default 20000)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="also run the secure path (two daemons on loopback, hill climbing) on the same training "
        "records and classify with its network: accuracy, time and bytes next to the perturbation learners",
    )
    parser.add_argument(
        "--out",
        help="report folder (default compare-classifiers-NAME; new or empty, written whole)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_compare)
