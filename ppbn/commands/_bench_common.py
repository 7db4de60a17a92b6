"""What the benchmarks that start both daemons share (``bench k2``, ``bench scale``):
sampled data with a local PKI, the learn job's parameters, and one timed learn job."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.commands.options import dp_params, hc_job_params, sample_overlap
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.data.datasets import MadeDataset
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.client import JobOutcome


def sample_pair_files(args: argparse.Namespace, work: Path) -> tuple[MadeDataset, int, PairFiles]:
    """``--records`` of ``--network`` split between alice and bob under ``work`` (with
    ``--missing-rate`` of the cells emptied, where the command has it) and a local PKI:
    the files a pair of daemons is started on. Returns the data set, the cells emptied
    and the files."""
    from ppbn.data.datasets import blank_cells, make_dataset
    from ppbn.pair.loopback import PairFiles
    from ppbn.parties.pki import make_local_pki
    from ppbn.parties.tls import PARTY_ROLES

    overlap = sample_overlap(args) if hasattr(args, "align") else 1.0
    made = make_dataset(args.network, args.records, args.seed, work / "data", overlap=overlap)
    rate = getattr(args, "missing_rate", 0.0)
    blanked = blank_cells(work / "data", rate, args.seed) if rate else 0
    make_local_pki(work / "certs", PARTY_ROLES)
    files = PairFiles(
        work / "data" / "schema.json",
        {r: work / "data" / f"{r}.csv" for r in ("alice", "bob")},
        work / "certs",
        work,
    )
    return made, blanked, files


def bench_learn_params(args: argparse.Namespace) -> dict[str, Any]:
    """The learn job's parameters from a bench's options (score, search, key, overlap)."""
    params: dict[str, Any] = {
        "max_parents": args.max_parents,
        "score": args.score,
        "tau": args.tau,
        "key_bits": args.key_bits,
        "overlap_tables": args.overlap_tables == "on",
        "split_terms": args.split_terms == "on",
        "term_lanes": args.term_lanes,
        "ot_k": args.ot_k,
    }
    if args.score == "bdeu":
        params["ess"] = args.ess
    params.update(hc_job_params(args))
    params.update(dp_params(args))
    return params


@dataclass(frozen=True)
class LearnRun:
    """One learn job of a bench: its wall time as the operator saw it, the network.json
    alice's daemon wrote, and the outcome with each party's own figures."""

    wall_s: float
    learned: dict[str, Any]
    outcome: JobOutcome


def run_learn(pair: LocalPair, params: dict[str, Any], quiet: bool) -> LearnRun:
    """Start the learn job at alice's daemon of a running pair and wait for it (its
    progress notes on stdout unless ``quiet``); a failed job is one line."""
    with pair.client("alice") as client:
        started = time.perf_counter()
        job_id = client.start("learn", params)
        outcome = client.wait(
            job_id, None, None if quiet else (lambda note: print(f"  {note}", flush=True))
        )
        wall = time.perf_counter() - started
    if outcome.state != "SUCCEEDED":
        raise UserError(f"the secure job failed: {outcome.error}")
    learned = json.loads((pair.out_dir("alice") / job_id / "network.json").read_text())
    return LearnRun(wall, learned, pair.with_peer_figures(outcome))
