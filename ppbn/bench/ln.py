"""The ``bench ln`` engine: the batched secure ln / x ln x pipeline alone (normalisation
circuit, OT table lookups, share series and products) on shares of random counts.

The two parties run in two processes joined by a pipe, as two daemons are in two
processes (``parties="threads"``: both in this process over the in-memory channel). The
report gives evaluations per second per score mode, bytes against the cost model, and
the CPU seconds each party's process (or thread) spent on them, which shows the party
that sets the pace (its pool workers are not counted; with the default inline thresholds
every block runs in the party's process). ``link`` delays each message as the link model
of ``ppbn.pair.shaper`` would.

    report = bench_ln(LnSettings(count=2000, modes=("exact",), parties="threads"))
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ppbn.bench.k2 import breakdown_rows
from ppbn.bn.constants import DEFAULT_ESS, SCORE_MODES
from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import numpy as np

    from ppbn.protocols.channel import Channel
    from ppbn.protocols.learning.scorer import SecureScorer

PARTIES = ("processes", "threads")
TRANSPORTS = {
    "processes": "two party processes joined by a pipe (each with its own pool)",
    "threads": "in-memory channel, both parties in this process (2 threads)",
}


@dataclass(frozen=True)
class LnSettings:
    """One ``bench ln`` run: ``count`` evaluations per score mode of ``modes``, counts
    uniform in [0, ``max_count``] (``seed``); each party's executor (``local``: its own
    pool of ``workers``, None for one per core; ``inline``), the inline thresholds (None:
    the protocols' defaults), its terms lanes and SoftSpokenOT's k; ``link`` a link model
    as ``RATE[/RTT]``."""

    count: int = 20000
    max_count: int = 20000
    modes: tuple[str, ...] = ("yw", "exact")
    seed: int = 1
    parties: str = "processes"
    link: str | None = None
    executor: str = "local"
    workers: int | None = None
    gc_inline_below: int | None = None
    ot_inline_below: int | None = None
    term_lanes: int = 1
    ot_k: int = DEFAULT_SUBFIELD_BITS


@dataclass(frozen=True)
class _PartySpec:
    """What each party's scorer is built from (picklable, for a party process)."""

    mode: str
    max_count: int
    executor: str
    workers: int | None
    gc_below: int
    ot_below: int
    link: str
    term_lanes: int
    ot_k: int


def bench_ln(settings: LnSettings) -> dict[str, Any]:
    """Run every mode's terms between the two parties and return the report."""
    import numpy as np

    from ppbn.pair.shaper import parse_link
    from ppbn.protocols.learning.cost import term_cost
    from ppbn.protocols.ot import OT_INLINE_BELOW
    from ppbn.protocols.yao import GC_INLINE_BELOW

    if settings.count < 1:
        raise UserError("--count must be at least 1")
    if settings.workers is not None and settings.workers < 1:
        raise UserError("--workers must be at least 1")
    if settings.parties not in PARTIES:
        raise UserError(f"--parties must be one of {', '.join(PARTIES)}")
    unknown = [m for m in settings.modes if m not in SCORE_MODES]
    if unknown:
        raise UserError(f"--modes: unknown score mode {unknown[0]!r}")
    gc_below = GC_INLINE_BELOW if settings.gc_inline_below is None else settings.gc_inline_below
    ot_below = OT_INLINE_BELOW if settings.ot_inline_below is None else settings.ot_inline_below
    link = parse_link(settings.link) if settings.link else None
    rng = np.random.default_rng(settings.seed)
    counts = rng.integers(0, settings.max_count + 1, size=settings.count).astype(np.uint64)
    alice_share = rng.integers(0, 2**63, size=settings.count, dtype=np.uint64)
    shares = {"alice": alice_share, "bob": counts - alice_share}  # wraps mod 2^64
    rows: list[dict[str, Any]] = []
    by_kind: list[dict[str, Any]] = []
    run = _in_processes if settings.parties == "processes" else _in_threads
    for mode in settings.modes:
        # a_jk of a binary child, q = 2
        shifts = [DEFAULT_ESS / 4] * settings.count if mode == "bdeu" else None
        spec = _PartySpec(
            mode, settings.max_count, settings.executor, settings.workers, gc_below, ot_below,
            settings.link or "", settings.term_lanes, settings.ot_k,
        )  # fmt: skip
        parties = run(spec, shares, shifts)
        model = term_cost(
            parties["alice"]["count_bits"], mode, shifts[0] if shifts else None, settings.ot_k
        )
        rows.append(_mode_row(settings, mode, parties, model.total))
        kinds = breakdown_rows(parties["alice"]["breakdown"])
        for row in kinds:
            row["bytes_per_evaluation"] = round(row["total"] / settings.count, 1)
            predicted = model.bytes_by_kind.get((row["phase"].split(": ", 1)[-1], row["kind"]))
            row["model_bytes_per_evaluation"] = None if predicted is None else round(predicted, 1)
        by_kind.extend(kinds)
    return {
        "what": "batched secure ln x and x ln x terms (normalisation circuit, OT lookups, share series)",
        "transport": TRANSPORTS[settings.parties]
        + (f", each message delayed by the link model {link.text}" if link else ""),
        "executor": {
            "kind": settings.executor,
            "workers": settings.workers,
            "gc_inline_below": gc_below,
            "ot_inline_below": ot_below,
        },
        **({"link": link.as_dict()} if link else {}),
        "max_count": settings.max_count,
        "modes": rows,
        "bytes_by_mode_and_kind": by_kind,
    }


def _mode_row(
    settings: LnSettings, mode: str, parties: dict[str, dict], model_bytes: float
) -> dict[str, Any]:
    """One mode's figures: per evaluation, and each party's CPU seconds."""
    alice, bob = parties["alice"], parties["bob"]
    seconds = max(alice["seconds"], bob["seconds"])
    count = settings.count
    return {
        "mode": mode,
        "evaluations": count,
        "seconds": round(seconds, 2),
        "evaluations_per_s": round(count / seconds),
        "bytes_per_evaluation": round(
            (alice["stats"]["bytes_sent"] + bob["stats"]["bytes_sent"]) / count
        ),
        "model_bytes_per_evaluation": round(model_bytes),
        "and_gates_per_evaluation": round(alice["and_gates"] / count),
        "ots_per_evaluation": round(bob["ots"] / count),
        "bytes_alice_to_bob": alice["stats"]["bytes_sent"],
        "bytes_bob_to_alice": alice["stats"]["bytes_received"],
        "rounds": alice["stats"]["rounds"],
        "alice_cpu_seconds": round(alice["cpu_seconds"], 3),
        "bob_cpu_seconds": round(bob["cpu_seconds"], 3),
        "term_lanes": settings.term_lanes,
        "ot_k": settings.ot_k,
        # of which in the terms lanes' processes (the rest: the party's own, relaying)
        "alice_lanes_cpu_seconds": round(alice["lanes_cpu_seconds"], 3),
        "bob_lanes_cpu_seconds": round(bob["lanes_cpu_seconds"], 3),
        # the compiled kernels' first load (or compile) in each party's process
        "kernels_first_load_s": max(alice["kernels"]["seconds"], bob["kernels"]["seconds"]),
        "kernels_compiled": alice["kernels"]["compiled"] + bob["kernels"]["compiled"],
    }


def _scorer(role: str, channel: Channel, spec: _PartySpec) -> SecureScorer:
    """One party's scorer: two binary variables, counts below max_count."""
    import numpy as np

    from ppbn.bn.schema import Schema, Variable
    from ppbn.protocols.learning.config import SecureLearnConfig
    from ppbn.protocols.learning.scorer import SecureScorer
    from ppbn.protocols.ledger import Ledger
    from ppbn.protocols.tables import TablesConfig

    schema = Schema("id", (Variable("a", "alice", ("0", "1")), Variable("b", "bob", ("0", "1"))))
    tables = TablesConfig(executor=spec.executor, workers=spec.workers)
    config = SecureLearnConfig(
        mode=spec.mode,
        tables=tables,
        gc_inline_below=spec.gc_below,
        ot_inline_below=spec.ot_below,
        term_lanes=spec.term_lanes,
        ot_k=spec.ot_k,
    )
    codes = np.zeros((spec.max_count, 1), dtype=np.int64)
    return SecureScorer(
        channel,
        role,
        schema,
        codes,
        spec.max_count,
        config,
        Ledger(role),
        _phase_labeller(channel, spec.mode),
    )


def _phase_labeller(channel: Channel, mode: str):
    """Count the channel's bytes under "MODE: PHASE" as the scorer announces its phases."""

    def progress(label: str, done: int, total: int) -> None:
        if label.startswith("phase "):
            channel.stats.section = f"{mode}: {label[len('phase ') :]}"

    return progress


def _outcome(
    scorer: SecureScorer, channel: Channel, seconds: float, cpu_seconds: float
) -> dict[str, Any]:
    """What the parent needs of one party's run (picklable). ``cpu_seconds``: the CPU time
    the party's own process (or thread) and its terms lanes spent on the terms; its pool
    workers' is not in it."""
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds + scorer.lanes_cpu_seconds,
        "lanes_cpu_seconds": scorer.lanes_cpu_seconds,
        "count_bits": scorer.count_bits,
        "and_gates": scorer.yao.counters.and_gates,
        "ots": scorer.yao.counters.ots + scorer.arith.counters.ots,
        "stats": channel.stats.as_dict(),
        "breakdown": channel.stats.breakdown(),
    }


