"""Issue 10: job control only for the daemon's own operator; peer RPCs only for the peer role.

Every call is a real gRPC call over mutual TLS with a certificate of the role under test;
the status code is what the daemon answered.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ppbn.parties.net import dial
from ppbn.parties.pki import issue_certificate, make_request
from ppbn.parties.tls import TlsFiles, load_tls_files
from ppbn.proto import party_pb2, party_pb2_grpc

DENIED = grpc.StatusCode.PERMISSION_DENIED


def _stub(pair, tls_dir: Path, identity: str, target: str) -> party_pb2_grpc.PartyServiceStub:
    files = load_tls_files(tls_dir, identity)
    return party_pb2_grpc.PartyServiceStub(dial(pair.addresses[target], files, target))


def _code(call, request) -> grpc.StatusCode:
    try:
        call(request, timeout=10)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def _job_control(stub) -> dict[str, grpc.StatusCode]:
    return {
        "StartJob": _code(
            stub.StartJob, party_pb2.JobRequest(kind="ping", params_json='{"rounds": 1}')
        ),
        "JobStatus": _code(stub.JobStatus, party_pb2.JobQuery(job_id="nope")),
        "CancelJob": _code(stub.CancelJob, party_pb2.JobQuery(job_id="nope")),
    }


@pytest.mark.parametrize(
    ("holder", "identity"),
    [("alice", "alice"), ("miner", "miner"), ("alice", "operator"), ("miner", "operator")],
    ids=["peer daemon", "miner daemon", "peer's operator", "miner's operator"],
)
def test_job_control_is_denied_to_everyone_but_the_own_operator(pair, pki, holder, identity):
    stub = _stub(pair, pki[holder], identity, "bob")
    assert _job_control(stub) == {"StartJob": DENIED, "JobStatus": DENIED, "CancelJob": DENIED}


def test_the_own_operator_gets_through(pair, pki):
    stub = _stub(pair, pki["bob"], "operator", "bob")
    codes = _job_control(stub)
    assert codes["StartJob"] == grpc.StatusCode.OK
    assert (
        codes["JobStatus"] == codes["CancelJob"] == grpc.StatusCode.NOT_FOUND
    )  # through, no such job
    assert _code(stub.Health, party_pb2.HealthRequest()) == grpc.StatusCode.OK


def test_peer_rpcs_are_denied_to_operators_and_the_miner(pair, pki):
    hello = pair.alice.hello
    for holder, identity in (("bob", "operator"), ("alice", "operator"), ("miner", "miner")):
        stub = _stub(pair, pki[holder], identity, "bob")
        assert _code(stub.Handshake, hello) == DENIED, (holder, identity)
        frames = iter([party_pb2.Frame(kind=party_pb2.Frame.OPEN, hello=hello)])
        assert (
            _code(lambda req, timeout, s=stub: list(s.Exchange(req, timeout=timeout)), frames)
            == DENIED
        )


def _reissued(
    pki: dict[str, Path],
    tmp_path: Path,
    role: str,
    party: str,
    not_before,
    not_after,
    ca_of: str = "",
) -> Path:
    """A copy of ``party``'s TLS folder with a ``role`` certificate of the given validity,
    signed by the real CA of ``ca_of`` (default: ``party``'s own)."""
    ca_of = ca_of or party
    folder = tmp_path / f"{party}-{role}-by-{ca_of}"
    shutil.copytree(pki[ca_of], folder)
    _, csr_path = make_request(
        folder, role, party, ("localhost", "127.0.0.1") if role != "operator" else (), force=True
    )
    ca_dir = pki[party].parent / f"ca-{ca_of}"
    ca_cert = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), password=None)
    csr = x509.load_pem_x509_csr(csr_path.read_bytes())
    cert = issue_certificate(csr, ca_cert, ca_key, not_before, not_after)
    (folder / f"{role}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return folder


def test_an_expired_certificate_is_refused_at_the_handshake(pair, pki, tmp_path, monkeypatch):
    now = dt.datetime.now(dt.UTC)
    folder = _reissued(
        pki, tmp_path, "operator", "bob", now - dt.timedelta(days=30), now - dt.timedelta(days=1)
    )
    # load_tls_files refuses an expired certificate of one's own: read it as a client would anyway
    monkeypatch.setattr("ppbn.parties.tls.now_utc", lambda: now - dt.timedelta(days=10))
    stub = _stub(pair, folder, "operator", "bob")
    monkeypatch.undo()
    code = _code(stub.JobStatus, party_pb2.JobQuery(job_id="nope"))
    assert code in (grpc.StatusCode.UNAVAILABLE, DENIED), code


def test_a_certificate_of_the_wrong_role_is_refused_at_the_first_call(pair, pki):
    """alice's daemon certificate cannot open a job stream at bob posing as the miner, nor
    can the miner's certificate open one where bob expects alice."""
    stub = _stub(pair, pki["miner"], "miner", "bob")
    frames = iter([party_pb2.Frame(kind=party_pb2.Frame.OPEN, hello=pair.alice.hello)])
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.Exchange(frames, timeout=10))
    assert refused.value.code() == DENIED
    assert "not from a certificate for role 'miner'" in refused.value.details()


def test_a_trusted_ca_cannot_issue_another_partys_role(pair, pki, tmp_path):
    """bob trusts the miner's CA (cross-trust), but a certificate for "alice" issued by it is
    not alice: only alice's own CA may vouch for alice's daemon."""
    now = dt.datetime.now(dt.UTC)
    folder = _reissued(
        pki,
        tmp_path,
        "alice",
        "alice",
        now - dt.timedelta(hours=1),
        now + dt.timedelta(days=30),
        ca_of="miner",
    )
    # load_tls_files would refuse this folder (the certificate is not from its ca.crt's
    # party): build the forger's credentials by hand
    ca_pem = (folder / "ca.crt").read_bytes()
    forged = TlsFiles(
        identity="alice",
        party="alice",
        ca_pem=ca_pem,
        trusted_pem=ca_pem + (folder / "trusted.crt").read_bytes(),
        cert_pem=(folder / "alice.crt").read_bytes(),
        key_pem=(folder / "alice.key").read_bytes(),
        cert_path=folder / "alice.crt",
        key_path=folder / "alice.key",
        not_after=now,
        warnings=(),
    )
    stub = party_pb2_grpc.PartyServiceStub(dial(pair.addresses["bob"], forged, "bob"))
    with pytest.raises(grpc.RpcError) as refused:
        stub.Handshake(pair.alice.hello, timeout=10)
    assert refused.value.code() == DENIED
    assert "issued by a CA of party 'miner'" in refused.value.details()
