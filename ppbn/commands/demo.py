"""``ppbn demo``: the main job on a built-in default (what ``make demo`` runs).

Samples 5,000 records from the Asia network, gives alternate variables to alice and bob,
starts both daemons as separate processes over loopback mutual TLS, runs the private K2
and parameter job between them, and prints the learned network next to the non-private
reference, with what each party learned and what it cost.
"""

from __future__ import annotations

import argparse
import json

from ppbn.bn.constants import DEFAULT_TAU
from ppbn.commands.checked_numbers import non_negative_int, positive_int
from ppbn.commands.data_options import (
    add_alignment_options,
    add_missing_options,
    missing_rule,
    sample_overlap,
)
from ppbn.errors import UserError


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ppbn.bench.pair_runs import sample_pair_files
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.schema import Schema
    from ppbn.commands.progress import progress_reporter
    from ppbn.data.outputs import check_output_dir, work_folder
    from ppbn.data.party_data import load_joined
    from ppbn.pair.loopback import LocalPair

    console = Console()
    rule = missing_rule(args)
    if args.out:  # before any work: a bad --out must not cost the run
        check_output_dir(args.out)
    with work_folder(args.out, "ppbn-demo-") as work:
        made, blanked, files = sample_pair_files(
            args.network, args.records, args.seed, work, sample_overlap(args), args.missing_rate
        )
        schema = made.schema
        shared = (
            ""
            if len(made.ids) == args.records
            else f" per party, {len(made.ids)} of them at both (--align psi)"
        )
        console.print(
            f"[bold]data[/bold]: {args.records} records{shared} sampled from {args.network} (seed {args.seed})"
        )
        if blanked:
            console.print(
                f"  {blanked:,} cells emptied at random ({args.missing_rate:g}); --missing {rule}"
            )
        for party in ("alice", "bob"):
            console.print(f"  {party} holds: {', '.join(v.name for v in schema.owned_by(party))}")
        params = {"max_parents": args.max_parents, "score": args.score, "tau": DEFAULT_TAU}
        console.print(
            f"[bold]secure path[/bold]: two daemons over loopback mutual TLS, job learn {json.dumps(params)}"
        )
        with (
            LocalPair(files, 300.0, missing_rule=rule, align=args.align) as pair,
            pair.client("alice") as client,
        ):
            job_id = client.start("learn", params)
            outcome = client.wait(job_id, None, progress_reporter(False))
            if outcome.state != "SUCCEEDED":
                raise UserError(f"the secure job failed: {outcome.error}")
            learned = {
                r: json.loads((pair.out_dir(r) / job_id / "network.json").read_text())
                for r in ("alice", "bob")
            }
            ledgers = {
                r: json.loads((pair.out_dir(r) / job_id / "ledger.json").read_text())
                for r in ("alice", "bob")
            }
        names, codes = load_joined(
            Schema.load(str(work / "data" / "schema.json")),
            work / "data" / "alice.csv",
            work / "data" / "bob.csv",
            missing_rule=rule,
            intersect=args.align == "psi",
        )
        states = {v.name: v.states for v in schema.variables}
        reference = learn_reference(
            names,
            states,
            codes,
            args.max_parents,
            args.score,
            available_case=rule == "available-case",
        )
        _print(console, learned, ledgers, reference, made.truth, outcome)
        return 0 if learned["alice"]["edges"] == [list(e) for e in reference.search.edges] else 1


def _print(console, learned, ledgers, reference, truth, outcome) -> None:
    from rich.table import Table

    from ppbn.bn.model import structural_hamming_distance

    secure = learned["alice"]
    ref_edges = [list(e) for e in reference.search.edges]
    table = Table(title="edges in the order K2 added them")
    table.add_column("#", justify="right")
    table.add_column("secure (alice = bob)")
    table.add_column("reference (joined plaintext)")
    for i in range(max(len(secure["edges"]), len(ref_edges))):
        s = " -> ".join(secure["edges"][i]) if i < len(secure["edges"]) else ""
        r = " -> ".join(ref_edges[i]) if i < len(ref_edges) else ""
        table.add_row(str(i + 1), s, r)
    console.print(table)
    cpts = Table(
        title="parameters P(child = first state | parents), one row per parent configuration"
    )
    cpts.add_column("variable")
    cpts.add_column("parents")
    cpts.add_column("secure")
    cpts.add_column("reference")
    worst = 0.0
    for v, spec in secure["parameters"].items():
        ref = reference.network.cpts[v]
        worst = max(
            worst,
            max(
                abs(a - b)
                for row, rrow in zip(spec["table"], ref, strict=True)
                for a, b in zip(row, rrow, strict=True)
            ),
        )
        cpts.add_row(
            v,
            ", ".join(spec["parents"]) or "-",
            " ".join(f"{row[0]:.4f}" for row in spec["table"]),
            " ".join(f"{row[0]:.4f}" for row in ref),
        )
    console.print(cpts)
    same = secure["edges"] == ref_edges and learned["bob"]["edges"] == ref_edges
    verdict = "[green]equal[/green]" if same else "[red]DIFFERENT[/red]"
    console.print(
        f"structure and edge order: {verdict} to the reference; largest CPT difference {worst:.1e}"
    )
    shd = structural_hamming_distance(
        {v: tuple(ps) for v, ps in secure["parents"].items()}, truth.parents
    )
    console.print(f"structural Hamming distance to the true Asia network: {shd}")
    for role in ("alice", "bob"):
        kinds: dict[str, int] = {}
        for entry in ledgers[role]["entries"]:
            kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
        console.print(
            f"{role} learned (ledger): " + ", ".join(f"{k} x{n}" for k, n in kinds.items())
        )
    stats = outcome.stats or {}
    console.print(
        f"cost ({stats.get('role', 'alice')}): {stats.get('wall_s', 0):.1f} s, "
        f"{stats.get('bytes_sent', 0) / 1e6:.1f} MB sent, {stats.get('bytes_received', 0) / 1e6:.1f} MB received, "
        f"{stats.get('paillier_encryptions', 0):,} Paillier encryptions, "
        f"{stats.get('and_gates', 0):,} AND gates, {stats.get('ots', 0):,} OTs"
    )


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="the main job on a built-in default: Asia, two daemons over TLS, private K2",
        description="Sample Asia records, split them between alice and bob, run both daemons "
        "over loopback mutual TLS, learn the network privately and print it next to the "
        "non-private reference.",
    )
    parser.add_argument("--network", default="asia")
    parser.add_argument("--records", type=positive_int, default=5000)
    parser.add_argument("--seed", type=non_negative_int, default=7)
    parser.add_argument("--max-parents", type=non_negative_int, default=2)
    parser.add_argument("--score", default="exact", choices=("exact", "yw", "yw0", "bic"))
    parser.add_argument("--out", help="keep data, certificates, logs and outputs in this folder")
    add_missing_options(parser, rate=True)
    add_alignment_options(parser)
    parser.set_defaults(func=_demo)
