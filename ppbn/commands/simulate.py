"""``ppbn simulate``: both daemons as local processes over loopback mutual TLS, one job.

Generates (or loads) a two-party data set, makes a throw-away CA and certificates,
starts alice's and bob's daemons as separate processes on free loopback ports, runs the
job through alice's daemon as the operator, prints the result and each party's figures,
and stops both daemons however the run ends. ``--reveal-for-testing`` adds both
parties' shares to check them against the plaintext counts: something no real
deployment may do, so it says so loudly.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.commands.learn import add_job_arguments, job_params, outcome_json, print_outcome
from ppbn.errors import UserError
from ppbn.protocols.channel import DEFAULT_TIMEOUT_S

REVEAL_WARNING = (
    "WARNING: --reveal-for-testing ADDS BOTH PARTIES' SHARES AND PRINTS WHAT THEY REVEAL. "
    "This breaks the privacy the protocol provides; it exists only to test ppbn."
)


def _data_files(args: argparse.Namespace, work: Path) -> tuple[Path, Path, Path]:
    if args.data:
        base = Path(args.data)
        files = (base / "schema.json", base / "alice.csv", base / "bob.csv")
        for path in files:
            if not path.is_file():
                raise UserError(f"{path}: not found (--data needs schema.json, alice.csv, bob.csv)")
        return files
    if not args.network or not args.records:
        raise UserError("give --network and --records (or --data DIR)")
    from ppbn.parties.datasets import make_dataset

    out = work / "data"
    make_dataset(args.network, args.records, args.seed, out)
    return out / "schema.json", out / "alice.csv", out / "bob.csv"


def reveal_tables(schema_path: Path, csvs: dict[str, Path], out_dirs: dict[str, Path]) -> dict[str, Any]:
    """Add both parties' table shares and compare with counts from the joined plaintext."""
    from ppbn.bn.schema import Schema
    from ppbn.parties.data import load_joined
    from ppbn.parties.tables_job import load_shares
    from ppbn.protocols.tables import reconstruct

    schema = Schema.load(str(schema_path))
    names, codes = load_joined(schema, csvs["alice"], csvs["bob"])
    column = {name: j for j, name in enumerate(names)}
    counts = reconstruct(load_shares(out_dirs["alice"]), load_shares(out_dirs["bob"]))
    wrong = []
    for family, table in counts.items():
        shape = schema.cardinalities(family)
        index = np.ravel_multi_index(tuple(codes[:, column[v]] for v in family), shape)
        truth = np.bincount(index, minlength=math.prod(shape)).reshape(shape)
        if not np.array_equal(table.astype(np.int64), truth):
            wrong.append("|".join(family))
    return {"tables_checked": len(counts), "tables_wrong": wrong, "all_equal": not wrong}


