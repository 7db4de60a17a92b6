"""The per-party PKI: ``ppbn certs ca/request/sign/trust/inspect``, the startup checks of
a TLS folder, and the role checks on both ends of a real gRPC connection."""

from __future__ import annotations

import builtins
import datetime as dt
import errno
import io
import ipaddress
import json
import logging
import os
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from timeouts import WAIT_S

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.pair.loopback import free_port
from ppbn.parties.net import dial
from ppbn.parties.pki import issue_certificate, make_ca, make_local_pki, make_request, sign_request
from ppbn.parties.tls import (
    DAEMON_ROLES,
    CertIdentity,
    TlsFiles,
    fingerprint,
    load_tls_files,
    peer_identity,
    server_credentials,
    verify_server_role,
)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = ppbn_main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppbn: error: "), err
    return lines[0]


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def party_via_cli(tmp_path: Path, capsys, role: str = "alice") -> dict[str, Path]:
    """alice's CA host, daemon host and operator host as three folders, made with the CLI."""
    ca, host, op = tmp_path / "ca", tmp_path / "host", tmp_path / "op"
    assert (
        run(["certs", "ca", "--out", str(ca), "--name", f"{role} CA", "--party", role], capsys)[0]
        == 0
    )
    assert (
        run(
            [
                "certs",
                "request",
                "--role",
                role,
                "--host",
                f"{role}.example.org",
                "--host",
                "10.0.0.7",
                "--out",
                str(host),
            ],
            capsys,
        )[0]
        == 0
    )
    operator = ["certs", "request", "--role", "operator", "--party", role, "--out", str(op)]
    assert run(operator, capsys)[0] == 0
    inbox = tmp_path / "inbox"  # what reaches the CA host: requests only
    inbox.mkdir()
    for folder, name in ((host, role), (op, "operator")):
        shutil.copy(folder / f"{name}.csr", inbox)
        code, out, _ = run(
            [
                "certs",
                "sign",
                "--ca",
                str(ca),
                "--csr",
                str(inbox / f"{name}.csr"),
                "--out",
                str(folder / f"{name}.crt"),
            ],
            capsys,
        )
        assert code == 0 and f"role {name}, party {role}" in out
        shutil.copy(ca / "ca.crt", folder / "ca.crt")
    return {"ca": ca, "host": host, "op": op}


# -- the CLI flow ------------------------------------------------------------------------


def test_request_sign_makes_role_certificates_with_only_the_given_hosts(tmp_path, capsys):
    dirs = party_via_cli(tmp_path, capsys)
    alice_files = load_tls_files(dirs["host"], "alice")
    operator_files = load_tls_files(dirs["op"], "operator")
    assert (alice_files.identity, alice_files.party) == ("alice", "alice")
    assert (operator_files.identity, operator_files.party) == ("operator", "alice")
    assert alice_files.warnings == () and alice_files.trusted_pem == alice_files.ca_pem
    for path in (dirs["ca"] / "ca.key", dirs["host"] / "alice.key", dirs["op"] / "operator.key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in dirs["ca"].iterdir()) == ["ca.crt", "ca.key"]  # no temp files

    ca = cert(dirs["ca"] / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == dt.timedelta(days=1825)
    alice = cert(dirs["host"] / "alice.crt")
    assert alice.subject.rfc4514_string() == "CN=alice" and alice.issuer == ca.subject
    assert alice.not_valid_after_utc - alice.not_valid_before_utc == dt.timedelta(days=397)
    usage = alice.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature
    assert not any(
        getattr(usage.value, n)
        for n in (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "key_cert_sign",
            "crl_sign",
        )
    )
    eku = alice.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    san = alice.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san) == {
        x509.DNSName("alice.example.org"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.7")),
        x509.UniformResourceIdentifier("urn:ppbn:role:alice"),
        x509.UniformResourceIdentifier("urn:ppbn:party:alice"),
    }
    assert not alice.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    operator = cert(dirs["op"] / "operator.crt")
    eku = operator.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]  # cannot serve as a daemon
    san = operator.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san) == {
        x509.UniformResourceIdentifier("urn:ppbn:role:operator"),
        x509.UniformResourceIdentifier("urn:ppbn:party:alice"),
    }


