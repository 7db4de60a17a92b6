"""The perturbation learners over vertically partitioned data, in the two setups of Ma and
Sivakumar (Sec. III-A): naive Bayes (Zhan, Chang and Matwin), ID3, the pocket perceptron
and association rules (Ma 2006, Ch. 6-7), each learned from counts estimated through the
public randomization scheme (``ppbn.randomized.perturb.learners``).

Setup I (no data miner), between alice and bob. The *learner* is the party that owns the
class (for rules, which have none: ``VerticalTask.learner_party``, alice by default).
  1. The other party randomizes every one of its columns with the public scheme and its
     own random source and sends them with their matrices (``pram.header`` + ``pram.data``:
     the PRAM path's ``send_randomized`` / ``recv_randomized``, which check the matrices
     against the agreed scheme and every code against its domain).
  2. The learner joins its own columns as they are (they never leave its host: identity
     mechanism) with the received randomized ones, and learns.
  3. The learner sends the model (``perturb.model``, JSON), the job's output; both hold it.

Setup II (a data miner): alice and bob each send all their columns randomized to the
miner, which joins the two randomized copies, learns, and sends the model to both.

What crosses the wire is either a randomized column under the agreed scheme (which the
sender's job checked against its own local policy before this runs) or the model.
Ledgers: ``randomized_data`` and ``randomization_matrix`` at whoever receives columns,
``model`` at whoever receives the model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppbn.bn.schema import PARTIES, Schema
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.pram import (
    MINER,
    Phase,
    check_scheme_fits,
    privacy_rows,
    recv_from_both_parties,
    recv_randomized,
    send_randomized,
)
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.learners import (
    ITEM_STATES,
    LEARNERS,
    fit_learner,
    item_codes,
    model_dict,
)
from ppbn.randomized.pram.operators import RandomizationScheme, RandomSource

MODEL_TAG = "perturb.model"
MODEL_MAX_BYTES = 64 * 1024 * 1024
MODEL_NAMES = {"nb": "naive_bayes", "id3": "id3", "perceptron": "pocket_perceptron"}


@dataclass(frozen=True)
class VerticalTask:
    """What to learn (public job parameters, the same at every party of the run)."""

    learner: str
    class_name: str | None  # None for rules
    options: Mapping[str, Any] = field(default_factory=dict)
    learner_party: str = "alice"  # setup I, rules: who learns

    def learning_party(self, schema: Schema) -> str:
        """Setup I: the owner of the class, or ``learner_party`` for rules."""
        return self.learner_party if self.class_name is None else schema.owner(self.class_name)


@dataclass
class VerticalOutcome:
    """One party's end of a run: the model and what was disclosed and received.

    ``disclosed`` lists every variable whose randomized column left its owner in this run,
    in schema order; ``privacy`` measures each of their blocks (pram ``privacy_rows``).
    """

    model: dict[str, Any]
    disclosed: tuple[str, ...]
    received: tuple[str, ...]
    privacy: list[dict[str, Any]]


def _no_phase(_name: str) -> AbstractContextManager[Any]:
    return nullcontext()


def learn_model(
    task: VerticalTask, schema: Schema, codes: np.ndarray, scheme: RandomizationScheme
) -> dict[str, Any]:
    """The model from coded records over every variable (schema order) and their scheme:
    a block per column that arrived randomized, none for columns taken as they are."""
    names = schema.names
    states: dict[str, tuple[str, ...]] = {v.name: v.states for v in schema.variables}
    if task.learner == "rules":
        codes = item_codes(names, codes, states)
        states = dict.fromkeys(names, ITEM_STATES)
    data = RandomizedData(names, codes, scheme)
    return model_dict(
        fit_learner(task.learner, data, task.class_name, task.options, states), states
    )


# -- setup I ----------------------------------------------------------------------------


def run_setup_one(
    role: str,
    channel: Channel,
    schema: Schema,
    own_codes: np.ndarray,
    scheme: RandomizationScheme,
    task: VerticalTask,
    source: RandomSource,
    ledger: Ledger,
    phase: Phase = _no_phase,
) -> VerticalOutcome:
    """One party's side of setup I (see the module docstring); both end with the model."""
    if role not in PARTIES:
        raise ValueError(f"setup I runs between alice and bob, not {role!r}")
    check_scheme_fits(scheme, schema)
    learner = task.learning_party(schema)
    other = "bob" if learner == "alice" else "alice"
    own_columns = tuple(v.name for v in schema.owned_by(role))
    other_columns = tuple(v.name for v in schema.owned_by(other))
    privacy = privacy_rows(scheme, other_columns, schema)
    if role == other:
        with phase("send randomized data"):
            send_randomized(channel, schema, own_columns, own_columns, own_codes, scheme, source)
        with phase("wait for the model"):
            model = recv_model(channel, task, schema, int(own_codes.shape[0]), ledger, learner)
        return VerticalOutcome(model, other_columns, (), privacy)
    n = int(own_codes.shape[0])
    with phase("receive randomized data"):
        theirs, their_scheme = recv_randomized(
            channel, schema, other_columns, n, scheme, ledger, other
        )
    with phase("learn"):
        by_name = {name: own_codes[:, j].astype(np.int64) for j, name in enumerate(own_columns)}
        by_name.update({name: theirs[:, j] for j, name in enumerate(other_columns)})
        view = np.column_stack([by_name[v] for v in schema.names])
        cards = dict(zip(schema.names, schema.cardinalities(), strict=True))
        model = learn_model(task, schema, view, RandomizationScheme(cards, their_scheme.blocks))
    with phase("send model"):
        channel.send(MODEL_TAG, encode_model(model))
    return VerticalOutcome(model, other_columns, other_columns, privacy)


