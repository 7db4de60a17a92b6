"""What the benchmarks that start both daemons share (``bench k2``, ``bench scale``,
``bench dp``'s secure job): sampled data with a local PKI, the learn job they run, and one
timed run of it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TAU
from ppbn.errors import UserError
from ppbn.protocols.constants import AUTO_LANES, DEFAULT_SUBFIELD_BITS

if TYPE_CHECKING:
    from ppbn.data.datasets import MadeDataset
    from ppbn.jobs.progress import JobProgress
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.client import JobOutcome


@dataclass(frozen=True)
class LearnJob:
    """The learn job a benchmark runs: the figures its report names, and what the job gets
    besides (``search_params``: the hill-climbing search, tabu length and edge lists;
    ``dp_params``: a differentially private release), both as the daemons take them."""

    max_parents: int = 2
    score: str = "exact"
    tau: float = DEFAULT_TAU
    ess: float = DEFAULT_ESS
    key_bits: int = 2048
    overlap_tables: bool = True
    split_terms: bool = False
    term_lanes: int | str = AUTO_LANES  # a number, or the parties' agreement
    ot_k: int = DEFAULT_SUBFIELD_BITS
    search_params: Mapping[str, Any] = field(default_factory=dict)
    dp_params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def search(self) -> str:
        return self.search_params.get("search", "k2")

    def params(self) -> dict[str, Any]:
        """The job's parameters, as the daemons get them (``ess`` for BDeu only)."""
        params: dict[str, Any] = {
            "max_parents": self.max_parents,
            "score": self.score,
            "tau": self.tau,
            "key_bits": self.key_bits,
            "overlap_tables": self.overlap_tables,
            "split_terms": self.split_terms,
            "term_lanes": self.term_lanes,
            "ot_k": self.ot_k,
        }
        if self.score == "bdeu":
            params["ess"] = self.ess
        return {**params, **self.search_params, **self.dp_params}


def sample_pair_files(
    network: str,
    records: int,
    seed: int,
    work: Path,
    overlap: float = 1.0,
    missing_rate: float = 0.0,
) -> tuple[MadeDataset, int, PairFiles]:
    """``records`` of ``network`` split between alice and bob under ``work`` (each party
    holding ``overlap`` of its records at the other too; ``missing_rate`` of the cells
    emptied) and a local PKI: the files a pair of daemons is started on. Returns the data
    set, the cells emptied and the files."""
    from ppbn.data.datasets import blank_cells, make_dataset
    from ppbn.pair.loopback import PairFiles
    from ppbn.parties.pki import make_local_pki
    from ppbn.parties.tls import PARTY_ROLES

    made = make_dataset(network, records, seed, work / "data", overlap=overlap)
    blanked = blank_cells(work / "data", missing_rate, seed) if missing_rate else 0
    make_local_pki(work / "certs", PARTY_ROLES)
    files = PairFiles(
        work / "data" / "schema.json",
        {r: work / "data" / f"{r}.csv" for r in PARTY_ROLES},
        work / "certs",
        work,
    )
    return made, blanked, files


@dataclass(frozen=True)
class LearnRun:
    """One learn job of a bench: its wall time as the operator saw it, the network.json
    alice's daemon wrote, and the outcome with each party's own figures."""

    wall_s: float
    learned: dict[str, Any]
    outcome: JobOutcome

    def job_params(self) -> dict[str, Any]:
        """The parameters the job ran with (every default filled in), from its result.json."""
        path = Path(self.outcome.out_dir or "") / "result.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8"))["params"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: cannot read the job's parameters: {exc}") from None


def run_learn(
    pair: LocalPair,
    params: dict[str, Any],
    progress: Callable[[JobProgress], None] | None = None,
    failed: str = "the secure job failed",
) -> LearnRun:
    """Start the learn job at alice's daemon of a running pair and wait for it (its
    progress to ``progress``); a failed job is one line, ``failed: why``."""
    with pair.client("alice") as client:
        started = time.perf_counter()
        job_id = client.start("learn", params)
        outcome = client.wait(job_id, None, progress)
        wall = time.perf_counter() - started
    if outcome.state != "SUCCEEDED":
        raise UserError(f"{failed}: {outcome.error}")
    learned = json.loads((pair.out_dir("alice") / job_id / "network.json").read_text())
    return LearnRun(wall, learned, pair.with_peer_figures(outcome))
