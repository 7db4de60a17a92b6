"""The secure learning job's configuration and the public facts both parties derive from it.

Everything here is public and agreed (or, where a field says so, this party's own): the
modules that run the protocol (``scorer``, ``k2``, ``hc``, ``parameters``, ``learn``) read
it, none of them writes it. ``K2Checkpoint`` is the state a job hands its caller between
search steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ppbn.bn.k2 import DEFAULT_TAU
from ppbn.bn.learn import HCOptions
from ppbn.bn.schema import Schema
from ppbn.bn.scores import DEFAULT_ESS
from ppbn.dp.accounting import DPPlan
from ppbn.dp.constants import DP_SCORES
from ppbn.protocols.base_ot import dh_bits_for
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, MAX_TERM_LANES
from ppbn.protocols.fixedpoint import SCORE_FRAC
from ppbn.protocols.ot import OT_INLINE_BELOW, check_subfield_bits
from ppbn.protocols.tables import TablesConfig
from ppbn.protocols.yao import GC_INLINE_BELOW

DISCLOSURES = ("public", "owner", "shared")
GARBLER = "alice"
Family = tuple[str, ...]
SPLIT_TERMS_FROM = 1024  # a batch of this many secure terms or more runs as two halves side by side
Progress = Callable[[str, int, int], None]


@dataclass
class K2Checkpoint:
    """One party's state after ``step`` completed K2 waves: enough to continue from there.

    ``decisions[w]`` lists wave w's public outcome as [child, chosen parent or None];
    ``count_shares`` and ``score_shares`` are this party's own shares (never the peer's).
    The daemon stores it (``jobs/checkpoint.py``); the protocol only produces and
    consumes it, through the ``checkpoint`` callback of ``learn.learn_secure``."""

    step: int
    decisions: list[list[list[str | None]]]
    count_shares: dict[Family, np.ndarray]
    score_shares: dict[tuple[str, frozenset[str]], np.ndarray]


@dataclass(frozen=True)
class SecureLearnConfig:
    """The options of one secure learning job: the search, the score, the disclosure of
    the parameters, and how the protocol schedules its work."""

    max_parents: int = 2
    mode: str = "exact"
    tau: float = DEFAULT_TAU
    order: tuple[str, ...] | None = None
    c_star: float = 1.0
    disclosure: str = "public"
    tables: TablesConfig = field(default_factory=TablesConfig)
    # Available-case analysis (``--missing available-case``; both parties set it from the
    # rule their daemons agreed on in the handshake): K2 compares each candidate with the
    # current parents on the records complete in the candidate too (``bn.k2.CountsOracle``,
    # paired mode), and the number of records each family of the learned network was
    # counted on is opened to both (``parameters.family_record_counts``, in both ledgers).
    available_case: bool = False
    # "k2" (under ``order``) or "hc": hill climbing (``bn.hc``) with the secure move oracle
    # (``learning.hc``) and these settings; ``order`` is then unused
    search: str = "k2"
    hc: HCOptions = field(default_factory=HCOptions)
    ess: float = DEFAULT_ESS  # BDeu's equivalent sample size (mode "bdeu" only)
    # score a batch of families in groups, the next group's table phase on a lane of the
    # channel while this group's terms run (``SecureScorer.scores``); both parties agree
    overlap_tables: bool = True
    # a batch of at least ``split_terms_from`` secure terms runs as two halves side by side,
    # the second on a lane of its own (``SecureScorer.terms``): for a slow link, where it
    # overlaps one half's compute with the other's transfer; on a fast link or one shared
    # host the extra thread costs more CPU than it hides (docs/user-guide.md, "Two halves of each batch of terms"). Both parties agree
    split_terms: bool = False
    split_terms_from: int = SPLIT_TERMS_FROM
    # each large batch of secure terms split across this many processes of each party,
    # each on a lane of its own (``term_lanes.py``): the ln-term phase on that many cores.
    # Both parties agree; 1: the job's own thread runs every term
    term_lanes: int = 1
    # SoftSpokenOT's k for every OT extension of the terms (``constants.SUBFIELD_CHOICES``):
    # 8 sends the fewest bytes, 4 spends the least CPU (docs/decisions/ot-subfield-bits.md).
    # Both parties agree
    ot_k: int = DEFAULT_SUBFIELD_BITS

    def __post_init__(self) -> None:
        if not 1 <= self.term_lanes <= MAX_TERM_LANES:
            raise ValueError(f"term_lanes must be in 1..{MAX_TERM_LANES}")
        check_subfield_bits(self.ot_k)

    # this party's own (never negotiated): garbled runs of fewer AND gates x instances, and
    # OT-extension calls of fewer OTs, stay in the job thread instead of the executor
    gc_inline_below: int = GC_INLINE_BELOW
    ot_inline_below: int = OT_INLINE_BELOW
    # a differentially private release (``learning/dp.py``): K2's choices by report-noisy-max
    # and noisy counts, under this plan; None: the exact release. Both parties derive the
    # plan alike from the job's public parameters (``jobs/learn.py``)
    dp: DPPlan | None = None

    def check_dp(self) -> None:
        """A DP job is K2 on complete records with a public release and a score whose
        sensitivity is stated (``dp.accounting.DP_SCORES``); ValueError otherwise."""
        if self.dp is None:
            return
        if self.search != "k2":
            raise ValueError("a differentially private job searches with K2 (not hill climbing)")
        if self.available_case:
            raise ValueError(
                "a differentially private job needs complete records (no available-case)"
            )
        if self.disclosure != "public":
            raise ValueError(
                "a differentially private job releases its network to both (disclosure public)"
            )
        if self.mode not in DP_SCORES:
            raise ValueError(
                f"a differentially private job scores with {' or '.join(DP_SCORES)}, not {self.mode}"
            )

    @property
    def largest_parents(self) -> int:
        """The most parents of any family the search scores: its limit, or more where hill
        climbing's start graph and fixed edges force them (the circuit width must hold those
        families' scores too). Both parties derive it from the same checked parameters."""
        if self.search != "hc":
            return self.max_parents
        return max(self.max_parents, self.hc.forced_parents())

    def tolerance(self) -> int:
        """tau in score units (2^-SCORE_FRAC); the secure comparison is exact on integers."""
        return int(math.floor(self.tau * (1 << SCORE_FRAC)))

    @property
    def dh_bits(self) -> int:
        """The base-OT group of the job, from its Paillier key size (``base_ot.dh_bits_for``):
        3072-bit keys use the 3072-bit group, so the whole job sits at one security level.
        Each party derives it from its own checked configuration, never from the peer."""
        return dh_bits_for(self.tables.key_bits)


