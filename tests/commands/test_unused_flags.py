"""A flag the run would not use is refused in one line naming it and what it needs, exit 2,
before any work: hill-climbing flags under K2, --dp-delta / --dp-structure-share without
--dp-epsilon, a score's or a path's flags under another; also --cache-mb / --spill-mb out
of range (named by flag) and a --ray-address where nothing listens."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ppbn.cli import main
from ppbn.protocols.executor import check_ray_address

EDGES = [["asia", "tub"], ["smoke", "lung"]]


@pytest.fixture(scope="module")
def edges(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("edges") / "edges.json"
    path.write_text(json.dumps(EDGES))
    return path


def _refused(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--white-list", "{edges}"], "--white-list needs --search hc"),
        (["--black-list", "{edges}"], "--black-list needs --search hc"),
        (["--fixed-edges", "{edges}"], "--fixed-edges needs --search hc"),
        (["--start", "{edges}"], "--start needs --search hc"),
        (["--search", "k2", "--tabu", "100"], "--tabu needs --search hc"),
        (["--search", "hc", "--order", "asia"], "--order needs --search k2"),
        (["--ess", "10"], "--ess needs --score bdeu"),
        (["--score", "bdeu", "--c-star", "2"], "--c-star needs --score bic"),
    ],
)
def test_reference_refuses_flags_of_another_search_or_score(
    small_data, edges, capsys, flags, message
):
    argv = ["reference", "--data", str(small_data), *(f.format(edges=edges) for f in flags)]
    assert _refused(argv, capsys).startswith(f"ppbn: error: {message}")


def test_the_white_list_applies_under_hill_climbing(small_data, edges, capsys):
    argv = ["reference", "--data", str(small_data), "--search", "hc", "--white-list", str(edges)]
    assert main([*argv, "--format", "json"]) == 0
    learned = json.loads(capsys.readouterr().out)
    assert all(edge in EDGES for edge in learned["edges"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["learn", "--dp-delta", "1e-9"], "--dp-delta needs --dp-epsilon"),
        (["learn", "--dp-structure-share", "0.3"], "--dp-structure-share needs --dp-epsilon"),
        (["learn", "--white-list", "{edges}"], "--white-list needs --search hc"),
        (["learn", "--job", "tables", "--max-parents", "3"], "--max-parents needs --job learn"),
        (["simulate", "--dp-delta", "1e-6"], "--dp-delta needs --dp-epsilon"),
        (["simulate", "--fixed-edges", "{edges}"], "--fixed-edges needs --search hc"),
        (
            ["simulate", "--path", "pram", "--p", "0.3", "--dp-epsilon", "1"],
            "--dp-epsilon needs --path secure",
        ),
        (["simulate", "--p", "0.3"], "--p needs --path pram"),
        (["simulate", "--setup", "2"], "--setup needs --path pram or perturb"),
        (
            ["simulate", "--path", "perturb", "--search", "hc"],
            "--search needs --path secure or pram",
        ),
        (["bench", "k2", "--white-list", "{edges}"], "--white-list needs --search hc"),
    ],
)
def test_learning_commands_refuse_unused_flags_before_any_work(
    tmp_path, edges, capsys, argv, message
):
    """learn: no daemon at the closed port is ever asked; simulate and bench k2: no data
    is made (the folders below stay empty)."""
    where = {
        "learn": ["--peer", f"127.0.0.1:{_closed_port()}", "--insecure"],
        "simulate": ["--network", "asia", "--records", "300", "--out", str(tmp_path / "run")],
        "bench": ["--network", "asia", "--records", "300"],
    }[argv[0]]
    line = _refused([*(a.format(edges=edges) for a in argv), *where], capsys)
    assert line.startswith(f"ppbn: error: {message}"), line
    assert not (tmp_path / "run").exists()


def test_resource_flags_out_of_range_name_the_flag(small_data, capsys):
    serve = ["party", "serve", "--role", "alice", "--schema", str(small_data / "schema.json")]
    serve += ["--data", str(small_data / "alice.csv"), "--listen", "127.0.0.1:0"]
    serve += ["--peer", f"127.0.0.1:{_closed_port()}", "--insecure"]
    line = _refused([*serve, "--cache-mb", "99999999"], capsys)
    assert line == "ppbn: error: --cache-mb 99999999: must be an integer in 0..10000000"
    line = _refused([*serve, "--spill-mb", "9999999999"], capsys)
    assert line == "ppbn: error: --spill-mb 9999999999: must be an integer in 0..1000000000"


def test_a_ray_address_where_nothing_listens_is_one_line(small_data):
    """Ray itself retries such an address for minutes; the daemon refuses it at start-up
    (a loopback port nothing listens on: refused at once, before ray is imported)."""
    address = f"127.0.0.1:{_closed_port()}"
    argv = ["party", "serve", "--role", "alice", "--schema", str(small_data / "schema.json")]
    argv += ["--data", str(small_data / "alice.csv"), "--listen", "127.0.0.1:0"]
    argv += ["--peer", f"127.0.0.1:{_closed_port()}", "--insecure"]
    argv += ["--executor", "ray", "--ray-address", address]
    done = subprocess.run(
        [sys.executable, "-m", "ppbn.cli", *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"ppbn: error: --executor ray: cannot join Ray: nothing accepts connections at "
        f"{address} (Connection refused): is this party's Ray cluster running there?"
    ]
    # the daemon's own connect (``connect_ray``) checks it the same way before ``ray.init``
    with pytest.raises(ConnectionError, match="nothing accepts connections at ray://"):
        check_ray_address(f"ray://{address}")
    check_ray_address("auto")  # no port: left to Ray
