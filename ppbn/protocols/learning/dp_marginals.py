"""The marginal release of the secure job (``ppbn.dp.marginal_release``; docs/security-dp.md,
"The marginal release"), on both parties' shares, with no curator.

Every step that reads the data runs inside a garbled circuit on additive table shares
(``SecureScorer.table_shares``), and each noise value is made from one uniform word of each
party (``circuits/noise.py``), so neither knows it:

1. the noisy 1-way tables (``noisy_count_circuit``), opened to both;
2. each pair's utility, the L1 error of the independent model (public after step 1) on
   the pair's counts (``circuits/pair_error.py``), left as shares;
3. |V| - 1 rounds growing the tree, each a report-noisy-max over the pairs that join a new
   variable to it, as a tournament of small circuits (``circuits/noisy_tournament.py``) of
   which only the winner is opened;
4. the chosen pairs' noisy 2-way tables, opened to both.

Both parties then fit the same network from the same noisy counts (post-processing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ppbn.bn.k2 import K2Result
from ppbn.bn.model import BayesNet
from ppbn.circuits.builders import index_width
from ppbn.circuits.noise import uniform_words
from ppbn.circuits.noisy_tournament import (
    TOURNAMENT_BLOCK,
    block_max_circuit,
    lowest_value,
    noisy_block_circuit,
    noisy_value_width,
)
from ppbn.circuits.pair_error import pair_error_circuit, pair_error_width
from ppbn.dp.accounting import DPPlan
from ppbn.dp.marginal_release import (
    Pair,
    independent_estimate,
    tree_network,
    tree_rounds,
)
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.learning.config import GARBLER
from ppbn.protocols.learning.dp import open_noisy_counts
from ppbn.protocols.learning.parameters import SecureParameters
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.yao import Reveal

PAIR_SOURCE = "report-noisy-max over garbled pair errors (differential privacy)"
COUNTS_SOURCE = "noisy marginal counts, the plan's noise drawn in a garbled circuit"
FIT_SOURCE = "private-pgm's fit of the noisy marginals (post-processing)"


def secure_marginal_release(
    scorer: SecureScorer, plan: DPPlan, before_release: Callable[[], None]
) -> tuple[K2Result, SecureParameters]:
    """One party's side of the marginal release: the tree (as a search result: the
    visiting order and the oriented edges) and the CPTs, alike at both."""
    schema = scorer.schema
    names = tuple(schema.names)
    states = {v.name: tuple(v.states) for v in schema.variables}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    tables = scorer.table_shares([(v,) for v in names] + pairs)
    one_way = noisy_tables(scorer, plan, [(v,) for v in names], tables, before_release)
    one_way_by_name = {v: one_way[(v,)] for v in names}
    chosen: list[Pair] = []
    if len(names) > 1:
        n = scorer.n_records

        def independent(pair: Pair) -> np.ndarray:
            return independent_estimate(one_way_by_name[pair[0]], one_way_by_name[pair[1]], n)

        width = pair_error_width(scorer.count_bits, max(np.asarray(tables[p]).size for p in pairs))
        errors = pair_error_shares(scorer, pairs, tables, independent, width)
        chooser = NoisyPairChooser(scorer, plan, width, errors)
        chosen = tree_rounds(names, chooser.choose)
    two_way = noisy_tables(scorer, plan, chosen, tables)
    started = time.perf_counter()
    net, order, edges = tree_network(
        names,
        states,
        chosen,
        one_way_by_name,
        {p: two_way[p] for p in chosen},
        plan,
        scorer.n_records,
    )
    view = fitted_view(scorer, net)
    scorer.clock.add("parameters", started)
    return K2Result(order, dict(net.parents), edges), view


def fitted_view(scorer: SecureScorer, net: BayesNet) -> SecureParameters:
    """A fitted network's CPTs as this party's parameters, each in its ledger."""
    view = SecureParameters({}, {}, {})
    for v in net.names:
        view.cpts[v] = net.cpts[v]
        view.unobserved[v] = net.unobserved.get(v, ())
        scorer.ledger.record("parameter", {"variable": v, "cpt": net.cpts[v].tolist()}, FIT_SOURCE)
    return view


def noisy_tables(
    scorer: SecureScorer,
    plan: DPPlan,
    families: Sequence[tuple[str, ...]],
    tables: dict,
    before_release: Callable[[], None] = lambda: None,
) -> dict[tuple[str, ...], np.ndarray]:
    """Each family's table with the plan's noise in every cell, at the scale of its
    tables (all 1-way or all 2-way: ``DPPlan.table_noise``), opened to both
    (``dp.open_noisy_counts``)."""
    if not families:
        return {}
    specs = {plan.table_noise(f) for f in families}
    if len(specs) != 1:
        raise ValueError("one opening takes tables of one noise scale: all 1-way or all pairs")
    started = time.perf_counter()
    scorer.phase("noisy counts")
    opened = open_noisy_counts(
        scorer, plan, [tables[f] for f in families], before_release, specs.pop()
    )
    released = dict(zip(families, opened, strict=True))
    for family, counts in released.items():
        scorer.ledger.record(
            "dp_counts", {"variables": list(family), "counts": counts.tolist()}, COUNTS_SOURCE
        )
    scorer.clock.add("noisy counts", started)
    return released


def pair_error_shares(
    scorer: SecureScorer,
    pairs: Sequence[Pair],
    tables: dict,
    estimate: Callable[[Pair], np.ndarray],
    width: int,
) -> dict[Pair, int]:
    """This party's share, mod 2^``width``, of every pair's L1 error against the public
    ``estimate`` of its counts (called by the garbler only, which feeds it to the circuit);
    ``width`` at least ``pair_error_width`` of the largest pair. One circuit run per table
    size."""
    started = time.perf_counter()
    scorer.phase("pair errors")
    count_bits, role = scorer.count_bits, scorer.role
    low = np.uint64((1 << count_bits) - 1)
    sizes: dict[int, list[Pair]] = {}
    for p in pairs:
        sizes.setdefault(int(np.asarray(tables[p]).size), []).append(p)
    suffix = "a" if role == GARBLER else "b"
    shares: dict[Pair, int] = {}
    for cells, members in sorted(sizes.items()):
        inputs: dict[str, np.ndarray] = {}
        counts = np.stack([np.asarray(tables[p]).ravel() for p in members]).astype(np.uint64) & low
        for c in range(cells):
            inputs[f"x{c}_{suffix}"] = counts[:, c]
        if role == GARBLER:  # public: a model's estimate, from released values only
            estimates = np.stack([np.asarray(estimate(p)).ravel() for p in members])
            if np.any(estimates < 0) or np.any(estimates >= 1 << count_bits):
                raise ProtocolError("a pair's estimate falls outside the counts' width")
            for c in range(cells):
                inputs[f"e{c}_a"] = estimates[:, c].astype(np.uint64)
        out = scorer.yao.run(
            pair_error_circuit(count_bits, cells, width),
            garbler=role == GARBLER,
            inputs=inputs,
            outputs={"error": Reveal.SHARES},
        )
        for p, share in zip(members, out["error"], strict=True):
            shares[p] = int(share) % (1 << width)
    scorer.clock.add("pair errors", started)
    return shares


class NoisyPairChooser:
    """One tree round: report-noisy-max over the candidates' error shares, as a tournament
    of small circuits (``circuits/noisy_tournament.py``) that opens only the winner."""

    def __init__(self, scorer: SecureScorer, plan: DPPlan, width: int, errors: dict[Pair, int]):
        if plan.decision_noise is None:
            raise ValueError("the job's privacy plan has no pair choices")
        self.scorer, self.plan, self.width, self.errors = scorer, plan, width, errors
        self.index_bits = index_width(plan.largest_options)
        self.wide = noisy_value_width(width + plan.extra_frac, plan.decision_noise)
        self.garbler = scorer.role == GARBLER
        self.rounds = 0

    def choose(self, candidates: list[Pair]) -> int:
        plan = self.plan
        self.rounds += 1
        if self.rounds > plan.decisions or len(candidates) > plan.largest_options:
            raise ProtocolError(
                f"the tree asked for choice {self.rounds} among {len(candidates)} pairs; the "
                f"privacy plan allows {plan.decisions} among at most {plan.largest_options}"
            )
        started = time.perf_counter()
        self.scorer.phase("argmax")
        values, indices, index = self._noisy_blocks(candidates)
        while index is None:
            values, indices, index = self._block_maxima(values, indices)
        if index >= len(candidates):
            raise ProtocolError(f"noisy choice {index} invalid for {len(candidates)} options")
        self.scorer.ledger.record("dp_pair", {"pair": list(candidates[index])}, PAIR_SOURCE)
        self.scorer.clock.add("decisions (Yao)", started)
        return index

    def _run(self, circuit, inputs: dict, final: bool) -> tuple[list[int], list[int], int | None]:
        """One tournament round: this party's shares of each block's (value, index), or the
        opened winner's index when one block is left."""
        out = self.scorer.yao.run(
            circuit,
            garbler=self.garbler,
            inputs=inputs,
            outputs={"value": Reveal.SHARES, "index": Reveal.BOTH if final else Reveal.SHARES},
        )
        if final:
            return [], [], int(out["index"][0])
        return [int(v) for v in out["value"]], [int(i) for i in out["index"]], None

    def _noisy_blocks(self, candidates: list[Pair]) -> tuple[list[int], list[int], int | None]:
        """Every candidate's share plus its noise; each block's first largest, as shares."""
        plan, suffix = self.plan, "a" if self.garbler else "b"
        spec, extra = plan.decision_noise, plan.extra_frac
        blocks = -(-len(candidates) // TOURNAMENT_BLOCK)
        modulus = 1 << (self.width + extra)
        inputs: dict[str, np.ndarray] = {}
        for slot in range(TOURNAMENT_BLOCK):
            column = np.zeros(blocks, dtype=object)
            for block in range(blocks):
                i = block * TOURNAMENT_BLOCK + slot
                if i < len(candidates):
                    column[block] = (self.errors[candidates[i]] << extra) % modulus
            inputs[f"s{slot}_{suffix}"] = column
            inputs[f"u{slot}_{suffix}"] = uniform_words(blocks, spec)
            if self.garbler:  # public: the option's index
                inputs[f"j{slot}_a"] = np.array(
                    [block * TOURNAMENT_BLOCK + slot for block in range(blocks)], dtype=object
                )
        if self.garbler:  # public: which slots hold a real option
            real = [
                min(TOURNAMENT_BLOCK, len(candidates) - b * TOURNAMENT_BLOCK) for b in range(blocks)
            ]
            inputs["valid_a"] = np.array([(1 << r) - 1 for r in real], dtype=object)
        circuit = noisy_block_circuit(TOURNAMENT_BLOCK, self.width + extra, spec, self.index_bits)
        return self._run(circuit, inputs, final=blocks == 1)

    def _block_maxima(
        self, values: list[int], indices: list[int]
    ) -> tuple[list[int], list[int], int | None]:
        """The next round over blocks of the shared entries; padding holds the lowest value
        (the garbler's share) and index 0."""
        suffix = "a" if self.garbler else "b"
        blocks = -(-len(values) // TOURNAMENT_BLOCK)
        pad_value = lowest_value(self.wide) if self.garbler else 0
        inputs: dict[str, np.ndarray] = {}
        for slot in range(TOURNAMENT_BLOCK):
            v = np.full(blocks, pad_value, dtype=object)
            j = np.zeros(blocks, dtype=object)
            for block in range(blocks):
                i = block * TOURNAMENT_BLOCK + slot
                if i < len(values):
                    v[block], j[block] = values[i], indices[i]
            inputs[f"v{slot}_{suffix}"], inputs[f"j{slot}_{suffix}"] = v, j
        circuit = block_max_circuit(TOURNAMENT_BLOCK, self.wide, self.index_bits)
        return self._run(circuit, inputs, final=blocks == 1)
