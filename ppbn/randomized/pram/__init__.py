"""The PRAM (post-randomization) path of Ma and Sivakumar.

- ``operators``: randomization matrices, validation, blocks/schemes, AES-CTR randomizer.
- ``estimators``: moment estimator, its covariance (Theorems 1-2), EM, parameters.
- ``privacy``: gamma-amplification, probabilistic K-anonymity, H(X | X_tilde).
- ``experiment``: the dissertation's Experiment 1 (Sec. 5.6.1).
- ``oracle``: the PRAM score oracle for the K2 driver in ``ppbn.bn.k2``, and the
  learners of setup II (data miner) and setup I (each child's owner), in one process.
"""

from ppbn.randomized.pram.estimators import ParameterEstimate, PramEstimator
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
)
from ppbn.randomized.pram.oracle import (
    OwnerOracle,
    PramLearned,
    PramOracle,
    learn_pram,
    learn_pram_setup_one,
    setup_one_view,
)
from ppbn.randomized.pram.privacy import (
    conditional_entropy,
    gamma_amplification,
    privacy_report,
    probabilistic_k_anonymity,
)

__all__ = [
    "Block",
    "OwnerOracle",
    "PramLearned",
    "PramOracle",
    "ParameterEstimate",
    "PramEstimator",
    "RandomSource",
    "RandomizationError",
    "RandomizationScheme",
    "conditional_entropy",
    "gamma_amplification",
    "learn_pram",
    "learn_pram_setup_one",
    "privacy_report",
    "probabilistic_k_anonymity",
    "setup_one_view",
]
