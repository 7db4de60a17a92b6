"""The terms lanes a job agrees on when it leaves them to the parties ("auto"):
``ppbn/protocols/learning/lanes_agreement.py``. Each offer comes from the party's own host,
the job takes the smaller, a small job sends no offer, and a peer's offer outside the
allowed range fails the job naming the message."""

from __future__ import annotations

import pytest
from timeouts import PEER_TIMEOUT_S

from ppbn.jobs.policy import LocalPolicy
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.constants import MAX_TERM_LANES
from ppbn.protocols.learning.lanes_agreement import (
    OFFER_TAG,
    agreed_lanes,
    first_round_terms,
    lanes_offer,
)
from ppbn.protocols.learning.term_lanes import MIN_LANE_TERMS
from ppbn.protocols.ledger import Ledger

ASIA = [2] * 8  # 8 binary variables: 168 terms in K2's first round, under two lanes' worth
ALARM_LIKE = [3] * 37  # 666 pairs of 3-state variables: 7,992 terms


def test_a_host_offers_the_cores_its_pool_leaves_within_its_policy():
    assert [lanes_offer(16, w, 16) for w in (16, 15, 14, 8, 1)] == [1, 1, 2, 8, 15]
    assert [lanes_offer(2, w, 16) for w in (1, 2, 8)] == [1, 1, 1]  # the 2-core host
    assert lanes_offer(16, 8, 3) == 3  # the policy's max_term_lanes
    assert lanes_offer(1024, 1, 1024) == MAX_TERM_LANES


def test_the_policy_offers_what_its_own_workers_leave(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert LocalPolicy().term_lanes_offer() == 1  # workers unset: the pool takes every core
    assert LocalPolicy(workers=8).term_lanes_offer() == 8
    assert LocalPolicy(workers=8, max_term_lanes=2).term_lanes_offer() == 2
    assert LocalPolicy(workers=8, executor="inline").term_lanes_offer() == 1
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert LocalPolicy(workers=1).term_lanes_offer() == 1


def test_the_first_rounds_terms_count_every_pairs_family():
    assert first_round_terms(ASIA) == 28 * (4 + 2)
    assert first_round_terms([2, 3]) == 6 + 2
    assert first_round_terms(ALARM_LIKE) == 666 * (9 + 3)


def _agree(offers: dict[str, int], cards: list[int]) -> tuple[dict[str, int], dict, dict]:
    """Both parties' agreement in two threads; each one's lanes, ledger and channel."""
    lanes: dict[str, int] = {}
    ledgers = {role: Ledger(role) for role in offers}
    pair = memory_channel_pair(timeout_s=PEER_TIMEOUT_S)
    channels = dict(zip(("alice", "bob"), pair, strict=True))

    def side(role: str):
        def run(channel):
            lanes[role] = agreed_lanes(channel, offers[role], cards, ledgers[role])

        return run

    run_two_party(side("alice"), side("bob"), pair=pair)
    return lanes, ledgers, channels


def test_the_job_takes_the_smaller_offer_and_records_the_peers():
    lanes, ledgers, channels = _agree({"alice": 8, "bob": 3}, ALARM_LIKE)
    assert lanes == {"alice": 3, "bob": 3}
    assert [(e.kind, e.value) for e in ledgers["alice"].entries] == [("term_lanes_offer", 3)]
    assert [(e.kind, e.value) for e in ledgers["bob"].entries] == [("term_lanes_offer", 8)]
    assert channels["alice"].stats.messages_sent == 1


def test_no_more_lanes_than_the_first_round_can_fill():
    cards = [3] * 9  # 36 pairs: 432 terms, one lane's worth and a bit
    assert first_round_terms(cards) // MIN_LANE_TERMS == 1
    lanes, _, channels = _agree({"alice": 8, "bob": 8}, cards)
    assert lanes == {"alice": 1, "bob": 1}
    assert channels["alice"].stats.messages_sent == 0  # no offer: nothing to agree on


def test_a_small_network_sends_no_offer():
    lanes, ledgers, channels = _agree({"alice": 8, "bob": 8}, ASIA)
    assert lanes == {"alice": 1, "bob": 1}
    assert channels["alice"].stats.messages_sent == channels["bob"].stats.messages_sent == 0
    assert not ledgers["alice"].entries


@pytest.mark.parametrize("peer_offer", [0, MAX_TERM_LANES + 1, 2**40])
def test_a_peer_offer_outside_the_range_fails_naming_the_message(peer_offer):
    """The hostile peer sends its own offer; the honest party checks it before using it."""
    errors: list[str] = []

    def honest(channel):
        try:
            agreed_lanes(channel, 4, ALARM_LIKE, Ledger("alice"))
        except ProtocolError as exc:
            errors.append(str(exc))

    def hostile(channel):
        channel.send_u64s(OFFER_TAG, [peer_offer])
        channel.recv_u64s(OFFER_TAG, 1)

    run_two_party(honest, hostile, pair=memory_channel_pair(timeout_s=PEER_TIMEOUT_S))
    assert len(errors) == 1
    assert OFFER_TAG in errors[0] and f"offered {peer_offer} terms lanes" in errors[0]


def test_an_offer_of_this_party_outside_the_range_is_a_bug():
    left, _ = memory_channel_pair(timeout_s=PEER_TIMEOUT_S)
    with pytest.raises(ValueError, match="offer must be in 1..64"):
        agreed_lanes(left, 0, ALARM_LIKE, Ledger("alice"))
