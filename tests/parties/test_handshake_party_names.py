"""A daemon's log lines name its peer by the display name its own schema gives it ("peer
bob (City Clinic)"); nothing of it is sent: the Hello carries no name."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from ppbn.parties.handshake import PeerLinks
from ppbn.proto import party_pb2


def links(names, log) -> tuple[PeerLinks, list[party_pb2.Hello]]:
    """Alice's links to a bob that accepts every Hello; the Hellos alice sent."""
    hello = party_pb2.Hello(role="alice", protocol_version=1, schema_fingerprint="f" * 64)
    peers = PeerLinks(hello, {"bob": "127.0.0.1:1"}, None, 5.0, 1 << 20, log, names)
    reply = party_pb2.HandshakeReply(
        accepted=True,
        hello=party_pb2.Hello(role="bob", protocol_version=1, schema_fingerprint="f" * 64),
    )
    sent = []
    peers.stubs["bob"] = SimpleNamespace(Handshake=lambda h, timeout: sent.append(h) or reply)
    return peers, sent


def test_the_handshake_line_names_the_peer_by_its_local_name(caplog):
    log = logging.getLogger("ppbn.test.alice")
    peers, sent = links({"bob": "City Clinic"}, log)
    assert peers.named("bob") == "bob (City Clinic)" and peers.named("miner") == "miner"
    with caplog.at_level(logging.INFO, logger=log.name):
        peers.record(peers.handshake("bob"))
    assert "handshake: peer bob (City Clinic) at 127.0.0.1:1 agrees on schema" in caplog.text
    assert "City Clinic" not in str(sent[0])


def test_without_names_the_line_is_as_before(caplog):
    log = logging.getLogger("ppbn.test.alice2")
    peers, _ = links(None, log)
    with caplog.at_level(logging.INFO, logger=log.name):
        peers.record(peers.handshake("bob"))
    assert "handshake: peer bob at 127.0.0.1:1 agrees on schema" in caplog.text