def _party_process(
    role: str,
    spec: _PartySpec,
    share: np.ndarray,
    shifts: list[float] | None,
    connection: Connection,
    report: Connection,
    parent_pid: int,
) -> None:
    """One party of ``parties="processes"``: its scorer over a pipe (and the link model's
    direction it sends on), a one-message start signal so that both clocks start together,
    then its terms; reports counters and traffic."""
    from ppbn.kernels.warm import warm_up
    from ppbn.pair.shaper import Direction, parse_link
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end

    exit_with_parent(parent_pid)
    channel = None
    try:
        other = "bob" if role == "alice" else "alice"
        link = Direction(f"{role}->{other}", parse_link(spec.link)) if spec.link else None
        channel = PipeChannel(connection, link, timeout_s=600)
        kernels = warm_up()  # the first load (or compile) is reported, not timed with the terms
        scorer = _scorer(role, channel, spec)
        try:
            scorer.wait_for_term_lanes()  # their start is not timed with the terms
            channel.send("bench.ready", b"")
            channel.recv("bench.ready", max_bytes=0)
            channel.stats = type(channel.stats)()  # the start signal is not the protocol's
            channel.stats.section = f"{spec.mode}: setup"
            started, cpu = time.perf_counter(), time.process_time()
            scorer.terms(share, shifts)
            outcome = _outcome(
                scorer, channel, time.perf_counter() - started, time.process_time() - cpu
            )
            report.send({"role": role, **outcome, "kernels": kernels})
        finally:
            scorer.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def _in_processes(
    spec: _PartySpec, shares: dict[str, np.ndarray], shifts: list[float] | None
) -> dict[str, dict]:
    import multiprocessing
    import os

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=_party_process,
            name=f"ppbn-{role}",
            args=(role, spec, shares[role], shifts, end, report_out, os.getpid()),
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for process in processes:
        process.start()
    return collect_reports(processes, report_in)


