"""``ppbn bench resume``: what a checkpoint saves when a daemon dies late in a job.

Two daemon processes over loopback mutual TLS (as ``bench k2``) run the learn job once
uninterrupted; then run it again, SIGKILL bob's daemon (with its workers, as the OOM
killer would) at a given share of the uninterrupted wall time, restart it, and continue
the job with ``--resume`` from both daemons' checkpoints. Reports the uninterrupted wall
time, when the kill came, how long alice took to report it, the restart, the resumed
run, and the time saved against running the job again from the start; and checks that
the resumed result equals the uninterrupted one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ppbn.commands.options import add_learn_run_options, positive_float
from ppbn.errors import UserError

POLL_S = 0.2


def _network(pair: Any, job_id: str) -> dict[str, Any]:
    return json.loads((pair.out_dir("alice") / job_id / "network.json").read_text())


def _same_network(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, float]:
    """Same edges in the same order, and the largest CPT difference."""
    import numpy as np

    diff = max(
        float(
            np.max(
                np.abs(
                    np.array(a["parameters"][v]["table"]) - np.array(b["parameters"][v]["table"])
                )
            )
        )
        for v in a["parameters"]
    )
    return a["edges"] == b["edges"], diff


def _bench_resume(args: argparse.Namespace) -> int:
    from ppbn.data.datasets import make_dataset
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki
    from ppbn.parties.tls import PARTY_ROLES
    from ppbn.proto.party_pb2 import JobInfo

    if not 0.05 <= args.kill_at <= 0.95:
        raise UserError("--kill-at must be between 0.05 and 0.95 of the uninterrupted run")
    say = (lambda text: None) if args.format == "json" else (lambda text: print(text, flush=True))
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-resume-"))
    try:
        make_dataset(args.network, args.records, args.seed, work / "data")
        make_local_pki(work / "certs", PARTY_ROLES)
        files = PairFiles(
            work / "data" / "schema.json",
            {r: work / "data" / f"{r}.csv" for r in PARTY_ROLES},
            work / "certs",
            work,
        )
        params = {
            "max_parents": args.max_parents,
            "score": args.score,
            "tau": args.tau,
            "key_bits": args.key_bits,
        }
        with LocalPair(files, args.timeout) as pair, pair.client("alice") as client:
            say(
                f"uninterrupted run: {args.network}, {args.records:,} records, u = {args.max_parents}"
            )
            started = time.perf_counter()
            full_id = client.start("learn", params)
            full = client.wait(full_id)
            full_s = time.perf_counter() - started
            if full.state != "SUCCEEDED":
                raise UserError(f"the uninterrupted job failed: {full.error}")
            say(f"  {full_s:.1f} s; now the same job, bob killed at {args.kill_at:.0%} of that")
            started = time.perf_counter()
            job_id = client.start("learn", params)
            while time.perf_counter() - started < args.kill_at * full_s:
                if client.status(job_id).state != JobInfo.RUNNING:
                    raise UserError(
                        "the second run ended before the kill (a loaded machine varies run times): try a lower --kill-at"
                    )
                time.sleep(POLL_S)
            killed_at_s = time.perf_counter() - started
            pair.kill("bob")
            killed = time.perf_counter()
            failed = client.wait(job_id)
            detected_s = time.perf_counter() - killed
            if failed.state != "FAILED":
                raise UserError(f"the killed run ended {failed.state}, not FAILED")
            say(
                f"  killed at {killed_at_s:.1f} s; alice reported it after {detected_s:.1f} s: {failed.error}"
            )
            started = time.perf_counter()
            pair.restart("bob")
            restart_s = time.perf_counter() - started
            started = time.perf_counter()
            client.start("learn", {}, job_id, resume=True)
            resumed = client.wait(job_id)
            resume_s = time.perf_counter() - started
            if resumed.state != "SUCCEEDED":
                raise UserError(f"the resumed job failed: {resumed.error}")
            same_edges, cpt_diff = _same_network(_network(pair, full_id), _network(pair, job_id))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "network": args.network,
        "records": args.records,
        "max_parents": args.max_parents,
        "score": args.score,
        "uninterrupted_s": round(full_s, 2),
        "killed_at_s": round(killed_at_s, 2),
        "detected_after_s": round(detected_s, 2),
        "restart_s": round(restart_s, 2),
        "resume_s": round(resume_s, 2),
        "saved_vs_rerun_s": round(full_s - resume_s, 2),
        "saved_vs_rerun_share": round((full_s - resume_s) / full_s, 3),
        "same_edges_and_order": same_edges,
        "max_abs_cpt_difference": cpt_diff,
    }
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        say(f"  restart {restart_s:.1f} s; resumed run {resume_s:.1f} s")
        say(
            f"saved against a rerun from the start: {full_s - resume_s:.1f} s ({report['saved_vs_rerun_share']:.0%})"
        )
        say(
            f"resumed result equals the uninterrupted one: edges {same_edges}, largest CPT difference {cpt_diff:.2e}"
        )
    return 0 if same_edges and cpt_diff < 1e-9 else 1


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser(
        "resume",
        help="the time a checkpoint saves: kill bob late in a learn job, restart, --resume",
        description="Run the learn job between two daemons over loopback TLS, then run it again, "
        "SIGKILL bob's daemon at --kill-at of the first run's wall time, restart it and resume; "
        "report the time saved against a rerun and check the resumed result.",
    )
    add_learn_run_options(parser)
    parser.add_argument(
        "--key-bits",
        type=int,
        default=2048,
        choices=(2048, 3072),
        help="Paillier key size (default 2048)",
    )
    parser.add_argument(
        "--kill-at",
        type=float,
        default=0.75,
        help="share of the uninterrupted wall time at which bob is killed (default 0.75)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        help="daemons' peer timeout in seconds (default 300)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_bench_resume)
