"""Private K2 structure learning and exact parameters (Yang-Wright Sec. 6 and 7, Fig. 3/4).

Both parties run this module's ``learn_secure`` in lockstep over one Channel. The single
K2 driver of ``bn/k2.py`` asks the ``SecureOracle`` for the decisions of all nodes that
are still adding parents (one wave per K2 step, see ``k2_search``); the oracle answers
from shares only:

1. Contingency-table shares in Z_2^64 of every family it needs (``protocols/tables``:
   Paillier, packed, cached across waves).
2. For every cell count alpha_ijk and row count (alpha_ij, or l_ij = alpha_ij + d - 1),
   the normalisation circuit (``circuits/scoring``) turns the count shares into shares of
   the mantissa's fraction f and of the multiplier (each output at its own width, as XOR
   shares of its bits by Yao's ``bit-shares`` mode, which ``arith.bit_mul`` multiplies into
   the ring), and masked lookup indices; the tables
   on those indices are fetched by OT in one round (``arith.lookup_batch``); the reduced
   argument u = m r_j - 1, the Lindell-Pinkas series, the products and the Stirling terms
   are evaluated on shares (``fixedpoint.terms_on`` with the
   ``SecureBackend``): the same code as the plaintext model.
3. Family score shares = sum of cell terms - sum of row terms + the public term (pub(d, q),
   q lgamma(d) or the BIC penalty), added by alice.
4. One garbled decision circuit per group of requests: the first candidate within tau of
   the best (NOTES.md tie rule) and whether it beats the current score by more than tau.
   Both parties learn exactly that decision and record it in their ledger.

Parameters (Sec. 7.1, computed from the tables the search already shared, Sec. 8.1):
alpha_ijk / alpha_ij by a garbled division circuit, revealed per the disclosure mode:
``public`` (both learn every CPT), ``owner`` (only the owner of v_i, Sec. 8.2), ``shared``
(each party keeps additive shares mod 2^64 of theta * 2^PARAM_FRAC).

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

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ppbn.bn.hc import HCResult, hill_climb
from ppbn.bn.k2 import DEFAULT_TAU, K2Request, K2Result, k2_search
from ppbn.bn.learn import HCOptions
from ppbn.bn.model import BayesNet
from ppbn.bn.params import cpt_from_counts
from ppbn.bn.schema import Schema
from ppbn.bn.scores import DEFAULT_ESS, pub
from ppbn.circuits.ir import values_to_bits
from ppbn.circuits.scoring import (
    PARAM_FRAC,
    NormalisationSpec,
    c_index_bits,
    decision_circuit,
    division_circuit,
    index_bits,
    normalisation_circuit,
    shared_outputs,
)
from ppbn.protocols import arith, ring
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.fixedpoint import (
    SCORE_FRAC,
    TABLES_ON_J,
    Shift,
    ShiftCoefficients,
    c_table,
    count_bits_for,
    inv_on,
    normalisation_spec,
    reduced_argument_on,
    shift_frac_for,
    tables_on_k,
    term_fixed_many,
    terms_on,
)
from ppbn.protocols.learning.hc import ResumableMoveOracle, SecureMoveOracle
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.ot import OT_INLINE_BELOW, dh_bits_for
from ppbn.protocols.paillier import OpCounters
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.tables import (
    MISSING,
    TablesConfig,
    TablesSession,
    config_index,
    per_alpha_cost,
    run_tables,
)
from ppbn.protocols.yao import GC_INLINE_BELOW, Reveal, YaoParty

DISCLOSURES = ("public", "owner", "shared")
GARBLER = "alice"
Family = tuple[str, ...]
SPLIT_TERMS_FROM = 1024  # a batch of this many secure terms or more runs as two halves side by side
TERMS_LANE_SESSION = b"|terms lane"  # the second half's lane: its own session label, so its own hashes
Progress = Callable[[str, int, int], None]


@dataclass
class K2Checkpoint:
    """One party's state after ``step`` completed K2 waves: enough to continue from there.

    ``decisions[w]`` lists wave w's public outcome as [child, chosen parent or None];
    ``count_shares`` and ``score_shares`` are this party's own shares (never the peer's).
    The daemon stores it (``parties/checkpoint.py``); this module only produces and
    consumes it, through the ``checkpoint`` callback of ``learn_secure``."""

    step: int
    decisions: list[list[list[str | None]]]
    count_shares: dict[Family, np.ndarray]
    score_shares: dict[tuple[str, frozenset[str]], np.ndarray]


@dataclass(frozen=True)
class SecureLearnConfig:
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
    # counted on is opened to both (``family_record_counts``, in both ledgers).
    available_case: bool = False
    # "k2" (under ``order``) or "hc": hill climbing (``bn.hc``) with the secure move oracle
    # (``protocols.hc``) and these settings; ``order`` is then unused
    search: str = "k2"
    hc: HCOptions = field(default_factory=HCOptions)
    ess: float = DEFAULT_ESS  # BDeu's equivalent sample size (mode "bdeu" only)
    # score a batch of families in groups, the next group's table phase on a lane of the
    # channel while this group's terms run (``SecureScorer.scores``); both parties agree
    overlap_tables: bool = True
    # a batch of at least ``split_terms_from`` secure terms runs as two halves side by side,
    # the second on a lane of its own (``SecureScorer.terms``): for a slow link, where it
    # overlaps one half's compute with the other's transfer; on a fast link or one shared
    # host the extra thread costs more CPU than it hides (README). Both parties agree
    split_terms: bool = False
    split_terms_from: int = SPLIT_TERMS_FROM
    # this party's own (never negotiated): garbled runs of fewer AND gates x instances, and
    # OT-extension calls of fewer OTs, stay in the job thread instead of the executor
    gc_inline_below: int = GC_INLINE_BELOW
    ot_inline_below: int = OT_INLINE_BELOW

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
        """The base-OT group of the job, from its Paillier key size (``ot.dh_bits_for``):
        3072-bit keys use the 3072-bit group, so the whole job sits at one security level.
        Each party derives it from its own checked configuration, never from the peer."""
        return dh_bits_for(self.tables.key_bits)


@dataclass
class PhaseClock:
    """Wall time per protocol phase (reported as ``stats.phases``)."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, started: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started


