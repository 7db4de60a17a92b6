"""GrpcChannel over a real gRPC Exchange stream on loopback: typed messages, counters, failures."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from ppbn.parties.grpc_channel import GrpcChannel, abort_text
from ppbn.parties.net import dial, server_options
from ppbn.proto import party_pb2, party_pb2_grpc
from ppbn.protocols.channel import PeerGone, ProtocolError

Frame = party_pb2.Frame
LIMIT = 64 * 1024


class _EchoServer(party_pb2_grpc.PartyServiceServicer):
    """Serves Exchange by handing the server end of each stream to the test."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.ends: list[GrpcChannel] = []
        self.arrived = threading.Event()

    def Exchange(self, request_iterator, context) -> Iterator[Frame]:  # noqa: N802
        opening = next(request_iterator)
        end = GrpcChannel(
            opening.job_id, "alice", timeout_s=self.timeout_s, max_message_bytes=LIMIT
        )
        context.add_callback(lambda: end.mark_dead("connection to peer alice closed"))
        end.queue_control(Frame(kind=Frame.ACCEPT))
        threading.Thread(target=end.pump, args=(request_iterator,), daemon=True).start()
        self.ends.append(end)
        self.arrived.set()
        yield from end.outgoing_frames()


@pytest.fixture
def pair():
    """(alice_end, bob_end) of one Exchange stream, 2 s timeout, 64 KiB messages."""
    service = _EchoServer(timeout_s=2.0)
    server = grpc.server(ThreadPoolExecutor(max_workers=4), options=server_options(LIMIT))
    party_pb2_grpc.add_PartyServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    connection = dial(f"127.0.0.1:{port}", None, "bob", LIMIT)
    alice = GrpcChannel("job1", "bob", timeout_s=2.0, max_message_bytes=LIMIT)
    alice.queue_control(Frame(kind=Frame.OPEN))
    call = party_pb2_grpc.PartyServiceStub(connection).Exchange(alice.outgoing_frames())
    threading.Thread(target=alice.pump, args=(call, Frame.ACCEPT), daemon=True).start()
    assert alice.next_control(5.0).kind == Frame.ACCEPT
    assert service.arrived.wait(5.0)
    yield alice, service.ends[0]
    alice.close()
    call.cancel()
    connection.close()
    server.stop(0)


def test_typed_messages_round_trip_with_counters(pair):
    alice, bob = pair
    table = np.arange(12, dtype=np.uint64).reshape(3, 4)
    alice.send("hello", b"from alice")
    alice.send_array("table", table)
    alice.send_ints("ciphertexts", [3, 2**100, 0], width_bytes=16)
    assert bob.recv("hello") == b"from alice"
    assert np.array_equal(bob.recv_array("table", np.uint64, (3, 4)), table)
    assert bob.recv_ints("ciphertexts", 3, 16) == [3, 2**100, 0]
    bob.send_u64s("sums", (1, 2**64 - 1))
    assert alice.recv_u64s("sums", 2) == (1, 2**64 - 1)
    sent = len(b"from alice") + len("hello") + table.nbytes + len("table") + 48 + len("ciphertexts")
    assert alice.stats.bytes_sent == bob.stats.bytes_received == sent
    assert alice.stats.messages_sent == 3 and bob.stats.messages_received == 3
    assert alice.stats.bytes_received == bob.stats.bytes_sent == 16 + len("sums")
    assert alice.stats.rounds == 1 and bob.stats.rounds == 1


def test_wrong_tag_is_a_protocol_error(pair):
    alice, bob = pair
    alice.send("oops", b"x")
    with pytest.raises(ProtocolError, match="expected message 'hello' from peer, got 'oops'"):
        bob.recv("hello")


def test_wrong_shape_and_oversize_are_refused(pair):
    alice, bob = pair
    alice.send_array("table", np.zeros(5, dtype=np.uint64))
    with pytest.raises(ProtocolError, match="over the limit 32"):
        bob.recv_array("table", np.uint64, (4,))
    with pytest.raises(ProtocolError, match="over the limit"):
        alice.send("big", bytes(LIMIT + 1))


