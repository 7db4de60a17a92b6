"""The operator's client trusts no daemon: a daemon that answers malformed JSON, a list
where an object belongs, JSON nested 10,000 deep, an unknown state, terminal escapes in
its texts, or another job's folder gets one line naming the field and the daemon (exit
2, no traceback), and nothing of another job is shown. The daemon here is a plaintext
gRPC stand-in on 127.0.0.1 that answers whatever each test gives it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from fake_daemon import FakeDaemon

from ppbn.api.daemon import Daemon
from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.parties.client import BadAnswer
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo
JOB = "j1"
# a clear screen, an OSC window title, a colour, a bell, a C1 CSI, a bidi override, rich markup
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b[31mred\x9b31m\u202eevil\u2066[bold]bold[/bold]\r\n\x00"


class AnsweringDaemon(FakeDaemon):
    """Alice's daemon as a stand-in: every job answer is ``answer(job_id)``; a job start is
    refused with ``refusal`` as its details when there is one."""

    def __init__(
        self, answer: Callable[[str], JobInfo], role: str = "alice", refusal: str = ""
    ) -> None:
        self.answer, self.refusal = answer, refusal
        super().__init__(role)

    def StartJob(self, request, context):  # noqa: N802
        if self.refusal:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, self.refusal)
        return JobInfo(job_id=request.job_id or JOB, kind=request.kind, state=JobInfo.RUNNING)

    def JobStatus(self, request, context):  # noqa: N802
        return self.answer(request.job_id)

    def CancelJob(self, request, context):  # noqa: N802
        return self.answer(request.job_id)


@pytest.fixture
def daemon() -> Iterator[Callable[..., AnsweringDaemon]]:
    started: list[AnsweringDaemon] = []

    def start(
        answer: Callable[[str], JobInfo], role: str = "alice", refusal: str = ""
    ) -> AnsweringDaemon:
        started.append(AnsweringDaemon(answer, role, refusal))
        return started[-1]

    yield start
    for each in started:
        each.server.stop(None)


def succeeded(job_id: str = JOB, **fields) -> JobInfo:
    base = {
        "kind": "ping",
        "state": JobInfo.SUCCEEDED,
        "result_json": json.dumps({"edges": [["a", "b"]], "parents": {"a": [], "b": ["a"]}}),
        "stats_json": json.dumps({"role": "alice", "wall_s": 1.5, "phases": {"tables": 0.5}}),
    }
    return JobInfo(job_id=job_id, **(base | fields))


def learn(address: str, capsys, *more: str) -> tuple[int, str, str]:
    code = main(["learn", "--peer", address, "--insecure", "--job", "ping", *more])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(code: int, out: str, err: str) -> str:
    """The one error line, after nothing but the 'job started' note; exit code 2."""
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err + out, err
    assert [line for line in lines if not line.startswith("job ")] == lines[-1:], err
    assert lines[-1].startswith("ppbn: error: ")
    assert_printable(out + err)
    return lines[-1].removeprefix("ppbn: error: ")


def assert_printable(text: str) -> None:
    odd = sorted({ch for ch in text if not ch.isprintable() and ch != "\n"})
    assert not odd, f"reached the terminal raw: {odd!r}"


DEEP = "[" * 10_000 + "]" * 10_000


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"result_json": "{"}, "malformed result_json for job 'j1': not JSON"),
        (
            {"result_json": "[1, 2]"},
            "malformed result_json for job 'j1': a JSON list, not an object",
        ),
        (
            {"result_json": '{"a": ' + DEEP + "}"},
            "malformed result_json for job 'j1': nested deeper",
        ),
        ({"result_json": DEEP}, "malformed result_json for job 'j1': nested deeper"),
        ({"stats_json": "[]"}, "malformed stats_json for job 'j1': a JSON list, not an object"),
        ({"peer_stats_json": "7"}, "malformed peer_stats_json for job 'j1': a JSON int"),
        ({"stats_json": '{"phases": [1]}'}, "malformed stats_json for job 'j1': 'phases' is not"),
        (
            {"stats_json": '{"wall_s": "1s"}'},
            "malformed stats_json for job 'j1': 'wall_s' is not a",
        ),
        (
            {"stats_json": '{"role": ["a"]}'},
            "malformed stats_json for job 'j1': 'role' is not text",
        ),
        ({"state": 99}, "malformed state for job 'j1': 99 is no state of a job"),
        ({"job_id": "other"}, "malformed job_id: 'other' when asked for job 'j1'"),
        (
            {"out_dir": "/srv/ppbn-out/other"},
            "malformed out_dir for job 'j1': '/srv/ppbn-out/other'",
        ),
    ],
)
def test_a_malformed_answer_is_one_line_naming_the_field(fields, said, daemon, capsys):
    fake = daemon(lambda job_id: succeeded(**({"job_id": job_id} | fields)))
    line = one_line(*learn(fake.address, capsys))
    assert line.startswith(f"the daemon at {fake.address} sent a {said}"), line
    assert "other" not in line or "other" in said


def test_a_malformed_answer_to_status_is_one_line_too(daemon, capsys):
    fake = daemon(lambda job_id: succeeded(job_id, result_json="[]"))
    line = one_line(*learn(fake.address, capsys, "--status", JOB))
    assert line.endswith("malformed result_json for job 'j1': a JSON list, not an object")


def test_the_python_api_raises_one_line(daemon):
    fake = daemon(lambda job_id: succeeded(job_id, stats_json="{" * 3))
    with Daemon(fake.address, insecure=True) as alice, pytest.raises(BadAnswer) as caught:
        alice.job(JOB).result()
    assert isinstance(caught.value, UserError) and "\n" not in str(caught.value)
    assert "malformed stats_json for job 'j1': not JSON" in str(caught.value)


def test_escapes_in_a_refusal_reach_the_terminal_printable(daemon, capsys):
    fake = daemon(
        lambda job_id: JobInfo(
            job_id=job_id, kind="ping" + HOSTILE, state=JobInfo.FAILED, error=HOSTILE, refused=True
        ),
        role="alice" + HOSTILE,
    )
    code, out, err = learn(fake.address, capsys)
    assert code == 2 and "Traceback" not in err
    assert_printable(out + err)
    assert "[bold]bold[/bold]" in out  # markup shown as text, not obeyed
    assert "?[2J?]0;owned??[31mred?31m?evil?[bold]" in out


def test_escapes_in_the_result_strings_and_files_reach_the_terminal_printable(daemon, capsys):
    result = {
        "edges": [["a" + HOSTILE, "b"]],
        "parents": {"a" + HOSTILE: [], "b": ["a" + HOSTILE]},
        "note" + HOSTILE: "x" + HOSTILE,
        "privacy": {"epsilon": "1" + HOSTILE},  # not the shape of a privacy object
        "edges_like": [[1, 2, 3]],
    }
    stats = {"role": "alice" + HOSTILE, "wall_s": 1, "phases": {"t" + HOSTILE: 2}}
    fake = daemon(
        lambda job_id: succeeded(
            job_id,
            result_json=json.dumps(result),
            stats_json=json.dumps(stats),
            out_dir=f"/srv/{HOSTILE}/{job_id}",
        )
    )
    code, out, err = learn(fake.address, capsys)
    assert code == 0 and "Traceback" not in err
    assert_printable(out + err)
    assert "evil" in out and "owned" in out  # shown, made printable


def test_escapes_in_the_grpc_details_reach_the_terminal_printable(daemon, capsys):
    fake = daemon(succeeded, refusal="no" + HOSTILE)
    line = one_line(*learn(fake.address, capsys))
    assert line.startswith(f"daemon at {fake.address}: no?[2J?]0;owned")


def test_a_peer_without_phase_times_shows_a_dash(daemon, capsys):
    peer = {"role": "bob", "mirrored": True, "bytes_sent": 10}
    fake = daemon(lambda job_id: succeeded(job_id, peer_stats_json=json.dumps(peer)))
    code, out, _ = learn(fake.address, capsys)
    row = next(line for line in out.splitlines() if "phase tables (s)" in line)
    assert code == 0 and "0.50" in row and "0.00" not in row
    assert row.split("0.50")[1].split()[1] == "-"


# -- results read by job id ----------------------------------------------------------------

NETWORK = {
    "order": ["a", "b"],
    "edges": [["a", "b"]],
    "parents": {"a": [], "b": ["a"]},
    "parameters": {
        "a": {"parents": [], "states": ["0", "1"], "table": [[0.5, 0.5]]},
        "b": {"parents": ["a"], "states": ["0", "1"], "table": [[0.9, 0.1], [0.2, 0.8]]},
    },
}


def job_folder(out: Path, job_id: str, named: str | None = None) -> Path:
    """A job folder as a daemon writes it; its result.json names ``named`` (its own id)."""
    folder = out / job_id
    folder.mkdir(parents=True)
    (folder / "network.json").write_text(json.dumps(NETWORK))
    (folder / "result.json").write_text(json.dumps({"job_id": named or job_id}))
    return folder


def test_the_job_own_folder_gives_the_cpts(daemon, tmp_path):
    folder = job_folder(tmp_path, JOB)
    fake = daemon(lambda job_id: succeeded(job_id, out_dir=str(folder)))
    with Daemon(fake.address, insecure=True) as alice:
        network = alice.job(JOB).result()
    assert network.cpts["b"].table == ((0.9, 0.1), (0.2, 0.8))


def test_another_job_folder_is_refused(daemon, tmp_path, capsys):
    other = job_folder(tmp_path, "other")
    fake = daemon(lambda job_id: succeeded(job_id, out_dir=str(other)))
    with Daemon(fake.address, insecure=True) as alice, pytest.raises(BadAnswer) as caught:
        alice.job(JOB).result()
    assert f"malformed out_dir for job 'j1': '{other}' is not that job's folder" in str(
        caught.value
    )
    line = one_line(*learn(fake.address, capsys, "--plot", str(tmp_path / "net.png")))
    assert "not that job's folder" in line and not (tmp_path / "net.png").exists()


def test_a_folder_whose_files_name_another_job_is_refused(daemon, tmp_path, capsys):
    """The folder has the job's name, but what it holds was written for another job."""
    folder = job_folder(tmp_path / "elsewhere", JOB, named="other")
    fake = daemon(lambda job_id: succeeded(job_id, out_dir=str(folder)))
    with Daemon(fake.address, insecure=True) as alice, pytest.raises(BadAnswer) as caught:
        alice.job(JOB).result()
    assert str(caught.value) == (
        f"the daemon at {fake.address} names {folder} as job j1's folder, "
        "but its result.json names job 'other'"
    )
    line = one_line(*learn(fake.address, capsys, "--plot", str(tmp_path / "net.png")))
    assert line == str(caught.value) and not (tmp_path / "net.png").exists()