def _in_threads(
    spec: _PartySpec, shares: dict[str, np.ndarray], shifts: list[float] | None
) -> dict[str, dict]:
    from ppbn.kernels.warm import warm_up
    from ppbn.pair.shaper import parse_link, shaped_memory_pair
    from ppbn.protocols.channel import memory_channel_pair, run_two_party

    kernels = warm_up()  # one process: one load for both parties
    pair = (
        memory_channel_pair(timeout_s=600)
        if not spec.link
        else shaped_memory_pair(parse_link(spec.link), timeout_s=600)[0]
    )
    scorers = {
        role: _scorer(role, end, spec) for role, end in zip(("alice", "bob"), pair, strict=True)
    }
    for scorer in scorers.values():
        scorer.wait_for_term_lanes()
    cpu: dict[str, float] = {}

    def party(role: str):
        def run(_) -> None:
            started = time.thread_time()  # the party's own thread: the other's is not in it
            scorers[role].terms(shares[role], shifts)
            cpu[role] = time.thread_time() - started

        return run

    started = time.perf_counter()
    try:
        run_two_party(party("alice"), party("bob"), pair=pair)
        seconds = time.perf_counter() - started
    finally:
        for scorer in scorers.values():
            scorer.close()
    return {
        role: {**_outcome(scorers[role], end, seconds, cpu[role]), "kernels": kernels}
        for role, end in zip(("alice", "bob"), pair, strict=True)
    }
