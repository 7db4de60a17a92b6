"""Learning from randomized data: mechanisms, distribution estimators and learners.

One place for "randomize a column with a known mechanism" and "estimate the original
distribution", used by every learner on randomized data (issue 15). The PRAM matrices and
their moment / EM estimators stay in ``ppbn.protocols.pram`` and are reused here, not copied.
"""