def score_bits(
    schema: Schema, n_records: int, max_parents: int, c_star: float = 1.0, ess: float = 0.0
) -> int:
    """Width of the decision circuit: |family score| * 2^SCORE_FRAC < 2^(width - 3).

    Every family score is a sum of terms of at most (x + 1/2) ln x over at most n + Q
    records-or-cells (Q = the largest table), plus a public term: pub(d, q) or
    q ln (d-1)!, or the BIC penalty c_star ln(n)/2 q (d-1). A score that could need more
    than the ring's 128 bits is refused rather than compared modulo 2^128."""
    cards = sorted((v.cardinality for v in schema.variables), reverse=True)
    largest_table = math.prod(cards[: max_parents + 1])
    total = n_records + largest_table
    bound = 4 * total * (math.log(total + 1) + 4) + 4 * largest_table * (
        math.lgamma(cards[0] + 1) + 2
    )
    bound += c_star * math.log(n_records + 1) * largest_table
    if ess:  # bdeu: lnG(x + a) with a <= ess, and the public q lnG(a_j) - q d lnG(a_jk)
        bound += (
            4
            * largest_table
            * (ess * math.log(total + ess + 1) + abs(math.lgamma(ess / largest_table)) + 2)
        )
    width = SCORE_FRAC + math.ceil(math.log2(bound)) + 3
    if width > 128:
        raise ValueError(
            f"family scores may need {width} bits; the secure comparison has 128 (lower c_star or u)"
        )
    return width
