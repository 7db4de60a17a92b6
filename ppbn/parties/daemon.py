"""``ppbn party serve``: one organisation's daemon, next to its own data.

Lifecycle: load and check the schema and this party's data (one-line errors naming
file, line and column), load and check the TLS files, listen, then keep introducing
itself to the peer (Handshake) so both logs say early whether the two sides agree on
the CA, the roles, the schema, the record count and the record ids. A job is started
by an operator on either daemon (StartJob); that daemon opens one Exchange stream to
its peer, which re-checks the Hello carried in the OPEN frame and accepts or refuses
with a reason. Both daemons then run the job function in a worker thread over a
``GrpcChannel``; a dead or misbehaving peer fails the job with one line within the
timeout, and the daemon goes on serving. SIGTERM stops it gracefully (the running job is
aborted with a reason the peer sees).

The data miner (setup II of Ma and Sivakumar Sec. III-A: PRAM and the perturbation
learners) is a third daemon role without data. It knows the addresses of alice and bob; alice and bob accept it only when
started with its address (``--miner``), and only for the job kinds of
``MINER_JOB_KINDS``, which start at the miner and run over one Exchange stream per party
(the job function receives a ``ChannelGroup``). The miner holds no records, so the
record checks of the handshake are made between the two parties' Hellos at job start.

The parts, each in its own module of ``ppbn.parties``: ``service`` (the RPCs and who may
call them), ``handshake`` (the peers and the introductions to them), ``controller`` (the
jobs: which ones this daemon takes, per ``admission``, and running them, per ``runner``),
``job_files``, ``job_stats`` and ``recorder`` (what a job leaves behind). This module
loads a daemon's inputs into one ``DaemonSetup``, builds the job controller and hands it
to the service, and starts and stops the server, the peer prober and the job controller.
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData, load_party_data
from ppbn.errors import UserError
from ppbn.parties.audit import AuditLog
from ppbn.parties.budget import DatasetKey, PrivacyBudget, budget_folder
from ppbn.parties.config import DaemonConfig, DaemonSetup
from ppbn.parties.controller import JobController
from ppbn.parties.handshake import (
    MINER_JOB_KINDS,
    PROTOCOL_VERSION,
    PeerLinks,
    hello_mismatch,
    parties_mismatch,
    peer_addresses,
)
from ppbn.parties.health import DaemonHealth
from ppbn.parties.job import Job
from ppbn.parties.job_files import JobFiles, check_out_dir
from ppbn.parties.metrics import DaemonMetrics
from ppbn.parties.net import server_options
from ppbn.parties.pauses import WATCH
from ppbn.parties.recorder import Recorder
from ppbn.parties.service import Callers, PartyService, add_party_service
from ppbn.parties.tls import MINER, load_tls_files, server_credentials
from ppbn.proto import party_pb2

__all__ = ["PROTOCOL_VERSION", "DaemonConfig", "PartyDaemon", "hello_mismatch", "parties_mismatch"]

MAX_CONCURRENT_RPCS = 64  # beyond this gRPC answers RESOURCE_EXHAUSTED at once


class PartyDaemon:
    """One party's daemon: loads its data and TLS files, builds its job controller and the
    gRPC service that calls it, and owns the server, the peer prober, the audit log and the
    metrics from start to stop."""

    def __init__(self, config: DaemonConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.role = config.role
        self.peer_addresses = peer_addresses(config.role, config.peer, config.peers)
        self.peer_roles = tuple(self.peer_addresses)
        self.log = logger or logging.getLogger(f"ppbn.party.{config.role}")
        self.log.info("loading schema %s", config.schema_path)
        self.schema = Schema.load(config.schema_path)
        if self.role == MINER:
            self.data: PartyData = PartyData(
                self.schema, MINER, (), (), np.zeros((0, 0), dtype=np.int64)
            )
            self.log.info(
                "miner: no data of its own; serves alice and bob for %s",
                ", ".join(sorted(MINER_JOB_KINDS)),
            )
        else:
            self.log.info("loading %s's data %s", self.role, config.data_path)
            self.data = load_party_data(
                self.schema,
                self.role,
                config.data_path,
                config.missing_as_category,
                config.missing_rule,
            )
            self.log.info(
                "data ok: %d records, %d variables of %s (%s); empty cells: --missing %s",
                self.data.n_records,
                len(self.data.columns),
                self.role,
                ", ".join(self.data.columns),
                self.data.missing_rule,
            )
        if config.insecure:
            self.tls = None
            self.log.warning(
                "INSECURE: plaintext gRPC, no certificates: anyone on the network can read the "
                "traffic and pose as %s; use only on a trusted loopback",
                " or ".join(self.peer_roles),
            )
        else:
            if not config.tls_dir:
                raise UserError("--tls-dir is required (or --insecure for plaintext testing)")
            self.tls = load_tls_files(config.tls_dir, self.role)
            self.log.info("TLS: certificate %s.crt signed by %s/ca.crt", self.role, config.tls_dir)
            for warning in self.tls.warnings:
                self.log.warning("TLS: %s", warning)
        self._log_policy()
        check_out_dir(config.out_dir)
        interrupted = sorted(p.name for p in Path(config.out_dir).glob(".*.partial"))
        if interrupted:
            self.log.warning(
                "%s holds %d folder(s) of jobs interrupted by a crash (%s): their ids stay taken "
                "until each is resumed (`ppbn learn --resume JOB_ID`) or its folder removed",
                config.out_dir,
                len(interrupted),
                ", ".join(interrupted[:5]),
            )
        self.hello = party_pb2.Hello(
            role=self.role,
            protocol_version=PROTOCOL_VERSION,
            schema_fingerprint=self.schema.fingerprint(),
            record_count=self.data.n_records,
            identity=self.role if self.tls else "",
            missing_rule=self.data.missing_rule if self.role != MINER else "",
            record_alignment=config.align,
        )
        self.port = 0
        self._stopping = threading.Event()
        self._server: grpc.Server | None = None
        self._prober: threading.Thread | None = None
        self.metrics = DaemonMetrics(self.role)
        self.metrics_port = 0  # bound port of the metrics endpoint, once serving
        self.peers = PeerLinks(
            self.hello,
            self.peer_addresses,
            self.tls,
            config.timeout_s,
            config.frame_bytes,
            self.log,
            self.schema.party_names,
        )
        self.recorder = Recorder(self.role, config.out_dir, self.metrics, self.log)
        self.setup = DaemonSetup(
            config=config,
            schema=self.schema,
            data=self.data,
            hello=self.hello,
            peer_addresses=self.peer_addresses,
            files=JobFiles(self.role, config.out_dir, self.log),
            recorder=self.recorder,
            metrics=self.metrics,
            # what this party's DP jobs spent of its data set: in this host's budget folder
            budget=PrivacyBudget(
                budget_folder(config.state_dir),
                config.policy.dp_total_epsilon,
                config.policy.dp_total_delta,
            ),
            dataset=DatasetKey(self.schema, self.data),
            stopping=self._stopping,
            log=self.log,
        )
        self.controller = JobController(self.setup, self.peers)
        self.callers = Callers(self.role, self.tls, self.peer_roles, self.log)
        self.service = PartyService(self.setup, self.callers, self.peers, self.controller)
        self._health = DaemonHealth(
            lambda context: self.callers.require_operator_or_peer(context, "health checks")
        )

    def _log_policy(self) -> None:
        """Say at start which local policy this daemon enforces, and what it allows that is weak."""
        policy = self.config.policy
        self.log.info(
            "policy (%s): paths %s; Paillier keys >= %d bits; disclosure %s; max parents %d, "
            "family %d; records >= %d; PRAM p >= %g (randomize %s)",
            policy.source,
            ",".join(policy.paths),
            policy.min_key_bits,
            ",".join(policy.disclosures),
            policy.max_parents,
            policy.max_family,
            policy.min_records,
            policy.pram.min_p,
            ",".join(policy.pram.always_randomize) or "none",
        )
        self.log.info(
            "executor %s (%s); ciphertext cache %d MiB in memory, %d MiB spill",
            policy.executor,
            f"Ray at {policy.ray_address}"
            if policy.ray_address
            else f"workers: {policy.workers or 'one per core'}",
            policy.cache_mb,
            policy.spill_mb,
        )
        self.log.info(
            "differential privacy: epsilon <= %g and delta <= %g per job, %g and %g in all on "
            "this data set (budget in %s); a peer opens at most %d DP jobs an hour%s",
            policy.dp_max_epsilon,
            policy.dp_max_delta,
            policy.dp_total_epsilon,
            policy.dp_total_delta,
            budget_folder(self.config.state_dir),
            policy.dp_peer_jobs_per_hour,
            "; every job that releases data must be DP (require_dp)" if policy.require_dp else "",
        )
        if policy.weak_key_allowed:
            self.log.warning(
                "policy allows 1024-bit Paillier keys: below today's security level, TESTING ONLY"
            )
        if self.role != MINER and self.data.n_records < policy.min_records:
            self.log.warning(
                "%d records, fewer than the policy minimum %d: every data job will be refused",
                self.data.n_records,
                policy.min_records,
            )
        if self.config.fixed_seed_for_testing is not None:
            self.log.warning(
                "INSECURE: --insecure-fixed-seed-for-testing: the PRAM randomization is reproducible "
                "by anyone who knows the seed; for tests only"
            )

    # -- status, as a process that embeds the daemon reads it ------------------------
    @property
    def peer_state(self) -> str:
        """ "ok" when every peer accepted the last handshake; otherwise what went wrong."""
        return self.peers.state

    @property
    def peer_states(self) -> dict[str, str]:
        """What the last handshake with each peer said, by the peer's role."""
        return self.peers.states

    @property
    def jobs(self) -> dict[str, Job]:
        """The jobs this daemon knows: the newest finished ones and the one running."""
        return self.controller.jobs

    @property
    def running(self) -> Job | None:
        return self.controller.running

    @property
    def audit(self) -> AuditLog | None:
        """The audit log, opened (and its chain verified) by start()."""
        return self.recorder.audit

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> int:
        """Listen and start probing the peer; returns the bound port."""
        self.recorder.open(self.config.audit_log or Path(self.config.out_dir) / "audit.log")
        WATCH.start()  # a job lost while this process was stopped is put down to that
        try:
            return self._start_serving()
        except BaseException:
            self.metrics.close()
            self.recorder.discard()
            raise

    def _start_serving(self) -> int:
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(
                self.config.metrics_host, self.config.metrics_port
            )
            self.log.info(
                "metrics at http://%s:%d/metrics (plain HTTP, no authentication%s)",
                self.config.metrics_host,
                self.metrics_port,
                ""
                if self.config.metrics_host in ("127.0.0.1", "::1", "localhost")
                else ": NOT bound to localhost, anyone who reaches it can read the daemon's figures",
            )
        server = grpc.server(
            ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"grpc-{self.role}"),
            options=server_options(self.config.frame_bytes),
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        )
        add_party_service(self.service, server)
        self._health.add_to(server)
        try:
            if self.tls is None:
                port = server.add_insecure_port(self.config.listen)
            else:
                port = server.add_secure_port(self.config.listen, server_credentials(self.tls))
        except RuntimeError:
            raise UserError(
                f"cannot listen on {self.config.listen}: the port is in use or the address is not one of this host"
            ) from None
        if port == 0:
            raise UserError(f"cannot listen on {self.config.listen} (address in use or not local?)")
        server.start()
        self._server, self.port = server, port
        self.peers.connect(self.metrics.peer_connection)
        self._health.serving()
        self.metrics.set_serving(True)
        self.recorder.append(
            lambda audit: audit.event(
                "daemon_started", listen=self.config.listen, policy=self.config.policy.source
            )
        )
        self.log.info(
            "%s listening on %s (port %d, %s); %s",
            self.role,
            self.config.listen,
            port,
            "mutual TLS" if self.tls else "PLAINTEXT",
            ", ".join(
                f"peer {self.peers.named(r)} expected at {a}"
                for r, a in self.peer_addresses.items()
            ),
        )
        self._prober = threading.Thread(
            target=self.peers.probe,
            args=(self._stopping, self.config.probe_interval_s),
            name="peer-probe",
            daemon=True,
        )
        self._prober.start()
        return port

    def stop(self, grace_s: float = 3.0) -> None:
        """Abort the running job (the peer is told why), then stop serving."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._health.shutting_down()
        self.metrics.set_serving(False)
        self.controller.abort_running(grace_s)
        if self._server is not None:
            self._server.stop(grace_s).wait()
        self.peers.close()
        self.recorder.append(lambda audit: audit.event("daemon_stopped"))
        self.recorder.close()
        self.metrics.close()
        self.log.info("%s stopped", self.role)

    def serve_forever(self) -> None:
        """Run until SIGTERM or SIGINT, then shut down gracefully."""
        stop = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            self.log.info("received %s: shutting down", signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        while not stop.wait(0.5):
            pass
        self.stop()
