"""``ppbn circuit run`` and ``ppbn circuit costs``: evaluate Bristol Fashion circuits and
report the AND-gate cost of the circuit builders.

``run`` evaluates in plaintext, or with ``--garbled`` as a real two-party garbled run:
alice garbles and feeds the inputs listed by ``--garbler-inputs``, bob evaluates and feeds
the others through oblivious transfer, the two in threads over the in-memory Channel.
Inputs and outputs are hex, with the bit convention of docs/conventions.md, "Bristol Fashion bit order"
(wire k of a bundle carries bit k of the hex value).
"""

from __future__ import annotations

import argparse
import json
import sys

from ppbn.errors import UserError


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    circuit = commands.add_parser(
        "circuit", help="evaluate Bristol Fashion circuits, plain or garbled"
    )
    sub = circuit.add_subparsers(dest="circuit_command", metavar="WHAT")
    circuit.set_defaults(func=lambda _args: _missing(circuit))

    run = sub.add_parser(
        "run",
        help="evaluate a Bristol Fashion circuit and print each output as hex",
        description="Evaluate a Bristol Fashion circuit on hex inputs (one --input per circuit "
        "input, in order) and print one hex line per output. With --garbled, two parties run "
        "it as a garbled circuit: alice garbles and holds the inputs in --garbler-inputs, bob "
        "evaluates and gets his input labels by oblivious transfer; both learn the outputs.",
    )
    run.add_argument("--bristol", required=True, metavar="FILE", help="circuit in Bristol Fashion")
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="HEX",
        help="one per circuit input, in order",
    )
    run.add_argument("--garbled", action="store_true", help="run as a two-party garbled circuit")
    run.add_argument(
        "--garbler-inputs",
        default="0",
        metavar="I,J",
        help="comma-separated indices of the inputs alice (the garbler) holds (default: 0)",
    )
    run.set_defaults(func=_run)

    costs = sub.add_parser(
        "costs",
        help="AND gates of each circuit builder at a bit width",
        description="Build each word-level builder (ppbn.circuits.builders) at --width bits and "
        "count its AND gates (XOR and INV are free under free-XOR garbling).",
    )
    costs.add_argument("--width", type=int, default=64)
    costs.add_argument("--k", type=int, default=4, help="values in the argmax (default 4)")
    costs.add_argument(
        "--frac-bits", type=int, help="fractional bits for multiply/divide (default width/2)"
    )
    costs.add_argument("--format", choices=("table", "json"), default="table")
    costs.set_defaults(func=_costs)


def _missing(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int:
    from ppbn.circuits.bristol import load_bristol_file, parse_inputs, split_inputs, value_to_hex
    from ppbn.circuits.evaluate import evaluate

    circuit = load_bristol_file(args.bristol)
    values = parse_inputs(circuit, args.input)
    if not args.garbled:
        outputs = evaluate(circuit, values)
        for bundle in circuit.outputs:
            print(value_to_hex(outputs[bundle.name][0], bundle.width))
        return 0

    from ppbn.protocols.channel import memory_channel_pair, run_two_party
    from ppbn.protocols.yao import YaoParty

    alice_inputs, bob_inputs = split_inputs(circuit, values, args.garbler_inputs)
    modes = {b.name: "both" for b in circuit.outputs}
    pair = memory_channel_pair()

    def alice(ch):
        party = YaoParty(ch)
        return party.run(
            circuit, garbler=True, inputs=alice_inputs, outputs=modes, instances=1
        ), party.counters

    def bob(ch):
        party = YaoParty(ch)
        return party.run(circuit, garbler=False, inputs=bob_inputs, outputs=modes, instances=1)

    (alice_out, counters), bob_out = run_two_party(alice, bob, pair=pair)
    for bundle in circuit.outputs:
        a, b = int(alice_out[bundle.name][0]), int(bob_out[bundle.name][0])
        if a != b:
            raise UserError(f"output {bundle.name}: the parties decoded different values")
        print(value_to_hex(a, bundle.width))
    stats = pair[0].stats
    print(
        f"garbled: {counters.and_gates} AND gates, {counters.ots} OTs, "
        f"{stats.bytes_sent + stats.bytes_received} bytes, {stats.rounds} rounds (alice's view)",
        file=sys.stderr,
    )
    return 0


def _costs(args: argparse.Namespace) -> int:
    from ppbn.circuits.builders import and_counts

    if args.width < 2 or args.k < 1:
        raise UserError("--width must be at least 2 and --k at least 1")
    counts = and_counts(args.width, k=args.k, frac_bits=args.frac_bits)
    if args.format == "json":
        print(json.dumps({"width": args.width, "and_gates": counts}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"AND gates per builder, {args.width}-bit operands")
    table.add_column("builder")
    table.add_column("AND gates", justify="right")
    for name, count in counts.items():
        table.add_row(name, f"{count:,}")
    Console().print(table)
    return 0