# -- setup II ---------------------------------------------------------------------------


def run_setup_two_party(
    role: str,
    channel: Channel,
    schema: Schema,
    own_codes: np.ndarray,
    scheme: RandomizationScheme,
    task: VerticalTask,
    source: RandomSource,
    ledger: Ledger,
    phase: Phase = _no_phase,
) -> VerticalOutcome:
    """alice's or bob's side of setup II: send every own column randomized, receive the model."""
    check_scheme_fits(scheme, schema)
    own_columns = tuple(v.name for v in schema.owned_by(role))
    with phase("send randomized data"):
        send_randomized(channel, schema, own_columns, own_columns, own_codes, scheme, source)
    with phase("wait for the miner"):
        model = recv_model(channel, task, schema, int(own_codes.shape[0]), ledger, MINER)
    disclosed = schema.names
    return VerticalOutcome(model, disclosed, (), privacy_rows(scheme, disclosed, schema))


def run_setup_two_miner(
    channels: Mapping[str, Channel],
    schema: Schema,
    scheme: RandomizationScheme,
    task: VerticalTask,
    ledger: Ledger,
    phase: Phase = _no_phase,
) -> VerticalOutcome:
    """The miner's side of setup II: join both randomized copies, learn, send the model."""
    check_scheme_fits(scheme, schema)
    with phase("receive randomized data"):
        randomized = recv_from_both_parties(channels, schema, scheme, ledger)
    with phase("learn"):
        model = learn_model(task, schema, randomized, scheme)
    with phase("send model"):
        payload = encode_model(model)
        for party in PARTIES:
            channels[party].send(MODEL_TAG, payload)
    disclosed = schema.names
    return VerticalOutcome(model, disclosed, disclosed, privacy_rows(scheme, disclosed, schema))


# -- the model on the wire --------------------------------------------------------------


def encode_model(model: Mapping[str, Any]) -> bytes:
    return json.dumps(model, allow_nan=False).encode()


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def recv_model(
    channel: Channel, task: VerticalTask, schema: Schema, records: int, ledger: Ledger, sender: str
) -> dict[str, Any]:
    """Receive the model, check its shape against the task and the schema, record it."""
    try:
        model = json.loads(
            channel.recv(MODEL_TAG, max_bytes=MODEL_MAX_BYTES), parse_constant=_reject_constant
        )
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError(f"{sender} sent a model that is not strict JSON") from None
    problem = model_problem(model, task, schema, records)
    if problem:
        raise ProtocolError(f"{sender} sent a malformed {task.learner} model: {problem}")
    ledger.record("model", model, sender)
    return model


