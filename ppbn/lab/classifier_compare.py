"""``ppbn compare-classifiers``: naive Bayes, ID3 and the pocket perceptron learned from
the original, the randomized (uncorrected) and the reconstructed data, against p.

Data: records sampled from a bnlearn network shipped with pgmpy with a chosen class
variable (scikit-learn's data sets are not a dependency), or the Lens data of Ma 2006,
Sec. 6.3 (``--lenses``: Table 6.1 sampling, Table 6.2 randomization). A separate test
sample, never randomized, measures accuracy (as the dissertation tests on the original
data, Sec. 6.3). Every attribute is randomized with M-category randomization p, or with
Warner's randomized response theta (binary attributes; Zhan's experiments), each on its
own or, with ``one_group``, all kept or flipped together (Zhan Sec. 3.2); the class only
with ``randomize_class``.

For each p and each of ``repeats`` randomizations of the one training sample:

- original: the learner on the original records (once: it does not depend on p);
- randomized: the same learner on the randomized records taken at face value;
- reconstructed: the learner on estimated counts (naive Bayes: Zhan; ID3: Sec. 7.2.2 with
  moment estimates; perceptron: expected cost with an EM prior, Sec. 6.2).

The privacy level is the gamma-amplification of the blocks (Sec. 3.1; (1 - p)(K - 1)/p
for M-category over K states), for each block size, strict and ignoring zeros (docs/conventions.md, "Gamma amplification"). The perceptron separates ``positive`` from the other class states; with a
binary class its accuracy is the ordinary one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy, PramPolicy
from ppbn.lab.lenses import CARDINALITIES as LENS_CARDINALITIES
from ppbn.lab.lenses import CLASS as LENS_CLASS
from ppbn.lab.lenses import lenses_scheme, sample_lenses
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.id3 import fit_id3
from ppbn.randomized.perturb.naive_bayes import fit_naive_bayes
from ppbn.randomized.perturb.perceptron import (
    DEFAULT_ITERATIONS,
    MAX_CONFIGURATIONS,
    fit_perceptron,
)
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomizationScheme, RandomSource
from ppbn.randomized.pram.privacy import gamma_amplification

LEARNERS = ("naive_bayes", "id3", "perceptron")
TITLES = {
    "naive_bayes": "naive Bayes (Zhan)",
    "id3": "ID3 (Ma Sec. 7.2)",
    "perceptron": "pocket perceptron (Ma Ch. 6)",
}
MODES = ("randomized", "reconstructed")


@dataclass(frozen=True)
class ClassifierSettings:
    network: str | None  # None: the Lens data
    class_name: str | None
    records: int
    test_records: int
    levels: tuple[float, ...]  # values of p, or of theta with mechanism "theta"
    repeats: int = 5
    seed: int = 7
    attributes: tuple[str, ...] | None = None
    randomize_class: bool = False
    max_depth: int | None = None
    encoding: str = "onehot"
    positive: str | None = None
    perceptron_estimator: str = "em"
    pocket_iterations: int = DEFAULT_ITERATIONS
    mechanism: str = "p"  # "p": M-category (Ma); "theta": Warner randomized response (Zhan)
    one_group: bool = False  # theta only: all attributes kept or flipped together (Zhan Sec. 3.2)
    secure: bool = False  # also the secure path's network as a classifier (classifier_secure)


@dataclass(frozen=True)
class Problem:
    """Training and test records with everything the learners need."""

    source: str
    columns: tuple[str, ...]
    states: dict[str, tuple[str, ...]]
    class_name: str
    attributes: tuple[str, ...]
    train: np.ndarray
    test: np.ndarray
    scheme: Callable[[float], RandomizationScheme]

    def cardinalities(self) -> list[int]:
        return [len(self.states[c]) for c in self.columns]


def make_problem(settings: ClassifierSettings) -> Problem:
    """Sample the data (a network's records or the Lens data) and fix attributes and scheme."""
    if settings.network is None:
        if settings.mechanism != "p":
            raise UserError("the Lens data are randomized as in Table 6.2 (give --p, not --theta)")
        columns, train = sample_lenses(settings.records, np.random.default_rng(settings.seed))
        _, test = sample_lenses(settings.test_records, np.random.default_rng(settings.seed + 1))
        states = {c: tuple(str(k + 1) for k in range(LENS_CARDINALITIES[c])) for c in columns}
        states[LENS_CLASS] = ("lenses (classes 1-2)", "none (class 3)")
        return Problem(
            "Lens data (Ma 2006, Sec. 6.3: Table 6.1 sampling, UCI Lenses labels, Table 6.2 randomization)",
            columns,
            states,
            LENS_CLASS,
            columns[:-1],
            train,
            test,
            lenses_scheme,
        )
    from ppbn.bn.networks import load_network, sample

    net = load_network(settings.network)
    if settings.class_name not in net.names:
        raise UserError(f"--class {settings.class_name!r} is not a variable of {settings.network}")
    columns = tuple(net.names)
    cls = settings.class_name
    attributes = settings.attributes or _default_attributes(net, cls)
    for a in attributes:
        if a not in columns or a == cls:
            raise UserError(
                f"--attributes: {a!r} is not a variable of {settings.network} besides the class"
            )
    keep = [columns.index(a) for a in attributes] + [columns.index(cls)]
    train = sample(net, settings.records, settings.seed)[:, keep]
    test = sample(net, settings.test_records, settings.seed + 1)[:, keep]
    used = (*attributes, cls)
    cards = {v: net.cardinality(v) for v in used}
    randomized = [*attributes, cls] if settings.randomize_class else list(attributes)
    groups = [tuple(randomized)] if settings.one_group else []

    def scheme(level: float) -> RandomizationScheme:
        if settings.mechanism == "theta":
            return scheme_for(cards, randomized, theta=level, groups=groups)
        return scheme_for(cards, randomized, p=level, groups=groups)

    return Problem(
        f"network {settings.network} (bnlearn, shipped with pgmpy)",
        used,
        {v: net.states[v] for v in used},
        cls,
        tuple(attributes),
        train,
        test,
        scheme,
    )


def _default_attributes(net, cls: str) -> tuple[str, ...]:
    """Every other variable when the perceptron's configuration space allows it, else the
    class's Markov blanket (parents, children, the children's other parents)."""
    others = tuple(v for v in net.names if v != cls)
    size = net.cardinality(cls) * math.prod(net.cardinality(v) for v in others)
    if size <= MAX_CONFIGURATIONS:
        return others
    children = [v for v in net.names if cls in net.parents[v]]
    blanket = set(net.parents[cls]) | set(children)
    for child in children:
        blanket |= set(net.parents[child])
    blanket.discard(cls)
    return tuple(v for v in net.names if v in blanket)


def gamma_levels(problem: Problem, level: float) -> dict[str, dict[str, float | None]]:
    """gamma-amplification of the blocks for each block size K (Sec. 3.1; docs/conventions.md, "Gamma amplification", zero
    convention): the strict value (None when infinite, as for a flip-all group, whose
    outputs each come from two originals only) and the value over nonzero entries."""
    strict: dict[str, float | None] = {}
    nonzero: dict[str, float | None] = {}
    for block in sorted(problem.scheme(level).blocks, key=lambda b: b.size):
        gamma = gamma_amplification(block.matrix, block.name)
        key = f"K={block.size}"
        strict[key] = gamma.value if math.isfinite(gamma.value) else None
        nonzero[key] = (
            gamma.value_ignoring_zeros if math.isfinite(gamma.value_ignoring_zeros) else None
        )
    return {"gamma": strict, "gamma_ignoring_zeros": nonzero}


def _accuracy(model, learner: str, test: RandomizedData, class_name: str) -> float:
    if learner == "perceptron":
        return model.accuracy(test)
    return float(np.mean(model.predict(test) == test.column(class_name)))


def _fit(
    learner: str,
    data: RandomizedData,
    problem: Problem,
    settings: ClassifierSettings,
    corrected: bool,
):
    cls = problem.class_name
    if learner == "naive_bayes":
        return fit_naive_bayes(data, cls)
    if learner == "id3":
        return fit_id3(data, cls, max_depth=settings.max_depth)
    positive = None
    if settings.positive is not None:
        if settings.positive not in problem.states[cls]:
            raise UserError(f"--positive {settings.positive!r}: not a state of {cls}")
        positive = problem.states[cls].index(settings.positive)
    return fit_perceptron(
        data,
        cls,
        positive=positive,
        encoding=settings.encoding,
        cost="expected" if corrected else "raw",
        method=settings.perceptron_estimator,
        iterations=settings.pocket_iterations,
    )


def run_classifier_comparison(
    settings: ClassifierSettings, say: Callable[[str], None]
) -> dict[str, Any]:
    """Every learner, mode, p and repetition; returns the report as a JSON-ready dict."""
    started = time.perf_counter()
    problem = make_problem(settings)
    cards = problem.cardinalities()
    test = RandomizedData.plain(problem.columns, problem.test, cards)
    original = RandomizedData.plain(problem.columns, problem.train, cards)
    y = test.column(problem.class_name)
    if settings.positive is None and len(problem.states[problem.class_name]) != 2:
        raise UserError(
            f"class {problem.class_name!r} has {len(problem.states[problem.class_name])} states: "
            "give --positive STATE for the perceptron (it separates one state from the rest)"
        )
    schemes = {
        x: problem.scheme(x) for x in settings.levels
    }  # a singular matrix fails here, before any work
    accuracy: dict[str, Any] = {
        name: {"original": None, **{m: [] for m in MODES}} for name in LEARNERS
    }
    seconds: dict[str, float] = dict.fromkeys(LEARNERS, 0.0)
    for learner in LEARNERS:
        model = _fit(learner, original, problem, settings, corrected=False)
        accuracy[learner]["original"] = _accuracy(model, learner, test, problem.class_name)
    for p, scheme in schemes.items():
        runs: dict[tuple[str, str], list[float]] = {}
        for r in range(settings.repeats):
            source = RandomSource.from_seed(f"compare-classifiers/{settings.seed}/{p!r}/{r}")
            codes = scheme.randomize(problem.train, problem.columns, source)
            views = {
                "randomized": RandomizedData.plain(problem.columns, codes, cards),
                "reconstructed": RandomizedData(problem.columns, codes, scheme),
            }
            for learner in LEARNERS:
                for mode, data in views.items():
                    tick = time.perf_counter()
                    model = _fit(
                        learner, data, problem, settings, corrected=mode == "reconstructed"
                    )
                    seconds[learner] += time.perf_counter() - tick
                    runs.setdefault((learner, mode), []).append(
                        _accuracy(model, learner, test, problem.class_name)
                    )
        for (learner, mode), values in runs.items():
            accuracy[learner][mode].append(
                {
                    "p": p,
                    "mean": float(np.mean(values)),
                    "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                    "runs": values,
                }
            )
        say(
            f"{settings.mechanism} = {p:g}: "
            + ", ".join(
                f"{learner} {runs[(learner, 'reconstructed')][0]:.3f}" for learner in LEARNERS
            )
        )
    majority = float(
        np.max(np.bincount(y, minlength=len(problem.states[problem.class_name]))) / len(y)
    )
    fits = len(settings.levels) * settings.repeats * len(MODES)
    secure = None
    if settings.secure:
        from ppbn.lab.classifier_secure import secure_classifier

        top = _most_private(settings)
        least = (
            min(min(x, 1.0 - x) for x in settings.levels)
            if settings.mechanism == "theta"
            else min(settings.levels)
        )
        policy = replace(
            LocalPolicy(),
            pram=PramPolicy(min_p=least),
            source=f"ppbn compare-classifiers (change >= {least:g})",
        )
        secure = secure_classifier(
            problem.columns,
            problem.states,
            problem.class_name,
            problem.train,
            problem.test,
            say,
            policy=policy,
            perturbation=(settings.mechanism, top),
        )
    return {
        "data": {
            "source": problem.source,
            "class": problem.class_name,
            "attributes": list(problem.attributes),
            "records": int(problem.train.shape[0]),
            "test_records": int(problem.test.shape[0]),
            "majority_rate": majority,
        },
        "mechanism": _mechanism_text(settings),
        "mechanism_parameter": settings.mechanism,
        "levels": list(settings.levels),
        "repeats": settings.repeats,
        "seed": settings.seed,
        "privacy": [{"level": x, **gamma_levels(problem, x)} for x in settings.levels],
        "accuracy": accuracy,
        "learning_seconds": seconds,
        "seconds_per_fit": {learner: seconds[learner] / fits for learner in LEARNERS},
        "secure": secure,
        "wall_s": time.perf_counter() - started,
        "perceptron": {
            "encoding": settings.encoding,
            "prior": settings.perceptron_estimator,
            "pocket_iterations": settings.pocket_iterations,
        },
    }


def _most_private(settings: ClassifierSettings) -> float:
    """The level that randomizes most: the largest p, or the theta closest to 0.5."""
    if settings.mechanism == "theta":
        return min(settings.levels, key=lambda x: abs(x - 0.5))
    return max(settings.levels)


def _mechanism_text(settings: ClassifierSettings) -> str:
    if settings.network is None:
        return "Table 6.2: M-category p per attribute; class not randomized"
    kind = (
        "Warner randomized response theta"
        if settings.mechanism == "theta"
        else "M-category randomization p"
    )
    scope = (
        "all attributes kept or flipped together (one group)"
        if settings.one_group
        else "per attribute"
    )
    return f"{kind}, {scope}; class {'randomized too' if settings.randomize_class else 'not randomized'}"


def parse_levels(text: str, flag: str) -> tuple[float, ...]:
    """A comma list of distinct randomization levels in (0, 1) (theta may be in [0, 1])."""
    try:
        levels = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UserError(f"{flag} must be a comma list of numbers, got {text!r}") from None
    low_ok = (lambda x: x >= 0.0) if flag == "--theta" else (lambda x: x > 0.0)
    high_ok = (lambda x: x <= 1.0) if flag == "--theta" else (lambda x: x < 1.0)
    if (
        not levels
        or any(not (low_ok(x) and high_ok(x)) for x in levels)
        or len(set(levels)) != len(levels)
    ):
        span = "[0, 1]" if flag == "--theta" else "(0, 1)"
        raise UserError(f"{flag} must list distinct randomization levels in {span}")
    return tuple(sorted(levels))


def parse_names(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    return tuple(n.strip() for n in text.split(",") if n.strip())


def classifier_settings(
    *,
    network: str | None,
    class_name: str | None,
    lenses: bool,
    records: int | None,
    test_records: int,
    p: str | None,
    theta: str | None,
    one_group: bool,
    secure: bool,
    repeats: int,
    pocket_iterations: int,
    seed: int,
    attributes: str | None,
    randomize_class: bool,
    max_depth: int | None,
    encoding: str | None,
    positive: str | None,
    perceptron_estimator: str,
) -> ClassifierSettings:
    """The settings ``ppbn compare-classifiers`` asks for (its flags' values), with the
    Lens data's defaults; one UserError naming the flags that cannot go together."""
    if (network is None) == (not lenses):
        raise UserError("give --network NAME (with --class) or --lenses")
    if network and not class_name:
        raise UserError("--network needs --class VARIABLE")
    records = records or (6000 if lenses else 20000)
    if records < 10 or test_records < 10:
        raise UserError("--records and --test-records must be at least 10")
    if theta and p:
        raise UserError("give --p (M-category) or --theta (randomized response), not both")
    if one_group and not theta:
        raise UserError("--one-group is Zhan's scheme: it needs --theta")
    if secure and lenses:
        raise UserError(
            "--secure runs the secure path on a network's records: give --network, not --lenses"
        )
    if repeats < 1:
        raise UserError("--repeats must be at least 1")
    if pocket_iterations < 1:
        raise UserError("--pocket-iterations must be at least 1")
    return ClassifierSettings(
        network=network,
        class_name=class_name,
        records=records,
        test_records=test_records,
        levels=parse_levels(theta, "--theta")
        if theta
        else parse_levels(p or "0.1,0.2,0.3,0.4", "--p"),
        repeats=repeats,
        seed=seed,
        attributes=parse_names(attributes),
        randomize_class=randomize_class,
        max_depth=max_depth,
        encoding=encoding or ("ordinal" if lenses else "onehot"),
        positive=positive,
        perceptron_estimator=perceptron_estimator,
        pocket_iterations=pocket_iterations,
        mechanism="theta" if theta else "p",
        one_group=one_group,
        secure=secure,
    )
