"""Security levels of a job, and the error an honest party raises when it catches a cheater.

Three levels, weakest first (docs/decisions/threat-model.md):

- ``semi-honest``: the Yang-Wright protocols as the paper proves them; each party follows
  the protocol and only tries to learn from what it sees.
- ``covert``: a peer that deviates is caught with probability at least 1/2 per attempt
  (covert security, Aumann and Lindell 2007), before it learns anything; phases that have
  malicious-level defences run them at this level too.
- ``malicious``: malicious security with abort, statistical error at most 2^-40: a peer
  that deviates from the protocol learns nothing beyond the agreed outputs, and every
  deviation that could reveal more is either made useless (the returned ciphertexts are
  uniformly random whatever the peer sent) or caught before the cheater learns anything.
  Only job kinds whose every phase has its defences run at this level.

Each daemon's policy sets the lowest level it runs (``min_security``); a job asks for a
level and both daemons check it against their own policies.
"""

from __future__ import annotations

from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.constants import SECURITY_LEVELS

STATISTICAL_ERROR_BITS = 40  # a cheater passes a check with probability at most 2^-40


def level_rank(level: str) -> int:
    """0 for the weakest level; a larger rank is stronger."""
    return SECURITY_LEVELS.index(check_level(level))


def check_level(level: object) -> str:
    """``level`` if it names a known level, else ValueError naming the choices."""
    if level not in SECURITY_LEVELS:
        raise ValueError(
            f"security level must be one of {', '.join(SECURITY_LEVELS)}, got {level!r}"
        )
    return str(level)


class CheatingDetected(ProtocolError):
    """The peer's messages failed a check of the ``malicious`` level.

    ``check`` names the check (``tables.key``, ``tables.weights``, ``ot.consistency``, ...),
    ``evidence`` holds what the honest party recorded for its audit log: public values and
    digests only, never a share, key or record.
    """

    def __init__(self, check: str, detail: str, evidence: dict[str, str | int] | None = None):
        super().__init__(f"cheating caught by the {check} check: {detail}")
        self.check = check
        self.detail = detail
        self.evidence = dict(evidence or {})
