"""The secure learning job's entry: K2 or hill climbing, then the parameters.

Both parties run ``learn_secure`` in lockstep over one Channel: the search (``k2.py``
under a node order, or ``hc.py``) on the family-score shares of ``scorer.py``, then
``parameters.py`` on the table shares the search already holds.

Alice garbles every circuit and is the OT sender; bob evaluates. The base OTs run in the
group that matches the Paillier key size (``SecureLearnConfig.dh_bits``), and every hash
is keyed by its protocol id and the channel's session label (the job id on the daemons),
so a job's garbling, OT and lookups share no fixed-key permutation with another job's.
What each party sees: garbled tables and labels (Yao), OT messages (those of
``arith.bit_mul`` in both directions, and those of the lifts, whose last bit d is uniform
to alice), masked truncation openings of sums (statistically hidden, 2^-40), resharings and
lookup entries (uniform in their small rings), colour bits of the normalisation outputs
(uniform), masked table indices (uniform), Paillier
ciphertexts and masked slots (statistically hidden), and the revealed decisions and
parameters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ppbn.bn.hc import HCResult, hill_climb
from ppbn.bn.k2 import K2Result, k2_search
from ppbn.bn.model import BayesNet
from ppbn.bn.schema import Schema
from ppbn.protocols.channel import Channel
from ppbn.protocols.learning.config import DISCLOSURES, K2Checkpoint, Progress, SecureLearnConfig
from ppbn.protocols.learning.dp import NoisyOracle, noisy_parameters
from ppbn.protocols.learning.dp_adaptive import secure_adaptive_release
from ppbn.protocols.learning.dp_marginals import secure_marginal_release
from ppbn.protocols.learning.hc import ResumableMoveOracle, SecureMoveOracle
from ppbn.protocols.learning.k2 import ResumableOracle, SecureOracle
from ppbn.protocols.learning.parameters import (
    SecureParameters,
    family_record_counts,
    secure_parameters,
)
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.paillier import OpCounters
from ppbn.protocols.tables import per_alpha_cost


def _hill_climb(
    scorer: SecureScorer,
    resume: K2Checkpoint | None,
    checkpoint: Callable[[K2Checkpoint], None] | None,
    progress: Callable[[int, int, str], None],
) -> HCResult:
    """Hill climbing over the schema's variables with the secure move oracle; each live
    step hands ``checkpoint`` this party's shares and the public moves so far."""
    config = scorer.config

    def after_step(decisions: list[list[list[str | None]]]) -> None:
        if checkpoint is not None:
            checkpoint(
                K2Checkpoint(
                    len(decisions), decisions, dict(scorer.count_shares), dict(scorer.score_shares)
                )
            )

    oracle = ResumableMoveOracle(
        SecureMoveOracle(scorer), resume.decisions if resume else (), after_step
    )
    opts = config.hc
    return hill_climb(
        scorer.schema.names,
        oracle,
        config.max_parents,
        config.tau,
        opts.tabu_length,
        opts.start,
        opts.black_list,
        opts.white_list,
        opts.fixed_edges,
        progress=progress,
    )


@dataclass
class SecureLearnResult:
    """One party's outcome of the job: what the search and the parameters revealed to it,
    and the job's statistics."""

    search: K2Result | HCResult
    parameters: SecureParameters
    network: BayesNet | None  # when every CPT is visible to this party
    stats: dict
    openings: list[tuple[str, np.ndarray]] | None = None
    family_records: dict[str, int] | None = None  # with ``SecureLearnConfig.available_case``


