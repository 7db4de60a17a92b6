"""The plaintext learners' names and defaults, without the learners: importing this module
loads nothing beyond the standard library, so the command line can show them in its help
(``ppbn --help`` stays fast). ``bn.scores``, ``bn.k2`` and ``bn.hc`` take them from here
(and still offer them under their old names)."""

from __future__ import annotations

# The modes every learner offers (reference, secure Yang-Wright, PRAM): the jobs and the
# PRAM oracle validate their ``score`` parameter against this tuple.
SCORE_MODES = ("exact", "yw", "yw0", "bic", "bdeu")
DEFAULT_ESS = 10.0
DEFAULT_TAU = 1e-3  # K2 and hill-climbing tolerance in nats
DEFAULT_TABU = 100  # pgmpy's default tabu_length
