"""The non-private reference learner: K2 with the plaintext oracle, then parameters.

Every secure and randomized result is compared with this one (same score mode, tau and
node order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.bn.k2 import DEFAULT_TAU, CountsOracle, K2Result, count_table, k2_search
from ppbn.bn.model import BayesNet
from ppbn.bn.params import estimate_parameters


@dataclass
class LearnedNetwork:
    search: K2Result
    network: BayesNet
    oracle: CountsOracle


def joined_count_fn(
    names: Sequence[str], states: Mapping[str, tuple[str, ...]], codes: np.ndarray
) -> Callable[[tuple[str, ...]], np.ndarray]:
    """count_fn over joined plaintext data (columns of ``codes`` in ``names`` order); a
    negative code is a missing cell, left out under the available-case rule (``count_table``)."""
    column = {n: i for i, n in enumerate(names)}

    def count(variables: tuple[str, ...]) -> np.ndarray:
        return count_table(codes, [column[v] for v in variables], [len(states[v]) for v in variables])

    return count


def learn_reference(
    names: Sequence[str],
    states: Mapping[str, tuple[str, ...]],
    codes: np.ndarray,
    max_parents: int,
    mode: str,
    tau: float = DEFAULT_TAU,
    order: Sequence[str] | None = None,
    c_star: float = 1.0,
    pseudo_count: float = 0.0,
    progress: Callable[[int, int, str], None] | None = None,
    available_case: bool | None = None,
) -> LearnedNetwork:
    """K2 then ML (or Dirichlet) parameters on the joined data. ``available_case`` (default:
    whenever ``codes`` holds missing cells, coded negative) compares candidates in paired
    mode (``CountsOracle.paired``), as the secure path does under --missing available-case."""
    count = joined_count_fn(names, states, codes)
    if available_case is None:
        available_case = bool(np.any(codes < 0))
    oracle = CountsOracle(count, mode, c_star, n_records=int(codes.shape[0]), paired=available_case)
    search = k2_search(tuple(order or names), max_parents, oracle, tau, progress)
    net = estimate_parameters(tuple(names), states, search.parents, count, pseudo_count)
    return LearnedNetwork(search, net, oracle)