def test_openssl_reads_the_same_extensions(tmp_path, capsys):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary")
    dirs = party_via_cli(tmp_path, capsys)
    command = [openssl, "x509", "-in", str(dirs["host"] / "alice.crt"), "-text", "-noout"]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "X509v3 Key Usage: critical" in text and "Digital Signature" in text
    assert "Key Encipherment" not in text and "Certificate Sign" not in text
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in text
    for entry in (
        "DNS:alice.example.org",
        "IP Address:10.0.0.7",
        "URI:urn:ppbn:role:alice",
        "URI:urn:ppbn:party:alice",
    ):
        assert entry in text
    assert "localhost" not in text and "127.0.0.1" not in text
    verify = subprocess.run(
        [
            openssl,
            "verify",
            "-CAfile",
            str(dirs["ca"] / "ca.crt"),
            str(dirs["host"] / "alice.crt"),
            str(dirs["op"] / "operator.crt"),
        ],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_sign_reads_no_private_key_but_the_cas(tmp_path, capsys, monkeypatch):
    ca = tmp_path / "ca"
    make_ca(ca, "alice CA")
    make_request(tmp_path / "host", "alice", hosts=["alice.example.org"])  # key beside the CSR
    read: list[Path] = []
    real_read_bytes, real_open = Path.read_bytes, builtins.open

    def recording_read_bytes(self: Path) -> bytes:
        read.append(Path(self).resolve())
        return real_read_bytes(self)

    def recording_open(file, *args, **kwargs):
        if isinstance(file, str | Path):
            read.append(Path(file).resolve())
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", recording_read_bytes)
    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)
    csr = str(tmp_path / "host" / "alice.csr")
    code, out, err = run(
        ["certs", "sign", "--ca", str(ca), "--csr", csr, "--out", str(tmp_path / "alice.crt")],
        capsys,
    )
    monkeypatch.undo()
    assert code == 0, err
    assert "role alice, party alice, hosts alice.example.org" in out and "valid until" in out
    assert (ca / "ca.key").resolve() in read and (tmp_path / "host" / "alice.csr").resolve() in read
    assert {p for p in read if p.suffix == ".key"} == {(ca / "ca.key").resolve()}
    # and it works with the requester's key nowhere near the CA
    (tmp_path / "host" / "alice.key").unlink()
    assert (
        run(
            [
                "certs",
                "sign",
                "--ca",
                str(ca),
                "--csr",
                str(tmp_path / "host" / "alice.csr"),
                "--out",
                str(tmp_path / "alice.crt"),
                "--force",
            ],
            capsys,
        )[0]
        == 0
    )


def test_a_ca_is_never_replaced(tmp_path, capsys):
    ca = tmp_path / "ca"
    assert run(["certs", "ca", "--out", str(ca)], capsys)[0] == 0
    key = (ca / "ca.key").read_bytes()
    code, _, err = run(["certs", "ca", "--out", str(ca)], capsys)
    assert code == 2 and "never replaced" in one_line_error(err) and "by hand" in err
    assert (ca / "ca.key").read_bytes() == key
    (ca / "ca.key").unlink()  # a lone certificate still blocks: its key is gone, not replaceable
    code, _, err = run(["certs", "ca", "--out", str(ca), "--days", "30"], capsys)
    assert code == 2 and "ca.crt already exists" in one_line_error(err)
    assert sorted(p.name for p in ca.iterdir()) == ["ca.crt"]