class SecureBackend:
    """``fixedpoint.Backend`` on additive shares: local ring operations, ``arith`` products.
    Alice's results may await bob's lift bits (``arith.ArithSession.defer_lifts``): call
    the session's ``settle`` before they leave the backend (``SecureScorer._terms_on``)."""

    def __init__(self, session: arith.ArithSession, role: str) -> None:
        self.session = session
        self.role = role
        # alice completes her lifts when she next reads, not at once (``arith._lift``): a
        # local operation's result awaits bob's bits with its operands (``derive``), a
        # truncation by opening completes its input first, the products settle themselves
        session.defer_lifts = True

    def add(self, x, y):
        return self.session.derive(ring.add(x, y), (x, 1), (y, 1))

    def sub(self, x, y):
        return self.session.derive(ring.sub(x, y), (x, 1), (y, -1))

    def scale(self, x, c: int):
        return self.session.derive(ring.mul_int(x, c), (x, c))

    def scale_each(self, x, cs: list[int]):
        factors = ring.from_ints(cs)
        return self.session.derive(ring.mul(x, factors), (x, factors))

    def constant(self, c: int, like):
        if self.role == GARBLER:
            return np.broadcast_to(ring.constant(c), like.shape).copy()
        return np.zeros_like(like)

    def truncate(self, x, bits: int, bound_bits: int):
        self.session.settle(x)
        return arith.truncate(self.session, x, bits, bound_bits)

    def mul(self, x, y, bits: int, bound_bits: int, operand_bits: tuple[int, int]):
        return arith.mul(self.session, x, y, truncate=bits, bound_bits=bound_bits, operand_bits=operand_bits)

    def square(self, x, bits: int, bound_bits: int, operand_bits: int):
        return arith.square(self.session, x, truncate=bits, bound_bits=bound_bits, operand_bits=operand_bits)

    def bit_mul(self, x, y, x_bits: int, y_bits: int):
        if x.shape[1] != x_bits:
            raise ValueError(f"{x.shape[1]} shared bits for a {x_bits}-bit operand")
        return arith.bit_mul(self.session, x, y, y_bits)


@dataclass
class _TermsEngine:
    """One conversation's sessions for secure terms: the job's own (on the channel), or a
    second set on a lane of its own (``SecureScorer._lane_engine``) that runs half of a
    large batch beside it. Each set has its own base OTs, OT extensions, garbling tweaks
    and, on the lane, hashes keyed by the lane's own session label."""

    yao: YaoParty
    arith: arith.ArithSession
    backend: SecureBackend


def _add_counters(into: object, moved: object) -> None:
    """Add the integer counters of ``moved`` (a counters dataclass) to ``into``'s, and zero them."""
    for name, value in vars(moved).items():
        setattr(into, name, getattr(into, name) + value)
        setattr(moved, name, 0)


def score_bits(schema: Schema, n_records: int, max_parents: int, c_star: float = 1.0, ess: float = 0.0) -> int:
    """Width of the decision circuit: |family score| * 2^SCORE_FRAC < 2^(width - 3).

    Every family score is a sum of terms of at most (x + 1/2) ln x over at most n + Q
    records-or-cells (Q = the largest table), plus a public term: pub(d, q) or
    q ln (d-1)!, or the BIC penalty c_star ln(n)/2 q (d-1). A score that could need more
    than the ring's 128 bits is refused rather than compared modulo 2^128."""
    cards = sorted((v.cardinality for v in schema.variables), reverse=True)
    largest_table = math.prod(cards[: max_parents + 1])
    total = n_records + largest_table
    bound = 4 * total * (math.log(total + 1) + 4) + 4 * largest_table * (math.lgamma(cards[0] + 1) + 2)
    bound += c_star * math.log(n_records + 1) * largest_table
    if ess:  # bdeu: lnG(x + a) with a <= ess, and the public q lnG(a_j) - q d lnG(a_jk)
        bound += 4 * largest_table * (ess * math.log(total + ess + 1) + abs(math.lgamma(ess / largest_table)) + 2)
    width = SCORE_FRAC + math.ceil(math.log2(bound)) + 3
    if width > 128:
        raise ValueError(f"family scores may need {width} bits; the secure comparison has 128 (lower c_star or u)")
    return width


CANDIDATE_BUCKET = 8  # decision circuits are built for multiples of this many candidates
PIPELINE_GROUPS = 4  # a batch of families is scored in up to this many groups ...
PIPELINE_MIN_TERMS = 2048  # ... of at least this many secure terms each


def normalisation_modes(spec: NormalisationSpec) -> dict[str, Reveal]:
    """Who gets what of the normalisation circuit: f and x2 as XOR shares of their bits
    (``shared_outputs``; ``arith.bit_mul`` takes them), the masked table indices to the
    evaluator."""
    masked = ["k_masked", "j_masked"] + (["c_masked"] if c_index_bits(spec.mode) else [])
    return {**dict.fromkeys(shared_outputs(spec), Reveal.BIT_SHARES), **dict.fromkeys(masked, Reveal.EVALUATOR)}


