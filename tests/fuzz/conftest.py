"""The live daemon under fuzz (bob, its own process) and the hostile alice, shared by the
fuzz tests of one session; the tally is printed at the end of the run."""

from __future__ import annotations

import time

import pytest
from fuzzkit import HONEST_PARAMS, TALLY, BobProcess, Fuzzer, make_alice, write_dataset
from waiting import wait_until as wait_for

from ppbn.pair.loopback import free_port
from ppbn.parties.pki import make_local_pki


@pytest.fixture(scope="session")
def fuzz_env(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    pki = make_local_pki(base / "pki", roles=("alice", "bob"))
    files = write_dataset(base / "data")
    alice_port = free_port()
    bob = BobProcess(base, files, pki, f"127.0.0.1:{alice_port}")
    alice = make_alice(base, files, pki, bob.address, alice_port)
    try:
        alice.start()
        wait_for(bob.healthy, what="bob's daemon to serve")
        wait_for(lambda: alice.peer_state == "ok", what="alice's handshake with bob")
        # one honest secure job first: bob loads what any first job loads once (numba and
        # the compiled kernels, at their first call), which is not growth under fuzz
        Fuzzer(alice, bob).record_honest_phases("learn", HONEST_PARAMS["learn"], "alice")
        TALLY.rss_before_mib = bob.rss_mib()
        TALLY.started = time.monotonic()  # the fuzz tests' own time, not the whole session's
        yield alice, bob
    finally:
        if bob.process.poll() is None:
            TALLY.rss_after_mib = bob.rss_mib()
            TALLY.rss_peak_mib = max(TALLY.rss_peak_mib, bob.peak_rss_mib())
        alice.stop(0.5)
        bob.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    if TALLY.total():
        for line in TALLY.summary():
            terminalreporter.write_line(line)
