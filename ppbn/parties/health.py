"""The standard gRPC health-checking service (``grpc.health.v1.Health``) on the daemon.

Load balancers and orchestrators probe it; it answers SERVING while the daemon runs and
NOT_SERVING once it shuts down. Like the daemon's own ``Health`` RPC it answers only
callers the daemon already admits (its own operator or a peer daemon): the TLS layer
checks the certificate chain, ``authorize`` the role.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ppbn.proto import party_pb2

PARTY_SERVICE = party_pb2.DESCRIPTOR.services_by_name["PartyService"].full_name
SERVING = health_pb2.HealthCheckResponse.SERVING


class DaemonHealth(health.HealthServicer):
    """``HealthServicer`` whose calls first pass the daemon's authorization check."""

    def __init__(self, authorize: Callable[[grpc.ServicerContext], None]) -> None:
        super().__init__(experimental_non_blocking=True)
        self._authorize = authorize
        self.set(health.OVERALL_HEALTH, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.set(PARTY_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)

    def Check(self, request, context):  # noqa: N802 - gRPC method name
        self._authorize(context)
        return super().Check(request, context)

    def Watch(self, request, context, send_response_callback=None):  # noqa: N802
        self._authorize(context)
        return super().Watch(request, context, send_response_callback)

    def serving(self) -> None:
        for service in (health.OVERALL_HEALTH, PARTY_SERVICE):
            self.set(service, SERVING)

    def shutting_down(self) -> None:
        self.enter_graceful_shutdown()

    def add_to(self, server: grpc.Server) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(self, server)
