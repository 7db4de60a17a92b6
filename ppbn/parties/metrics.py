"""Prometheus metrics of one daemon, served over plain HTTP on localhost (``--metrics-port``).

Each daemon has its own ``CollectorRegistry`` (two daemons in one test process must not
share the global one). Figures are collected at scrape time: the running job's bytes and
phase are read from its live channel and context, so a scrape during a long job shows
where it is. Finished jobs' figures are added to the totals once, under the same lock the
scrape takes, so counters never jump back or count a job twice.

Labels come only from bounded sets (job kinds, states, abort codes, phase names, peer
roles): never from a peer's text, so a hostile peer cannot grow the label space. The one
job id shown (``ppbn_job_info``) is the running job's, checked by the daemon.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from ppbn.errors import UserError


class DaemonMetrics(Collector):
    """The daemon's figures; the daemon calls the ``job_*`` and state methods at its events."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.registry = CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._started_at = time.time()
        self._serving = False
        self._job: Any = None  # the running job (duck-typed: job_id, kind.name, channel, context)
        self._phase = ""
        self._phase_since = 0.0
        self._started: Counter[str] = Counter()  # kind
        self._finished: Counter[tuple[str, str]] = Counter()  # (kind, state)
        self._refused: Counter[str] = Counter()  # abort code name
        self._bytes = {"sent": 0, "received": 0}
        self._messages = {"sent": 0, "received": 0}
        self._phase_seconds: Counter[tuple[str, str]] = Counter()  # (kind, phase)
        self._connections: dict[str, bool] = {}
        self._checkpoint_at: float | None = None
        self._server: Any = None
        self.registry.register(self)

    # -- events ----------------------------------------------------------------------
    def set_serving(self, serving: bool) -> None:
        self._serving = serving

    def job_started(self, job: Any) -> None:
        with self._lock:
            self._job, self._phase, self._phase_since = job, "", time.monotonic()
            self._started[job.kind.name] += 1

    def phase_entered(self, job: Any, phase: str) -> None:
        with self._lock:
            if job is self._job:
                self._phase, self._phase_since = phase, time.monotonic()

    def job_finished(self, job: Any, state: str) -> None:
        """Add a finished job's final figures to the totals (once)."""
        with self._lock:
            kind = job.kind.name
            self._finished[(kind, state)] += 1
            stats = job.channel.stats
            self._bytes["sent"] += stats.bytes_sent
            self._bytes["received"] += stats.bytes_received
            self._messages["sent"] += stats.messages_sent
            self._messages["received"] += stats.messages_received
            for phase, seconds in dict(job.context.phases).items():
                self._phase_seconds[(kind, phase)] += seconds
            if job is self._job:
                self._job, self._phase = None, ""

    def job_refused(self, code: str) -> None:
        with self._lock:
            self._refused[code] += 1

    def peer_connection(self, peer: str, ready: bool) -> None:
        self._connections[peer] = ready

    def checkpoint_written(self, at: float | None = None) -> None:
        """For the resume path: a checkpoint was written now (or at ``at``, epoch seconds)."""
        self._checkpoint_at = time.time() if at is None else at

    # -- scrape ----------------------------------------------------------------------
    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._collect_locked()

    def _collect_locked(self) -> Iterator[Metric]:
        job = self._job
        role = [self.role]
        up = GaugeMetricFamily(
            "ppbn_serving", "1 while the daemon serves, 0 while it shuts down", labels=["role"]
        )
        up.add_metric(role, 1.0 if self._serving else 0.0)
        yield up
        uptime = GaugeMetricFamily("ppbn_uptime_seconds", "seconds since the daemon started")
        uptime.add_metric([], time.time() - self._started_at)
        yield uptime

        running = GaugeMetricFamily(
            "ppbn_jobs_running", "jobs running now (0 or 1)", labels=["kind"]
        )
        if job is not None:
            running.add_metric([job.kind.name], 1.0)
        yield running
        started = CounterMetricFamily("ppbn_jobs_started", "jobs started", labels=["kind"])
        for kind, count in sorted(self._started.items()):
            started.add_metric([kind], count)
        yield started
        finished = CounterMetricFamily(
            "ppbn_jobs_finished", "jobs ended, by final state", labels=["kind", "state"]
        )
        for (kind, state), count in sorted(self._finished.items()):
            finished.add_metric([kind, state], count)
        yield finished
        refused = CounterMetricFamily(
            "ppbn_jobs_refused",
            "job requests refused here or by the peer, by abort code",
            labels=["reason"],
        )
        for code, count in sorted(self._refused.items()):
            refused.add_metric([code], count)
        yield refused

        live = job.channel.stats if job is not None else None
        for direction in ("sent", "received"):
            total = CounterMetricFamily(
                f"ppbn_bytes_{direction}",
                f"job traffic bytes {direction}, all jobs including the running one",
            )
            total.add_metric(
                [], self._bytes[direction] + (getattr(live, f"bytes_{direction}") if live else 0)
            )
            yield total
            messages = CounterMetricFamily(
                f"ppbn_messages_{direction}", f"job messages {direction}, all jobs"
            )
            messages.add_metric(
                [],
                self._messages[direction] + (getattr(live, f"messages_{direction}") if live else 0),
            )
            yield messages
            current = GaugeMetricFamily(
                f"ppbn_job_bytes_{direction}",
                f"bytes {direction} by the running job (0 when none runs)",
            )
            current.add_metric([], getattr(live, f"bytes_{direction}") if live else 0)
            yield current

        info = GaugeMetricFamily(
            "ppbn_job_info",
            "the running job and its current phase",
            labels=["job", "kind", "phase"],
        )
        elapsed = GaugeMetricFamily(
            "ppbn_job_phase_elapsed_seconds", "seconds in the running job's current phase"
        )
        phase_totals = Counter(self._phase_seconds)
        if job is not None:
            info.add_metric([job.job_id, job.kind.name, self._phase], 1.0)
            elapsed.add_metric([], time.monotonic() - self._phase_since)
            for phase, seconds in dict(job.context.phases).items():
                phase_totals[(job.kind.name, phase)] += seconds
        yield info
        yield elapsed
        durations = CounterMetricFamily(
            "ppbn_phase_seconds",
            "seconds spent in each completed phase, all jobs",
            labels=["kind", "phase"],
        )
        for (kind, phase), seconds in sorted(phase_totals.items()):
            durations.add_metric([kind, phase], seconds)
        yield durations

        connections = GaugeMetricFamily(
            "ppbn_peer_connections_open",
            "1 while the gRPC connection to a peer daemon is ready",
            labels=["peer"],
        )
        for peer, ready in sorted(self._connections.items()):
            connections.add_metric([peer], 1.0 if ready else 0.0)
        yield connections
        streams = GaugeMetricFamily(
            "ppbn_job_streams_open", "job streams (Exchange) open with peers"
        )
        channel = job.channel if job is not None else None
        streams.add_metric(
            [], len(getattr(channel, "channels", {"": channel})) if channel is not None else 0
        )
        yield streams
        checkpoint = GaugeMetricFamily(
            "ppbn_checkpoint_age_seconds",
            "seconds since the last checkpoint was written, -1 if none",
        )
        checkpoint.add_metric(
            [], -1.0 if self._checkpoint_at is None else time.time() - self._checkpoint_at
        )
        yield checkpoint

    # -- HTTP ------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Serve /metrics on host:port (0: a free port); returns the bound port."""
        if not 0 <= port <= 65535:
            raise UserError(f"--metrics-port must be in 0..65535 (0: a free port), not {port}")
        try:
            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise UserError(
                f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