def model_problem(model: Any, task: VerticalTask, schema: Schema, records: int) -> str | None:
    """Why ``model`` is not a model of ``task.learner`` over ``schema``, or None."""
    if task.learner not in LEARNERS:
        return f"unknown learner {task.learner!r}"
    if not isinstance(model, dict):
        return "not an object"
    if task.learner == "rules":
        return _rules_problem(model, schema, records)
    if model.get("model") != MODEL_NAMES[task.learner] or model.get("class") != task.class_name:
        return f"expected a {MODEL_NAMES[task.learner]} model of class {task.class_name!r}"
    classes = schema.variable(task.class_name).states
    if task.learner == "nb":
        return _naive_bayes_problem(model, schema, classes)
    if task.learner == "id3":
        return _tree_problem(model.get("tree"), schema, classes, depth=0)
    weights = model.get("weights")
    if (
        model.get("positive") not in classes
        or not isinstance(weights, dict)
        or not all(_is_number(w) for w in weights.values())
    ):
        return "the positive class or the weights are malformed"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _distribution_problem(table: Any, keys: tuple[str, ...], what: str) -> str | None:
    if not isinstance(table, dict) or tuple(table) != keys:
        return f"{what} is not over {list(keys)}"
    if not all(_is_number(p) and 0.0 <= p <= 1.0 for p in table.values()):
        return f"{what} holds a value that is not a probability"
    return None


def _naive_bayes_problem(model: dict, schema: Schema, classes: tuple[str, ...]) -> str | None:
    problem = _distribution_problem(model.get("prior"), classes, "the prior")
    if problem:
        return problem
    conditionals = model.get("conditionals")
    attributes = tuple(v for v in schema.names if v != model["class"])
    if not isinstance(conditionals, dict) or tuple(conditionals) != attributes:
        return f"the conditionals are not over {list(attributes)}"
    for name, rows in conditionals.items():
        states = schema.variable(name).states
        if not isinstance(rows, dict) or tuple(rows) != states:
            return f"the conditionals of {name!r} are not over its states"
        for state, row in rows.items():
            problem = _distribution_problem(row, classes, f"P({name} = {state} | class)")
            if problem:
                return problem
    return None


def _tree_problem(node: Any, schema: Schema, classes: tuple[str, ...], depth: int) -> str | None:
    if depth > len(schema.names) or not isinstance(node, dict) or node.get("label") not in classes:
        return "a tree node is malformed (label, depth)"
    counts = node.get("counts")
    if (
        not isinstance(counts, dict)
        or tuple(counts) != classes
        or not all(_is_number(c) for c in counts.values())
    ):
        return "a tree node's counts are malformed"
    if "split" not in node:
        return None
    split = node["split"]
    if split not in schema.names or not _is_number(node.get("gain")):
        return f"a tree node splits on {split!r}, not a variable of the schema"
    children = node.get("children")
    if not isinstance(children, dict) or tuple(children) != schema.variable(split).states:
        return f"a split on {split!r} does not have one branch per state"
    for child in children.values():
        problem = _tree_problem(child, schema, classes, depth + 1)
        if problem:
            return problem
    return None


def _rules_problem(model: dict, schema: Schema, records: int) -> str | None:
    names = set(schema.names)
    if model.get("records") != records:
        return f"it counts {model.get('records')!r} records, not {records}"
    itemsets, rules = model.get("frequent_itemsets"), model.get("rules")
    if not isinstance(itemsets, list) or not isinstance(rules, list):
        return "frequent_itemsets and rules must be lists"
    for entry in itemsets:
        if (
            not isinstance(entry, dict)
            or not _items_ok(entry.get("items"), names)
            or not all(
                _is_number(entry.get(k)) for k in ("support", "support_sd", "randomized_support")
            )
        ):
            return "a frequent itemset is malformed"
    for rule in rules:
        if (
            not isinstance(rule, dict)
            or not _items_ok(rule.get("if"), names)
            or not _items_ok(rule.get("then"), names)
            or not all(_is_number(rule.get(k)) for k in ("support", "confidence"))
        ):
            return "a rule is malformed"
    return None


def _items_ok(items: Any, names: set[str]) -> bool:
    return (
        isinstance(items, list)
        and bool(items)
        and len(set(items)) == len(items)
        and set(items) <= names
    )
