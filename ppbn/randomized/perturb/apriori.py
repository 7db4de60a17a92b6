"""Apriori on randomized transactions with grouped randomization (Ma 2006, Sec. 7.1).

Items are binary columns (1 = the transaction holds the item). Owners randomize groups
of items simultaneously (Sec. 7.1.2.1: symmetric M-category over the 2^|G| combinations
of a group, or Zhan's keep-or-flip-all), groups independently. For a candidate itemset C
the data miner needs T_C, the counts of all 2^|C| presence patterns of C's items:

- Prop. 7.1-7.2: an item, or several items of one group, are randomized by the group's
  marginal transition matrix (``response.marginal_transition``; the propositions' closed
  forms are checked in the tests);
- Prop. 7.3: items from several groups: P_C = P_C1 (x) ... (x) P_Cm, and
  T_hat_C = (P_C^T)^{-1} T_tilde_C is unbiased, its last cell the estimated support;
- Prop. 7.4: T_tilde_C follows from the randomized supports of C and of all its subsets
  by inclusion-exclusion, so each pass counts one support per candidate, as plain
  Apriori does; every subset of a candidate was itself a candidate earlier.

The variance of an estimated support is Theorem 2's (Cov(T_hat) = (P^{-1})^T
[sum_l T_l V_l] P^{-1}, which the propositions inherit), evaluated at the clipped estimate
(``sd``). Itemsets are kept when the estimated support reaches ``min_support``; rules
X => Y when the estimated confidence sup(X u Y) / sup(X) reaches ``min_confidence``.
Estimates are not monotone under randomization, so a confidence can exceed 1: it is
reported clipped to 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.pram.estimators import apply_along_axes, moment_covariance, moment_estimate

# T_tilde(s) from supersets' supports: per item, absent = sup(without) - sup(with)
_INCLUSION_EXCLUSION = np.array([[1.0, -1.0], [0.0, 1.0]])


@dataclass(frozen=True)
class Itemset:
    items: tuple[str, ...]
    count: float  # estimated number of transactions holding every item
    sd: float  # its standard deviation (Theorem 2, randomization only)
    randomized_count: int  # what the randomized data show

    def to_dict(self, records: int) -> dict[str, Any]:
        return {
            "items": list(self.items),
            "support": self.count / records,
            "support_sd": self.sd / records,
            "randomized_support": self.randomized_count / records,
        }


@dataclass(frozen=True)
class Rule:
    antecedent: tuple[str, ...]
    consequent: tuple[str, ...]
    support: float
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "if": list(self.antecedent),
            "then": list(self.consequent),
            "support": self.support,
            "confidence": self.confidence,
        }


def table_from_supports(
    items: Sequence[str], supports: Mapping[frozenset[str], float], records: float
) -> np.ndarray:
    """T_C over the presence patterns of ``items`` (C order, absent = 0) from the supports
    of every subset of ``items`` (Prop. 7.4, inclusion-exclusion); the empty set's support
    is ``records``."""
    k = len(items)
    superset = np.empty((2,) * k)
    for pattern in itertools.product((0, 1), repeat=k):
        chosen = frozenset(item for item, bit in zip(items, pattern, strict=True) if bit)
        superset[pattern] = records if not chosen else supports[chosen]
    return apply_along_axes(superset, [((i,), _INCLUSION_EXCLUSION) for i in range(k)])


class SupportEstimator:
    """Estimated supports of itemsets from randomized transactions (Props. 7.1-7.4)."""

    def __init__(self, data: RandomizedData, items: Sequence[str] | None = None) -> None:
        self.data = data
        self.items = tuple(data.columns if items is None else items)
        for item in self.items:
            if data.cardinality(item) != 2:
                raise UserError(
                    f"item {item!r} has {data.cardinality(item)} states; items must be binary"
                )
        self._supports: dict[frozenset[str], float] = {}

    def randomized_support(self, itemset: Sequence[str]) -> int:
        """sup_tilde: randomized transactions holding every item of ``itemset`` (cached)."""
        key = frozenset(itemset)
        if key not in self._supports:
            held = np.ones(self.data.records, dtype=bool)
            for item in itemset:
                held &= self.data.column(item) == 1
            self._supports[key] = float(np.count_nonzero(held))
        return int(self._supports[key])

    def randomized_table(self, itemset: Sequence[str]) -> np.ndarray:
        """T_tilde_C by Prop. 7.4 from the supports of ``itemset`` and its subsets."""
        for size in range(1, len(itemset) + 1):
            for subset in itertools.combinations(itemset, size):
                self.randomized_support(subset)
        return table_from_supports(itemset, self._supports, float(self.data.records))

    def estimate(self, itemset: Sequence[str]) -> Itemset:
        """T_hat_C = (P_C^T)^{-1} T_tilde_C (Props. 7.2-7.3); its last cell is sup_hat."""
        itemset = tuple(itemset)
        observed = self.randomized_table(itemset)
        operators = self.data.operators(itemset)
        if operators is None:
            raise UserError(
                f"itemset {itemset}: a randomization block has no marginal on these items"
            )
        table = moment_estimate(observed, operators) if operators else observed
        last = (1,) * len(itemset)
        variance = moment_covariance(table, operators)[-1, -1] if operators else 0.0
        return Itemset(
            itemset,
            float(table[last]),
            float(np.sqrt(max(variance, 0.0))),
            self.randomized_support(itemset),
        )


def apriori_gen(
    frequent: Sequence[tuple[str, ...]], order: Mapping[str, int]
) -> list[tuple[str, ...]]:
    """Candidates of size k from frequent (k-1)-itemsets (items in ``order``): join those
    sharing their first k-2 items, keep a candidate only if all its (k-1)-subsets are
    frequent (Sec. 7.1.1)."""
    known = set(frequent)
    ordered = sorted(frequent, key=lambda s: [order[i] for i in s])
    out = []
    for a, b in itertools.combinations(ordered, 2):
        if a[:-1] != b[:-1]:
            continue
        candidate = tuple(sorted((*a, b[-1]), key=order.__getitem__))
        if all(sub in known for sub in itertools.combinations(candidate, len(candidate) - 1)):
            out.append(candidate)
    return out


@dataclass(frozen=True)
class Mining:
    records: int
    itemsets: tuple[Itemset, ...]
    rules: tuple[Rule, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "frequent_itemsets": [s.to_dict(self.records) for s in self.itemsets],
            "rules": [r.to_dict() for r in self.rules],
        }


def frequent_itemsets(
    data: RandomizedData,
    min_support: float,
    items: Sequence[str] | None = None,
    max_size: int | None = None,
) -> list[Itemset]:
    """Apriori with estimated supports (Sec. 7.1.2.3): L_k from C_k, C_{k+1} from L_k."""
    if not 0.0 < min_support <= 1.0:
        raise UserError(f"min support must be in (0, 1], got {min_support:g}")
    estimator = SupportEstimator(data, items)
    order = {item: i for i, item in enumerate(estimator.items)}
    threshold = min_support * data.records
    found: list[Itemset] = []
    candidates = [(item,) for item in estimator.items]
    size = 1
    while candidates and (max_size is None or size <= max_size):
        level = [estimator.estimate(c) for c in candidates]
        kept = [s for s in level if s.count >= threshold]
        found += kept
        candidates = apriori_gen([s.items for s in kept], order)
        size += 1
    return found


def association_rules(
    itemsets: Sequence[Itemset], records: int, min_confidence: float
) -> list[Rule]:
    """Rules X => Y from each frequent itemset of 2 or more items, X a nonempty proper
    subset; supports of X come from the same estimates (all subsets are frequent)."""
    if not 0.0 <= min_confidence <= 1.0:
        raise UserError(f"min confidence must be in [0, 1], got {min_confidence:g}")
    count = {frozenset(s.items): s.count for s in itemsets}
    rules = []
    for s in itemsets:
        if len(s.items) < 2:
            continue
        for size in range(1, len(s.items)):
            for antecedent in itertools.combinations(s.items, size):
                base = count.get(frozenset(antecedent), 0.0)
                if base <= 0:
                    continue
                confidence = min(s.count / base, 1.0)
                if confidence >= min_confidence:
                    consequent = tuple(i for i in s.items if i not in antecedent)
                    rules.append(Rule(antecedent, consequent, s.count / records, confidence))
    rules.sort(key=lambda r: (-r.confidence, -r.support, r.antecedent, r.consequent))
    return rules


def mine(
    data: RandomizedData,
    min_support: float,
    min_confidence: float,
    items: Sequence[str] | None = None,
    max_size: int | None = None,
) -> Mining:
    """Frequent itemsets and association rules from ``data`` (randomized or plain)."""
    itemsets = frequent_itemsets(data, min_support, items, max_size)
    rules = association_rules(itemsets, data.records, min_confidence)
    return Mining(data.records, tuple(itemsets), tuple(rules))
