"""Private hill climbing: the secure move oracle of ``bn.hc.hill_climb``.

The driver of ``bn/hc.py`` enumerates the legal moves itself (legality is public, since
the structure is) and asks this oracle which one to apply. The oracle answers from shares
only, on the same machinery as the private K2 (``scorer.py``):

1. Every family a legal move would create or remove is scored once, as additive shares
   (``SecureScorer.scores``: contingency-table shares, the secure ln terms). Scores are
   decomposable, so the shares are kept across steps and a step scores only the families
   it has not seen: the one or two families the last move changed, with their new
   neighbours.
2. Each move's delta is a signed sum of two or four family-score shares, computed
   locally by each party (no interaction).
3. A garbled argmax over all deltas applies the tie rule of ``bn.hc`` (the K2 rule of
   docs/conventions.md, "Hill-climbing moves", with current score 0): stop unless the best delta exceeds tau,
   otherwise the earliest move in the canonical order within tau of the best. It runs in
   four stages of small fixed circuits (``tolerant_argmax``), so both parties learn
   exactly the chosen move, or "stop".

Both parties record every step in their ledgers (``hc_move``, ``hc_stop``): the moves in
order, the same leakage class as K2's edges in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ppbn.bn.hc import Move, MoveQuery
from ppbn.circuits.scoring import (
    block_max_circuit,
    first_hit_circuit,
    select_circuit,
    threshold_circuit,
)
from ppbn.protocols import ring
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.learning.config import GARBLER
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.yao import Reveal, YaoParty

MOVE_BLOCK = 32  # the argmax's first and third stages take the moves in blocks of this size
GROUP_BUCKET = 8  # its second and fourth stages are built for multiples of this many blocks
DELTA_EXTRA_BITS = 2  # a reversal's delta sums four family scores


class SecureMoveOracle:
    """Chooses hill-climbing moves on shared family scores (module docstring)."""

    def __init__(self, scorer: SecureScorer) -> None:
        self.scorer = scorer
        self.step = 0
        self.width = scorer.score_bits + DELTA_EXTRA_BITS
        if self.width > 128:
            raise ValueError(
                f"move deltas may need {self.width} bits; the secure comparison has 128"
            )

    @property
    def families_scored(self) -> int:
        return len(self.scorer.score_shares)

    def choose_move(self, queries: Sequence[MoveQuery], tau: float) -> int | None:
        scorer = self.scorer
        if tau != scorer.config.tau:
            raise ValueError("the secure oracle's tolerance is fixed by its configuration")
        keys = list(
            dict.fromkeys((child, parents) for q in queries for _, child, parents in q.terms)
        )
        shares = dict(zip(keys, ring.to_ints(np.stack(scorer.scores(keys))), strict=True))
        modulus = 1 << self.width
        deltas = [sum(sign * shares[(c, ps)] for sign, c, ps in q.terms) % modulus for q in queries]
        scorer.phase("argmax")
        started = time.perf_counter()
        index = tolerant_argmax(
            scorer.yao, scorer.role == GARBLER, deltas, scorer.config.tolerance(), self.width
        )
        scorer.clock.add("decisions (Yao)", started)
        if index is not None and index >= len(queries):
            raise ProtocolError(f"hc decision {index} invalid for {len(queries)} moves")
        self.step += 1
        record_step(scorer.ledger, self.step, None if index is None else queries[index].move)
        return index


def tolerant_argmax(
    yao: YaoParty, garbler: bool, deltas: Sequence[int], tolerance: int, width: int
) -> int | None:
    """The tie rule over shared values (this party's shares mod 2^width of values below
    2^(width-2) in magnitude): None when the best is <= tolerance, else the first index
    within tolerance of the best. Four stages of small circuits (``circuits.scoring``),
    each run over many instances; both parties learn only "stop" or the index."""
    groups = -(-len(deltas) // MOVE_BLOCK)
    groups = -(-groups // GROUP_BUCKET) * GROUP_BUCKET
    modulus = 1 << width
    # padding values are -2^(width-2): below every real value, never at or above the threshold
    sentinel = (-(1 << (width - 2))) % modulus if garbler else 0
    padded = [*deltas, *[sentinel] * (groups * MOVE_BLOCK - len(deltas))]
    blocks = np.array(padded, dtype=object).reshape(groups, MOVE_BLOCK)
    suffix = "a" if garbler else "b"

    def column(values) -> np.ndarray:
        return np.array([int(v) for v in values], dtype=object)

    values = {f"s{i}_{suffix}": column(blocks[:, i]) for i in range(MOVE_BLOCK)}
    maxima = yao.run(
        block_max_circuit(MOVE_BLOCK, width),
        garbler=garbler,
        inputs=values,
        outputs={"max": Reveal.SHARES},
    )["max"]
    out = yao.run(
        threshold_circuit(groups, tolerance, width),
        garbler=garbler,
        inputs={f"m{g}_{suffix}": column([maxima[g]]) for g in range(groups)},
        outputs={"add": Reveal.BOTH, "t": Reveal.SHARES},
    )
    if not int(out["add"][0]):
        return None
    threshold = column([out["t"][0]] * groups)
    hits = yao.run(
        first_hit_circuit(MOVE_BLOCK, width),
        garbler=garbler,
        inputs={**values, f"t_{suffix}": threshold},
        outputs={"hit": Reveal.SHARES, "index": Reveal.SHARES},
    )
    inputs = {f"h{g}_{suffix}": column([hits["hit"][g]]) for g in range(groups)}
    inputs.update({f"x{g}_{suffix}": column([hits["index"][g]]) for g in range(groups)})
    chosen = yao.run(
        select_circuit(groups, MOVE_BLOCK),
        garbler=garbler,
        inputs=inputs,
        outputs={"index": Reveal.BOTH},
    )
    return int(chosen["index"][0])


def record_step(ledger: Ledger, step: int, move: Move | None) -> None:
    """The public outcome of one step, in the ledger: the move applied, or the stop."""
    source = "garbled argmax over the move deltas (tie rule)"
    if move is None:
        ledger.record("hc_stop", {"step": step}, source)
    else:
        ledger.record("hc_move", {"step": step, "kind": move.kind, "edge": list(move.edge)}, source)


class ResumableMoveOracle:
    """The secure move oracle with checkpoints (``k2.ResumableOracle`` for K2):
    replays the public moves of a checkpoint (both parties replay the same ones, no
    protocol run), then asks the secure oracle and hands ``after_step`` the public moves so
    far after every live step (the caller stores them with its shares). A step is stored
    as ``[[kind, parent, child]]``, a stop as ``[]``."""

    def __init__(
        self,
        oracle: SecureMoveOracle,
        replayed: Sequence[Sequence[Sequence[str | None]]] = (),
        after_step: Callable[[list[list[list[str | None]]]], None] | None = None,
    ) -> None:
        self.oracle = oracle
        self.decisions: list[list[list[str | None]]] = [list(map(list, s)) for s in replayed]
        self.replay = len(self.decisions)
        self.after_step = after_step

    @property
    def families_scored(self) -> int:
        return self.oracle.families_scored

    def choose_move(self, queries: Sequence[MoveQuery], tau: float) -> int | None:
        oracle = self.oracle
        if oracle.step < self.replay:
            recorded = self.decisions[oracle.step]
            oracle.step += 1
            chosen = (
                Move(str(recorded[0][0]), (str(recorded[0][1]), str(recorded[0][2])))
                if recorded
                else None
            )
            moves = [q.move for q in queries]
            if chosen is not None and chosen not in moves:
                raise ValueError(
                    f"checkpoint names {chosen}, not a legal move at step {oracle.step} of this job"
                )
            record_step(oracle.scorer.ledger, oracle.step, chosen)
            return None if chosen is None else moves.index(chosen)
        index = oracle.choose_move(queries, tau)
        move = None if index is None else queries[index].move
        self.decisions.append([] if move is None else [[move.kind, *move.edge]])
        if self.after_step is not None:
            self.after_step(self.decisions)
        return index
