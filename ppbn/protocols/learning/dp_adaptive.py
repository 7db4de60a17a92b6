"""The adaptive release of the secure job (``ppbn.dp.adaptive_release``; docs/security-dp.md,
"The adaptive release"), on both parties' shares, with no curator.

The steps of the marginal release (``dp_marginals``), with the pairs chosen round by round:

1. the noisy 1-way tables, opened to both;
2. each round: every pair not yet measured gets its L1 error against the garbler's fitted
   model (its estimate is public: a function of the released counts) in the pair-error
   circuit, left as shares; the garbler adds AIM's public offset to its share; a
   report-noisy-max tournament opens only the winner; the winner's noisy 2-way table is
   opened to both, and the garbler fits the model again;
3. both parties fit the last model from the same noisy counts (post-processing).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ppbn.bn.k2 import K2Result
from ppbn.circuits.pair_error import pair_error_width
from ppbn.dp.accounting import DPPlan
from ppbn.dp.adaptive_release import (
    adaptive_rounds,
    all_pairs,
    measurement_offsets,
    model_estimate,
    model_network,
)
from ppbn.dp.count_noise import noise_stddev
from ppbn.dp.graphical_fit import Measured
from ppbn.dp.marginal_release import Pair
from ppbn.protocols.learning.config import GARBLER
from ppbn.protocols.learning.dp_marginals import (
    NoisyPairChooser,
    fitted_view,
    noisy_tables,
    pair_error_shares,
)
from ppbn.protocols.learning.parameters import SecureParameters
from ppbn.protocols.learning.scorer import SecureScorer


def utility_width(count_bits: int, cells: int, offset: int) -> int:
    """Bits of a pair's utility share: an L1 error of ``cells`` counts below 2^count_bits
    plus an offset of at most ``offset``, with a zero top bit."""
    largest = cells * ((1 << count_bits) - 1) + offset
    return max(pair_error_width(count_bits, cells), largest.bit_length() + 1)


def secure_adaptive_release(
    scorer: SecureScorer, plan: DPPlan, before_release: Callable[[], None]
) -> tuple[K2Result, SecureParameters]:
    """One party's side of the adaptive release: the network (as a search result: a
    topological order and the edges) and the CPTs, alike at both."""
    schema = scorer.schema
    names = tuple(schema.names)
    states = {v.name: tuple(v.states) for v in schema.variables}
    domain = {v: len(states[v]) for v in names}
    pairs = all_pairs(names)
    tables = scorer.table_shares([(v,) for v in names] + pairs)
    one_way = noisy_tables(scorer, plan, [(v,) for v in names], tables, before_release)
    stddev = noise_stddev(plan.count_noise)
    garbler = scorer.role == GARBLER
    offsets = measurement_offsets(pairs, domain, stddev)
    cells = max((domain[a] * domain[b] for a, b in pairs), default=1)
    width = utility_width(scorer.count_bits, cells, max(offsets.values(), default=0))
    chooser = NoisyPairChooser(scorer, plan, width, {})
    modulus = 1 << width

    def choose(candidates: list[Pair], joint: np.ndarray | None) -> int:
        def estimate(pair: Pair) -> np.ndarray:
            assert joint is not None  # the garbler fits every round
            return model_estimate(joint, names, pair)

        errors = pair_error_shares(scorer, candidates, tables, estimate, width)
        if garbler:  # public: AIM's offset of each pair, added to one share
            errors = {p: (e + offsets[p]) % modulus for p, e in errors.items()}
        chooser.errors = errors
        return chooser.choose(candidates)

    def measure(pair: Pair) -> np.ndarray:
        return noisy_tables(scorer, plan, [pair], tables)[pair]

    one_sd = noise_stddev(plan.one_way_noise)
    first = [Measured((v,), one_way[(v,)], one_sd) for v in names]
    chosen, _, model = adaptive_rounds(
        names,
        domain,
        plan.decisions,
        first,
        choose,
        measure,
        stddev,
        scorer.n_records,
        refit=garbler,
    )
    started = time.perf_counter()
    net = model_network(model, names, states, chosen)
    view = fitted_view(scorer, net)
    scorer.clock.add("parameters", started)
    order = net.topological_order()
    edges = [(p, v) for v in order for p in net.parents[v]]
    return K2Result(order, dict(net.parents), edges), view