def test_frame_over_grpc_limit_breaks_the_stream_with_a_clear_reason(pair):
    alice, bob = pair
    alice.max_message_bytes = 4 * LIMIT  # a misbehaving sender ignoring the agreed limit
    alice.send("big", bytes(2 * LIMIT))
    with pytest.raises(PeerGone, match="exceeded the size limit"):
        alice.recv("reply")
    with pytest.raises(
        PeerGone, match="peer alice closed|connection to peer alice|peer alice ended the stream"
    ):
        bob.recv("big")


def test_silent_peer_times_out(pair):
    _alice, bob = pair
    start = time.monotonic()
    with pytest.raises(PeerGone, match="sent nothing for 2 s"):
        bob.recv("anything")
    assert time.monotonic() - start < 4.0


def test_abort_reaches_the_peer_as_its_fixed_text_only(pair):
    alice, bob = pair
    alice.abort(party_pb2.AbortCode.POLICY, "p")
    expected = abort_text(party_pb2.AbortCode.POLICY, "p")
    with pytest.raises(PeerGone, match=re.escape(f"aborted the job: {expected}")):
        bob.recv("next")
    assert bob.peer_abort_code == party_pb2.AbortCode.POLICY
    with pytest.raises(PeerGone):
        alice.send("after", b"")


def test_bytes_are_counted_per_section_and_message_kind():
    from ppbn.protocols.channel import ChannelStats, memory_channel_pair, run_two_party

    alice, bob = memory_channel_pair(timeout_s=5)

    def a(ch):
        ch.send("x.one", b"12345")
        ch.stats.section = "later"
        ch.send("x.two", b"1")
        ch.recv("y")

    def b(ch):
        ch.recv("x.one")
        ch.recv("x.two")
        ch.send("y", b"123")

    run_two_party(a, b, pair=(alice, bob))
    sent = alice.stats.breakdown()
    assert sent["setup"]["x.one"]["bytes_sent"] == 5 + len("x.one")
    assert (
        sent["later"]["x.two"]["messages_sent"] == 1 and sent["later"]["y"]["bytes_received"] == 4
    )
    total = ChannelStats()
    total.add(bob.stats, mirrored=True)  # bob's view, turned into alice's
    assert total.as_dict() == alice.stats.as_dict() | {"rounds": total.rounds}
    assert total.by_kind[("setup", "x.one")][0] == alice.stats.by_kind[("setup", "x.one")][0]


# -- lanes: two conversations over one stream, in two threads per side -------------------
def _conversation(channel, prefix: str, rounds: int, first: bool) -> list[bytes]:
    """A ping-pong of ``rounds`` messages each way; returns what this side received."""
    got = []
    for i in range(rounds):
        if first:
            channel.send(f"{prefix}.ping", f"{prefix}{i}".encode() * (1 + i % 7))
            got.append(channel.recv(f"{prefix}.pong"))
        else:
            got.append(channel.recv(f"{prefix}.ping"))
            channel.send(f"{prefix}.pong", got[-1][::-1])
    return got


def _side(channel, first: bool) -> tuple[list[bytes], list[bytes]]:
    """The main conversation here, a lane's in a second thread, then the lane closed."""
    lane = channel.open_lane()
    found: dict[str, list[bytes]] = {}
    worker = threading.Thread(
        target=lambda: found.setdefault("lane", _conversation(lane, "t", 40, first))
    )
    worker.start()
    main = _conversation(channel, "m", 60, not first)
    worker.join(10)
    channel.close_lane(lane)
    channel.send("after", b"main again")
    assert channel.recv("after") == b"main again"
    return main, found["lane"]


