"""Certificates for the two daemons and their operators, and gRPC credentials from them.

Trust model: one small CA that both organisations agree on signs one certificate per
identity. The common name is the identity the daemons authorise on: ``alice`` and
``bob`` for the daemons, ``miner`` for the data miner of the PRAM path (setup II), and
``operator`` for someone driving jobs with ``ppbn learn``.
A daemon dialling its peer checks that the peer's certificate is signed by the CA *and*
names the expected role (gRPC's target-name override), so a certificate for the wrong
role is refused by TLS itself. Party certificates also name ``ppbn-party``, which is what
``ppbn learn`` checks when it does not know which of the two daemons it is talking to.

Keys are ECDSA P-256: as strong as RSA-3072 for TLS and much faster to make.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppbn.errors import UserError

PARTY_ROLES = ("alice", "bob")
MINER = "miner"  # the data miner of the PRAM path's setup II: a daemon without data
DAEMON_ROLES = (*PARTY_ROLES, MINER)
OPERATOR = "operator"
ANY_PARTY_NAME = "ppbn-party"
CA_NAME = "ppbn test CA"
VALIDITY_DAYS = 825
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class TlsFiles:
    """PEM bytes of the CA certificate and of one identity's certificate and key."""

    identity: str
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san_entries(names: list[str]) -> list[x509.GeneralName]:
    entries: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


def _write(path: Path, data: bytes, private: bool) -> None:
    path.write_bytes(data)
    if private:
        os.chmod(path, 0o600)


def make_certificates(out_dir: str | Path, hosts: list[str] | None = None) -> list[Path]:
    """Write ca.crt/ca.key and <identity>.crt/.key for alice, bob, miner and operator.

    Daemon certificates (alice, bob, miner) name their role, ``ppbn-party``, localhost and loopback addresses
    and every entry of ``hosts`` (DNS names or IP addresses). Returns the written paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=VALIDITY_DAYS)

    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    written = [out / "ca.crt", out / "ca.key"]
    _write(written[0], ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    _write(written[1], _key_pem(ca_key), private=True)

    for identity in (*DAEMON_ROLES, OPERATOR):
        key = _new_key()
        if identity == OPERATOR:
            names = [OPERATOR]
            usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        else:
            names = [identity, ANY_PARTY_NAME, *DEFAULT_HOSTS, *(hosts or [])]
            usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(_san_entries(names)), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        cert_path, key_path = out / f"{identity}.crt", out / f"{identity}.key"
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(key_path, _key_pem(key), private=True)
        written += [cert_path, key_path]
    return written


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found (make one with `ppbn certs make --out DIR`)") from None


def load_tls_files(tls_dir: str | Path, identity: str) -> TlsFiles:
    """Read ca.crt and <identity>.crt/.key and check they fit together before serving.

    Catching a certificate made for another role, or signed by another CA, here gives a
    one-line error at startup instead of an opaque TLS failure at the first connection.
    """
    base = Path(tls_dir)
    ca_pem = _read(base / "ca.crt", "CA certificate")
    cert_path = base / f"{identity}.crt"
    cert_pem = _read(cert_path, f"certificate of {identity}")
    key_pem = _read(base / f"{identity}.key", f"private key of {identity}")
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError as exc:
        raise UserError(f"{base}: cannot read the PEM files of {identity}: {exc}") from None
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if names != [identity]:
        raise UserError(f"{cert_path}: certificate is for {names}, expected common name {identity!r}")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise UserError(f"{cert_path}: not signed by the CA in {base / 'ca.crt'}") from None
    if key.public_key().public_numbers() != cert.public_key().public_numbers():
        raise UserError(f"{base / (identity + '.key')}: key does not match {cert_path}")
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC):
        raise UserError(f"{cert_path}: certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    return TlsFiles(identity, ca_pem, cert_pem, key_pem)


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Server side of mutual TLS: present our certificate, require a CA-signed client one."""
    return grpc.ssl_server_credentials(
        [(files.key_pem, files.cert_pem)], root_certificates=files.ca_pem, require_client_auth=True
    )


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Client side of mutual TLS: verify the server against the CA, present our certificate."""
    return grpc.ssl_channel_credentials(
        root_certificates=files.ca_pem, private_key=files.key_pem, certificate_chain=files.cert_pem
    )


def caller_identity(context: grpc.ServicerContext) -> str:
    """Common name of the caller's verified client certificate; "" on a plaintext server."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode("utf-8", "replace") if names else ""