def test_request_refuses_bad_input_and_overwriting(tmp_path, capsys):
    out = str(tmp_path / "r")
    for argv, message in (
        (["--role", "alice"], "needs at least one --host"),
        (["--role", "operator"], "an operator needs --party"),
        (["--role", "operator", "--party", "bob", "--host", "x.example"], "names no host"),
        (["--role", "bob", "--party", "alice", "--host", "b.example"], "is for party 'bob'"),
        (["--role", "bob", "--host", "b.example:7402"], "no port, no wildcard"),
        (["--role", "bob", "--host", "*.example"], "no port, no wildcard"),
    ):
        code, _, err = run(["certs", "request", *argv, "--out", out], capsys)
        assert code == 2 and message in one_line_error(err), (argv, err)
    bob = ["certs", "request", "--role", "bob", "--host", "b.example", "--out", out]
    assert run(bob, capsys)[0] == 0
    key = (tmp_path / "r" / "bob.key").read_bytes()
    code, _, err = run(bob, capsys)
    assert code == 2 and "use --force" in one_line_error(err)
    assert (tmp_path / "r" / "bob.key").read_bytes() == key
    assert run([*bob, "--force"], capsys)[0] == 0
    assert (tmp_path / "r" / "bob.key").read_bytes() != key


def test_sign_refuses_forged_and_foreign_requests(tmp_path, capsys):
    make_ca(tmp_path / "ca", "alice CA")
    _, csr_path = make_request(tmp_path, "alice", hosts=["alice.example.org"])
    request = x509.load_pem_x509_csr(csr_path.read_bytes())
    der = bytearray(request.public_bytes(serialization.Encoding.DER))
    der[-1] ^= 1  # the last byte of the signature
    forged = tmp_path / "forged.csr"
    forged.write_bytes(x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM))
    key = serialization.load_pem_private_key((tmp_path / "alice.key").read_bytes(), None)
    foreign = tmp_path / "foreign.csr"
    foreign.write_bytes(
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name.from_rfc4514_string("CN=alice"))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("alice.example.org"),
                    x509.UniformResourceIdentifier("urn:ppbn:role:alice"),
                    x509.UniformResourceIdentifier("urn:ppbn:party:bob"),
                ]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
    )
    for path, message in ((forged, "signature does not verify"), (foreign, "is for party 'alice'")):
        code, _, err = run(
            [
                "certs",
                "sign",
                "--ca",
                str(tmp_path / "ca"),
                "--csr",
                str(path),
                "--out",
                str(tmp_path / "x.crt"),
            ],
            capsys,
        )
        assert code == 2 and message in one_line_error(err), err
    assert not (tmp_path / "x.crt").exists()


def test_trust_checks_the_pinned_fingerprint(tmp_path, capsys):
    pki = make_local_pki(tmp_path / "pki", roles=("alice",))
    bob_ca, _ = make_ca(tmp_path / "bob-ca", "bob CA", party="bob")
    unbound, _ = make_ca(tmp_path / "unbound-ca", "unbound CA")
    tls = pki["alice"]
    right = fingerprint(cert(bob_ca))
    wrong = "00" * 32
    code, _, err = run(
        ["certs", "trust", "--tls-dir", str(tls), "--ca", str(bob_ca), "--fingerprint", wrong],
        capsys,
    )
    assert code == 2 and f"fingerprint is {right}, not the pinned" in one_line_error(err)
    assert not (tls / "trusted.crt").exists()
    for argv, message in (
        (["--ca", str(tls / "alice.crt")], "not a CA certificate"),
        (["--ca", str(tls / "ca.crt")], "this party's own CA"),
        (["--ca", str(bob_ca), "--fingerprint", "abc"], "expected 64 hex digits"),
        (["--ca", str(unbound)], "this CA names no party"),
    ):
        code, _, err = run(["certs", "trust", "--tls-dir", str(tls), *argv], capsys)
        assert code == 2 and message in one_line_error(err), err
    code, out, _ = run(
        [
            "certs",
            "trust",
            "--tls-dir",
            str(tls),
            "--ca",
            str(bob_ca),
            "--fingerprint",
            right.replace(":", "").lower(),
        ],
        capsys,
    )
    assert code == 0 and right in out and "matches the pinned fingerprint" in out
    code, out, _ = run(["certs", "trust", "--tls-dir", str(tls), "--ca", str(bob_ca)], capsys)
    assert code == 0 and right in out and "already trusted" in out
    files = load_tls_files(tls, "alice")
    assert [fingerprint(c) for c in x509.load_pem_x509_certificates(files.trusted_pem)] == [
        fingerprint(cert(tls / "ca.crt")),
        right,
    ]
    same_name, _ = make_ca(tmp_path / "impostor-ca", "bob CA", party="bob")
    code, _, err = run(["certs", "trust", "--tls-dir", str(tls), "--ca", str(same_name)], capsys)
    assert code == 2 and "CA names must differ" in one_line_error(err)


