"""The Lens data of Ma 2006, Sec. 6.3, simulation (1): the pocket perceptron's test bed.

The dissertation draws 6,000 records of four categorical attributes independently from
Table 6.1's probabilities and labels each record as the UCI Lenses database labels that
combination. The Lenses database (Cendrowska 1987) lists all 24 combinations of age
(young, pre-presbyopic, presbyopic), spectacle prescription (myope, hypermetrope),
astigmatic (no, yes) and tear production rate (reduced, normal) with class 1 (hard
lenses), 2 (soft) or 3 (none); it is written out below, in the database's row order.
Classes 1 and 2 are merged, class 3 is the other class. Table 6.1 gives X2..X4 a third
column of zeros: they are binary.

Randomization (Table 6.2): X1 "ternary symmetric randomization with parameter p", X2-X4
binary symmetric with p; the class is not randomized. The text does not say how p splits
between X1's two other values; we read it as the M-category scheme (keep with 1 - p, each
other value p / 2), so every attribute changes with the same probability p. Read as
Fig. 2.1(b) with p1 = p2 = p instead, X1 would change with 2p.
"""

from __future__ import annotations

import numpy as np

from ppbn.randomized.pram.operators import (
    Block,
    RandomizationScheme,
    binary_symmetric,
    multi_category,
)

ATTRIBUTES = ("age", "prescription", "astigmatic", "tear_rate")
CLASS = "lenses"
CARDINALITIES = {"age": 3, "prescription": 2, "astigmatic": 2, "tear_rate": 2, "lenses": 2}
# Table 6.1: Pr(X_j = 1), Pr(X_j = 2), Pr(X_j = 3)
TABLE_6_1 = ((0.5, 0.3, 0.2), (0.9, 0.1), (0.2, 0.8), (0.2, 0.8))
# UCI Lenses: (age, prescription, astigmatic, tear rate) -> class, values 1-based
LENSES = {
    (1, 1, 1, 1): 3,
    (1, 1, 1, 2): 2,
    (1, 1, 2, 1): 3,
    (1, 1, 2, 2): 1,
    (1, 2, 1, 1): 3,
    (1, 2, 1, 2): 2,
    (1, 2, 2, 1): 3,
    (1, 2, 2, 2): 1,
    (2, 1, 1, 1): 3,
    (2, 1, 1, 2): 2,
    (2, 1, 2, 1): 3,
    (2, 1, 2, 2): 1,
    (2, 2, 1, 1): 3,
    (2, 2, 1, 2): 2,
    (2, 2, 2, 1): 3,
    (2, 2, 2, 2): 3,
    (3, 1, 1, 1): 3,
    (3, 1, 1, 2): 3,
    (3, 1, 2, 1): 3,
    (3, 1, 2, 2): 1,
    (3, 2, 1, 1): 3,
    (3, 2, 1, 2): 2,
    (3, 2, 2, 1): 3,
    (3, 2, 2, 2): 3,
}


def lens_class(codes: np.ndarray) -> np.ndarray:
    """Merged class code of coded attributes: 0 for Lenses classes 1-2, 1 for class 3."""
    return np.array([0 if LENSES[tuple(int(v) + 1 for v in row)] < 3 else 1 for row in codes])


def sample_lenses(records: int, rng: np.random.Generator) -> tuple[tuple[str, ...], np.ndarray]:
    """``records`` coded records (attributes..., class) drawn as in Sec. 6.3 (1)."""
    columns = [rng.choice(len(probs), size=records, p=probs) for probs in TABLE_6_1]
    attributes = np.column_stack(columns)
    return (*ATTRIBUTES, CLASS), np.column_stack([attributes, lens_class(attributes)])


def lenses_scheme(p: float) -> RandomizationScheme:
    """Table 6.2: X1 over three values with p, X2-X4 binary symmetric with p, class kept."""
    blocks = [Block(("age",), (3,), multi_category(3, p), f"ternary p={p:g}")]
    blocks += [
        Block((name,), (2,), binary_symmetric(p), f"binary symmetric p={p:g}")
        for name in ATTRIBUTES[1:]
    ]
    return RandomizationScheme(CARDINALITIES, blocks)
