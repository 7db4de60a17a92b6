"""The test suite's time bounds, sized for a loaded 2-core host (load ~10: the suite's own
daemons, numba compiling kernels, other suites). A test passes or fails on what the code
does, never on how quiet the machine is.

Generous bounds cost nothing when things go right: a peer that answers ends the wait at
once, a condition that comes true ends the polling. Only a test whose point is that a
timeout fires (a peer that vanished, stopped or never answers) keeps a short timeout of
its own, written in that test, and then nothing that must finish first (a handshake, an
honest job before the fault) may run under it."""

from __future__ import annotations

# A test daemon's or channel's peer timeout for jobs that must succeed: how long one side
# waits for the other's next message while the other computes (a first job compiles numba
# kernels; a Paillier or Yao step of seconds on a quiet host takes a minute under load).
PEER_TIMEOUT_S = 120.0

# How long a test waits for something that will happen: a handshake, a job's end at either
# side, a daemon coming up. Above PEER_TIMEOUT_S, so a job that does fail reports its own
# error (naming the peer and the phase) before the test gives up waiting on it.
WAIT_S = 180.0