def learn_secure(
    channel: Channel,
    role: str,
    schema: Schema,
    codes: np.ndarray,
    config: SecureLearnConfig,
    ledger: Ledger,
    progress: Progress | None = None,
    paillier: OpCounters | None = None,
    keep_openings: bool = False,
    resume: K2Checkpoint | None = None,
    checkpoint: Callable[[K2Checkpoint], None] | None = None,
    before_release: Callable[[], None] = lambda: None,
) -> SecureLearnResult:
    """One party's side of the private K2 + parameters job. ``paillier`` collects the
    public-key operation counts (the daemon passes its job counters); ``keep_openings``
    keeps the masked values this party opens (``SecureLearnResult.openings``, for audits
    and the leak tests). ``resume``: continue after the checkpoint's step (both parties
    must pass the checkpoint of the same step); ``checkpoint`` receives this party's
    state after every K2 wave (the caller stores it); ``before_release`` is called before
    this party contributes a noise word to a DP job's circuits, the first value the run can
    open (the daemon spends its budget reservation there)."""
    if config.disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {', '.join(DISCLOSURES)}")
    config.check_dp()
    started = time.perf_counter()
    n_records = int(codes.shape[0])
    if "schema" not in ledger.kinds():
        ledger.record("schema", schema.fingerprint(), "public schema")
    if "record_count" not in ledger.kinds():
        ledger.record("record_count", n_records, "public record count")
    scorer = SecureScorer(
        channel, role, schema, codes, n_records, config, ledger, progress, paillier, keep_openings
    )
    if resume is not None:
        scorer.count_shares.update(resume.count_shares)
        scorer.score_shares.update(resume.score_shares)
    try:
        scorer.tables.prepare_in_background(
            n_records
        )  # the key pair and warm workers, off the critical path
        order = tuple(config.order or schema.names)

        def k2_progress(step: int, total: int, label: str) -> None:
            if progress:
                progress(label, step, total)

        search: K2Result | HCResult
        if config.dp is not None and config.dp.release == "marginals":
            search, params = secure_marginal_release(scorer, config.dp, before_release)
            source = "marginal release's tree"
        elif config.dp is not None and config.dp.release == "adaptive":
            search, params = secure_adaptive_release(scorer, config.dp, before_release)
            source = "adaptive release's pairs"
        elif config.search == "hc":
            search = _hill_climb(scorer, resume, checkpoint, k2_progress)
            source = "hill-climbing moves"
        elif config.search == "k2":
            base = (
                SecureOracle(scorer)
                if config.dp is None
                else NoisyOracle(scorer, config.dp, before_release)
            )
            oracle = ResumableOracle(base, resume, checkpoint)
            search = k2_search(order, config.max_parents, oracle, config.tau, k2_progress)
            source = "K2 decisions"
        else:
            raise ValueError(f"unknown search {config.search!r}; choose k2 or hc")
        for edge in search.edges:
            ledger.record("edge", list(edge), source)
        ledger.record("structure", {v: list(ps) for v, ps in search.parents.items()}, source)
        if config.dp is None:
            params = secure_parameters(scorer, search.parents, config.disclosure)
        elif config.dp.release == "network":
            params = noisy_parameters(scorer, search.parents, config.dp, before_release)
        family_records = (
            family_record_counts(scorer, search.parents) if config.available_case else None
        )
    finally:
        scorer.close()
    network = None
    if len(params.cpts) == len(schema.names):
        states = {v.name: v.states for v in schema.variables}
        network = BayesNet(
            schema.names, states, dict(search.parents), params.cpts, params.unobserved
        )
    stats = {
        "wall_s": time.perf_counter() - started,
        "phases": dict(scorer.clock.seconds),
        "phase_cpu": scorer.clock.cpu_split(),  # per phase: serial and parallel CPU seconds
        **channel.stats.as_dict(),
        "paillier_encryptions": scorer.paillier.encryptions,
        "public_key_operations": scorer.paillier.public_key_operations,
        "and_gates": scorer.yao.counters.and_gates,
        "ots": scorer.yao.counters.ots + scorer.arith.counters.ots,
        "ln_evaluations": scorer.evaluations,
        "families_scored": len(scorer.score_shares),
        # the paper's method (one n-long scalar product per alpha, Sec. 6.3) on the same
        # families, both parties together: computed, not run
        "per_alpha_encryptions": per_alpha_cost(
            schema, list(scorer.count_shares), n_records, config.tables.key_bits
        ).encryptions,
    }
    return SecureLearnResult(search, params, network, stats, scorer.arith.openings, family_records)
