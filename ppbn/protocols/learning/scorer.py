"""Shares of family scores for the secure searches (Yang-Wright Sec. 6.3 to 6.5).

``SecureScorer`` is shared by the K2 oracle (``k2.py``) and the hill-climbing move
oracle (``hc.py``); it answers from shares only:

1. Contingency-table shares in Z_2^64 of every family it needs (``protocols/tables.py``:
   Paillier, packed, cached across steps).
2. The secure term of every cell count alpha_ijk and row count (alpha_ij, or l_ij =
   alpha_ij + d - 1) on those shares (``terms.py``), except the terms of counts one party
   knows in the clear, which that party computes alone.
3. Family score shares = sum of cell terms - sum of row terms + the public term (pub(d, q),
   q lgamma(d) or the BIC penalty), added by alice.

Two schedules hide the wire behind compute, both chosen alike by the two parties from
public sizes: the next group's table phase on a lane of the channel while this group's
terms run (``SecureScorer.scores``), and a large batch of terms in two halves side by side
(``SecureScorer.terms``). With ``term_lanes`` a large batch runs instead in parts on
processes of each party (``term_lanes.py``), so that the terms use that many cores.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ppbn.bn.schema import Schema
from ppbn.bn.scores import pub
from ppbn.protocols import ring
from ppbn.protocols.channel import Channel
from ppbn.protocols.fixedpoint import (
    SCORE_FRAC,
    Shift,
    count_bits_for,
    shift_frac_for,
    term_fixed_many,
)
from ppbn.protocols.learning.clock import SHARE_TERMS, PhaseClock
from ppbn.protocols.learning.config import GARBLER, Family, Progress, SecureLearnConfig, score_bits
from ppbn.protocols.learning.term_lanes import TermLanes, lanes_for
from ppbn.protocols.learning.terms import (
    EngineSpec,
    TermsEngine,
    build_engine,
    take_counters,
)
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.paillier import OpCounters
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.tables import MISSING, TablesSession, config_index, run_tables

TERMS_LANE_SESSION = (
    b"|terms lane"  # the second half's lane: its own session label, so its own hashes
)
PIPELINE_GROUPS = 4  # a batch of families is scored in up to this many groups ...
PIPELINE_MIN_TERMS = 2048  # ... of at least this many secure terms each


def local_owner(schema: Schema, family: Family) -> str | None:
    """The party that holds every variable of ``family``, or None when they are split."""
    owners = {schema.owner(v) for v in family}
    return owners.pop() if len(owners) == 1 else None


def _add_counts(into: object, counts: dict[str, int]) -> None:
    """Add ``counts`` (name -> value) to the integer counters of ``into``."""
    for name, value in counts.items():
        setattr(into, name, getattr(into, name) + value)


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
        self.clock = PhaseClock()  # first: the job's CPU outside the phases counts from here
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
        self.tables = TablesSession(
            replace(config.tables, complete_records=not config.available_case)
        )
        max_d = max(v.cardinality for v in schema.variables)
        bdeu = config.mode == "bdeu"
        if bdeu and not config.ess > 0:
            raise ValueError("the BDeu equivalent sample size must be > 0")
        # counts below 2^K: rows are alpha_ij + d - 1 (yw, exact), or alpha_ij + a_j < n + ess (bdeu)
        self.count_bits = count_bits_for(
            n_records + math.ceil(config.ess) + 1 if bdeu else n_records + max_d - 1
        )
        self.shift_frac = shift_frac_for(self.count_bits) if bdeu else 0
        # the garbled phases share the party's executor (and seeds) with the table phase
        self._engine = self._terms_engine(channel, self.tables.seeds, keep_openings)
        self.yao, self.arith, self.backend = (
            self._engine.yao,
            self._engine.arith,
            self._engine.backend,
        )
        self._lane: tuple[Channel, TermsEngine] | None = (
            None  # ``_lane_engine``, opened on first use
        )
        self._lane_seeds = self.tables.seeds.next() if self.tables.seeds.fixed else None
        # the terms lanes' processes (``term_lanes.py``): started now, so that they load while
        # the first table phase runs (both parties construct the scorer at the same point)
        self._term_lanes: TermLanes | None = None
        self.lanes_cpu_seconds = 0.0  # the terms lanes' processes' CPU, reported by benches
        if config.term_lanes > 1:
            channel.expect_lanes(config.term_lanes)
            seeds = TaskSeeds(self.tables.seeds.next() if self.tables.seeds.fixed else None)
            self._term_lanes = TermLanes(
                channel, self._engine_spec(keep_openings), config.term_lanes, seeds
            )
        self._sections: dict[
            str, str
        ] = {}  # phase -> the channel's byte section the party layer gave it
        self._announced = threading.Condition()  # ``_sections`` grew
        self.score_bits = score_bits(
            schema, n_records, config.largest_parents, config.c_star, config.ess if bdeu else 0.0
        )
        self.count_shares: dict[Family, np.ndarray] = {}
        self.score_shares: dict[tuple[str, frozenset[str]], np.ndarray] = {}
        # paired mode (available-case): (child, parents, given) -> score share on the records
        # complete in given too; recomputed after a resume, never checkpointed
        self.paired_shares: dict[tuple[str, tuple[str, ...], str], np.ndarray] = {}
        # the sum of the cell terms of each set of variables (``_score_cells``); not checkpointed
        self.cell_sums: dict[frozenset[str], int] = {}
        # the sum of the secure row terms per (parents, row offset, bdeu shift); not checkpointed
        self.row_sums: dict[tuple[frozenset[str], int, float | None], int] = {}
        self._term_memo: dict[
            float | None, dict[int, int]
        ] = {}  # ``_own_terms``: shift -> count -> term
        self.evaluations = 0

    def phase(self, name: str) -> None:
        """Announce a protocol phase (the daemon names it when a peer fails); the calling
        thread's CPU counts toward the phase the clock adds next (``PhaseClock.mark``)."""
        self.clock.mark()
        if self.progress is not None:
            self.progress(f"phase {name}", 0, 0)
        with self._announced:
            self._sections[name] = self.channel.stats.section
            self._announced.notify_all()

    def _section_of(self, phase: str) -> str:
        """The byte section the party layer gave ``phase`` on the channel (a lane labels its
        bytes alike): the first time, once the main thread has announced it."""
        with self._announced:
            self._announced.wait_for(
                lambda: phase in self._sections, timeout=self.channel.timeout_s
            )
            return self._sections.get(phase, self.channel.stats.section)

    def _engine_spec(self, keep_openings: bool) -> EngineSpec:
        config = self.config
        return EngineSpec(
            role=self.role,
            mode=config.mode,
            count_bits=self.count_bits,
            shift_frac=self.shift_frac,
            dh_bits=config.dh_bits,
            ot_k=config.ot_k,
            gc_inline_below=config.gc_inline_below,
            ot_inline_below=config.ot_inline_below,
            keep_openings=keep_openings,
        )

    def _terms_engine(self, channel: Channel, seeds: TaskSeeds, keep_openings: bool) -> TermsEngine:
        """Garbling and share-arithmetic sessions over ``channel``, on the party's executor."""
        return build_engine(
            self._engine_spec(keep_openings), channel, seeds, lambda: self.tables.executor
        )

    def _lane_engine(self) -> tuple[Channel, TermsEngine]:
        """The second set of term sessions, on a lane opened once per job at the first
        split batch (both parties reach it at the same point: the batch sizes are public).
        Its randomness is its own: a fixed test seed derives the lane's seeds in the
        constructor, so a run still repeats whatever the threads' interleaving."""
        if self._lane is None:
            lane = self.channel.open_lane(session=self.channel.session + TERMS_LANE_SESSION)
            self._lane = (
                lane,
                self._terms_engine(
                    lane, TaskSeeds(self._lane_seeds), self.arith.openings is not None
                ),
            )
        return self._lane

    # -- tables -------------------------------------------------------------------------
    def table_shares(
        self, families: Sequence[Family], lane: Channel | None = None
    ) -> dict[Family, np.ndarray]:
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
                self.clock.mark()
            started = time.perf_counter()
            self.count_shares.update(
                run_tables(
                    self.channel if lane is None else lane,
                    self.role,
                    self.schema,
                    self.codes,
                    missing,
                    counters=self.paillier,
                    progress=self.progress if lane is None else None,
                    session=self.tables,
                )
            )
            self.clock.add("tables", started)
        for family in families:
            if family not in self.count_shares:
                base = canonical(family)
                axes = [base.index(v) for v in family]
                self.count_shares[family] = np.ascontiguousarray(
                    np.transpose(self.count_shares[base], axes)
                )
        return {f: self.count_shares[f] for f in families}

    # -- terms ----------------------------------------------------------------------------
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
        if lanes_for(n, self.config.term_lanes) > 1:
            return self._terms_on_lanes(x_shares, shifts)
        if not (self.config.split_terms and n >= max(2, self.config.split_terms_from)):
            result = self._engine.terms(x_shares, shifts, self.phase, self.clock)
            self.evaluations += n
            return result
        half = n // 2
        lane, engine = self._lane_engine()
        low, high = (None, None) if shifts is None else (shifts[:half], shifts[half:])

        def mark(
            phase: str,
        ) -> None:  # the lane's bytes go to the section its phase has on the channel
            lane.stats.section = self._section_of(phase)

        mark("ln terms (Yao)")
        beside = PhaseClock()  # the second half's CPU, which runs beside this thread's
        second = _Background(lane.name, engine.terms, x_shares[half:], high, mark, beside)
        first = self._engine.terms(x_shares[:half], low, self.phase, self.clock)
        started = time.perf_counter()
        rest = second.join()
        self.clock.add(SHARE_TERMS, started)
        for phase, cpu in beside.cpu.items():
            self.clock.add_parallel(phase, cpu.total_s)
        self.channel.settle_lane(lane)
        _add_counts(self.yao.counters, take_counters(engine.yao.counters))
        _add_counts(self.arith.counters, take_counters(engine.arith.counters))
        if self.arith.openings is not None:
            self.arith.openings.extend(engine.arith.openings)
            engine.arith.openings.clear()
        self.evaluations += n
        return np.concatenate([first, rest])

    def _terms_on_lanes(self, x_shares: np.ndarray, shifts: Sequence[float] | None) -> np.ndarray:
        """``terms`` across the job's terms lanes (``term_lanes.py``, started with the
        scorer) for a batch large enough for two: both parties split it alike, n is
        public. The phase times are the slowest lane's."""
        assert self._term_lanes is not None  # lanes_for > 1 needs term_lanes > 1
        result, reports = self._term_lanes.run(x_shares, shifts, self.phase, self._section_of)
        for report in reports:
            _add_counts(self.yao.counters, report.yao)
            _add_counts(self.arith.counters, report.arith)
            if self.arith.openings is not None:
                self.arith.openings.extend(report.openings)
            self.lanes_cpu_seconds += report.cpu_seconds
        for phase in {phase for report in reports for phase in report.seconds}:
            slowest = max(report.seconds.get(phase, 0.0) for report in reports)
            self.clock.seconds[phase] = self.clock.seconds.get(phase, 0.0) + slowest
        for report in reports:  # each lane's process and relay thread ran beside this thread
            for phase, seconds in report.cpu.items():
                self.clock.add_parallel(phase, seconds)
        self.clock.charge(SHARE_TERMS)  # this thread's own since the share phase's mark
        self.evaluations += x_shares.shape[0]
        return result

    def wait_for_term_lanes(self) -> None:
        """Until the terms lanes' processes have loaded (benches start their clocks after)."""
        if self._term_lanes is not None:
            self._term_lanes.wait_ready()

    def close(self) -> None:
        """End the job's terms lanes (if any started) and the table phase's executor."""
        try:
            if self._term_lanes is not None:
                self._term_lanes.close()
        finally:
            self.tables.close()

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
        groups = self.pipeline_groups([(*ps, c) for c, ps in wanted])
        sizes = [sum(self.secure_terms(f) for f in families) for families in groups]
        done = 0
        if groups:
            self.table_shares(groups[0])
        for index, families in enumerate(groups):
            following = None
            if index + 1 < len(groups):
                lane = self.channel.open_lane()
                following = _Background(lane.name, self.table_shares, groups[index + 1], lane)
            tables = self.table_shares(families)  # computed by now: a lookup
            cells = [tables[fam].reshape(-1, self.schema.cardinality(fam[-1])) for fam in families]
            self._terms_progress("ln terms", done, sum(sizes))
            for family, share in zip(
                families, self._score_cells(cells, families, cache_cells=True), strict=True
            ):
                self.score_shares[(family[-1], frozenset(family[:-1]))] = share
            done += sizes[index]
            self._terms_progress("ln terms", done, sum(sizes))
            if following is not None:
                following.join()
                self.channel.close_lane(lane)
        return [self.score_shares[(c, frozenset(ps))] for c, ps in keys]

    def _terms_progress(self, unit: str, done: int, total: int) -> None:
        """Terms done of a batch's ``total``, counted in ``secure_terms`` (at most the
        terms that run securely), before and after each group: local only, nothing is sent."""
        if self.progress is not None and total > 0:
            self.progress(unit, done, total)

    def pipeline_groups(self, families: list[Family]) -> list[list[Family]]:
        """The families of one batch in consecutive groups of about equal secure terms
        (``secure_terms``), at most ``PIPELINE_GROUPS`` of at least ``PIPELINE_MIN_TERMS``:
        group i + 1's table phase (Paillier, CPU) runs on a lane of the channel while group
        i's terms (garbled circuits and OT, mostly bytes on the wire) run here, so on a slow
        link the table phase costs next to nothing. A family's size is its secure terms
        (``_term_owners``: none for a local family, which needs no table phase either), and
        the first group gets half a share: its table phase is the one nothing overlaps.
        Both parties split alike: the families and their sizes are public."""
        sizes = [self.secure_terms(fam) for fam in families]
        most = (
            min(PIPELINE_GROUPS, sum(sizes) // PIPELINE_MIN_TERMS, len(families))
            if self.config.overlap_tables
            else 1
        )
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
        owner = local_owner(self.schema, family)
        if owner is None and own_rows and not self.config.available_case and len(family) > 1:
            return None, local_owner(self.schema, family[:-1])
        return owner, owner

    def secure_terms(self, family: Family) -> int:
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
                tables[fam]
                .sum(axis=len(fam) - 2, dtype=np.uint64)
                .reshape(-1, self.schema.cardinality(fam[-1]))
                for fam in families
            ]
            total = sum(c.size + c.shape[0] for c in cells)  # at most: cells and rows
            self._terms_progress("paired ln terms", 0, total)
            # the rows count the records complete in the given variable too: not the parents' owner's own counts
            for key, share in zip(
                wanted, self._score_cells(cells, families, own_rows=False), strict=True
            ):
                self.paired_shares[key] = share
            self._terms_progress("paired ln terms", total, total)
        return [self.paired_shares[k] for k in keys]

    def _score_cells(
        self,
        tables: Sequence[np.ndarray],
        families: Sequence[Family],
        *,
        cache_cells: bool = False,
        own_rows: bool = True,
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
            rows_fresh = row_key is None or (
                row_key not in self.row_sums and row_key not in fresh_rows
            )
            if row_key is not None and rows_fresh:
                fresh_rows.add(row_key)
            own_cells = own_rows_sum = 0
            if owner == self.role and fresh:
                own_cells = self._own_terms(cells.ravel(), cell_shift)
            elif owner is None and fresh:
                pieces.append(cells.ravel())
                shifts += [cell_shift] * cells.size
            if row_owner == self.role:
                rows = (
                    cells.sum(axis=1, dtype=np.uint64)
                    if owner
                    else self._parent_counts(family[:-1])
                )
                own_rows_sum = self._own_terms(rows + np.uint64(row_offset), row_shift)
            elif row_owner is None and rows_fresh:
                rows = cells.sum(axis=1, dtype=np.uint64)
                pieces.append(rows + np.uint64(row_offset) if self.role == GARBLER else rows)
                shifts += [row_shift] * q
            n_cells = cells.size if owner is None and fresh else 0
            n_rows = q if row_owner is None and rows_fresh else 0
            layout.append(
                (n_cells, n_rows, fresh, own_cells, own_rows_sum, q, d, key, rows_fresh, row_key)
            )
        terms = None
        if pieces:
            terms = self.terms(
                np.concatenate(pieces).astype(np.uint64), shifts if mode == "bdeu" else None
            )

        def secure_sum(start: int, stop: int) -> int:
            return ring.to_ints(ring.sum(terms[start:stop]))[0] if stop > start else 0

        offset = 0
        out = []
        for (
            n_cells,
            n_rows,
            fresh,
            own_cells,
            own_rows_sum,
            q,
            d,
            key,
            rows_fresh,
            row_key,
        ) in layout:
            cell_sum = own_cells + secure_sum(
                offset, offset + n_cells
            )  # Python ints, reduced by ring.constant
            if key is not None:
                cell_sum = (
                    self.cell_sums.setdefault(key, cell_sum) if fresh else self.cell_sums[key]
                )
            row_sum = own_rows_sum + secure_sum(offset + n_cells, offset + n_cells + n_rows)
            if row_key is not None:
                row_sum = (
                    self.row_sums.setdefault(row_key, row_sum)
                    if rows_fresh
                    else self.row_sums[row_key]
                )
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
            memo.update(
                zip(
                    fresh,
                    term_fixed_many(fresh, self.count_bits, self.config.mode, per_count),
                    strict=True,
                )
            )
        return sum(memo[int(v)] * int(r) for v, r in zip(values, repeats, strict=True))

    def _parent_counts(self, parents: Family) -> np.ndarray:
        """alpha_ij from this party's own columns: the records of each configuration of
        ``parents`` (all its own), in any order (only their terms' sum is used)."""
        columns = {v.name: j for j, v in enumerate(self.schema.owned_by(self.role))}
        configs = config_index(self.schema, self.codes, columns, parents)
        if (configs == MISSING).any():
            raise ValueError(
                "a missing cell outside available-case analysis: the loader should have refused it"
            )
        return np.bincount(configs, minlength=math.prod(self.schema.cardinalities(parents))).astype(
            np.uint64
        )


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
