"""Learning from randomized data: mechanisms, distribution estimators and learners.

One place for "randomize a column with a known mechanism" and "estimate the original
distribution", used by every learner on randomized data. The PRAM matrices and
their moment / EM estimators stay in ``ppbn.randomized.pram`` and are reused here, not copied.

- ``noise``: additive noise distributions (Wu): cdf, characteristic function, sampling.
- ``mechanisms``: a column's mechanism (PRAM matrix, Warner, Zhan groups, additive noise)
  and the mechanism file.
- ``categorical``: ``reconstruct`` a categorical column or a few (moment, EM).
- ``additive``: Wu's EM, binned EM, Richardson-Lucy, Fourier estimate, one-step protocol.
- ``mgas_example``: the dissertation's two-triangle MGAS example (Sec. 2.5).
- Learners on randomized data (Zhan; Ma 2006, Ch. 6-7), each a local library call:
  ``naive_bayes``, ``id3``, ``perceptron``, ``apriori``, over ``estimated`` counts of
  ``response`` mechanisms.
"""

from ppbn.randomized.perturb.apriori import mine
from ppbn.randomized.perturb.categorical import CategoricalEstimate, reconstruct
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.id3 import fit_id3
from ppbn.randomized.perturb.mechanisms import Mechanisms, parse_mechanisms
from ppbn.randomized.perturb.naive_bayes import fit_naive_bayes
from ppbn.randomized.perturb.perceptron import fit_perceptron
from ppbn.randomized.perturb.response import scheme_for

__all__ = [
    "CategoricalEstimate",
    "Mechanisms",
    "RandomizedData",
    "fit_id3",
    "fit_naive_bayes",
    "fit_perceptron",
    "mine",
    "parse_mechanisms",
    "reconstruct",
    "scheme_for",
]