class SecureScorer:
    """Shares of family scores (and the table shares behind them) for one job."""

    def __init__(
        self,
        channel: Channel,
        role: str,
        schema: Schema,
        codes: np.ndarray,
        n_records: int,
        config: SecureLearnConfig,
        ledger: Ledger,
        progress: Progress | None = None,
        paillier: OpCounters | None = None,
        keep_openings: bool = False,
    ) -> None:
        self.channel = channel
        self.role = role
        self.schema = schema
        self.codes = codes
        self.n_records = n_records
        self.config = config
        self.ledger = ledger
        self.progress = progress
        self.paillier = paillier if paillier is not None else OpCounters()
        # records are complete unless available-case: the table phase may derive counts (``tables``)
        self.tables = TablesSession(replace(config.tables, complete_records=not config.available_case))
        # the garbled phases share the party's executor (and seeds) with the table phase
        self._engine = self._terms_engine(channel, self.tables.seeds, keep_openings)
        self.yao, self.arith, self.backend = self._engine.yao, self._engine.arith, self._engine.backend
        self._lane: tuple[Channel, _TermsEngine] | None = None  # ``_lane_engine``, opened on first use
        self._lane_seeds = self.tables.seeds.next() if self.tables.seeds.fixed else None
        self._sections: dict[str, str] = {}  # phase -> the channel's byte section the party layer gave it
        self._announced = threading.Condition()  # ``_sections`` grew
        self.clock = PhaseClock()
        max_d = max(v.cardinality for v in schema.variables)
        bdeu = config.mode == "bdeu"
        if bdeu and not config.ess > 0:
            raise ValueError("the BDeu equivalent sample size must be > 0")
        # counts below 2^K: rows are alpha_ij + d - 1 (yw, exact), or alpha_ij + a_j < n + ess (bdeu)
        self.count_bits = count_bits_for(n_records + math.ceil(config.ess) + 1 if bdeu else n_records + max_d - 1)
        self.shift_frac = shift_frac_for(self.count_bits) if bdeu else 0
        self.score_bits = score_bits(schema, n_records, config.largest_parents, config.c_star, config.ess if bdeu else 0.0)
        self.count_shares: dict[Family, np.ndarray] = {}
        self.score_shares: dict[tuple[str, frozenset[str]], np.ndarray] = {}
        # paired mode (available-case): (child, parents, given) -> score share on the records
        # complete in given too; recomputed after a resume, never checkpointed
        self.paired_shares: dict[tuple[str, tuple[str, ...], str], np.ndarray] = {}
        # the sum of the cell terms of each set of variables (``_score_cells``); not checkpointed
        self.cell_sums: dict[frozenset[str], int] = {}
        # the sum of the secure row terms per (parents, row offset, bdeu shift); not checkpointed
        self.row_sums: dict[tuple[frozenset[str], int, float | None], int] = {}
        self._term_memo: dict[float | None, dict[int, int]] = {}  # ``_own_terms``: shift -> count -> term
        self.evaluations = 0

    def phase(self, name: str) -> None:
        """Announce a protocol phase (the daemon names it when a peer fails)."""
        if self.progress is not None:
            self.progress(f"phase {name}", 0, 0)
        with self._announced:
            self._sections[name] = self.channel.stats.section
            self._announced.notify_all()

    def _section_of(self, phase: str) -> str:
        """The byte section the party layer gave ``phase`` on the channel (a lane labels its
        bytes alike): the first time, once the main thread has announced it."""
        with self._announced:
            self._announced.wait_for(lambda: phase in self._sections, timeout=self.channel.timeout_s)
            return self._sections.get(phase, self.channel.stats.section)

    def _terms_engine(self, channel: Channel, seeds: TaskSeeds, keep_openings: bool) -> _TermsEngine:
        """Garbling and share-arithmetic sessions over ``channel``, on the party's executor."""
        config = self.config
        batches = {"seeds": seeds, "executor": lambda: self.tables.executor}
        yao = YaoParty(channel, dh_bits=config.dh_bits, gc_inline_below=config.gc_inline_below,
                       ot_inline_below=config.ot_inline_below, **batches)  # fmt: skip
        session = arith.ArithSession(
            channel, self.role, keep_openings, dh_bits=config.dh_bits, ot_inline_below=config.ot_inline_below, **batches
        )
        return _TermsEngine(yao, session, SecureBackend(session, self.role))

    def _lane_engine(self) -> tuple[Channel, _TermsEngine]:
        """The second set of term sessions, on a lane opened once per job at the first
        split batch (both parties reach it at the same point: the batch sizes are public).
        Its randomness is its own: a fixed test seed derives the lane's seeds in the
        constructor, so a run still repeats whatever the threads' interleaving."""
        if self._lane is None:
            lane = self.channel.open_lane(session=self.channel.session + TERMS_LANE_SESSION)
            self._lane = (lane, self._terms_engine(lane, TaskSeeds(self._lane_seeds), self.arith.openings is not None))
        return self._lane

    # -- tables -------------------------------------------------------------------------
    def table_shares(self, families: Sequence[Family], lane: Channel | None = None) -> dict[Family, np.ndarray]:
        """Shares of each family's count table, axes in the family's order. A table depends
        only on the set of its variables, so it is computed once per set (in schema order)
        and transposed locally for the other orders: hill climbing asks for u | v and v | u.
        With ``lane`` the table phase talks over that lane of the channel (``scores`` runs
        it in a second thread) and does not announce a phase: the main thread owns that."""
        position = {v: i for i, v in enumerate(self.schema.names)}

        def canonical(family: Family) -> Family:
            return tuple(sorted(family, key=position.__getitem__))

        missing = list(dict.fromkeys(canonical(f) for f in families if f not in self.count_shares))
        missing = [f for f in missing if f not in self.count_shares]
        if missing:
            if lane is None:
                self.phase("tables")
            else:
                lane.stats.section = "tables"
            started = time.perf_counter()
            self.count_shares.update(
                run_tables(
                    self.channel if lane is None else lane, self.role, self.schema, self.codes, missing,
                    counters=self.paillier, progress=self.progress if lane is None else None, session=self.tables,
                )
            )  # fmt: skip
            self.clock.add("tables", started)
        for family in families:
            if family not in self.count_shares:
                base = canonical(family)
                axes = [base.index(v) for v in family]
                self.count_shares[family] = np.ascontiguousarray(np.transpose(self.count_shares[base], axes))
        return {f: self.count_shares[f] for f in families}

    # -- terms ----------------------------------------------------------------------------
    def _normalise(self, yao: YaoParty, x_shares: np.ndarray, shift: Shift | None) -> tuple[dict, dict[str, np.ndarray]]:
        """One run of the normalisation circuit: XOR shares of the bits of f and x2 ((n, w)
        0/1 arrays; ``fixedpoint.normalise``), and this party's view of the masked table
        indices (alice's pads, bob's masked values)."""
        mode = self.config.mode
        spec = normalisation_spec(self.count_bits, mode, shift)
        circuit = normalisation_circuit(spec)
        n = x_shares.shape[0]
        outputs = normalisation_modes(spec)
        shared = {name: out.width for name, out in shared_outputs(spec).items()}
        masked = [name for name, how in outputs.items() if how == Reveal.EVALUATOR]
        low = x_shares & np.uint64((1 << self.count_bits) - 1)
        if self.role == GARBLER:
            rng = ring.RandomRing()
            widths = {
                "k": index_bits(self.count_bits + spec.shift_frac), "j": spec.mantissa_bits, "c": c_index_bits(mode)
            }
            pads = {name: rng.uint64(n) & np.uint64((1 << w) - 1) for name, w in widths.items() if w}
            out = yao.run(
                circuit, garbler=True, outputs=outputs,
                inputs={"xa": low, **{f"mu_{name}": pad for name, pad in pads.items()}},
            )  # fmt: skip
            return {name: values_to_bits(out[name], w).T for name, w in shared.items()}, pads
        out = yao.run(circuit, garbler=False, outputs=outputs, inputs={"xb": low})
        bits = {name: values_to_bits(out[name], w).T for name, w in shared.items()}
        return bits, {m[0]: np.asarray(out[m], dtype=np.uint64) for m in masked}

    def terms(self, x_shares: np.ndarray, shifts: Sequence[float] | None = None) -> np.ndarray:
        """Shares of the cell/row term of every count (uint64 shares in, ring shares out);
        bdeu: lnG(x + a) with the public shift a of each count (``shifts``), one
        normalisation circuit and one C-table per distinct shift.

        With ``split_terms`` a batch of at least ``split_terms_from`` terms runs as two
        halves side by side, the second in a thread on the terms lane (``_lane_engine``):
        each product layer is compute, then bytes both ways, then compute, so one half's
        compute overlaps the other's transfer and round trips. The halves are the same
        computation on fewer terms, each on its own OTs, garbling and masks, and both
        parties split alike (n is public)."""
        mode = self.config.mode
        n = x_shares.shape[0]
        if (mode == "bdeu") != (shifts is not None):
            raise ValueError("the bdeu mode, and only it, takes shifts")
        self.phase("ln terms (Yao)")  # two names, so the daemon can count bytes per step
        if not (self.config.split_terms and n >= max(2, self.config.split_terms_from)):
            result = self._terms_on(self._engine, x_shares, shifts, self.phase, self.clock)
            self.evaluations += n
            return result
        half = n // 2
        lane, engine = self._lane_engine()
        low, high = (None, None) if shifts is None else (shifts[:half], shifts[half:])

        def mark(phase: str) -> None:  # the lane's bytes go to the section its phase has on the channel
            lane.stats.section = self._section_of(phase)

        mark("ln terms (Yao)")
        second = _Background(
            lane.name, self._terms_on, engine, x_shares[half:], high, mark, None
        )
        first = self._terms_on(self._engine, x_shares[:half], low, self.phase, self.clock)
        started = time.perf_counter()
        rest = second.join()
        self.clock.add("ln and x ln x (shares)", started)
        self.channel.settle_lane(lane)
        _add_counters(self.yao.counters, engine.yao.counters)
        _add_counters(self.arith.counters, engine.arith.counters)
        if self.arith.openings is not None:
            self.arith.openings.extend(engine.arith.openings)
            engine.arith.openings.clear()
        self.evaluations += n
        return np.concatenate([first, rest])

    def _terms_on(
        self,
        engine: _TermsEngine,
        x_shares: np.ndarray,
        shifts: Sequence[float] | None,
        mark: Callable[[str], None],
        clock: PhaseClock | None,
    ) -> np.ndarray:
        """``terms`` on one set of sessions: the normalisation circuit, one round of lookups,
        then the products of ``fixedpoint.terms_on``; ``mark`` names the phase of the
        products when it starts, ``clock`` (the main thread's only) takes the times."""
        mode = self.config.mode
        n = x_shares.shape[0]
        groups: dict[float | None, np.ndarray] = {None: np.arange(n)}
        if shifts is not None:
            values = np.asarray(shifts, dtype=float)
            groups = {float(a): np.flatnonzero(values == a) for a in np.unique(values)}
        started = time.perf_counter()  # the caller named the phase "ln terms (Yao)"
        runs = {
            a: self._normalise(engine.yao, x_shares[idx], None if a is None else Shift(a, self.shift_frac))
            for a, idx in groups.items()
        }
        if clock is not None:
            clock.add("normalise (Yao)", started)
        started = time.perf_counter()
        mark("ln terms (shares)")

        def gathered(name: str) -> np.ndarray:
            first = next(iter(runs.values()))[0][name]
            bits = np.empty((n, first.shape[1]), dtype=np.uint8)
            for a, idx in groups.items():
                bits[idx] = runs[a][0][name]
            return bits

        def index(name: str) -> np.ndarray:
            out = np.zeros(n, dtype=np.uint64)
            for a, idx in groups.items():
                out[idx] = runs[a][1][name]
            return out

        # every table in one lookup round: those on k, those on j (one OT set and one
        # message per index), and the C-table(s) on c; each entry at its own width
        shift_frac = self.shift_frac if mode == "bdeu" else 0
        k_bits = self.count_bits + shift_frac
        requests = [(tables_on_k(mode, self.count_bits, shift_frac), index("k")), (list(TABLES_ON_J), index("j"))]
        if mode in ("exact", "yw0"):
            requests.append(([c_table(mode)], index("c")))
        elif mode == "bdeu":
            requests += [([c_table(mode, Shift(a, self.shift_frac))], runs[a][1]["c"]) for a in groups]
        on_k, (ln_r, reciprocal), *on_c = arith.lookup_batch(engine.arith, requests)
        k_ln2 = on_k[0]
        inv = inv_on(engine.backend, reciprocal, on_k[1], k_bits, shift_frac) if mode in ("exact", "bdeu") else None
        c_entry = None
        if mode in ("exact", "yw0"):
            c_entry = on_c[0][0]
        elif mode == "bdeu":
            engine.arith.settle()  # alice's shares are copied below: complete them first
            c_entry = np.zeros((n, 2), dtype=np.uint64)
            for (share,), idx in zip(on_c, groups.values(), strict=True):
                c_entry[idx] = share
        coefficients = None
        if shifts is not None:
            coefficients = ShiftCoefficients.of([Shift(float(a), self.shift_frac) for a in shifts])
        result = terms_on(
            engine.backend, mode, self.count_bits, reduced_argument_on(engine.backend, gathered("f"), reciprocal, k_bits),
            gathered("x2"), k_ln2, ln_r, c_entry, inv, coefficients,
        )  # fmt: skip
        engine.arith.settle()  # the last product's lift, before the result leaves the terms
        if clock is not None:
            clock.add("ln and x ln x (shares)", started)
        return result

    # -- family scores -------------------------------------------------------------------
    def public_term(self, q: int, d: int) -> float:
        mode = self.config.mode
        if mode in ("yw", "yw0"):
            return pub(d, q)
        if mode == "exact":
            return q * math.lgamma(d)
        if mode == "bdeu":
            ess = self.config.ess
            return q * math.lgamma(ess / q) - q * d * math.lgamma(ess / (q * d))
        n = self.n_records
        return -self.config.c_star * (math.log(n) / 2 if n > 1 else 0.0) * q * (d - 1)

    def scores(self, keys: Sequence[tuple[str, tuple[str, ...]]]) -> list[np.ndarray]:
        """This party's share (ring element) of the score of each (child, parents)."""
        wanted = [(c, ps) for c, ps in keys if (c, frozenset(ps)) not in self.score_shares]
        wanted = list(dict.fromkeys(wanted))
        groups = self._pipeline_groups([(*ps, c) for c, ps in wanted])
        if groups:
            self.table_shares(groups[0])
        for index, families in enumerate(groups):
            following = None
            if index + 1 < len(groups):
                lane = self.channel.open_lane()
                following = _Background(lane.name, self.table_shares, groups[index + 1], lane)
            tables = self.table_shares(families)  # computed by now: a lookup
            cells = [tables[fam].reshape(-1, self.schema.cardinality(fam[-1])) for fam in families]
            for family, share in zip(families, self._score_cells(cells, families, cache_cells=True), strict=True):
                self.score_shares[(family[-1], frozenset(family[:-1]))] = share
            if following is not None:
                following.join()
                self.channel.close_lane(lane)
        return [self.score_shares[(c, frozenset(ps))] for c, ps in keys]

    def _pipeline_groups(self, families: list[Family]) -> list[list[Family]]:
        """The families of one batch in consecutive groups of about equal secure terms
        (``_secure_terms``), at most ``PIPELINE_GROUPS`` of at least ``PIPELINE_MIN_TERMS``:
        group i + 1's table phase (Paillier, CPU) runs on a lane of the channel while group
        i's terms (garbled circuits and OT, mostly bytes on the wire) run here, so on a slow
        link the table phase costs next to nothing. A family's size is its secure terms
        (``_term_owners``: none for a local family, which needs no table phase either), and
        the first group gets half a share: its table phase is the one nothing overlaps.
        Both parties split alike: the families and their sizes are public."""
        sizes = [self._secure_terms(fam) for fam in families]
        most = min(PIPELINE_GROUPS, sum(sizes) // PIPELINE_MIN_TERMS, len(families)) if self.config.overlap_tables else 1
        count = max(1, most)
        share = sum(sizes) / (count - 0.5) if count > 1 else 0.0
        groups: list[list[Family]] = []
        done = 0
        for family, size in zip(families, sizes, strict=True):
            if not groups or (len(groups) < count and done >= share * (len(groups) - 0.5)):
                groups.append([])
            groups[-1].append(family)
            done += size
        return groups

    def _term_owners(self, family: Family, own_rows: bool) -> tuple[str | None, str | None]:
        """Who computes a family's cell terms and its row terms alone (None: securely),
        ``_score_cells``: the party holding the whole family computes both; with ``own_rows``
        and complete records, the party holding all the parents computes the rows."""
        owner = _local_owner(self.schema, family)
        if owner is None and own_rows and not self.config.available_case and len(family) > 1:
            return None, _local_owner(self.schema, family[:-1])
        return owner, owner

    def _secure_terms(self, family: Family) -> int:
        """The family's terms that run securely: at most its cells and rows (fewer when a
        family scored before shares them, ``_score_cells``)."""
        q = math.prod(self.schema.cardinality(v) for v in family[:-1])
        owner, row_owner = self._term_owners(family, own_rows=True)
        return (0 if owner else q * self.schema.cardinality(family[-1])) + (0 if row_owner else q)

    def paired_scores(self, keys: Sequence[tuple[str, tuple[str, ...], str]]) -> list[np.ndarray]:
        """Shares of the score of (child, parents) on the records complete in ``given`` too:
        the table of (parents..., given, child), summed over ``given`` on the shares (a
        local, linear step). Available-case K2 compares a candidate with its child's
        current parents on these same records (``bn.k2.CountsOracle``, paired mode)."""
        wanted = [k for k in dict.fromkeys(keys) if k not in self.paired_shares]
        if wanted:
            families = [(*ps, z, c) for c, ps, z in wanted]
            tables = self.table_shares(families)
            cells = [
                tables[fam].sum(axis=len(fam) - 2, dtype=np.uint64).reshape(-1, self.schema.cardinality(fam[-1]))
                for fam in families
            ]
            # the rows count the records complete in the given variable too: not the parents' owner's own counts
            for key, share in zip(wanted, self._score_cells(cells, families, own_rows=False), strict=True):
                self.paired_shares[key] = share
        return [self.paired_shares[k] for k in keys]

    def _score_cells(
        self, tables: Sequence[np.ndarray], families: Sequence[Family], *, cache_cells: bool = False, own_rows: bool = True
    ) -> list[np.ndarray]:
        """Score shares of (q, d) count-table shares: cell terms - row terms + public term.

        A term whose count one party knows in the clear is computed by that party alone
        (``_own_terms``), its peer's share of it being zero; only the others run securely:
        - a family whose variables one party holds entirely (its table share is the table
          itself, ``tables``): all its terms;
        - with ``own_rows`` and complete records (not available-case), a family whose
          parents one party holds: its row counts alpha_ij, that party's own counts of
          its parents' configurations.
        Both parties choose alike from public data (owners, the missing rule), and neither
        learns more: the secure terms would give it a share of values its peer knows.

        With ``cache_cells`` (``families`` are then the tables' variables, child last) the
        sum of the cell terms is kept per set of variables: every mode's cell term is a
        function of the cell count alone (and, for bdeu, of ess / (q d), also a property
        of the set), so u | v and v | u share it and only their row terms differ. With
        complete records, so is the sum of the secure row terms per set of parents (with
        the row offset d - 1 and bdeu's ess / q): alpha_ij counts every record with parent
        configuration j whatever the child, so children of equal d share it."""
        mode, ess = self.config.mode, self.config.ess
        pieces, layout, shifts = [], [], []
        fresh_sets: set[frozenset[str]] = set()
        fresh_rows: set[tuple[frozenset[str], int, float | None]] = set()
        for cells, family in zip(tables, families, strict=True):
            q, d = cells.shape
            owner, row_owner = self._term_owners(family, own_rows)
            key = frozenset(family) if cache_cells else None
            fresh = key is None or (key not in self.cell_sums and key not in fresh_sets)
            if key is not None and fresh:
                fresh_sets.add(key)
            cell_shift = ess / (q * d) if mode == "bdeu" else None  # bdeu's a_jk
            row_shift = ess / q if mode == "bdeu" else None  # bdeu's a_j
            row_offset = 0 if mode in ("bic", "bdeu") else d - 1  # rows l_ij = alpha_ij + d - 1
            row_key = None
            if row_owner is None and cache_cells and not self.config.available_case:
                row_key = (frozenset(family[:-1]), row_offset, row_shift)
            rows_fresh = row_key is None or (row_key not in self.row_sums and row_key not in fresh_rows)
            if row_key is not None and rows_fresh:
                fresh_rows.add(row_key)
            own_cells = own_rows_sum = 0
            if owner == self.role and fresh:
                own_cells = self._own_terms(cells.ravel(), cell_shift)
            elif owner is None and fresh:
                pieces.append(cells.ravel())
                shifts += [cell_shift] * cells.size
            if row_owner == self.role:
                rows = cells.sum(axis=1, dtype=np.uint64) if owner else self._parent_counts(family[:-1])
                own_rows_sum = self._own_terms(rows + np.uint64(row_offset), row_shift)
            elif row_owner is None and rows_fresh:
                rows = cells.sum(axis=1, dtype=np.uint64)
                pieces.append(rows + np.uint64(row_offset) if self.role == GARBLER else rows)
                shifts += [row_shift] * q
            n_cells = cells.size if owner is None and fresh else 0
            n_rows = q if row_owner is None and rows_fresh else 0
            layout.append((n_cells, n_rows, fresh, own_cells, own_rows_sum, q, d, key, rows_fresh, row_key))
        terms = None
        if pieces:
            terms = self.terms(np.concatenate(pieces).astype(np.uint64), shifts if mode == "bdeu" else None)

        def secure_sum(start: int, stop: int) -> int:
            return ring.to_ints(ring.sum(terms[start:stop]))[0] if stop > start else 0

        offset = 0
        out = []
        for n_cells, n_rows, fresh, own_cells, own_rows_sum, q, d, key, rows_fresh, row_key in layout:
            cell_sum = own_cells + secure_sum(offset, offset + n_cells)  # Python ints, reduced by ring.constant
            if key is not None:
                cell_sum = self.cell_sums.setdefault(key, cell_sum) if fresh else self.cell_sums[key]
            row_sum = own_rows_sum + secure_sum(offset + n_cells, offset + n_cells + n_rows)
            if row_key is not None:
                row_sum = self.row_sums.setdefault(row_key, row_sum) if rows_fresh else self.row_sums[row_key]
            share = cell_sum - row_sum
            offset += n_cells + n_rows
            if self.role == GARBLER:
                share += int(round(self.public_term(q, d) * (1 << SCORE_FRAC)))
            out.append(ring.constant(share))
        return out

    def _own_terms(self, counts: np.ndarray, shift: float | None) -> int:
        """The sum of the terms of counts this party knows in the clear, each as the secure
        path computes it (``fixedpoint.term_fixed_many``, the model the secure terms
        reproduce to a unit in the last place per truncation), memoised per count."""
        memo = self._term_memo.setdefault(shift, {})
        values, repeats = np.unique(np.asarray(counts, dtype=np.uint64), return_counts=True)
        fresh = [int(v) for v in values if int(v) not in memo]
        if fresh:
            per_count = None if shift is None else [Shift(shift, self.shift_frac)] * len(fresh)
            memo.update(zip(fresh, term_fixed_many(fresh, self.count_bits, self.config.mode, per_count), strict=True))
        return sum(memo[int(v)] * int(r) for v, r in zip(values, repeats, strict=True))

    def _parent_counts(self, parents: Family) -> np.ndarray:
        """alpha_ij from this party's own columns: the records of each configuration of
        ``parents`` (all its own), in any order (only their terms' sum is used)."""
        columns = {v.name: j for j, v in enumerate(self.schema.owned_by(self.role))}
        configs = config_index(self.schema, self.codes, columns, parents)
        if (configs == MISSING).any():
            raise ValueError("a missing cell outside available-case analysis: the loader should have refused it")
        return np.bincount(configs, minlength=math.prod(self.schema.cardinalities(parents))).astype(np.uint64)


class _Background:
    """``work(*args)`` in a daemon thread (a table phase, or half of a batch of terms, on a
    lane); ``join`` returns its result, or raises what the thread raised. A daemon thread,
    because if the main thread fails the job's channel is closed and the lane's reads end
    with it."""

    def __init__(self, name: str, work: Callable, *args) -> None:
        self.result = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(work, args), daemon=True, name=name)
        self.thread.start()

    def _run(self, work: Callable, args: tuple) -> None:
        try:
            self.result = work(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread by join
            self.error = exc

    def join(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


class SecureOracle:
    """The K2 oracle of the secure path: batched decisions from shares (Sec. 6.6, 6.7)."""

    def __init__(self, scorer: SecureScorer) -> None:
        self.scorer = scorer

    def best_parent(self, child, parents, candidates, tau) -> str | None:
        return self.best_parents([K2Request(child, parents, candidates)], tau)[0]

    def best_parents(self, requests: Sequence[K2Request], tau: float) -> list[str | None]:
        scorer = self.scorer
        if tau != scorer.config.tau:
            raise ValueError("the secure oracle's tolerance is fixed by its configuration")
        paired = scorer.config.available_case
        keys = []
        for r in requests:
            keys.append((r.child, r.parents))
            keys += [(r.child, (*r.parents, z)) for z in r.candidates]
        scores = dict(zip(keys, scorer.scores(keys), strict=True))
        if paired:
            # available-case: each candidate's gain over the current parents on the same
            # records, s(parents + z) - s(parents | complete in z); "current" is then 0
            given = [(r.child, r.parents, z) for r in requests for z in r.candidates]
            for (c, ps, z), share in zip(given, scorer.paired_scores(given), strict=True):
                scores[(c, (*ps, z))] = ring.sub(scores[(c, (*ps, z))], share)
            zero = np.zeros(2, dtype=np.uint64)
            for r in requests:
                scores[(r.child, r.parents)] = zero
        answers: list[str | None] = [None] * len(requests)
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            padded = -(-len(r.candidates) // CANDIDATE_BUCKET) * CANDIDATE_BUCKET
            groups.setdefault(padded, []).append(i)
        width = scorer.score_bits + (1 if paired else 0)  # a gain is a difference of two scores
        if width > 128:
            raise ValueError(f"score gains may need {width} bits; the secure comparison has 128")
        modulus = 1 << width
        # padding candidates score -2^(width-2): never the best while a real one exists
        sentinel = (-(1 << (width - 2))) % modulus if scorer.role == GARBLER else 0
        suffix = "a" if scorer.role == GARBLER else "b"
        scorer.phase("argmax")
        started = time.perf_counter()
        for slots, members in sorted(groups.items()):
            circuit = decision_circuit(slots, scorer.config.tolerance(), width)

            def column(keys: list[tuple[str, tuple[str, ...]] | None]) -> np.ndarray:
                values = [sentinel if k is None else ring.to_ints(scores[k].reshape(1, 2))[0] % modulus for k in keys]
                return np.array(values, dtype=object)

            inputs = {f"cur_{suffix}": column([(requests[i].child, requests[i].parents) for i in members])}
            for c in range(slots):
                inputs[f"s{c}_{suffix}"] = column(
                    [
                        (requests[i].child, (*requests[i].parents, requests[i].candidates[c]))
                        if c < len(requests[i].candidates)
                        else None
                        for i in members
                    ]
                )
            out = scorer.yao.run(
                circuit, garbler=scorer.role == GARBLER, inputs=inputs,
                outputs={"index": Reveal.BOTH, "add": Reveal.BOTH},
            )
            for slot, i in enumerate(members):
                r = requests[i]
                index, add = int(out["index"][slot]), int(out["add"][slot])
                if (add and index >= len(r.candidates)) or (not add and index):
                    raise ProtocolError(f"decision ({add}, {index}) invalid for {len(r.candidates)} candidates")
                answers[i] = r.candidates[index] if add else None
                scorer.ledger.record(
                    "k2_decision",
                    {"child": r.child, "parents": list(r.parents), "chosen": answers[i]},
                    "garbled argmax with the tie rule (Yang-Wright 6.6)",
                )
        scorer.clock.add("decisions (Yao)", started)
        return answers


class ResumableOracle:
    """The secure oracle with checkpoints: replays the public decisions of the waves a
    checkpoint holds (no protocol run: both parties replay the same ones), then asks the
    secure oracle and hands ``checkpoint`` this party's state after every live wave."""

    def __init__(
        self,
        oracle: SecureOracle,
        start: K2Checkpoint | None,
        checkpoint: Callable[[K2Checkpoint], None] | None,
    ) -> None:
        self.oracle = oracle
        self.decisions: list[list[list[str | None]]] = [list(map(list, w)) for w in start.decisions] if start else []
        self.replay = len(self.decisions)
        self.checkpoint = checkpoint
        self.wave = 0

    def best_parent(self, child, parents, candidates, tau) -> str | None:
        return self.best_parents([K2Request(child, parents, candidates)], tau)[0]

    def best_parents(self, requests: Sequence[K2Request], tau: float) -> list[str | None]:
        wave, self.wave = self.wave, self.wave + 1
        if wave < self.replay:
            recorded = self.decisions[wave]
            if [r.child for r in requests] != [child for child, _ in recorded]:
                raise ValueError(f"checkpoint does not match K2 step {wave + 1} of this job")
            answers = [chosen for _, chosen in recorded]
            for r, chosen in zip(requests, answers, strict=True):
                if chosen is not None and chosen not in r.candidates:
                    raise ValueError(f"checkpoint names {chosen!r}, not a candidate parent of {r.child!r}")
                self.oracle.scorer.ledger.record(
                    "k2_decision",
                    {"child": r.child, "parents": list(r.parents), "chosen": chosen},
                    "garbled argmax with the tie rule (Yang-Wright 6.6)",
                )
            return answers
        answers = self.oracle.best_parents(requests, tau)
        self.decisions.append([[r.child, a] for r, a in zip(requests, answers, strict=True)])
        if self.checkpoint is not None:
            scorer = self.oracle.scorer
            self.checkpoint(
                K2Checkpoint(len(self.decisions), self.decisions, dict(scorer.count_shares), dict(scorer.score_shares))
            )
        return answers


@dataclass
class SecureParameters:
    """This party's view of the parameters: CPTs it may see, and shares it keeps."""

    cpts: dict[str, np.ndarray]  # variable -> (q, d) CPT, for every CPT revealed to us
    unobserved: dict[str, tuple[int, ...]]
    # shared mode: variable -> {"theta": shares mod 2^64 of theta 2^PARAM_FRAC, "unobserved":
    # shares mod 2 of the flag}, one entry per CPT cell (C order)
    shares: dict[str, dict[str, list[int]]]


def _reveal_for(disclosure: str, owner: str) -> Reveal:
    if disclosure == "public":
        return Reveal.BOTH
    if disclosure == "shared":
        return Reveal.SHARES
    return Reveal.GARBLER if owner == GARBLER else Reveal.EVALUATOR


def _local_owner(schema: Schema, family: Family) -> str | None:
    owners = {schema.owner(v) for v in family}
    return owners.pop() if len(owners) == 1 else None


def _record_cpt(scorer: SecureScorer, view: SecureParameters, v: str, cpt: np.ndarray, unobserved, source: str) -> None:
    view.cpts[v] = cpt
    view.unobserved[v] = tuple(int(j) for j in unobserved)
    scorer.ledger.record("parameter", {"variable": v, "cpt": cpt.tolist()}, source)


def _local_parameters(scorer: SecureScorer, families: dict[str, Family], disclosure: str, view: SecureParameters) -> None:
    """Yang-Wright 7.1 case 1: a family held by one party is that party's own data, so it
    computes the CPT itself and announces it (public), keeps it (owner: it owns v_i), or
    deals shares of it (shared). Each party sends its part, then reads the peer's."""
    schema, role, channel = scorer.schema, scorer.role, scorer.channel
    mine = [v for v, f in families.items() if _local_owner(schema, f) == role]
    theirs = [v for v, f in families.items() if _local_owner(schema, f) not in (None, role)]
    cells = {v: scorer.count_shares[families[v]].size for v in families}
    if disclosure == "owner":
        for v in mine:
            d = schema.cardinality(v)
            cpt, unobserved = cpt_from_counts(scorer.count_shares[families[v]].reshape(-1, d).astype(float))
            _record_cpt(scorer, view, v, cpt, unobserved, "own data (Yang-Wright 7.1, case 1)")
        return
    outgoing = []
    for v in mine:
        d = schema.cardinality(v)
        cpt, unobserved = cpt_from_counts(scorer.count_shares[families[v]].reshape(-1, d).astype(float))
        flags = np.zeros(cpt.shape, dtype=np.uint64)
        flags[list(unobserved), :] = 1
        if disclosure == "public":
            _record_cpt(scorer, view, v, cpt, unobserved, "own data (Yang-Wright 7.1, case 1)")
            outgoing += [cpt.ravel().view(np.uint64), flags.ravel()]
        else:
            fixed = np.round(cpt.ravel() * (1 << PARAM_FRAC)).astype(np.uint64)
            rng = ring.RandomRing()
            peer_theta, peer_flags = rng.uint64(fixed.size), rng.uint64(fixed.size) & np.uint64(1)
            view.shares[v] = {"theta": [int(x) for x in fixed - peer_theta], "unobserved": [int(x) for x in flags.ravel() ^ peer_flags]}
            outgoing += [peer_theta, peer_flags]
    if mine:
        channel.send_array("params.local", np.concatenate(outgoing))
    if not theirs:
        return
    received = channel.recv_array("params.local", np.uint64, (2 * sum(cells[v] for v in theirs),))
    offset = 0
    for v in theirs:
        d, size = schema.cardinality(v), cells[v]
        values, flags = received[offset : offset + size], received[offset + size : offset + 2 * size]
        offset += 2 * size
        if np.any(flags > 1):
            raise ProtocolError(f"params.local: flags of {v!r} are not bits")
        if disclosure == "shared":
            view.shares[v] = {"theta": [int(x) for x in values], "unobserved": [int(x) for x in flags]}
            continue
        cpt = values.view(np.float64).reshape(-1, d)
        if not np.all(np.isfinite(cpt)) or np.any(cpt < 0) or np.any(np.abs(cpt.sum(axis=1) - 1) > 1e-9):
            raise ProtocolError(f"params.local: the peer's CPT of {v!r} is not a conditional distribution")
        unobserved = np.flatnonzero(flags.reshape(-1, d)[:, 0])
        _record_cpt(scorer, view, v, cpt.copy(), unobserved, "announced by its owner (Yang-Wright 7.1, case 1)")


def secure_parameters(scorer: SecureScorer, parents: dict[str, tuple[str, ...]], disclosure: str) -> SecureParameters:
    """alpha_ijk / alpha_ij for the learned structure (Yang-Wright Sec. 7.1, Fig. 4), from
    the table shares the search already holds (Sec. 8.1).

    Case 1 (one party holds the whole family) is computed locally by that party. Cases 2
    (one party holds all parents) and 3 (the general case) both use the garbled division:
    the paper's shortcut for case 2 would let the parents' owner learn the counts
    alpha_ijk in the clear (derivable from the public CPT and its own alpha_ij, but not
    under the owner and shared disclosure modes, and not an output in the ledger's
    sense); the division costs about (PARAM_FRAC + 1) count_bits AND gates per cell
    (``builders.fraction``). One division run per group of variables with the same number
    of states and the same owner."""
    if disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {DISCLOSURES}")
    started = time.perf_counter()
    schema, role = scorer.schema, scorer.role
    families = {v: (*parents[v], v) for v in schema.names}
    scorer.table_shares(list(families.values()))
    view = SecureParameters({}, {}, {})
    _local_parameters(scorer, families, disclosure, view)
    groups: dict[tuple[int, str], list[str]] = {}
    for v in schema.names:
        if _local_owner(schema, families[v]) is None:
            groups.setdefault((schema.cardinality(v), schema.owner(v)), []).append(v)
    scorer.phase("parameters")
    suffix = "a" if role == GARBLER else "b"
    for (d, owner), variables in sorted(groups.items()):
        cells = [scorer.count_shares[families[v]].reshape(-1, d) for v in variables]
        low = np.uint64((1 << scorer.count_bits) - 1)  # counts fit: shares mod 2^count_bits suffice
        numerators = np.concatenate([c.ravel() for c in cells]).astype(np.uint64) & low
        denominators = np.concatenate([np.repeat(c.sum(axis=1, dtype=np.uint64), d) for c in cells]) & low
        reveal = _reveal_for(disclosure, owner)
        out = scorer.yao.run(
            division_circuit(scorer.count_bits, d),
            garbler=role == GARBLER,
            inputs={f"n{suffix}": numerators, f"d{suffix}": denominators},
            outputs={"theta": reveal, "unobserved": reveal},
        )
        if "theta" not in out:
            continue  # owner mode, the peer's variables
        offsets = np.cumsum([0] + [c.size for c in cells])
        for i, v in enumerate(variables):
            theta = [int(x) for x in out["theta"][offsets[i] : offsets[i + 1]]]
            flags = [int(x) for x in out["unobserved"][offsets[i] : offsets[i + 1]]]
            if disclosure == "shared":
                view.shares[v] = {"theta": theta, "unobserved": flags}
                continue
            cpt = np.array(theta, dtype=float).reshape(-1, d) / (1 << PARAM_FRAC)
            unobserved = np.flatnonzero(np.array(flags).reshape(-1, d)[:, 0])
            _record_cpt(scorer, view, v, cpt, unobserved, "garbled division (Yang-Wright 7.1, cases 2 and 3)")
    scorer.clock.add("parameters", started)
    return view


def family_record_counts(scorer: SecureScorer, parents: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Open N_i = sum_jk alpha_ijk of each family of the learned network to both parties.

    Under available-case analysis a family counts only its complete records, so N_i may be
    below n; no earlier step reveals it (the CPTs are ratios, the decisions single bits).
    Each party sums its own shares of the family's table mod 2^64 and sends the sum: the
    two sums add up to N_i and, since each table share is the count plus (or minus) a mask
    that only its sum with the other share cancels, the pair reveals N_i and nothing else.
    Both parties record the values in their ledgers (kind ``family_records``)."""
    schema = scorer.schema
    families = {v: (*parents[v], v) for v in schema.names}
    tables = scorer.table_shares(list(families.values()))
    mine = [int(tables[families[v]].sum(dtype=np.uint64)) for v in schema.names]
    scorer.channel.send_u64s("family_records", mine)
    theirs = scorer.channel.recv_u64s("family_records", len(mine))
    counts = {}
    for v, a, b in zip(schema.names, mine, theirs, strict=True):
        total = (a + b) % (1 << 64)
        if total > scorer.n_records:
            raise ProtocolError(f"family_records: the count of {v!r}'s family exceeds the {scorer.n_records} records")
        counts[v] = total
    scorer.ledger.record(
        "family_records", counts, "sum of the family's table shares, opened (available-case analysis)"
    )
    return counts


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
            checkpoint(K2Checkpoint(len(decisions), decisions, dict(scorer.count_shares), dict(scorer.score_shares)))

    oracle = ResumableMoveOracle(SecureMoveOracle(scorer), resume.decisions if resume else (), after_step)
    opts = config.hc
    return hill_climb(
        scorer.schema.names, oracle, config.max_parents, config.tau, opts.tabu_length, opts.start,
        opts.black_list, opts.white_list, opts.fixed_edges, progress=progress,
    )  # fmt: skip


@dataclass
class SecureLearnResult:
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
) -> SecureLearnResult:
    """One party's side of the private K2 + parameters job. ``paillier`` collects the
    public-key operation counts (the daemon passes its job counters); ``keep_openings``
    keeps the masked values this party opens (``SecureLearnResult.openings``, for audits
    and the leak tests). ``resume``: continue after the checkpoint's step (both parties
    must pass the checkpoint of the same step); ``checkpoint`` receives this party's
    state after every K2 wave (the caller stores it)."""
    if config.disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {', '.join(DISCLOSURES)}")
    started = time.perf_counter()
    n_records = int(codes.shape[0])
    if "schema" not in ledger.kinds():
        ledger.record("schema", schema.fingerprint(), "public schema")
    if "record_count" not in ledger.kinds():
        ledger.record("record_count", n_records, "public record count")
    scorer = SecureScorer(channel, role, schema, codes, n_records, config, ledger, progress, paillier, keep_openings)
    if resume is not None:
        scorer.count_shares.update(resume.count_shares)
        scorer.score_shares.update(resume.score_shares)
    try:
        scorer.tables.prepare_in_background(n_records)  # the key pair and warm workers, off the critical path
        order = tuple(config.order or schema.names)

        def k2_progress(step: int, total: int, label: str) -> None:
            if progress:
                progress(label, step, total)

        search: K2Result | HCResult
        if config.search == "hc":
            search = _hill_climb(scorer, resume, checkpoint, k2_progress)
            source = "hill-climbing moves"
        elif config.search == "k2":
            oracle = ResumableOracle(SecureOracle(scorer), resume, checkpoint)
            search = k2_search(order, config.max_parents, oracle, config.tau, k2_progress)
            source = "K2 decisions"
        else:
            raise ValueError(f"unknown search {config.search!r}; choose k2 or hc")
        for edge in search.edges:
            ledger.record("edge", list(edge), source)
        ledger.record("structure", {v: list(ps) for v, ps in search.parents.items()}, source)
        params = secure_parameters(scorer, search.parents, config.disclosure)
        family_records = family_record_counts(scorer, search.parents) if config.available_case else None
    finally:
        scorer.tables.close()
    network = None
    if len(params.cpts) == len(schema.names):
        states = {v.name: v.states for v in schema.variables}
        network = BayesNet(schema.names, states, dict(search.parents), params.cpts, params.unobserved)
    stats = {
        "wall_s": time.perf_counter() - started,
        "phases": dict(scorer.clock.seconds),
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