def test_inspect_shows_role_expiry_and_warnings(tmp_path, capsys):
    pki = make_local_pki(tmp_path / "pki", roles=("alice",))
    soon = _issue(
        tmp_path / "pki" / "ca-alice",
        pki["alice"] / "alice.csr",
        days_before=380,
        days_after=10,
        out=tmp_path / "soon.crt",
    )
    code, out, _ = run(["certs", "inspect", str(pki["alice"] / "alice.crt"), str(soon)], capsys)
    assert code == 0
    assert "role           alice" in out and "hosts          localhost, 127.0.0.1, ::1" in out
    assert "ext. key usage serverAuth, clientAuth" in out and "digital_signature (critical)" in out
    assert "days left      396" in out
    assert out.count("WARNING") == 1 and "WARNING: expires in 9 days" in out
    code, out, _ = run(
        [
            "certs",
            "inspect",
            str(pki["alice"] / "operator.crt"),
            str(soon),
            str(pki["alice"] / "ca.crt"),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    report = json.loads(out)
    assert [(r["role"], r["party"], r["is_ca"]) for r in report] == [
        ("operator", "alice", False),
        ("alice", "alice", False),
        ("", "alice", True),
    ]
    assert report[0]["hosts"] == [] and report[0]["extended_key_usage"] == ["clientAuth"]
    assert report[1]["days_left"] == 9 and report[1]["warning"].startswith("expires in 9 days")
    code, _, err = run(["certs", "inspect", str(pki["alice"] / "alice.key")], capsys)
    assert code == 2 and "is a private key" in one_line_error(err)


# -- a party's TLS folder -------------------------------------------------------------


def _issue(ca_dir: Path, csr: Path, days_before: float, days_after: float, out: Path) -> Path:
    """A certificate valid from ``days_before`` days ago until ``days_after`` days ahead."""
    now = dt.datetime.now(dt.UTC)
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    issued = issue_certificate(
        x509.load_pem_x509_csr(csr.read_bytes()),
        cert(ca_dir / "ca.crt"),
        ca_key,
        now - dt.timedelta(days=days_before),
        now + dt.timedelta(days=days_after),
    )
    out.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
    return out


def test_startup_refuses_expired_foreign_or_wrong_role_files_and_warns_ahead(tmp_path, caplog):
    pki = make_local_pki(tmp_path / "pki", roles=("alice", "bob"))
    alice, ca_alice = pki["alice"], tmp_path / "pki" / "ca-alice"
    _issue(ca_alice, alice / "alice.csr", 400, -1, alice / "alice.crt")
    with pytest.raises(UserError, match=r"alice.crt: certificate expired on "):
        load_tls_files(alice, "alice")
    _issue(ca_alice, alice / "alice.csr", 380, 20, alice / "alice.crt")
    with caplog.at_level(logging.WARNING, logger="ppbn.parties.tls"):
        files = load_tls_files(alice, "alice")
    assert len(files.warnings) == 1 and "alice.crt: expires in 19 days" in files.warnings[0]
    assert "expires in 19 days" in caplog.text
    assert files.not_after == cert(alice / "alice.crt").not_valid_after_utc

    shutil.copy(alice / "operator.crt", alice / "alice.crt")  # a certificate of another role
    with pytest.raises(UserError, match=r"certificate is for role 'operator', expected 'alice'"):
        load_tls_files(alice, "alice")
    shutil.copy(pki["bob"] / "bob.crt", alice / "alice.crt")
    with pytest.raises(UserError, match=r"certificate is for role 'bob', expected 'alice'"):
        load_tls_files(alice, "alice")
    shutil.copy(pki["bob"] / "ca.crt", alice / "ca.crt")  # bob's CA did not sign alice.crt
    _issue(ca_alice, alice / "alice.csr", 1, 300, alice / "alice.crt")
    with pytest.raises(UserError, match=r"alice.crt: not signed by the CA in .*ca.crt"):
        load_tls_files(alice, "alice")
    shutil.copy(ca_alice / "ca.crt", alice / "ca.crt")
    shutil.copy(alice / "operator.key", alice / "alice.key")
    with pytest.raises(UserError, match="key does not match"):
        load_tls_files(alice, "alice")
    with pytest.raises(UserError, match="miner.crt: certificate of miner not found"):
        load_tls_files(alice, "miner")


def test_local_pki_lays_out_one_folder_per_role_with_cross_trust(tmp_path):
    pki = make_local_pki(tmp_path)
    assert set(pki) == set(DAEMON_ROLES)
    cas = {role: fingerprint(cert(tmp_path / f"ca-{role}" / "ca.crt")) for role in DAEMON_ROLES}
    for role, tls in pki.items():
        assert tls == tmp_path / role and not (tls / "ca.key").exists()
        daemon, operator = load_tls_files(tls, role), load_tls_files(tls, "operator")
        assert (daemon.party, operator.party) == (role, role) and not daemon.warnings
        trusted = [fingerprint(c) for c in x509.load_pem_x509_certificates(daemon.trusted_pem)]
        assert trusted == [cas[role], *(cas[r] for r in DAEMON_ROLES if r != role)]
    again = make_local_pki(tmp_path, roles=("alice",))  # throwaway keys: a rerun replaces them
    assert fingerprint(cert(again["alice"] / "ca.crt")) != cas["alice"]


# -- the role checks over real connections ------------------------------------------------


class EchoServer:
    """A one-method gRPC server on loopback presenting ``files``' certificate; records the
    identity of every caller as the daemon would see it."""

    def __init__(self, files: TlsFiles) -> None:
        self.callers: list[CertIdentity | None] = []
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))

        def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.callers.append(peer_identity(context, files))
            return request

        handler = grpc.method_handlers_generic_handler(
            "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_secure_port("127.0.0.1:0", server_credentials(files))
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def call(self, client_files: TlsFiles) -> bytes:
        with dial(self.address, client_files, "the echo server") as channel:
            return channel.unary_unary("/test.Echo/Echo")(b"hi", timeout=WAIT_S)

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    return make_local_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def alice_server(pki):
    server = EchoServer(load_tls_files(pki["alice"], "alice"))
    yield server
    server.stop()


def test_verify_server_role_names_what_it_found(pki, alice_server):
    bob_operator = load_tls_files(pki["bob"], "operator")
    found_alice = r"presents a certificate for 'alice' \(party alice.*expected bob"
    with pytest.raises(UserError, match=found_alice):
        verify_server_role(alice_server.address, bob_operator, ("bob",))
    alice_operator = load_tls_files(pki["alice"], "operator")
    found = verify_server_role(alice_server.address, alice_operator, DAEMON_ROLES)
    assert (found.role, found.party, found.issued_by_own_ca) == ("alice", "alice", True)
    assert found.fingerprint == fingerprint(cert(pki["alice"] / "alice.crt"))
    assert not verify_server_role(alice_server.address, bob_operator, ("alice",)).issued_by_own_ca


def test_verify_server_role_refuses_an_untrusted_or_absent_server(tmp_path, alice_server):
    stranger = load_tls_files(make_local_pki(tmp_path, roles=("bob",))["bob"], "bob")
    untrusted = r"TLS with 127.0.0.1:\d+ failed: .*not signed by a CA we trust"
    with pytest.raises(UserError, match=untrusted):
        verify_server_role(alice_server.address, stranger, ("alice",))
    with pytest.raises(UserError, match="refused the connection"):
        verify_server_role(f"127.0.0.1:{free_port()}", stranger, ("alice",))


def test_peer_identity_on_a_real_call(pki, alice_server):
    for party, identity in (("alice", "operator"), ("bob", "bob"), ("bob", "operator")):
        assert alice_server.call(load_tls_files(pki[party], identity)) == b"hi"
    seen = [(c.role, c.party, c.common_name, c.issued_by_own_ca) for c in alice_server.callers]
    assert seen == [
        ("operator", "alice", "operator", True),
        ("bob", "bob", "bob", False),
        ("operator", "bob", "operator", False),
    ]


def test_a_shared_ca_works_and_grpc_checks_the_dialled_host(tmp_path):
    ca = tmp_path / "ca"
    make_ca(ca, "shared CA")
    hosts = {"alice": "127.0.0.1", "bob": "127.0.0.1", "miner": "miner.example.org"}
    for role, host in hosts.items():
        _, csr = make_request(tmp_path / role, role, hosts=[host])
        sign_request(ca, csr, tmp_path / role / f"{role}.crt")
        shutil.copy(ca / "ca.crt", tmp_path / role / "ca.crt")
    alice, bob, miner = (load_tls_files(tmp_path / r, r) for r in ("alice", "bob", "miner"))
    assert b"-----BEGIN CERTIFICATE-----" in bob.trusted_pem and bob.trusted_pem == bob.ca_pem
    server = EchoServer(alice)
    try:
        assert server.call(bob) == b"hi"
        assert [(c.role, c.issued_by_own_ca) for c in server.callers] == [("bob", True)]
    finally:
        server.stop()
    server = EchoServer(miner)  # its certificate names miner.example.org, not 127.0.0.1
    try:
        with pytest.raises(grpc.RpcError, match="(?i)hostname verification"):
            server.call(bob)
        with pytest.raises(UserError, match="not made for host 127.0.0.1"):
            verify_server_role(server.address, bob, ("miner",))
    finally:
        server.stop()


# -- a key and its request together; a CA signs for its own party only --------------------


def test_request_force_replaces_key_and_request_together_or_neither(tmp_path, capsys, monkeypatch):
    import ppbn.parties.pki as pki

    out = tmp_path / "host"
    bob = ["certs", "request", "--role", "bob", "--host", "b.example", "--out", str(out), "--force"]
    assert run(bob, capsys)[0] == 0
    old = {name: (out / name).read_bytes() for name in ("bob.key", "bob.csr")}
    real_replace = os.replace

    def replace_fails_for_the_request(src, dst, *args, **kwargs):
        if str(dst).endswith("bob.csr") and str(src).endswith(".tmp"):
            raise OSError(errno.EACCES, "Permission denied")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(pki.os, "replace", replace_fails_for_the_request)
    code, _, err = run(bob, capsys)
    monkeypatch.undo()
    assert (
        code == 2
        and one_line_error(err) == f"ppbn: error: cannot write {out / 'bob.csr'}: Permission denied"
    )
    assert {name: (out / name).read_bytes() for name in old} == old  # the old pair, untouched
    assert sorted(p.name for p in out.iterdir()) == ["bob.csr", "bob.key"]  # no temporaries
    assert run(bob, capsys)[0] == 0  # and a working replacement replaces both
    assert all((out / name).read_bytes() != data for name, data in old.items())


@pytest.mark.parametrize(
    ("role", "party"), [("bob", "bob"), ("miner", "miner"), ("operator", "bob")]
)
def test_a_party_ca_refuses_another_partys_request_unless_told(tmp_path, capsys, role, party):
    ca = tmp_path / "alice-ca"
    make_ca(ca, "alice CA", party="alice")
    _, csr = make_request(
        tmp_path / "host", role, party, [] if role == "operator" else ["h.example"]
    )
    sign = ["certs", "sign", "--ca", str(ca), "--csr", str(csr), "--out", str(tmp_path / "x.crt")]
    code, _, err = run(sign, capsys)
    assert code == 2 and one_line_error(err) == (
        f"ppbn: error: {csr}: a request of party {party!r}, but {ca} is the CA of party 'alice': "
        f"sign it with {party}'s CA (or pass --allow-other-party if you mean it)"
    )
    assert not (tmp_path / "x.crt").exists()
    code, out, err = run([*sign, "--allow-other-party"], capsys)
    assert code == 0 and f"role {role}, party {party}" in out, err
