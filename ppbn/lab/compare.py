"""``ppbn compare``: the secure path and the PRAM path side by side on the same data.

One data set is sampled from a bnlearn network (``make_dataset``) and split between alice
and bob. On it run:

- the exact reference (plaintext K2 on the joined data, in this process): the yardstick
  structure every other run is measured against;
- the PRAM path over the daemons (alice, bob and the miner as separate processes on
  loopback, mutual TLS), setup I and setup II, for each p, plain and with the extra-link
  fix of Ma and Sivakumar (Sec. V): the threshold eta for Bayesian scores, the penalty
  multiplier C* for BIC. The daemons run with the local test flag
  ``--insecure-fixed-seed-for-testing`` (a seed is never a job parameter), so for one p
  both setups and both variants see the same randomized copy and differ only by what
  they are measuring; the daemons' policy permits the smallest p asked for;
- the secure path: job kind ``learn`` through the same daemons.

Measures per run: structural Hamming distance to the reference structure (a reversed
edge counts once) with its extra, missing and reversed links; KL(truth || learned) of
the generating network's joint from the learned one; wall time and bytes exchanged
(summed over the daemons); and per disclosed variable gamma (strict zero convention of
docs/conventions.md, "Gamma amplification") and K_p.

KL divergence: exact by enumeration when the joint has at most ``ENUMERATION_LIMIT``
states, otherwise a Monte Carlo estimate with ``KL_SAMPLES`` records drawn from the
generating network (its standard error is reported). Learned CPTs are mixed with the
uniform distribution at weight ``KL_SMOOTHING`` first, so a zero estimate gives a large
but finite divergence.

This module runs the comparison and returns a ``Comparison``; the report written from it
(findings, tables, report.md, results.json and plots) is ppbn/lab/compare_report.py.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.bn.learn import learn_reference
from ppbn.bn.model import BayesNet, structure_diff
from ppbn.bn.networks import sample
from ppbn.bn.schema import Schema
from ppbn.errors import UserError
from ppbn.jobs.policy import ALL_VARIABLES, LocalPolicy, PramPolicy

ENUMERATION_LIMIT = 1 << 18
KL_SAMPLES = 200_000
KL_SMOOTHING = 1e-6
DEFAULT_ETA_SCHEDULE = ((0.0, 1.0), (0.15, 0.99), (0.25, 0.98), (math.inf, 0.97))
DEFAULT_C_STAR_SCHEDULE = ((0.0, 1.0), (0.15, 4.0), (math.inf, 8.0))


def scheduled(schedule: Sequence[tuple[float, float]], p: float) -> float:
    """The value for p: the first (bound, value) with p <= bound.

    The eta schedule is the paper's (Sec. VII-B: 0.99 up to p = 0.15, 0.98 up to 0.25,
    0.97 beyond; 1 without randomization). The paper names C* = 4 and 8 but no rule, so
    the C* schedule mirrors the eta one: 4 up to p = 0.15, 8 beyond.
    """
    return next(value for bound, value in schedule if p <= bound)


# -- structures -----------------------------------------------------------------------


# ``structure_diff`` (extra, missing, reversed links) lives in ppbn.bn.model, imported above


def network_from_json(document: Mapping[str, Any], schema: Schema) -> BayesNet:
    """The network of a ``network.json`` (reference, secure or PRAM path)."""
    states = {v.name: v.states for v in schema.variables}
    parameters = document["parameters"]
    missing = [v for v in schema.names if v not in parameters]
    if missing:
        raise UserError(f"network.json has no CPT for {missing[0]!r} (parameters withheld?)")
    return BayesNet(
        schema.names,
        states,
        {v: tuple(parameters[v]["parents"]) for v in schema.names},
        {v: np.asarray(parameters[v]["table"], dtype=float) for v in schema.names},
        {v: tuple(parameters[v].get("unobserved", ())) for v in schema.names},
    )


# -- KL divergence ----------------------------------------------------------------------


@dataclass(frozen=True)
class KLEstimator:
    """KL(truth || learned): exact by enumeration for small joints, Monte Carlo otherwise.

    The evaluation points (and, for enumeration, their truth probabilities) are computed
    once and shared by every learned network, so all runs are measured on the same sample.
    """

    truth: BayesNet
    codes: np.ndarray
    weights: np.ndarray  # truth probabilities (enumeration) or 1/M (Monte Carlo)
    truth_log: np.ndarray
    method: str

    @classmethod
    def build(cls, truth: BayesNet, seed: int, samples: int = KL_SAMPLES) -> KLEstimator:
        size = math.prod(truth.cardinality(v) for v in truth.names)
        if size <= ENUMERATION_LIMIT:
            dims = tuple(truth.cardinality(v) for v in truth.names)
            codes = np.stack(np.unravel_index(np.arange(size), dims), axis=1)
            truth_log = truth.log_probability(codes)
            keep = np.isfinite(truth_log)
            codes, truth_log = codes[keep], truth_log[keep]
            return cls(
                truth,
                codes,
                np.exp(truth_log),
                truth_log,
                f"exact (enumeration of {size:,} states)",
            )
        codes = sample(truth, samples, seed)
        truth_log = truth.log_probability(codes)
        weights = np.full(samples, 1.0 / samples)
        return cls(
            truth,
            codes,
            weights,
            truth_log,
            f"Monte Carlo ({samples:,} samples from the generating network)",
        )

    def divergence(self, learned: BayesNet) -> tuple[float, float]:
        """(KL in nats, its standard error: 0 when exact)."""
        terms = self.truth_log - learned.log_probability(self.codes, KL_SMOOTHING)
        value = float(np.sum(self.weights * terms))
        if self.method.startswith("exact"):
            return value, 0.0
        return value, float(np.std(terms) / math.sqrt(len(terms)))


# -- runs -------------------------------------------------------------------------------


@dataclass
class Run:
    """One learned network and what it cost; ``available`` False carries ``reason``."""

    path: str  # "reference", "pram", "secure"
    setup: int | None = None
    p: float | None = None
    fix: str = ""  # "", "eta=0.99", "C*=4"
    available: bool = True
    reason: str = ""
    parents: dict[str, list[str]] = field(default_factory=dict)
    diff: dict[str, Any] = field(default_factory=dict)
    kl: float = math.nan
    kl_se: float = math.nan
    wall_s: float = math.nan
    bytes_exchanged: int = 0
    privacy: list[dict[str, Any]] = field(default_factory=list)
    search: str = "k2"  # "hc": hill climbing, measured against the hill-climbing reference

    @property
    def label(self) -> str:
        tag = " [hc]" if self.search == "hc" else ""
        if self.path != "pram":
            return self.path + tag
        return (
            f"PRAM setup {'I' if self.setup == 1 else 'II'}"
            + (f" + {self.fix}" if self.fix else "")
            + tag
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "label": self.label,
            "setup": self.setup,
            "p": self.p,
            "fix": self.fix,
            "available": self.available,
            "reason": self.reason,
            "structure": self.diff,
            "kl_nats": _finite(self.kl),
            "kl_standard_error": _finite(self.kl_se),
            "wall_s": _finite(self.wall_s),
            "bytes_exchanged": self.bytes_exchanged,
            "privacy": self.privacy,
            "parents": self.parents,
            "search": self.search,
        }


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def bytes_exchanged(outcomes: Mapping[str, Any]) -> int:
    """Bytes sent by every daemon of the job, as each measured its own channels."""
    return sum(int((o.stats or {}).get("bytes_sent", 0)) for o in outcomes.values())


def comparison_policy(settings: CompareSettings) -> LocalPolicy:
    """The policy of the comparison's daemons: the built-in one, with the PRAM minimum lowered
    to the smallest p asked for (the person running the comparison is both parties)."""
    least = min(settings.ps)
    pram = PramPolicy(min_p=least, always_randomize=(ALL_VARIABLES,) if least > 0 else ())
    return replace(LocalPolicy(), pram=pram, source=f"ppbn compare (PRAM p >= {least:g})")


def parse_ps(text: str) -> tuple[float, ...]:
    """``--p``: a comma list of distinct randomization levels in [0, 1), sorted."""
    try:
        ps = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UserError(f"--p must be a comma list of numbers, got {text!r}") from None
    if not ps or any(not 0.0 <= p < 1.0 for p in ps) or len(set(ps)) != len(ps):
        raise UserError("--p must list distinct randomization levels in [0, 1)")
    return tuple(sorted(ps))


@dataclass
class CompareSettings:
    network: str
    records: int
    ps: tuple[float, ...]
    seed: int
    max_parents: int
    score: str
    tau: float
    eta: float | None  # None: the paper's schedule
    c_star: float | None  # None: the schedule above
    secure: bool
    timeout_s: float
    hc: bool = False  # also hill climbing: reference, PRAM setup II and secure

    def __post_init__(self) -> None:
        """Refuse settings no comparison can run with, before any work."""
        if self.records < 2:
            raise UserError("--records must be at least 2")
        if self.eta is not None and not 0.0 < self.eta <= 1.0:
            raise UserError("--eta must be in (0, 1]")
        if self.c_star is not None and not self.c_star > 0:
            raise UserError("--c-star must be positive")

    def fix_for(self, p: float) -> tuple[str, dict[str, float]]:
        """The extra-link fix for this score and p: (label, job parameters)."""
        if self.score == "bic":
            c_star = (
                self.c_star if self.c_star is not None else scheduled(DEFAULT_C_STAR_SCHEDULE, p)
            )
            return f"C*={c_star:g}", {"c_star": c_star}
        eta = self.eta if self.eta is not None else scheduled(DEFAULT_ETA_SCHEDULE, p)
        return f"eta={eta:g}", {"eta": eta}


@dataclass
class Comparison:
    settings: CompareSettings
    schema: Schema
    kl_method: str
    runs: list[Run]
    reference_edges: int
    truth_edges: int
    reference_vs_truth: dict[str, Any]
    wall_s: float
    hc_reference_vs_truth: dict[str, Any] | None = None


def run_comparison(
    settings: CompareSettings, work: Path, say: Callable[[str], None] = lambda _msg: None
) -> Comparison:
    """Everything ``ppbn compare`` measures, with the daemons started under ``work``."""
    from ppbn.data.datasets import make_dataset
    from ppbn.data.party_data import load_joined
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki

    started = time.perf_counter()
    data_dir = work / "data"
    made = make_dataset(settings.network, settings.records, settings.seed, data_dir)
    schema = made.schema
    names, codes = load_joined(schema, data_dir / "alice.csv", data_dir / "bob.csv")
    states = {v.name: v.states for v in schema.variables}
    kl = KLEstimator.build(made.truth, settings.seed + 1)
    say(f"data: {settings.records:,} records of {settings.network}; KL {kl.method}")

    t0 = time.perf_counter()
    reference = learn_reference(
        names, states, codes, settings.max_parents, settings.score, settings.tau
    )
    ref_parents = {v: list(reference.search.parents[v]) for v in names}
    ref_run = Run("reference", parents=ref_parents, wall_s=time.perf_counter() - t0)
    _measure(ref_run, reference.network, ref_parents, kl)
    runs = [ref_run]
    say(f"reference: {len(reference.search.edges)} edges in {ref_run.wall_s:.2f} s")

    make_local_pki(work / "certs")
    files = PairFiles(
        data_dir / "schema.json",
        {"alice": data_dir / "alice.csv", "bob": data_dir / "bob.csv"},
        work / "certs",
        work,
    )
    policy = comparison_policy(settings)
    if policy.pram.min_p < LocalPolicy().pram.min_p:
        say(
            f"policy: {policy.source} (weaker than the built-in minimum p {LocalPolicy().pram.min_p:g})"
        )
    with LocalPair(
        files,
        settings.timeout_s,
        miner=True,
        policy=policy,
        fixed_seed_for_testing=f"compare/{settings.seed}",
    ) as trio:
        say("daemons up: alice, bob and miner (loopback, mutual TLS)")
        for p in settings.ps:
            fix_label, fix_params = settings.fix_for(p)
            neutral = next(iter(fix_params.values())) == 1.0  # eta = 1 or C* = 1: plain K2
            for setup in (1, 2):
                for fix in ("",) if neutral else ("", fix_label):
                    params: dict[str, Any] = {
                        "p": p,
                        "max_parents": settings.max_parents,
                        "score": settings.score,
                        "tau": settings.tau,
                        **(fix_params if fix else {}),
                    }
                    run = Run("pram", setup=setup, p=p, fix=fix)
                    _run_daemon_job(
                        trio,
                        run,
                        "miner" if setup == 2 else "alice",
                        "pram-miner" if setup == 2 else "pram",
                        params,
                        schema,
                        ref_parents,
                        kl,
                    )
                    runs.append(run)
                    say(f"{run.label}, p={p:g}: SHD {run.diff.get('shd', '-')}, {run.wall_s:.2f} s")
        secure = Run("secure")
        if not settings.secure:
            secure.available, secure.reason = False, "skipped (--no-secure)"
        else:
            say("secure path (job kind learn): this is the slow one")
            learn_params = {
                "max_parents": settings.max_parents,
                "score": settings.score,
                "tau": settings.tau,
                "order": None,
                "c_star": 1.0,
                "disclosure": "public",
            }
            _run_daemon_job(trio, secure, "alice", "learn", learn_params, schema, ref_parents, kl)
        if not secure.available:
            print(f"ppbn compare: SECURE PATH NOT AVAILABLE: {secure.reason}", file=sys.stderr)
        runs.append(secure)
        hc_parents = (
            _hill_climbing_runs(settings, trio, names, states, codes, schema, kl, runs, say)
            if settings.hc
            else None
        )
    truth_parents = {v: list(made.truth.parents[v]) for v in made.truth.names}
    return Comparison(
        settings,
        schema,
        kl.method,
        runs,
        len(reference.search.edges),
        sum(len(ps) for ps in truth_parents.values()),
        structure_diff(ref_parents, truth_parents),
        time.perf_counter() - started,
        None if hc_parents is None else structure_diff(hc_parents, truth_parents),
    )


def _hill_climbing_runs(
    settings: CompareSettings,
    trio,
    names,
    states,
    codes,
    schema: Schema,
    kl: KLEstimator,
    runs: list[Run],
    say: Callable[[str], None],
) -> dict[str, list[str]]:
    """The hill-climbing rows: the reference, PRAM setup II for each p (plain,
    and with C* for bic; the eta rule is K2's), and the secure path, each measured against
    the hill-climbing reference. Returns the reference's parents."""
    t0 = time.perf_counter()
    reference = learn_reference(
        names, states, codes, settings.max_parents, settings.score, settings.tau, search="hc"
    )
    ref_parents = {v: list(reference.search.parents[v]) for v in names}
    ref_run = Run("reference", parents=ref_parents, wall_s=time.perf_counter() - t0, search="hc")
    _measure(ref_run, reference.network, ref_parents, kl)
    runs.append(ref_run)
    say(f"reference [hc]: {len(reference.search.moves)} moves in {ref_run.wall_s:.2f} s")
    common = {
        "max_parents": settings.max_parents,
        "score": settings.score,
        "tau": settings.tau,
        "search": "hc",
    }
    for p in settings.ps:
        fix_label, fix_params = settings.fix_for(p)
        fixes = ("",) if settings.score != "bic" or fix_params["c_star"] == 1.0 else ("", fix_label)
        for fix in fixes:
            run = Run("pram", setup=2, p=p, fix=fix, search="hc")
            params = {"p": p, **common, **(fix_params if fix else {})}
            _run_daemon_job(trio, run, "miner", "pram-miner", params, schema, ref_parents, kl)
            runs.append(run)
            say(f"{run.label}, p={p:g}: SHD {run.diff.get('shd', '-')}, {run.wall_s:.2f} s")
    secure = Run("secure", search="hc")
    if not settings.secure:
        secure.available, secure.reason = False, "skipped (--no-secure)"
    else:
        say("secure path, hill climbing (job kind learn, search hc)")
        _run_daemon_job(
            trio,
            secure,
            "alice",
            "learn",
            {**common, "disclosure": "public"},
            schema,
            ref_parents,
            kl,
        )
    runs.append(secure)
    return ref_parents


def _measure(
    run: Run, network: BayesNet, reference: Mapping[str, Sequence[str]], kl: KLEstimator
) -> None:
    run.parents = {v: list(network.parents[v]) for v in network.names}
    run.diff = structure_diff(run.parents, reference)
    run.kl, run.kl_se = kl.divergence(network)


def _run_daemon_job(
    trio,
    run: Run,
    start_role: str,
    kind: str,
    params: dict[str, Any],
    schema: Schema,
    reference: Mapping[str, Sequence[str]],
    kl: KLEstimator,
) -> None:
    """Run one job on the daemons and fill ``run``; a failure makes the run unavailable."""
    t0 = time.perf_counter()
    try:
        _job_id, outcomes = trio.run_job(start_role, kind, params)
    except UserError as exc:
        run.available, run.reason = False, str(exc)
        return
    run.wall_s = time.perf_counter() - t0
    mine = outcomes[start_role]
    if mine.state != "SUCCEEDED":
        run.available, run.reason = False, f"job {mine.state.lower()}: {mine.error}"
        return
    document = json.loads((Path(mine.out_dir) / "network.json").read_text(encoding="utf-8"))
    run.bytes_exchanged = bytes_exchanged(outcomes)
    run.privacy = document.get("privacy", [])
    try:
        network = network_from_json(document, schema)
    except (UserError, KeyError, ValueError) as exc:
        run.available, run.reason = False, f"cannot read its network.json: {exc}"
        return
    _measure(run, network, reference, kl)
