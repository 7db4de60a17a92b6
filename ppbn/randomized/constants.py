"""The randomized learners' names that the command line shows in its help, without numpy
or scipy: importing this module loads nothing beyond the standard library (``ppbn --help``
stays fast; ``ppbn.randomized.pram`` loads its estimators as a package).
``randomized.pram.oracle`` and ``randomized.perturb.reconstruction`` take them from here."""

from __future__ import annotations

COUNT_METHODS = ("moment", "em")  # the PRAM count estimators: moment (clipped at 0) or EM
# ``ppbn perturb reconstruct``'s estimators: Wu's for additive columns, PRAM's for categorical
ADDITIVE_METHODS = ("em", "binned-em", "richardson-lucy", "fourier")
CATEGORICAL_METHODS = ("moment", "em")

# the learners' own options, as ``fit_learner`` names them (each learner reads its own);
# ``seed`` is the perceptron's pocket seed
LEARNER_OPTIONS = (
    "estimator",
    "alpha",
    "max_depth",
    "min_count",
    "positive",
    "encoding",
    "cost",
    "iterations",
    "seed",
    "min_support",
    "min_confidence",
    "max_size",
)
