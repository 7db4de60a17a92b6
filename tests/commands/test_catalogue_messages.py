"""The messages a user meets in the smaller cases of the bad-input catalogue: a daemon lost
or stopped during a job, something that is not a ppbn daemon at the address, a flag out of
range, an optional estimate too costly to run. Each gives one line that says which case it
is and what to do (exit code 2), or the rest of the result with a note.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from fake_daemon import FakeDaemon
from known_files import TEST_POLICY
from loopback_pair import insecure_pair
from timeouts import WAIT_S
from waiting import wait_until as wait_for

from ppbn.cli import main
from ppbn.data.datasets import make_dataset
from ppbn.jobs.base import JobKind
from ppbn.jobs.policy import LocalPolicy
from ppbn.jobs.registry import register_job, unregister_job
from ppbn.parties.client import DaemonClient
from ppbn.parties.pki import make_local_pki
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    """The error line, which is the last (progress lines such as "job J started" may precede it)."""
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("ppbn: error: ")]
    assert errors == lines[-1:] and "Traceback" not in err, err
    return lines[-1].removeprefix("ppbn: error: ")


# -- what the client says when its daemon goes away during a job ---------------------------


class PollingDaemon(FakeDaemon):
    """A stand-in for alice's daemon: the job starts and runs until ``on_status`` (called
    at each status poll after the first) decides otherwise."""

    def __init__(self, on_status) -> None:
        self.polls = 0
        self.on_status = on_status
        super().__init__("alice")

    def StartJob(self, request, context):  # noqa: N802
        return JobInfo(job_id="j1", kind=request.kind, state=JobInfo.RUNNING)

    def JobStatus(self, request, context):  # noqa: N802
        self.polls += 1
        if self.polls > 1:
            self.on_status(self, context)
        return JobInfo(job_id=request.job_id, kind="ping", state=JobInfo.RUNNING)


def test_a_daemon_killed_during_a_job_is_not_called_a_tls_problem(capsys):
    def vanish(daemon, context):  # every connection dropped at once, as a SIGKILL does
        threading.Thread(target=daemon.server.stop, args=(None,)).start()
        time.sleep(0.5)

    daemon = PollingDaemon(vanish)
    code, err = run(["learn", "--peer", daemon.address, "--insecure", "--job", "ping"], capsys)
    assert code == 2 and one_line(err) == (
        f"the daemon at {daemon.address} closed the connection during job j1 (stopped or killed?); "
        f"when it is back, check it with: ppbn learn --peer {daemon.address} --insecure --status j1"
    )
    assert "TLS" not in err and "certificate" not in err


def test_a_daemon_that_stops_answering_may_still_run_the_job(capsys):
    def silent(daemon, context):  # what gRPC reports when its keepalive pings go unanswered
        context.abort(grpc.StatusCode.UNAVAILABLE, "ping timeout")

    daemon = PollingDaemon(silent)
    try:
        code, err = run(["learn", "--peer", daemon.address, "--insecure", "--job", "ping"], capsys)
    finally:
        daemon.server.stop(None)
    assert code == 2 and one_line(err) == (
        f"the daemon at {daemon.address} stopped answering during job j1 (ping timeout); the job may "
        f"still be running there: check it with: ppbn learn --peer {daemon.address} --insecure --status j1"
    )


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the bad request our TLS hello makes is expected
        pass


def test_a_plain_http_server_at_the_address_is_named_as_not_tls(tmp_path, capsys):
    pki = make_local_pki(tmp_path / "certs", roles=("alice",))
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{web.server_address[1]}"
    try:
        code, err = run(
            ["learn", "--peer", address, "--tls-dir", str(pki["alice"]), "--job", "ping"], capsys
        )
    finally:
        web.shutdown()
        web.server_close()
    assert code == 2 and one_line(err) == (
        f"{address} answered, but not with TLS: is it a ppbn daemon? (check the HOST:PORT given with --peer)"
    )


# -- a daemon stopped during a job says so; its peer names who stopped -----------------------


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("messages") / "asia"
    make_dataset("asia", 200, 7, out)
    return out


def daemon_pair(data: Path, tmp: Path):
    policy = LocalPolicy.load(TEST_POLICY)
    return insecure_pair(data, tmp, {"alice": policy, "bob": policy})


def test_a_stopped_daemon_says_its_operator_stopped_it_and_the_peer_names_it(tiny_data, tmp_path):
    def hold(role, channel, context):
        channel.send("hold", b"1")
        channel.recv("hold")
        deadline = time.monotonic() + WAIT_S  # held until a daemon stops, however slow the host
        while time.monotonic() < deadline:
            context.check_cancelled()
            time.sleep(0.05)
        return {}

    register_job(JobKind("hold", hold, lambda params, schema: dict(params), "test job"))
    try:
        with daemon_pair(tiny_data, tmp_path) as (daemons, ports):
            with DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client:
                job_id = client.start("hold", {})
                wait_for(
                    lambda: all(job_id in d.jobs for d in daemons.values()), what="the job at both"
                )
                daemons["alice"].stop(grace_s=0.5)
            jobs = {role: d.jobs[job_id] for role, d in daemons.items()}
            wait_for(lambda: all(job.done.is_set() for job in jobs.values()), what="the job to end")
    finally:
        unregister_job("hold")
    assert jobs["alice"].state == JobInfo.CANCELLED and jobs["alice"].error == (
        "stopped by this daemon's operator: the daemon of alice is shutting down; "
        "when both daemons are up, start the job again"
    )
    assert jobs["bob"].state == JobInfo.FAILED and jobs["bob"].error.startswith(
        "peer alice aborted the job: its daemon is shutting down"
    )


# -- perturb learn: the disguised-test estimate is an extra; too costly, it is skipped --------


def multi_state_csv(path: Path, n: int, seed: int) -> Path:
    """A class y and eight attributes of four states each: under M-category randomization
    every attribute has four candidate originals, 4^8 = 65,536 classifier passes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    columns = {f"x{i}": (rng.integers(0, 4, n) + y) % 4 for i in range(8)}
    lines = ["rid," + ",".join(columns) + ",y"]
    for r in range(n):
        lines.append(f"r{r}," + ",".join(f"s{columns[c][r]}" for c in columns) + f",c{y[r]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_perturb_learn_reports_the_accuracy_and_skips_a_too_costly_estimate(tmp_path, capsys):
    train, test = (
        multi_state_csv(tmp_path / "train.csv", 400, 1),
        multi_state_csv(tmp_path / "test.csv", 100, 2),
    )
    argv = [
        "perturb",
        "learn",
        "nb",
        "--data",
        str(train),
        "--test",
        str(test),
        "--class",
        "y",
        "--id",
        "rid",
        "--p",
        "0.3",
        "--randomize",
        "5",
    ]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^accuracy on 100 test records: [01]\.\d{4}$", out, re.MULTILINE), out
    assert (
        "note: no estimate from a copy of the test records randomized here: the disguised-test estimate "
        "needs 65,536 classifier passes (more than 16,384): randomize fewer or binary columns, or attributes "
        "in groups (a Warner group has 2 candidates, whatever its size)"
    ) in out
    code = main([*argv, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and "accuracy" in report and "accuracy_estimated" not in report
    assert "65,536 classifier passes" in report["accuracy_estimated_skipped"]


# -- numeric flags: the flag the user typed is named ----------------------------------------


def argparse_error(argv: list[str], capsys) -> str:
    """argparse's own refusal: exit code 2 and its error line, the last on stderr."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["datasets", "make", "--network", "asia", "--records", "0", "--out", "x"],
            "ppbn datasets make: error: argument --records: must be a positive integer (got 0)",
        ),
        (
            ["datasets", "make", "--network", "asia", "--records", "-5", "--out", "x"],
            "ppbn datasets make: error: argument --records: must be a positive integer (got -5)",
        ),
        (
            [
                "datasets",
                "make",
                "--network",
                "asia",
                "--records",
                "10",
                "--seed",
                "-1",
                "--out",
                "x",
            ],
            "ppbn datasets make: error: argument --seed: must be a non-negative integer (got -1)",
        ),
        (
            ["simulate", "--records", "0"],
            "ppbn simulate: error: argument --records: must be a positive integer (got 0)",
        ),
        (
            ["simulate", "--timeout", "0"],
            "ppbn simulate: error: argument --timeout: must be a positive number (got 0)",
        ),
        (
            ["reference", "--max-parents", "-1"],
            "ppbn reference: error: argument --max-parents: must be a non-negative integer (got -1)",
        ),
        (
            ["reference", "--ess", "0"],
            "ppbn reference: error: argument --ess: must be a positive number (got 0)",
        ),
        (
            ["reference", "--tau", "nan"],
            "ppbn reference: error: argument --tau: must be a finite number (got nan)",
        ),
        (
            ["bench", "tables", "--records", "0"],
            "ppbn bench tables: error: argument --records: must be a positive integer (got 0)",
        ),
        (
            ["bench", "k2", "--records", "-3"],
            "ppbn bench k2: error: argument --records: must be a positive integer (got -3)",
        ),
        (
            ["bench", "gc", "--repeats", "0"],
            "ppbn bench gc: error: argument --repeats: must be a positive integer (got 0)",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_numeric_flag_out_of_range_is_named(argv, line, capsys):
    assert argparse_error(argv, capsys) == line


def test_party_serve_workers_names_the_flag_not_the_policy(capsys):
    argv = [
        "party",
        "serve",
        "--role",
        "alice",
        "--schema",
        "s.json",
        "--listen",
        "127.0.0.1:1",
        "--workers",
        "10000",
    ]
    assert argparse_error(argv, capsys) == (
        "ppbn party serve: error: argument --workers: must be an integer in 1..1024 (got 10000)"
    )
