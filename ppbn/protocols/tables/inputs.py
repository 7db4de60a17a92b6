"""What each record contributes to a table phase, per chunk: pure numpy, no keys.

The tasks that run on an executor (``protocols/executor.py``) take plain arrays: X's
bit positions in its packed indicator plaintexts, and Y's cluster labels, by which it
multiplies ciphertexts. The available-case rule for missing cells (``--missing
available-case``) is applied here, by each party to its own columns, so that a record adds
to a family's cell only if neither party's part of the family is missing, as in
``bn.k2.count_table``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ppbn.bn.schema import Schema
from ppbn.protocols.tables.config import TablesConfig
from ppbn.protocols.tables.plan import Family, Group, Subset, make_plan, slot_bits

# A missing cell (``--missing available-case``, ``data.party_data.MISSING_CODE``): the record
# has no configuration of any subset containing that variable, so its indicator row for
# the subset is all zeros and it adds to no cell of any family containing the variable.
MISSING = -1


def config_index(
    schema: Schema, codes: np.ndarray, columns: dict[str, int], subset: Subset
) -> np.ndarray:
    """Each record's configuration of ``subset``, or MISSING when any of its variables is
    missing: the available-case rule, applied by each party to its own columns (a record
    counts in a cell only if neither party's part of the family is missing)."""
    if not subset:
        return np.zeros(codes.shape[0], dtype=np.int64)
    parts = tuple(codes[:, columns[v]] for v in subset)
    missing = np.zeros(codes.shape[0], dtype=bool)
    for part in parts:
        missing |= part < 0
    if not missing.any():
        return np.ravel_multi_index(parts, schema.cardinalities(subset))
    index = np.ravel_multi_index(
        tuple(np.where(missing, 0, p) for p in parts), schema.cardinalities(subset)
    )
    index[missing] = MISSING
    return index


def label_cardinalities(
    schema: Schema, codes: np.ndarray, columns: dict[str, int], union: Subset
) -> tuple[int, ...]:
    """Cardinalities of the aggregator's cluster labels: a variable with missing cells in
    this party's own data gets one extra state (its last) for "missing"."""
    return tuple(schema.cardinality(v) + int(bool(np.any(codes[:, columns[v]] < 0))) for v in union)


def _cluster_label(
    codes: np.ndarray, columns: dict[str, int], union: Subset, cards: tuple[int, ...]
) -> np.ndarray:
    """Each record's joint state of ``union`` over ``cards`` (missing = the extra last state),
    so that every record has a label: the marginalisation to a subset then drops exactly the
    records missing in that subset's variables, and every ciphertext stays a factor of one
    product (``multiply_by_label``'s invertibility check covers it)."""
    if not union:
        return np.zeros(codes.shape[0], dtype=np.int64)
    parts = tuple(
        np.where(codes[:, columns[v]] < 0, card - 1, codes[:, columns[v]])
        for v, card in zip(union, cards, strict=True)
    )
    return np.ravel_multi_index(parts, cards)


def bit_positions(
    schema: Schema, block: np.ndarray, columns: dict[str, int], group: Group, width: int
) -> np.ndarray:
    """X's task input for a chunk: per record and slice, the bit to set (-1: none)."""
    positions = np.full((block.shape[0], len(group.slices)), -1, dtype=np.int64)
    for j, (offset, piece) in enumerate(zip(group.offsets(), group.slices, strict=True)):
        cfg = config_index(schema, block, columns, piece.subset)
        inside = (cfg >= piece.start) & (cfg < piece.stop)
        positions[inside, j] = width * (offset + cfg[inside] - piece.start)
    return positions


def record_labels(
    block: np.ndarray,
    columns: dict[str, int],
    clusters: list[Subset],
    label_cards: dict[Subset, tuple[int, ...]],
) -> np.ndarray:
    """Y's task input for a chunk: each record's label in each cluster of the group."""
    return np.stack([_cluster_label(block, columns, u, label_cards[u]) for u in clusters])


def chunk_inputs(
    schema: Schema,
    codes: dict[str, np.ndarray],
    families: Sequence[Family],
    config: TablesConfig,
    n_records: int,
) -> tuple[str, np.ndarray, np.ndarray, list[int]]:
    """What one chunk of ``codes`` (both parties' columns, for a measurement only: ``ppbn
    bench chunk-cost``) gives the two tasks of the plan's first direction for a job of
    ``n_records``: the encrypter, its positions, the aggregator's labels and label counts."""
    plan = make_plan(schema, families, n_records, config)
    if not plan.directions:
        raise ValueError("no crossing family")
    direction = plan.directions[0]
    x, y = direction.encrypter, direction.aggregator
    x_columns = {v.name: j for j, v in enumerate(schema.owned_by(x))}
    y_columns = {v.name: j for j, v in enumerate(schema.owned_by(y))}
    width = slot_bits(n_records, config.statistical_bits)
    positions = bit_positions(schema, codes[x], x_columns, direction.groups[0], width)
    clusters = direction.clusters[0]
    cards = {u: label_cardinalities(schema, codes[y], y_columns, u) for u in clusters}
    return (
        x,
        positions,
        record_labels(codes[y], y_columns, clusters, cards),
        [math.prod(cards[u]) for u in clusters],
    )


def chunk_bounds(n_records: int, chunk_size: int) -> list[tuple[int, int]]:
    """[start, stop) of each chunk of records: the unit of streaming, of tasks and of the cache."""
    return [(s, min(s + chunk_size, n_records)) for s in range(0, n_records, chunk_size)]
