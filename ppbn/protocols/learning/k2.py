"""The secure K2 oracle (Yang-Wright Sec. 6.6 and 6.7, Fig. 3).

The single K2 driver of ``bn/k2.py`` asks the ``SecureOracle`` for the decisions of all
nodes that are still adding parents (one wave per K2 step, see ``k2_search``); the oracle
answers from the family-score shares of ``scorer.SecureScorer`` and one garbled decision
circuit per group of requests: the first candidate within tau of the best (the tie rule
of docs/conventions.md, "Tie rule") and whether it beats the current score by more than tau.
Both parties learn exactly that decision and record it in their ledger.

``ResumableOracle`` adds checkpoints: it replays the public decisions of a checkpoint's
waves, then hands the caller this party's state after every live wave.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ppbn.bn.k2 import K2Request
from ppbn.circuits.scoring import decision_circuit
from ppbn.protocols import ring
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.learning.config import GARBLER, K2Checkpoint
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.yao import Reveal

DECISION_SOURCE = "garbled argmax with the tie rule (Yang-Wright 6.6)"
CANDIDATE_BUCKET = 8  # decision circuits are built for multiples of this many candidates


class SharesOracle(Protocol):
    """A K2 oracle that decides from the scorer's shares: ``SecureOracle`` here, or the
    noisy one of a differentially private job (``dp.NoisyOracle``)."""

    scorer: SecureScorer
    source: str  # how its decisions are made, as the ledger says

    def best_parents(self, requests: Sequence[K2Request], tau: float) -> list[str | None]: ...


class SecureOracle:
    """The K2 oracle of the secure path: batched decisions from shares (Sec. 6.6, 6.7)."""

    source = DECISION_SOURCE

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
                values = [
                    sentinel if k is None else ring.to_ints(scores[k].reshape(1, 2))[0] % modulus
                    for k in keys
                ]
                return np.array(values, dtype=object)

            inputs = {
                f"cur_{suffix}": column([(requests[i].child, requests[i].parents) for i in members])
            }
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
                circuit,
                garbler=scorer.role == GARBLER,
                inputs=inputs,
                outputs={"index": Reveal.BOTH, "add": Reveal.BOTH},
            )
            for slot, i in enumerate(members):
                r = requests[i]
                index, add = int(out["index"][slot]), int(out["add"][slot])
                if (add and index >= len(r.candidates)) or (not add and index):
                    raise ProtocolError(
                        f"decision ({add}, {index}) invalid for {len(r.candidates)} candidates"
                    )
                answers[i] = r.candidates[index] if add else None
                scorer.ledger.record(
                    "k2_decision",
                    {"child": r.child, "parents": list(r.parents), "chosen": answers[i]},
                    self.source,
                )
        scorer.clock.add("decisions (Yao)", started)
        return answers


class ResumableOracle:
    """The secure oracle with checkpoints: replays the public decisions of the waves a
    checkpoint holds (no protocol run: both parties replay the same ones), then asks the
    secure oracle and hands ``checkpoint`` this party's state after every live wave."""

    def __init__(
        self,
        oracle: SharesOracle,
        start: K2Checkpoint | None,
        checkpoint: Callable[[K2Checkpoint], None] | None,
    ) -> None:
        self.oracle = oracle
        self.decisions: list[list[list[str | None]]] = (
            [list(map(list, w)) for w in start.decisions] if start else []
        )
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
                    raise ValueError(
                        f"checkpoint names {chosen!r}, not a candidate parent of {r.child!r}"
                    )
                self.oracle.scorer.ledger.record(
                    "k2_decision",
                    {"child": r.child, "parents": list(r.parents), "chosen": chosen},
                    self.oracle.source,
                )
            return answers
        answers = self.oracle.best_parents(requests, tau)
        self.decisions.append([[r.child, a] for r, a in zip(requests, answers, strict=True)])
        if self.checkpoint is not None:
            scorer = self.oracle.scorer
            self.checkpoint(
                K2Checkpoint(
                    len(self.decisions),
                    self.decisions,
                    dict(scorer.count_shares),
                    dict(scorer.score_shares),
                )
            )
        return answers
