"""One way from a learner's name to its model, for ``ppbn perturb learn`` and the daemon jobs.

Both the local command (``ppbn.lab.randomized_learning``) and the vertically
partitioned jobs (``ppbn.protocols.perturb``) fit through ``fit_learner``, so the
same records and scheme give the same model wherever they are learned: naive Bayes (Zhan,
Chang and Matwin), ID3, the pocket perceptron and association rules (Ma 2006, Ch. 6-7).

Options (a mapping; keys a learner does not use are ignored): ``estimator`` (moment or
em; None: the learner's default), nb ``alpha``; id3 ``max_depth``, ``min_count``;
perceptron ``positive`` (a state name), ``encoding``, ``cost``, ``iterations``, ``seed``
(of the pocket's draws, not of any randomization); rules ``min_support``,
``min_confidence``, ``max_size``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppbn.errors import DataError, UserError
from ppbn.randomized.perturb.apriori import Mining, mine
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.id3 import DecisionTree, fit_id3
from ppbn.randomized.perturb.naive_bayes import NaiveBayes, fit_naive_bayes
from ppbn.randomized.perturb.perceptron import Perceptron, fit_perceptron

LEARNERS = ("nb", "id3", "perceptron", "rules")
CLASSIFIERS = ("nb", "id3", "perceptron")
PRESENT = {"1", "yes", "true", "y", "t"}
ABSENT = {"0", "no", "false", "n", "f"}
ITEM_STATES = ("0", "1")

Model = NaiveBayes | DecisionTree | Perceptron | Mining


def item_codes(
    columns: Sequence[str], codes: np.ndarray, states: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """Binary item columns recoded so that code 1 means the item is present.

    A relabelling of each column's two states, which the symmetric mechanisms here
    (Warner, flip-all groups, M-category) are invariant under: recoding randomized records
    equals randomizing recoded ones with the same scheme."""
    out = np.empty_like(np.asarray(codes))
    for j, name in enumerate(columns):
        out[:, j] = np.isin(codes[:, j], present_states(name, states[name]))
    return out


def present_states(name: str, states: Sequence[str]) -> list[int]:
    """The state (at most one) of a binary item column that means "present"."""
    values = [str(s).lower() for s in states]
    present = [k for k, v in enumerate(values) if v in PRESENT]
    absent = [k for k, v in enumerate(values) if v in ABSENT]
    if len(present) > 1 or len(absent) > 1 or len(present) + len(absent) != len(values):
        raise DataError(
            f"column {name!r} has values {list(states)}: association rules need "
            "binary items (0/1, no/yes, false/true)"
        )
    return present


def fit_learner(
    learner: str,
    data: RandomizedData,
    class_name: str | None,
    options: Mapping[str, Any],
    states: Mapping[str, Sequence[str]],
) -> Model:
    """Fit ``learner`` on ``data`` (randomized or plain, with its public scheme).

    For ``rules`` the data must already hold item codes (``item_codes``)."""
    if learner not in LEARNERS:
        raise UserError(f"unknown learner {learner!r}; use one of {', '.join(LEARNERS)}")
    if learner == "rules":
        return mine(
            data, options["min_support"], options["min_confidence"], max_size=options["max_size"]
        )
    if class_name is None:
        raise UserError(f"learner {learner} needs a class column")
    estimator = options.get("estimator")
    if learner == "nb":
        return fit_naive_bayes(
            data, class_name, alpha=options["alpha"], method=estimator or "moment"
        )
    if learner == "id3":
        return fit_id3(
            data,
            class_name,
            method=estimator or "moment",
            max_depth=options["max_depth"],
            min_count=options["min_count"],
        )
    positive = options.get("positive")
    if positive is not None:
        if positive not in states[class_name]:
            raise UserError(
                f"--positive {positive!r}: not a value of {class_name} ({', '.join(states[class_name])})"
            )
        positive = list(states[class_name]).index(positive)
    attributes = data.attributes_besides(class_name)
    values = None
    if options["encoding"] == "ordinal":
        values = [ordinal_values(states[a]) for a in attributes]
    return fit_perceptron(
        data,
        class_name,
        positive=positive,
        encoding=options["encoding"],
        values=values,
        cost=options["cost"],
        method=estimator or "em",
        iterations=options["iterations"],
        seed=options["seed"],
    )


def model_dict(model: Model, states: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The model as JSON-ready data, states named by ``states``."""
    if isinstance(model, Mining):
        return model.to_dict()
    return model.to_dict(states)


def ordinal_values(states: Sequence[str]) -> tuple[float, ...]:
    """Numeric state names as values (interval means, Sec. 6.1), else positions 1, 2, ..."""
    try:
        return tuple(float(s) for s in states)
    except ValueError:
        return tuple(float(k + 1) for k in range(len(states)))
