"""The PRAM (post-randomization) path of Ma and Sivakumar.

- ``operators``: randomization matrices, validation, blocks/schemes, AES-CTR randomizer.
- ``estimators``: moment estimator, its covariance (Theorems 1-2), EM, parameters.
- ``privacy``: gamma-amplification, probabilistic K-anonymity, H(X | X_tilde).
- ``experiment``: the dissertation's Experiment 1 (Sec. 5.6.1).
- ``oracle``: the PRAM score oracle for the K2 driver in ``ppbn.bn.k2``.
"""

from ppbn.protocols.pram.estimators import ParameterEstimate, PramEstimator
from ppbn.protocols.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
)
from ppbn.protocols.pram.privacy import (
    conditional_entropy,
    gamma_amplification,
    privacy_report,
    probabilistic_k_anonymity,
)

__all__ = [
    "Block",
    "ParameterEstimate",
    "PramEstimator",
    "RandomSource",
    "RandomizationError",
    "RandomizationScheme",
    "conditional_entropy",
    "gamma_amplification",
    "privacy_report",
    "probabilistic_k_anonymity",
]
