"""The differentially private release of the secure job (docs/security-dp.md).

Two steps replace their exact counterparts when ``SecureLearnConfig.dp`` holds a plan
(``ppbn/dp/accounting.py``):

- ``NoisyOracle``: each K2 parent choice is report-noisy-max with exponential noise over
  the stop option (the child's current score; marked invalid where the plan leaves it
  out, ``DPPlan.stop_option``) and every candidate's score. The scores stay shares; the
  garbled circuit (``circuits/noise.py``) adds a geometric draw to each, made from the
  XOR of one uniform word from each party, and reveals only the winner.
- ``noisy_parameters``: every cell of every family table of the learned network gets
  discrete Laplace noise in a garbled circuit, made the same way, and only the noisy count
  is opened to both; clipping at 0 and normalising are post-processing.

Neither party knows any noise value: each is a function of both parties' words, and the
circuit reveals nothing but the winner or the noisy count (Dwork, Kenthapadi, McSherry,
Mironov and Naor 2006 ask exactly this of distributed noise generation).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ppbn.bn.k2 import K2Request
from ppbn.bn.params import cpt_from_counts
from ppbn.circuits.ir import to_signed
from ppbn.circuits.noise import (
    count_draws,
    noisy_argmax_circuit,
    noisy_count_circuit,
    noisy_width,
    uniform_words,
)
from ppbn.dp.accounting import DPPlan
from ppbn.dp.count_noise import CountNoise
from ppbn.protocols import ring
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.learning.config import GARBLER, Family
from ppbn.protocols.learning.parameters import SecureParameters
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.yao import Reveal

OPTION_BUCKET = 8  # noisy argmax circuits are built for multiples of this many options
DP_DECISION_SOURCE = "report-noisy-max over garbled scores (differential privacy)"
DP_PARAMETER_SOURCE = "noisy counts, discrete Laplace drawn in a garbled circuit, normalised"


class NoisyOracle:
    """The K2 oracle of a DP job: one noisy argmax per request, grouped by option count."""

    source = DP_DECISION_SOURCE

    def __init__(
        self, scorer: SecureScorer, plan: DPPlan, before_release: Callable[[], None]
    ) -> None:
        self.scorer = scorer
        self.plan = plan
        self.before_release = before_release
        self.decisions = 0

    def best_parent(self, child, parents, candidates, tau) -> str | None:
        return self.best_parents([K2Request(child, parents, candidates)], tau)[0]

    def best_parents(self, requests: Sequence[K2Request], tau: float) -> list[str | None]:
        scorer, spec = self.scorer, self.plan.decision_noise
        if spec is None:
            raise ValueError("the job's privacy plan has no parent choices")
        self.decisions += len(requests)
        if self.decisions > self.plan.decisions:
            raise ProtocolError(
                f"K2 asked for {self.decisions} noisy choices; the privacy plan allows {self.plan.decisions}"
            )
        keys = [_option_key(r, slot) for r in requests for slot in range(len(r.candidates) + 1)]
        scores = dict(zip(keys, scorer.scores(keys), strict=True))
        # the shares move up by the plan's extra fractional bits (a local, linear step: the
        # noise is drawn in finer units than the scores, so fewer noisy scores tie)
        width, extra = scorer.score_bits, self.plan.extra_frac
        modulus = 1 << width
        suffix = "a" if scorer.role == GARBLER else "b"
        # requests are grouped by their option count (stop and the candidates) rounded up
        # to a multiple of OPTION_BUCKET: one circuit per group, the padding marked invalid
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            padded = -(-(len(r.candidates) + 1) // OPTION_BUCKET) * OPTION_BUCKET
            groups.setdefault(padded, []).append(i)
        answers: list[str | None] = [None] * len(requests)
        scorer.phase("argmax")
        started = time.perf_counter()
        self.before_release()
        for options, members in sorted(groups.items()):
            inputs: dict[str, np.ndarray] = {}
            real = [len(requests[i].candidates) + 1 for i in members]
            if scorer.role == GARBLER:  # public: which slots hold a real option
                inputs["valid_a"] = np.array([self._valid(count) for count in real], dtype=object)
            for slot in range(options):
                column = np.empty(len(members), dtype=object)
                column[:] = [
                    self._share(scores, requests[i], slot, modulus) << extra if slot < count else 0
                    for i, count in zip(members, real, strict=True)
                ]
                inputs[f"s{slot}_{suffix}"] = column
                inputs[f"u{slot}_{suffix}"] = uniform_words(len(members), spec)
            out = scorer.yao.run(
                noisy_argmax_circuit(options, width + extra, spec, with_validity=True),
                garbler=scorer.role == GARBLER,
                inputs=inputs,
                outputs={"index": Reveal.BOTH},
            )
            for slot, (i, count) in enumerate(zip(members, real, strict=True)):
                r, index = requests[i], int(out["index"][slot])
                if index >= count:
                    raise ProtocolError(f"noisy choice {index} invalid for {count} options")
                answers[i] = r.candidates[index - 1] if index else None
                scorer.ledger.record(
                    "k2_decision",
                    {"child": r.child, "parents": list(r.parents), "chosen": answers[i]},
                    self.source,
                )
        scorer.clock.add("decisions (Yao)", started)
        return answers

    def _valid(self, options: int) -> int:
        """The option slots that may win: all, or all but stop (slot 0) where the plan
        leaves it out (``DPPlan.stop_option``)."""
        slots = (1 << options) - 1
        return slots if self.plan.stop_option else slots & ~1

    @staticmethod
    def _share(scores: dict, request: K2Request, slot: int, modulus: int) -> int:
        """This party's share of the option's score, mod 2^width."""
        return ring.to_ints(scores[_option_key(request, slot)].reshape(1, 2))[0] % modulus


def _option_key(request: K2Request, slot: int) -> tuple[str, tuple[str, ...]]:
    """Slot 0 is stop (the current parents), slot c adds candidate c - 1."""
    if slot == 0:
        return request.child, request.parents
    return request.child, (*request.parents, request.candidates[slot - 1])


def noisy_parameters(
    scorer: SecureScorer,
    parents: dict[str, tuple[str, ...]],
    plan: DPPlan,
    before_release: Callable[[], None],
) -> SecureParameters:
    """CPTs from noisy counts of every family of the learned network, opened to both
    parties (the DP release has one disclosure: public)."""
    started = time.perf_counter()
    schema = scorer.schema
    families: dict[str, Family] = {v: (*parents[v], v) for v in schema.names}
    tables = scorer.table_shares(list(families.values()))
    scorer.phase("parameters")
    cells = [tables[families[v]].reshape(-1, schema.cardinality(v)) for v in schema.names]
    released = open_noisy_counts(scorer, plan, cells, before_release)
    view = SecureParameters({}, {}, {})
    for v, noisy in zip(schema.names, released, strict=True):
        # post-processing: clip at 0 and normalise; a row with nothing left is uniform
        cpt, unobserved = cpt_from_counts(np.clip(noisy, 0, None))
        view.cpts[v] = cpt
        view.unobserved[v] = unobserved
        scorer.ledger.record(
            "dp_counts", {"variable": v, "counts": noisy.tolist()}, DP_PARAMETER_SOURCE
        )
        scorer.ledger.record("parameter", {"variable": v, "cpt": cpt.tolist()}, DP_PARAMETER_SOURCE)
    scorer.clock.add("parameters", started)
    return view


def open_noisy_counts(
    scorer: SecureScorer,
    plan: DPPlan,
    tables: Sequence[np.ndarray],
    before_release: Callable[[], None],
    spec: CountNoise | None = None,
) -> list[np.ndarray]:
    """Each table of count shares with noise in every cell (``spec``, discrete Laplace or
    Gaussian; None: the plan's ``count_noise``), drawn in one garbled run and opened to both, in the
    tables' shapes. More cells than the plan bounds are refused before ``before_release``."""
    spec = plan.count_noise if spec is None else spec
    count_bits, role = scorer.count_bits, scorer.role
    low = np.uint64((1 << count_bits) - 1)
    shares = np.concatenate([np.asarray(t).ravel() for t in tables]).astype(np.uint64) & low
    total = int(shares.size)
    if total > plan.cells_bound:
        raise ProtocolError(
            f"{total} noisy counts; the privacy plan bounds them by {plan.cells_bound}"
        )
    suffix = "a" if role == GARBLER else "b"
    before_release()
    out = scorer.yao.run(
        noisy_count_circuit(count_bits, spec),
        garbler=role == GARBLER,
        inputs={
            f"n{suffix}": shares,
            **{f"u{name}_{suffix}": uniform_words(total, spec) for name in count_draws(spec)},
        },
        outputs={"noisy": Reveal.BOTH},
    )
    signed = np.array(to_signed(out["noisy"], noisy_width(count_bits, spec)), dtype=np.int64)
    released, offset = [], 0
    for t in tables:
        size = int(np.asarray(t).size)
        released.append(signed[offset : offset + size].reshape(np.shape(t)))
        offset += size
    return released
