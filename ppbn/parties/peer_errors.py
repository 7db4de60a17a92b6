"""Typed failures of talking to a peer daemon.

What the daemon does about a failure (the abort code it sends, whether it tries the peer
again, how loudly it logs) follows from the failure's type, raised where the condition is
known, never from the wording of its message: the messages stay free to change.
"""

from __future__ import annotations

from ppbn.errors import UserError
from ppbn.protocols.channel import PeerGone, ProtocolError


class PeerMismatch(ProtocolError):
    """The peer's Hello (at the miner: the two parties' Hellos) disagrees with what this
    daemon checks (protocol, roles, schema, records, options): a job ends with MISMATCH."""


class PeerSilent(PeerGone):
    """The peer sent nothing for the whole timeout while this side waited: a job ends with
    TIMEOUT, and can be run again once the peer answers."""


class PeerUnreachable(UserError):
    """Nothing answered at the peer's address: a daemon still starting there is worth
    another try."""


class PeerNotListening(PeerUnreachable):
    """The peer's host refused the connection: no daemon listens there (yet)."""
