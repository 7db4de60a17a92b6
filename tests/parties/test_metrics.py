"""Issue 16, part 4: Prometheus metrics, the standard gRPC health service, JSON logs.

Two real daemons (in-process, loopback, mutual TLS), each with its own metrics endpoint
on a free port; /metrics is read over HTTP during a running job and after it ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from adversarial.hostile import write_dataset
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from test_audit import operator, start_pair
from timeouts import WAIT_S

from ppbn.commands.party import configure_logging
from ppbn.errors import UserError
from ppbn.parties.logs import JsonFormatter
from ppbn.parties.metrics import DaemonMetrics
from ppbn.parties.net import dial
from ppbn.parties.pki import make_local_pki
from ppbn.parties.tls import load_tls_files

N_RECORDS = 60


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S) as reply:
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def poll(what: str, predicate, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    return make_local_pki(tmp_path_factory.mktemp("pki"), roles=("alice", "bob"))


@pytest.fixture
def daemons(tmp_path, pki):
    files = write_dataset(tmp_path / "data", N_RECORDS, seed=4)
    running = start_pair(tmp_path, pki, files, metrics_port=0)
    yield running
    for daemon in running.values():
        daemon.stop(0.5)


def health_stub(daemon, tls_dir: Path, identity: str) -> health_pb2_grpc.HealthStub:
    return health_pb2_grpc.HealthStub(
        dial(f"127.0.0.1:{daemon.port}", load_tls_files(tls_dir, identity), daemon.role)
    )


def test_metrics_show_the_running_job_and_the_totals_after(daemons, pki):
    alice = daemons["alice"]
    assert alice.metrics_port > 0 and daemons["bob"].metrics_port == 0  # off unless asked for
    before = scrape(alice.metrics_port)
    assert value(before, "ppbn_serving", role="alice") == 1.0
    assert value(before, "ppbn_checkpoint_age_seconds") == -1.0
    # gRPC reports connectivity changes asynchronously
    poll(
        "the connection to bob",
        lambda: value(scrape(alice.metrics_port), "ppbn_peer_connections_open", peer="bob") == 1.0,
    )
    with operator(alice, pki) as client:
        job = client.start("ping", {"rounds": 100_000, "bytes": 1024}, "long-ping")

        def live():
            samples = scrape(alice.metrics_port)
            moved = min(
                value(samples, "ppbn_job_bytes_sent") or 0,
                value(samples, "ppbn_job_bytes_received") or 0,
            )
            return (
                samples
                if moved > 0 and value(samples, "ppbn_job_info", job=job, kind="ping", phase="ping")
                else None
            )

        during = poll("the running job in /metrics", live)
        assert value(during, "ppbn_jobs_running", kind="ping") == 1.0
        assert value(during, "ppbn_bytes_sent_total") >= value(during, "ppbn_job_bytes_sent")
        assert value(during, "ppbn_job_streams_open") == 1.0
        assert value(during, "ppbn_job_phase_elapsed_seconds") >= 0
        client.cancel(job)

    def ended():
        samples = scrape(alice.metrics_port)
        return (
            samples
            if value(samples, "ppbn_jobs_finished_total", kind="ping", state="cancelled")
            else None
        )

    after = poll("the cancelled job's totals", ended)
    assert value(after, "ppbn_jobs_started_total", kind="ping") == 1.0
    assert value(after, "ppbn_bytes_sent_total") >= value(during, "ppbn_bytes_sent_total") > 0
    assert value(after, "ppbn_bytes_received_total") > 0
    assert value(after, "ppbn_phase_seconds_total", kind="ping", phase="ping") > 0
    assert (
        value(after, "ppbn_job_bytes_sent") == 0
        and value(after, "ppbn_jobs_running", kind="ping") is None
    )
    with operator(alice, pki) as client, pytest.raises(Exception, match="workers"):
        client.start("ping", {"rounds": 1, "workers": 2})
    assert value(scrape(alice.metrics_port), "ppbn_jobs_refused_total", reason="BAD_REQUEST") == 1.0


def test_the_standard_health_service_answers_serving_then_not_serving(daemons, pki):
    alice = daemons["alice"]
    stub = health_stub(alice, pki["alice"], "operator")
    for service in ("", "ppbn.PartyService"):
        assert (
            stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=WAIT_S).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    # the peer daemon may ask too; the other party's operator may not
    assert (
        health_stub(alice, pki["bob"], "bob")
        .Check(health_pb2.HealthCheckRequest(), timeout=WAIT_S)
        .status
        == 1
    )
    with pytest.raises(grpc.RpcError) as denied:
        health_stub(alice, pki["bob"], "operator").Check(
            health_pb2.HealthCheckRequest(), timeout=WAIT_S
        )
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # a watcher sees NOT_SERVING when the daemon shuts down
    statuses = []
    watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=WAIT_S)

    def follow() -> None:
        try:
            for reply in watch:
                statuses.append(reply.status)
        except grpc.RpcError:
            pass

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    poll("the first health update", lambda: statuses)
    alice.stop(0.5)
    follower.join(WAIT_S)
    assert statuses[0] == health_pb2.HealthCheckResponse.SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses


def test_json_logs_are_one_object_per_line_with_the_job():
    formatter = JsonFormatter("bob")
    record = logging.LogRecord(
        "ppbn.party.bob", logging.INFO, __file__, 1, "job %s: %s", ("j1", "line\nbreak"), None
    )
    record.threadName = "job-j1"
    line = formatter.format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["job"] == "j1" and entry["level"] == "INFO" and entry["logger"] == "ppbn.party.bob"
    assert (
        entry["message"] == "job j1: line\nbreak"
        and entry["time"].endswith("Z")
        and entry["role"] == "bob"
    )
    record.threadName = "grpc-bob_0"
    record.job = "j2"  # given with extra={"job": ...}
    assert json.loads(formatter.format(record))["job"] == "j2"


def test_log_format_json_sets_the_formatter(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    configure_logging("alice", log_format="json")
    assert root.handlers and all(isinstance(h.formatter, JsonFormatter) for h in root.handlers)


def test_a_bad_or_busy_metrics_port_is_one_line():
    first = DaemonMetrics("alice")
    with pytest.raises(UserError, match=r"--metrics-port must be in 0\.\.65535"):
        first.serve("127.0.0.1", 70000)
    port = first.serve("127.0.0.1", 0)
    try:
        with pytest.raises(UserError, match=f"--metrics-port: cannot listen on 127.0.0.1:{port}"):
            DaemonMetrics("bob").serve("127.0.0.1", port)
    finally:
        first.close()