@pytest.mark.parametrize("transport", ["grpc", "memory"])
def test_lanes_carry_two_conversations_at_once(transport, request):
    from ppbn.protocols.channel import run_two_party

    if transport == "grpc":
        alice, bob = request.getfixturevalue("pair")
        out: dict[str, object] = {}
        threads = [
            threading.Thread(target=lambda r=r, c=c, f=f: out.setdefault(r, _side(c, f)))
            for r, c, f in (("alice", alice, True), ("bob", bob, False))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        a, b = out["alice"], out["bob"]
        stats = alice.stats
    else:
        from ppbn.protocols.channel import memory_channel_pair

        ends = memory_channel_pair(timeout_s=5)
        a, b = run_two_party(lambda ch: _side(ch, True), lambda ch: _side(ch, False), pair=ends)
        stats = ends[0].stats
    assert b[1] == [
        f"t{i}".encode() * (1 + i % 7) for i in range(40)
    ]  # bob's lane received alice's pings
    assert a[1] == [m[::-1] for m in b[1]]
    assert a[0] == [f"m{i}".encode() * (1 + i % 7) for i in range(60)]
    assert stats.messages_sent == 40 + 60 + 1  # the lane's counters joined the channel's
    assert ("setup", "t.ping") in stats.by_kind


def test_a_frame_for_no_open_lane_and_leftovers_are_protocol_errors(pair):
    alice, bob = pair
    lane_a, lane_b = alice.open_lane(), bob.open_lane()
    lane_a.send("t.one", b"1")
    lane_a.send("t.two", b"2")
    assert lane_b.recv("t.one") == b"1"
    alice.send("hello", b"main")
    assert bob.recv("hello") == b"main"  # reads past the lane's waiting frame
    with pytest.raises(ProtocolError, match="1 more messages on lane1 than the protocol has"):
        bob.close_lane(lane_b)
    lane7 = [alice.open_lane() for _ in range(6)][-1]  # alice's lanes 2..7, bob's still 1
    lane7.send("tables.masked", b"x")  # too far ahead: bob takes early frames for 2 and 3 only
    with pytest.raises(ProtocolError, match="'lane7|tables.masked': no such lane is open"):
        bob.recv("hello")


def test_a_frame_for_the_next_lane_waits_until_it_opens_and_a_closed_lane_refuses(pair):
    """The peer's thread on a new lane may send before this party opens its end (the split
    ln terms do, ``scorer.SecureScorer.terms``): the frame waits; a closed lane's does not."""
    alice, bob = pair
    lane_a = alice.open_lane()
    lane_a.send("t.early", b"1")
    alice.send("hello", b"main")
    assert bob.recv("hello") == b"main"  # read past lane1's frame before bob opened lane1
    lane_b = bob.open_lane()
    assert lane_b.recv("t.early") == b"1"
    bob.close_lane(lane_b)
    alice.close_lane(lane_a)
    lane_a.send("t.late", b"x")  # a frame on a lane both have closed
    with pytest.raises(ProtocolError, match="'lane1|t.late': no such lane is open"):
        bob.recv("hello")


def test_expected_lanes_may_receive_before_they_open_and_no_further(pair):
    """A job's terms lanes open together (``expect_lanes``): the peer's frames for any of
    them wait; one past them and the usual early lanes is still a protocol error."""
    alice, bob = pair
    bob.expect_lanes(4)
    lanes = [alice.open_lane() for _ in range(7)]
    lanes[5].send("t.early", b"1")  # lanes 1..6 may come early: 4 expected + 2
    lanes[6].send("t.early", b"2")
    alice.send("hello", b"main")
    with pytest.raises(ProtocolError, match="'lane7|t.early': no such lane is open"):
        bob.recv("hello")


def test_frames_waiting_for_a_lane_are_bounded(monkeypatch, pair):
    from ppbn.protocols import channel as channel_module

    monkeypatch.setattr(channel_module, "LANE_BACKLOG_BYTES", 1000)
    alice, bob = pair
    lane_a, _lane_b = alice.open_lane(), bob.open_lane()
    for _ in range(3):
        lane_a.send("flood", bytes(400))
    alice.send("hello", b"main")
    with pytest.raises(ProtocolError, match="over 1000 bytes wait for other lanes"):
        bob.recv("hello")
