"""``ppbn demo``: the main job on a built-in default (what ``make demo`` runs).

Samples 5,000 records from the Asia network, splits the variables between alice and bob,
and learns the network. Until the secure two-daemon path is wired in, this runs the
non-private reference learner and says so.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from ppbn.bn.io import network_json
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.model import structural_hamming_distance
    from ppbn.bn.schema import Schema
    from ppbn.commands.reference import format_text
    from ppbn.parties.data import load_joined
    from ppbn.parties.datasets import make_dataset

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ppbn-demo-"))
    made = make_dataset(args.network, args.records, args.seed, out)
    schema = Schema.load(str(out / "schema.json"))
    names, codes = load_joined(schema, out / "alice.csv", out / "bob.csv")
    states = {v.name: v.states for v in schema.variables}
    print(f"data: {args.records} records from {args.network} in {out}")
    for party in ("alice", "bob"):
        print(f"  {party} holds: {', '.join(v.name for v in schema.owned_by(party))}")
    print("path: reference (non-private; the secure two-daemon path is not wired in yet)")
    learned = learn_reference(names, states, codes, args.max_parents, "exact")
    result = network_json(learned.network, names, learned.search.edges, "exact", 1e-3)
    print(format_text(result))
    shd = structural_hamming_distance(learned.network.parents, made.truth.parents)
    print(f"structural Hamming distance to the true network: {shd}")
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("demo", help="run the main job on a built-in default (Asia)")
    parser.add_argument("--network", default="asia")
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-parents", type=int, default=2)
    parser.add_argument("--out", help="folder for the generated data (default: a temp folder)")
    parser.set_defaults(func=_demo)
