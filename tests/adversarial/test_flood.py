"""Issue 10: oversized and flooding messages leave a daemon's memory bounded and it serving.

Bob's daemon runs as its own process (its RSS is read from /proc); the flood comes from
real gRPC clients with valid certificates: bob's operator and alice's daemon certificate.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from hostile import write_dataset
from waiting import wait_until as wait_for

from ppbn.pair.loopback import free_port
from ppbn.parties.net import dial
from ppbn.parties.tls import load_tls_files
from ppbn.proto import party_pb2, party_pb2_grpc

MIB = 1024 * 1024
pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="needs /proc for RSS"
)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def bob_process(tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("flood")
    files = write_dataset(base / "data", 150, seed=9)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "ppbn.cli",
        "party",
        "serve",
        "--role",
        "bob",
        "--schema",
        str(files["schema"]),
        "--data",
        str(files["bob"]),
        "--listen",
        f"127.0.0.1:{port}",
        "--peer",
        f"127.0.0.1:{free_port()}",
        "--tls-dir",
        str(pki["bob"]),
        "--out",
        str(base / "out"),
    ]
    with open(base / "bob.log", "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    address = f"127.0.0.1:{port}"
    operator = party_pb2_grpc.PartyServiceStub(
        dial(address, load_tls_files(pki["bob"], "operator"), "bob", 256 * MIB)
    )

    def healthy():
        try:
            return (
                operator.Health(party_pb2.HealthRequest(), timeout=2).status
                == party_pb2.HealthReply.SERVING
            )
        except grpc.RpcError:
            return False

    try:
        wait_for(healthy, what="bob's daemon")
        yield process, address, operator, healthy, base / "bob.log"
    finally:
        process.terminate()
        process.wait(10)


def test_oversized_frames_and_a_flood_leave_memory_bounded_and_the_daemon_serving(bob_process, pki):
    process, address, operator, healthy, log = bob_process
    before = _rss_mib(process.pid)

    # one 100 MiB StartJob request and one 100 MiB frame on a job stream
    huge = "x" * (100 * MIB)
    with pytest.raises(grpc.RpcError) as big:
        operator.StartJob(party_pb2.JobRequest(kind="ping", params_json=huge), timeout=60)
    assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    alice = party_pb2_grpc.PartyServiceStub(
        dial(address, load_tls_files(pki["alice"], "alice"), "bob", 256 * MIB)
    )
    frame = party_pb2.Frame(kind=party_pb2.Frame.OPEN, payload=b"\0" * (100 * MIB))
    with pytest.raises(grpc.RpcError) as big_frame:
        list(alice.Exchange(iter([frame]), timeout=60))
    assert big_frame.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED)
    del huge, frame

    # 1,000 requests queued at once, each with the largest parameters a request may carry
    request = party_pb2.JobRequest(
        kind="ping", params_json='{"rounds": 1, "pad": "' + "y" * 60_000 + '"}'
    )
    futures = [operator.StartJob.future(request, timeout=120) for _ in range(1000)]
    codes: dict[grpc.StatusCode, int] = {}
    for future in futures:
        future.exception(timeout=180)  # waits for the answer without raising it
        code = future.code()
        codes[code] = codes.get(code, 0) + 1
    assert sum(codes.values()) == 1000
    assert set(codes) <= {
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }, codes

    # deep nesting, in the job parameters and in a peer's first frame
    for depth in (1_000, 100_000):
        with pytest.raises(grpc.RpcError) as nested:
            operator.StartJob(
                party_pb2.JobRequest(kind="ping", params_json="[" * depth), timeout=30
            )
        assert nested.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert (
            "nested too deeply" in nested.value.details() or "over 64 KiB" in nested.value.details()
        )
    odd = party_pb2.Frame(kind=99, job_id="x")
    answers = list(alice.Exchange(iter([odd]), timeout=30))
    assert len(answers) == 1 and answers[0].kind == party_pb2.Frame.ABORT
    assert answers[0].code == party_pb2.AbortCode.PROTOCOL

    time.sleep(1.0)
    after = _rss_mib(process.pid)
    assert process.poll() is None, "daemon died"
    assert healthy(), "daemon stopped serving"
    assert after - before < 100, f"RSS grew from {before:.0f} MiB to {after:.0f} MiB"
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-2000:]
    print(f"bob RSS {before:.0f} -> {after:.0f} MiB; 1,000 queued requests answered {codes}")
