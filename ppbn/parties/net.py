"""gRPC plumbing shared by the daemon, ``ppbn learn`` and ``ppbn simulate``.

One place for the channel options (message size limits on both ends, keepalive so a
vanished host is noticed), for dialling a daemon with TLS, and for turning gRPC's
transport errors into one line a person can act on.
"""

from __future__ import annotations

import grpc

from ppbn.errors import UserError
from ppbn.parties.peer_errors import PeerNotListening, PeerUnreachable
from ppbn.parties.tls import TlsFiles, channel_credentials
from ppbn.protocols.channel import DEFAULT_MAX_MESSAGE_BYTES

# Room for the frame's own fields around the largest payload a Channel accepts.
FRAME_OVERHEAD_BYTES = 64 * 1024
KEEPALIVE_MS = 10_000


def message_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    limit = min(max_message_bytes + FRAME_OVERHEAD_BYTES, 2**31 - 1)
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
    ]


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    return [
        *message_options(max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_MS // 2),
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_MS // 2),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.so_reuseport", 0),
    ]


def dial(
    address: str,
    tls: TlsFiles | None,
    expected_name: str,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> grpc.Channel:
    """Open a gRPC channel to a daemon; with TLS its certificate must come from a trusted CA
    and name the host of ``address``.

    Certificates name hosts, not roles, so gRPC checks the address as any TLS client
    would; which role answers there is checked by the caller (``verify_server_role``
    before it trusts the channel, or the server's refusal of our certificate).
    ``expected_name`` is the role the caller means to reach, for its error messages.
    """
    options: list[tuple[str, object]] = [
        *message_options(max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_MS // 2),
        # newer gRPC cores time an unanswered ping out by this (default 60 s), not only by
        # keepalive_timeout: without it a stopped peer is seen after a minute
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_MS // 2),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 2_000),
    ]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, channel_credentials(tls), options=options)


def describe_rpc_error(exc: grpc.RpcError, address: str, expected_name: str) -> str:
    """One line saying what went wrong talking to ``address``, TLS failures spelled out."""
    return str(rpc_failure(exc, address, expected_name))


def rpc_failure(exc: grpc.RpcError, address: str, expected_name: str) -> UserError:
    """The failure of a call to ``address`` as a typed error (``PeerUnreachable`` when
    nothing answered there) carrying ``describe_rpc_error``'s line. gRPC tells a transport
    failure's cause only in the text of its details, so this is where they are read."""
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else str(exc)) or ""
    lowered = details.lower()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, None):
        if "hostname verification" in lowered:
            return UserError(
                f"TLS with {address} failed: the certificate of what answers there (meant to be "
                f"{expected_name}) does not name that host ({_last_line(details)})"
            )
        if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
            return UserError(
                f"TLS with {address} failed: its certificate is not signed by a CA we trust "
                f"(meant to reach {expected_name}; `ppbn certs trust`?) ({_last_line(details)})"
            )
        if any(s in lowered for s in ("ssl", "tls", "handshake", "alert", "certificate")):
            return UserError(
                f"TLS with {address} failed: it rejected our certificate (our CA not in its "
                f"trusted.crt?) or it does not speak TLS ({_last_line(details)})"
            )
        if "connection refused" in lowered:
            return PeerNotListening(
                f"{address} refused the connection: is the daemon running and listening there?"
            )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return UserError(f"{address} did not answer in time ({_last_line(details)})")
        if "socket closed" in lowered or "connection reset" in lowered or "eof" in lowered:
            return UserError(
                f"{address} closed the connection during setup: TLS was refused (wrong CA or "
                f"certificate?) or the daemon runs without TLS ({_last_line(details)})"
            )
        return PeerUnreachable(f"cannot reach {address}: {_last_line(details)}")
    name = code.name if code is not None else "ERROR"
    return UserError(f"{address} answered {name}: {details}")


def _last_line(details: str) -> str:
    parts = [p.strip() for p in details.replace("\n", " ").split(";") if p.strip()]
    return parts[-1] if parts else details
