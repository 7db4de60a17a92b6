"""A plaintext stand-in for a party's daemon on a loopback port, for the tests of what the
operator's client makes of its answers: it serves Health as ``role``, and a subclass
answers the job calls."""

from __future__ import annotations

from concurrent import futures

import grpc

from ppbn.proto import party_pb2, party_pb2_grpc


class FakeDaemon(party_pb2_grpc.PartyServiceServicer):
    """Started on construction; ``server.stop(None)`` ends it."""

    def __init__(self, role: str = "alice") -> None:
        self.role = role
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        party_pb2_grpc.add_PartyServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def Health(self, request, context):  # noqa: N802 - gRPC's method name
        return party_pb2.HealthReply(
            status=party_pb2.HealthReply.SERVING, role=self.role, peer_state="ok"
        )
