"""``ppbn reference``: the non-private learner on the joined data, the yardstick for every
private result."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ppbn.bn.hc import DEFAULT_TABU
from ppbn.bn.k2 import DEFAULT_TAU
from ppbn.bn.scores import DEFAULT_ESS, SCORE_MODES
from ppbn.commands._flag_types import non_negative_float, non_negative_int, positive_float
from ppbn.errors import UserError

SEARCHES = ("k2", "hc")


def parse_order(text: str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """The K2 node order: schema order by default, or a comma list naming every variable once."""
    if not text:
        return names
    order = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [v for v in order if v not in names]
    if unknown:
        raise UserError(f"--order: {unknown[0]!r} is not a variable of the schema")
    if len(set(order)) != len(order) or len(order) != len(names):
        missing = [v for v in names if v not in order]
        raise UserError(
            f"--order must name every variable exactly once (missing: {', '.join(missing) or 'none'})"
        )
    return order


def add_learning_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every learner (reference, secure, PRAM): same meaning everywhere."""
    parser.add_argument("--max-parents", type=non_negative_int, default=2, help="parent limit u (default 2)")
    parser.add_argument(
        "--score", choices=SCORE_MODES, default="exact",
        help="exact (ln f), yw (Yang-Wright eq. 6), yw0 (eq. 6 minus zero cells), bic, bdeu "
        "(default exact)",
    )
    parser.add_argument(
        "--search", choices=SEARCHES, default="k2",
        help="k2 (needs a node order; the default) or hc: hill climbing over DAGs, no order "
        "(on the PRAM path: setup 2 only)",
    )  # fmt: skip
    parser.add_argument(
        "--ess", type=positive_float, default=DEFAULT_ESS,
        help=f"BDeu equivalent sample size (default {DEFAULT_ESS:g}, as pgmpy)",
    )
    parser.add_argument(
        "--tau", type=non_negative_float, default=DEFAULT_TAU,
        help=f"K2 tolerance in nats: add a parent only if the score rises by more than tau "
        f"(default {DEFAULT_TAU:g})",
    )
    parser.add_argument("--order", help="K2 node order as a comma list (default: schema order)")
    parser.add_argument("--c-star", type=positive_float, default=1.0, help="BIC penalty multiplier C* (default 1)")
    parser.add_argument(
        "--dirichlet", type=non_negative_float, default=0.0, metavar="A",
        help="Dirichlet pseudo-count for parameters (default 0: maximum likelihood)",
    )
    add_hc_options(parser)


def refuse_on_private_paths(args: argparse.Namespace, path: str = "secure") -> None:
    """The one place where the private paths (``learn``, ``simulate``, ``bench k2``) refuse
    what they cannot run: hill climbing in PRAM setup I (each child's owner learns its own
    families there, while a move is chosen among both parties')."""
    if getattr(args, "search", "k2") != "k2" and path == "PRAM" and getattr(args, "setup", 2) != 2:
        raise UserError(
            "--search hc on the PRAM path needs --setup 2 (a miner): in setup I each child's owner "
            "scores its own families, and a move is chosen among both parties' families"
        )


def add_hc_options(parser: argparse.ArgumentParser) -> None:
    """Hill-climbing options of the reference learner (pgmpy's HillClimbSearch semantics)."""
    group = parser.add_argument_group("hill climbing (--search hc)")
    group.add_argument(
        "--tabu", type=non_negative_int, default=DEFAULT_TABU, metavar="N",
        help=f"tabu list length: the last N moves may not be undone (default {DEFAULT_TABU}, as pgmpy)",
    )  # fmt: skip
    group.add_argument("--start", metavar="FILE", help="start DAG: a JSON list of [parent, child] edges, or a network.json")
    group.add_argument("--black-list", metavar="FILE", help="JSON list of edges never to add")
    group.add_argument("--white-list", metavar="FILE", help="JSON list of the only edges that may be added")
    group.add_argument("--fixed-edges", metavar="FILE", help="JSON list of edges always present (never deleted or reversed)")


