"""A job's figures: this daemon's own, the peer's traffic as mirrored here, and the
end-of-job exchange, which carries only figures that do not depend on the data
(``EXCHANGED_STATS``, SECURITY.md) and confirms the job's outcome to every peer.
"""

from __future__ import annotations

import json
from typing import Any

from ppbn.jobs.base import ChannelGroup
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.handshake import PROTOCOL_VERSION
from ppbn.parties.job import Job
from ppbn.protocols.channel import ChannelStats, ProtocolError

STATS_MAX_BYTES = 4096
# What crosses the wire after a job: nothing that depends on the data (SECURITY.md).
EXCHANGED_STATS = ("protocol_version", "role", "kind")


def own_stats(job: Job, role: str, wall_s: float) -> dict[str, Any]:
    """This daemon's own figures; they stay here (only EXCHANGED_STATS cross the wire)."""
    ctx = job.context
    return {
        "role": role,
        "job_id": job.job_id,
        "kind": job.kind.name,
        "wall_s": round(wall_s, 4),
        "phases": {name: round(seconds, 4) for name, seconds in ctx.phases.items()},
        **job.channel.stats.as_dict(),
        # local only, like every figure here: where this side's bytes went
        "bytes_by_phase_and_kind": job.channel.stats.breakdown(),
        "paillier_encryptions": ctx.counters.encryptions,
        "public_key_operations": ctx.counters.public_key_operations,
        **dict(ctx.tallies),
        "counters": {**ctx.counters.as_dict(), **dict(ctx.tallies)},
    }


def exchange_stats(channel: GrpcChannel | ChannelGroup, stats: dict[str, Any]) -> None:
    """End-of-job handshake with every peer, and the confirmation that decides the job's
    outcome: a side sends it only once its outputs are written (in its temporary folder)
    and renames them into place only once every peer's has arrived; a side that cannot
    write sends ABORT instead, so every party fails the job. The miner, with two peers,
    receives both parties' confirmations before it sends its own: a party that fails makes
    the miner fail, and so the other party too.

    Only the fields of ``EXCHANGED_STATS`` travel (none depends on the data); anything else
    received is a protocol error, so a peer cannot slip data-dependent figures into it."""
    mine = {"protocol_version": PROTOCOL_VERSION, "role": stats["role"], "kind": stats["kind"]}
    payload = json.dumps(mine, sort_keys=True).encode()
    if isinstance(channel, ChannelGroup):
        for each in channel.channels.values():
            parse_stats(each.recv("job.done", max_bytes=STATS_MAX_BYTES), stats["kind"])
        for each in channel.channels.values():
            each.send("job.done", payload)
        return
    channel.send("job.done", payload)
    parse_stats(channel.recv("job.done", max_bytes=STATS_MAX_BYTES), stats["kind"])


def parse_stats(payload: bytes, kind: str) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise ProtocolError("peer sent end-of-job statistics that are not JSON") from None
    if not isinstance(value, dict) or tuple(sorted(value)) != tuple(sorted(EXCHANGED_STATS)):
        raise ProtocolError(
            f"peer sent end-of-job statistics with fields other than {', '.join(EXCHANGED_STATS)}"
        )
    if value["protocol_version"] != PROTOCOL_VERSION or value["kind"] != kind:
        raise ProtocolError(
            "peer's end-of-job statistics name another protocol version or job kind"
        )
    return value


def mirrored_peer_stats(job: Job) -> dict[str, Any]:
    """The peer's traffic as this daemon saw it: what we received it sent, and the reverse.
    The peer's own figures (time, operations) never cross the wire."""
    channels = job.channels
    total = ChannelStats()
    for each in channels.values():
        total.add(each.stats, mirrored=True)
    return {"role": "+".join(channels), "kind": job.kind.name, "mirrored": True, **total.as_dict()}
