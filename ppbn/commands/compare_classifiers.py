"""``ppbn compare-classifiers``: classifiers learned from original, randomized and
reconstructed data against the privacy level (see ppbn.lab.classifier_compare)."""

from __future__ import annotations

import argparse
import sys

from ppbn.errors import UserError


def _compare(args: argparse.Namespace) -> int:
    from ppbn.data.outputs import atomic_output_dir, check_output_dir
    from ppbn.lab.classifier_compare import (
        ClassifierSettings,
        markdown_table,
        parse_levels,
        parse_names,
        paths_table,
        run_classifier_comparison,
        trends,
        write_report,
    )

    if (args.network is None) == (not args.lenses):
        raise UserError("give --network NAME (with --class) or --lenses")
    if args.network and not args.class_name:
        raise UserError("--network needs --class VARIABLE")
    records = args.records or (6000 if args.lenses else 20000)
    if records < 10 or args.test_records < 10:
        raise UserError("--records and --test-records must be at least 10")
    if args.theta and args.p:
        raise UserError("give --p (M-category) or --theta (randomized response), not both")
    if args.one_group and not args.theta:
        raise UserError("--one-group is Zhan's scheme: it needs --theta")
    if args.secure and args.lenses:
        raise UserError(
            "--secure runs the secure path on a network's records: give --network, not --lenses"
        )
    if args.repeats < 1:
        raise UserError("--repeats must be at least 1")
    if args.pocket_iterations < 1:
        raise UserError("--pocket-iterations must be at least 1")
    settings = ClassifierSettings(
        network=args.network,
        class_name=args.class_name,
        records=records,
        test_records=args.test_records,
        levels=parse_levels(args.theta, "--theta")
        if args.theta
        else parse_levels(args.p or "0.1,0.2,0.3,0.4", "--p"),
        repeats=args.repeats,
        seed=args.seed,
        attributes=parse_names(args.attributes),
        randomize_class=args.randomize_class,
        max_depth=args.max_depth,
        encoding=args.encoding or ("ordinal" if args.lenses else "onehot"),
        positive=args.positive,
        perceptron_estimator=args.perceptron_estimator,
        pocket_iterations=args.pocket_iterations,
        mechanism="theta" if args.theta else "p",
        one_group=args.one_group,
        secure=args.secure,
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
        return 0
    print(markdown_table(results))
    print()
    if results["secure"] is not None:
        print(paths_table(results))
        print()
    for line in trends(results):
        print(f"- {line}")
    print()
    print(f"wall time {results['wall_s']:.1f} s; report: {', '.join(str(p) for p in written)}")
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
