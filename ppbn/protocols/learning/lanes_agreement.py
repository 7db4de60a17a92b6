"""How many terms lanes a job runs when it leaves the number to the parties (the job
parameter ``term_lanes`` = ``"auto"``, the default): each party offers what its own host
gives, and the job takes the smaller offer (docs/decisions/term-lanes.md).

Both parties must split a batch alike (``term_lanes.py``), so the number is agreed, not
chosen by each daemon alone; and each lane is a process the daemon starts, so each offer
comes from that daemon's own policy (its workers and ``max_term_lanes``), never from the
peer. An offer is one small integer about the host, not about the data: the peer's is
checked (1 to ``MAX_TERM_LANES``) and recorded in the ledger.

A job whose first round of terms is too small to fill two lanes (public: the schema's
domain sizes are) starts no lane and sends no offer: a small network runs as it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.constants import MAX_TERM_LANES
from ppbn.protocols.learning.term_lanes import lanes_for
from ppbn.protocols.ledger import Ledger

OFFER_TAG = "learn.term_lanes_offer"


def lanes_offer(cores: int, workers: int, max_lanes: int) -> int:
    """What a party offers: the cores its pool of ``workers`` leaves on a host of ``cores``,
    at most its policy's ``max_lanes``; one where fewer than two are left. The lanes and
    the pool run at once (the next families' table phase beside the terms), and on the
    16-core host lanes in the pool's cores made the job slower, lanes in cores of their
    own twice as fast (docs/decisions/term-lanes.md)."""
    spare = cores - workers
    return max(1, min(spare, max_lanes, MAX_TERM_LANES)) if spare >= 2 else 1


def first_round_terms(cardinalities: Sequence[int]) -> int:
    """About how many terms K2's first round scores: for every pair of variables, the
    family of one given the other (its cells and its rows), the smaller as the parent.
    Hill climbing's first step scores both directions, so this bounds it from below."""
    return sum(a * b + min(a, b) for a, b in combinations(cardinalities, 2))


def agreed_lanes(channel: Channel, offer: int, cardinalities: Sequence[int], ledger: Ledger) -> int:
    """The job's terms lanes: 1 where the first round's terms would not fill two lanes
    (``lanes_for``; no message), else the smaller of this party's ``offer`` and the peer's,
    exchanged now, and no more than that round can use."""
    terms = first_round_terms(cardinalities)
    if lanes_for(terms, MAX_TERM_LANES) < 2:
        return 1
    if not 1 <= offer <= MAX_TERM_LANES:
        raise ValueError(f"a terms lanes offer must be in 1..{MAX_TERM_LANES}, not {offer}")
    channel.send_u64s(OFFER_TAG, [offer])
    (peer,) = channel.recv_u64s(OFFER_TAG, 1)
    if not 1 <= peer <= MAX_TERM_LANES:
        raise ProtocolError(
            f"message {OFFER_TAG!r}: the peer offered {peer} terms lanes, outside 1..{MAX_TERM_LANES}"
        )
    ledger.record("term_lanes_offer", int(peer), "peer")
    return lanes_for(terms, min(offer, int(peer)))