def _simulate(args: argparse.Namespace) -> int:
    from ppbn.parties.harness import LocalPair, PairFiles
    from ppbn.parties.tls import make_certificates

    params = job_params(args)
    if args.reveal_for_testing:
        print(REVEAL_WARNING, file=sys.stderr)
        if args.job != "tables":
            raise UserError("--reveal-for-testing applies to the tables job only")
    keep = bool(args.out)
    work = Path(args.out) if keep else Path(tempfile.mkdtemp(prefix="ppbn-simulate-"))
    work.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    quiet = args.format == "json"
    timings: dict[str, float] = {}
    try:
        start = time.perf_counter()
        schema, alice_csv, bob_csv = _data_files(args, work)
        timings["data_s"] = time.perf_counter() - start
        start = time.perf_counter()
        tls_dir = work / "certs"
        make_certificates(tls_dir)
        timings["certs_s"] = time.perf_counter() - start
        files = PairFiles(schema, {"alice": alice_csv, "bob": bob_csv}, tls_dir, work)
        start = time.perf_counter()
        with LocalPair(files, args.timeout) as pair:
            timings["daemons_start_s"] = time.perf_counter() - start
            if not quiet:
                print(f"daemons up: alice {pair.address('alice')}, bob {pair.address('bob')} "
                      f"(mutual TLS; logs in {work if keep else 'a temporary folder'})", file=sys.stderr)  # fmt: skip
            start = time.perf_counter()
            with pair.client("alice") as client:
                job_id = client.start(args.job, params)
                progress = None if quiet else (lambda note: print(f"  {note}", file=sys.stderr))
                outcome = client.wait(job_id, None, progress)
            timings["job_s"] = time.perf_counter() - start
            if outcome.state != "SUCCEEDED":
                for role in ("alice", "bob"):
                    print(f"{role}'s log: {pair.log_tail(role, 3)}", file=sys.stderr)
            reveal = None
            if args.reveal_for_testing and outcome.state == "SUCCEEDED":
                out_dirs = {role: pair.out_dir(role) / job_id for role in ("alice", "bob")}
                reveal = reveal_tables(schema, {"alice": alice_csv, "bob": bob_csv}, out_dirs)
        report = _report(args, outcome, timings, reveal)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        _print_report(outcome, report, keep)
    return 0 if outcome.state == "SUCCEEDED" and (reveal is None or reveal["all_equal"]) else 1


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _report(args, outcome, timings: dict[str, float], reveal: dict[str, Any] | None) -> dict[str, Any]:
    report = outcome_json(outcome)
    report.update(
        {
            "network": args.network if not args.data else None,
            "data": args.data,
            "records": (outcome.result or {}).get("records", args.records),
            "seed": args.seed if not args.data else None,
            "transport": "gRPC over mutual TLS, loopback, two processes",
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
    )
    parties = report["stats"]
    if outcome.kind == "tables" and outcome.result:
        total = sum(s.get("paillier_encryptions", 0) for s in parties.values())
        paper = outcome.result["per_alpha_encryptions"]
        report["paillier_encryptions_both_parties"] = total
        report["per_alpha_encryptions"] = paper
        report["fewer_encryptions_than_per_alpha"] = round(paper / total, 1) if total else None
    if reveal is not None:
        report["reveal_for_testing"] = reveal
    return report


def _print_report(outcome, report: dict[str, Any], files_kept: bool) -> None:
    print_outcome(outcome, "ppbn simulate", show_files=files_kept)
    timings = report["timings"]
    print(
        f"data {timings.get('data_s', 0):.2f} s, certificates {timings.get('certs_s', 0):.2f} s, "
        f"daemons up {timings.get('daemons_start_s', 0):.2f} s, job {timings.get('job_s', 0):.2f} s "
        "(start to finish, as the operator saw it)"
    )
    if "per_alpha_encryptions" in report:
        print(
            f"Paillier encryptions, both parties: {report['paillier_encryptions_both_parties']:,}; "
            f"the paper's per-alpha method on the same families: {report['per_alpha_encryptions']:,} "
            f"({report['fewer_encryptions_than_per_alpha']}x more)"
        )
    reveal = report.get("reveal_for_testing")
    if reveal is not None:
        print(REVEAL_WARNING, file=sys.stderr)
        verdict = "all equal" if reveal["all_equal"] else f"WRONG: {', '.join(reveal['tables_wrong'][:5])}"
        print(f"revealed {reveal['tables_checked']} tables against the plaintext counts: {verdict}")


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "simulate",
        help="run both daemons locally over loopback mutual TLS and one job between them",
        description="Generate (or load) a two-party data set, make certificates, start alice's "
        "and bob's daemons as separate processes on loopback ports, run the job, print the "
        "result and per party wall time per phase, bytes, rounds and public-key operations, "
        "and stop both daemons whatever happens.",
    )
    parser.add_argument("--network", help="network to sample from (see `ppbn datasets make`)")
    parser.add_argument("--records", type=int, help="number of records to sample")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--data", help="folder with schema.json, alice.csv, bob.csv instead of sampling")
    parser.add_argument("--out", help="keep data, certificates, logs and outputs in this folder")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S,
        help=f"daemons' peer timeout in seconds (default {DEFAULT_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--reveal-for-testing", action="store_true",
        help="TESTING ONLY: add both parties' shares and check them against the plaintext counts",
    )  # fmt: skip
    add_job_arguments(parser)
    parser.set_defaults(func=_simulate)
