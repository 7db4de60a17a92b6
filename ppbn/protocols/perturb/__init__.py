"""Learning from randomized data: mechanisms, distribution estimators and learners.

One place for "randomize a column with a known mechanism" and "estimate the original
distribution", used by every learner on randomized data (issue 15). The PRAM matrices and
their moment / EM estimators stay in ``ppbn.protocols.pram`` and are reused here, not copied.
"""

# Learners on randomized data (Zhan; Ma 2006, Ch. 6-7), each a local library call.
from ppbn.protocols.perturb.apriori import mine as mine
from ppbn.protocols.perturb.estimated import RandomizedData as RandomizedData
from ppbn.protocols.perturb.id3 import fit_id3 as fit_id3
from ppbn.protocols.perturb.naive_bayes import fit_naive_bayes as fit_naive_bayes
from ppbn.protocols.perturb.perceptron import fit_perceptron as fit_perceptron
from ppbn.protocols.perturb.response import scheme_for as scheme_for
