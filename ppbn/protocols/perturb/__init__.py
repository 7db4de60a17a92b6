"""Learning from randomized data: mechanisms, distribution estimators and learners.

One place for "randomize a column with a known mechanism" and "estimate the original
distribution", used by every learner on randomized data (issue 15). The PRAM matrices and
their moment / EM estimators stay in ``ppbn.protocols.pram`` and are reused here, not copied.

- ``noise``: additive noise distributions (Wu): cdf, characteristic function, sampling.
- ``mechanisms``: a column's mechanism (PRAM matrix, Warner, Zhan groups, additive noise)
  and the mechanism file.
- ``categorical``: ``reconstruct`` a categorical column or a few (moment, EM).
- ``additive``: Wu's EM, binned EM, Richardson-Lucy, Fourier estimate, one-step protocol.
- ``mgas_example``: the dissertation's two-triangle MGAS example (Sec. 2.5).
"""

from ppbn.protocols.perturb.categorical import CategoricalEstimate, reconstruct
from ppbn.protocols.perturb.mechanisms import Mechanisms, parse_mechanisms

__all__ = ["CategoricalEstimate", "Mechanisms", "parse_mechanisms", "reconstruct"]