def hc_options(args: argparse.Namespace):
    """``HCOptions`` from the command line; file and edge errors are user errors."""
    from ppbn.bn.hc import read_edge_file
    from ppbn.bn.learn import HCOptions

    def edges(option: str):
        path = getattr(args, option.replace("-", "_"), None)
        if path is None:
            return None
        try:
            return read_edge_file(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--{option}: {path}: file not found") from None
        except ValueError as exc:  # JSONDecodeError included
            raise UserError(f"--{option}: {path}: {exc}") from None

    if args.tabu < 0:
        raise UserError("--tabu must be >= 0")
    return HCOptions(args.tabu, edges("start"), edges("black-list"), edges("white-list"), edges("fixed-edges"))


def hc_job_params(args: argparse.Namespace) -> dict:
    """The hill-climbing parameters of the learn job (none for K2): the search, the tabu
    length and the edge lists read from their files (both daemons check them)."""
    if getattr(args, "search", "k2") != "hc":
        return {}
    opts = hc_options(args)
    params: dict = {"search": "hc", "tabu": opts.tabu_length}
    for name in ("start", "black_list", "white_list", "fixed_edges"):
        edges = getattr(opts, name)
        if edges is not None:
            params[name] = [[p, c] for p, c in edges]
    return params


def search_options(args: argparse.Namespace) -> dict:
    """``learn_reference`` keyword arguments for the search the command line asked for."""
    search = getattr(args, "search", "k2")
    return {"search": search, "hc": hc_options(args) if search == "hc" else None}


def same_hc_moves(learned: dict, reference_search) -> bool | None:
    """Whether a private hill-climbing run (its network.json) applied the reference's moves
    in the same order; None for K2."""
    if "moves" not in learned:
        return None
    ours = [(m["kind"], tuple(m["edge"])) for m in learned["moves"]]
    return ours == [(m.move.kind, m.move.edge) for m in reference_search.moves]


def add_missing_options(parser: argparse.ArgumentParser, rate: bool = False) -> None:
    """``--missing`` (and ``--missing-as-category``, its older alias for ``category``) on
    every command that loads data; with ``rate`` also ``--missing-rate`` for generated data."""
    from ppbn.data.party_data import MISSING_HELP, MISSING_RULES

    parser.add_argument("--missing", choices=MISSING_RULES, help=MISSING_HELP)
    parser.add_argument(
        "--missing-as-category", action="store_true",
        help="the same as --missing category: read empty cells as the schema's declared missing_state",
    )  # fmt: skip
    if rate:
        parser.add_argument(
            "--missing-rate", type=float, default=0.0, metavar="R",
            help="empty this fraction of the generated data's cells at random (each cell "
            "independently) before the run, to try --missing available-case (default 0)",
        )  # fmt: skip


def missing_rule(args: argparse.Namespace) -> str:
    """The rule of ``--missing`` / ``--missing-as-category`` (``error`` when neither is given)."""
    from ppbn.data.party_data import missing_rule_from

    return missing_rule_from(getattr(args, "missing", None), getattr(args, "missing_as_category", False))


def family_records(learned) -> dict[str, int]:
    """Records each family of a learned network was counted on (what the secure learn job
    reports under ``family_records``): under available-case analysis, its complete records."""
    count = learned.oracle.count_fn
    parents = learned.search.parents
    return {v: int(count((*parents[v], v)).sum()) for v in parents}


def format_text(result: dict) -> str:
    lines = [f"score {result['score']}, tau {result['tau']:g}, search {result.get('search', 'k2')}"]
    if result.get("search", "k2") == "k2":
        lines.append("order: " + ", ".join(result["order"]))
        lines.append("edges in the order added:")
        lines += [f"  {i + 1:3d}. {p} -> {c}" for i, (p, c) in enumerate(result["edges"])] or ["  (none)"]
    else:
        lines.append(f"moves in the order applied (total score {result['total_score']:.4f}):")
        lines += [
            f"  {i + 1:3d}. {m['kind']:7s} {m['edge'][0]} -> {m['edge'][1]}  {m['delta']:+.4f}"
            for i, m in enumerate(result["moves"])
        ] or ["  (none)"]
        lines.append(f"edges: {len(result['edges'])}")
    lines.append("parameters:")
    for v, spec in result["parameters"].items():
        given = f" | {', '.join(spec['parents'])}" if spec["parents"] else ""
        flag = f"  [{len(spec['unobserved'])} unobserved parent configurations: uniform]" if spec["unobserved"] else ""
        lines.append(f"  P({v}{given}): {len(spec['table'])} x {len(spec['states'])}{flag}")
        if len(spec["table"]) <= 4:
            for row in spec["table"]:
                lines.append("      " + "  ".join(f"{p:.4f}" for p in row))
    records = result.get("family_records")
    if records and records["rule"] == "available-case":
        lines.append(f"records per family (available-case, of {records['records']}):")
        lines += [f"  {v}: {k}" for v, k in records["families"].items()]
    return "\n".join(lines)


def _reference(args: argparse.Namespace) -> int:
    from ppbn.bn.io import network_json, write_bif
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.schema import Schema
    from ppbn.data.outputs import atomic_output_dir, check_output_dir
    from ppbn.data.party_data import load_joined_with_bins

    if args.out:  # before any work: a bad --out must not cost the computed result
        check_output_dir(args.out, force=args.force)
    data = Path(args.data)
    schema = Schema.load(str(data / "schema.json"))
    rule = missing_rule(args)
    # each party's file is discretized exactly as its daemon does (its whole own file)
    names, codes, cuts = load_joined_with_bins(
        schema, data / "alice.csv", data / "bob.csv", missing_rule=rule, intersect=args.align == "psi"
    )
    order = parse_order(args.order, names)
    states = {v.name: v.states for v in schema.variables}
    if args.max_parents < 0:
        raise UserError("--max-parents must be >= 0")
    start = time.perf_counter()
    try:
        learned = learn_reference(
            names, states, codes, args.max_parents, args.score, args.tau, order, args.c_star, args.dirichlet,
            available_case=rule == "available-case", ess=args.ess, **search_options(args),
        )  # fmt: skip
    except ValueError as exc:  # bad start DAG, lists or --ess
        raise UserError(str(exc)) from None
    network = learned.network.with_state_names(schema.state_names(cuts))  # both owners' intervals
    result = network_json(network, order, learned.search.edges, args.score, args.tau)
    result["search"] = args.search
    if args.score == "bdeu":
        result["ess"] = args.ess
    if args.search == "hc":
        found = learned.search
        result["moves"] = [
            {"kind": m.move.kind, "edge": list(m.move.edge), "delta": m.delta} for m in found.moves
        ]
        result["total_score"] = found.score
        result["tabu"] = args.tabu
        result["start"] = [[p, c] for c in names for p in found.start[c]]
        result["families_scored"] = found.families_scored
    result["stats"] = {"wall_s": time.perf_counter() - start, "records": int(codes.shape[0])}
    result["family_records"] = {
        "rule": rule, "records": int(codes.shape[0]), "families": family_records(learned)
    }
    if args.out:
        with atomic_output_dir(args.out, force=args.force) as out:
            write_bif(network, out / "network.bif")
            (out / "network.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2) if args.format == "json" else format_text(result))
    return 0


PSI_DEFAULT_OVERLAP = 0.6


def add_alignment_options(parser: argparse.ArgumentParser, sampling: bool = True) -> None:
    """--align for commands that start both daemons (and --overlap where they sample data)."""
    parser.add_argument(
        "--align", choices=("strict", "psi"), default="strict",
        help="strict (default): both parties hold the same record ids; psi: the daemons run a "
        "private set intersection of their ids and learn on the shared records only",
    )  # fmt: skip
    if sampling:
        parser.add_argument(
            "--overlap", type=float,
            help="share of each party's sampled records the other holds too (default 1, or "
            f"{PSI_DEFAULT_OVERLAP:g} with --align psi)",
        )  # fmt: skip


def sample_overlap(args: argparse.Namespace) -> float:
    """The overlap to sample with: given, or the default of the alignment; strict needs 1."""
    overlap = args.overlap if args.overlap is not None else (PSI_DEFAULT_OVERLAP if args.align == "psi" else 1.0)
    if overlap < 1.0 and args.align != "psi":
        raise UserError(f"--overlap {overlap:g}: parties with different records need --align psi")
    return overlap


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reference",
        help="learn the network from the joined data, non-privately (the yardstick)",
        description="K2 (or hill-climbing) structure learning and parameters on the joined "
        "plaintext data of both parties. Every private result is compared with this one.",
    )
    parser.add_argument("--data", required=True, help="folder with schema.json, alice.csv, bob.csv")
    add_learning_options(parser)
    add_missing_options(parser)
    parser.add_argument(
        "--align", choices=("strict", "psi"), default="strict",
        help="strict (default): both files must hold the same record ids; psi: learn on the records "
        "whose id is in both files (what daemons run with --align psi learn on)",
    )  # fmt: skip
    parser.add_argument(
        "--out", help="also write network.bif and network.json to this folder (new or empty; "
        "written whole or not at all)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=_reference)
