"""A party's TLS at run time: its checked certificate files, gRPC credentials, and who a
verified peer is.

Certificates say who they are for in two SAN URIs that the daemons authorise on:
``urn:ppbn:role:<role>`` (alice, bob, miner or operator) and ``urn:ppbn:party:<party>``
(the party whose daemon an operator may control; the role itself for daemons). The
subject CN repeats the role for people. DNS names and IP addresses in the SAN are only
the hosts given when the request was made, so gRPC's ordinary host-name check against
the dialled address is what binds a daemon to its address; the role is checked
separately (``verify_server_role`` on the client side, ``peer_identity`` on the server
side).

One party's TLS folder (``ppbn party serve --tls-dir DIR --role alice``):
``ca.crt`` (this party's CA certificate; never its key), optional ``trusted.crt`` (the
other parties' CA certificates), ``alice.crt`` + ``alice.key``, and optionally
``operator.crt`` + ``operator.key`` for an operator of this party. The files are made
offline by ``ppbn/parties/pki.py``, which reads them with the helpers here, so the CA
tooling and the daemons apply the same rules.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ppbn.errors import UserError

# the roles (alice, bob, miner, operator) live in parties.constants, which the command line
# reads without grpc and cryptography; the daemons import them from here as well
from ppbn.parties.constants import DAEMON_ROLES as DAEMON_ROLES
from ppbn.parties.constants import EXPIRY_WARNING_DAYS, ROLES
from ppbn.parties.constants import MINER as MINER
from ppbn.parties.constants import OPERATOR as OPERATOR
from ppbn.parties.constants import PARTY_ROLES as PARTY_ROLES

ROLE_URI = "urn:ppbn:role:"
PARTY_URI = "urn:ppbn:party:"
CA_CERT, CA_KEY, TRUSTED = "ca.crt", "ca.key", "trusted.crt"

log = logging.getLogger(__name__)

# what OpenSSL reports when the bytes that come back are not a TLS record at all
_NOT_TLS_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "PACKET_LENGTH_TOO_LONG",
        "HTTP_REQUEST",
        "RECORD_LAYER_FAILURE",
        "UNKNOWN_PROTOCOL",
    }
)


@dataclass(frozen=True)
class TlsFiles:
    """One identity's certificate and key with the CA certificates it trusts, checked at load."""

    identity: str  # role of this certificate
    party: str  # party it belongs to (== identity for daemons)
    ca_pem: bytes  # this party's own CA certificate
    trusted_pem: bytes  # ca_pem + every imported CA (root certificates for gRPC)
    cert_pem: bytes
    key_pem: bytes
    cert_path: Path
    key_path: Path
    not_after: dt.datetime
    warnings: tuple[str, ...]  # e.g. expiry within EXPIRY_WARNING_DAYS
    imported_cas: tuple[x509.Certificate, ...] = ()  # the other parties' CAs (trusted.crt)


@dataclass(frozen=True)
class CertIdentity:
    """Who a verified peer certificate is for; ``role`` is "" when it names no ppbn role."""

    role: str
    party: str
    common_name: str
    fingerprint: str
    issued_by_own_ca: bool  # signed by files.ca_pem (this party's CA)
    issuer_party: str = ""  # the party named by the CA that signed it ("" if unbound or unknown)

    @property
    def vouched_for(self) -> bool:
        """Signed by our own CA, or by a trusted CA bound to the party the certificate names:
        a party's CA cannot issue certificates for another party's role."""
        return self.issued_by_own_ca or (
            bool(self.issuer_party) and self.issuer_party == self.party
        )


# -- reading certificates and keys (the daemons and the CA tooling alike) ----------


def now_utc() -> dt.datetime:
    """Aware UTC time: certificate validity is compared against it."""
    return dt.datetime.now(dt.UTC)


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER in colon-separated hex pairs, as ``openssl x509 -fingerprint`` has it."""
    return ":".join(
        f"{b:02X}" for b in hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()
    )


def expiry_warning(not_after: dt.datetime, now: dt.datetime) -> str:
    """One line saying when a certificate expires (or did); empty while that is far off."""
    if not_after <= now:
        return f"expired on {not_after:%Y-%m-%d %H:%M} UTC"
    left = not_after - now
    if left <= dt.timedelta(days=EXPIRY_WARNING_DAYS):
        return f"expires in {left.days} days ({not_after:%Y-%m-%d %H:%M} UTC): renew it"
    return ""


def cert_pem(cert: x509.Certificate) -> bytes:
    """A certificate as PEM, the form the files and gRPC take."""
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """A private key as unencrypted PKCS#8 PEM: its file's mode (0600) is what protects it."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def read_pem_file(path: Path, what: str) -> bytes:
    """A file's bytes, or one line naming the file and what it should hold."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found (see `ppbn certs --help`)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what}: {exc.strerror}") from None


def load_certs(data: bytes, path: Path) -> list[x509.Certificate]:
    """Every certificate in PEM data (a bundle holds several)."""
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise UserError(f"{path}: not a PEM certificate") from None
    return certs


def load_cert(path: Path, what: str) -> x509.Certificate:
    """The certificate of a file that must hold exactly one."""
    certs = load_certs(read_pem_file(path, what), path)
    if len(certs) != 1:
        raise UserError(f"{path}: holds {len(certs)} certificates, expected one ({what})")
    return certs[0]


def load_key(path: Path, what: str) -> ec.EllipticCurvePrivateKey:
    """An unencrypted ECDSA private key, the only kind ppbn makes."""
    try:
        key = serialization.load_pem_private_key(read_pem_file(path, what), password=None)
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"{path}: cannot read the {what} (unencrypted PEM expected): {exc}"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise UserError(f"{path}: the {what} is not an ECDSA key")
    return key


def same_key(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> bool:
    """Whether a key belongs to a certificate: a mismatch is caught before any handshake."""
    return key.public_key().public_numbers() == cert.public_key().public_numbers()


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``cert`` directly (ppbn CAs have no intermediates)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def common_name(name: x509.Name) -> str:
    """The CN of a name, "" without one."""
    values = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else ""


def find_extension(extensions: x509.Extensions, kind: type) -> Any:
    """The extension of that class, None when absent."""
    try:
        return extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None


def san_identity(extensions: x509.Extensions) -> tuple[str, str, tuple[str, ...], list[str]]:
    """(role, party, hosts, URIs that are neither) from a SAN; role/party "" when absent."""
    san = find_extension(extensions, x509.SubjectAlternativeName)
    if san is None:
        return "", "", (), []
    roles, parties, others = [], [], []
    for uri in san.value.get_values_for_type(x509.UniformResourceIdentifier):
        if uri.startswith(ROLE_URI):
            roles.append(uri.removeprefix(ROLE_URI))
        elif uri.startswith(PARTY_URI):
            parties.append(uri.removeprefix(PARTY_URI))
        else:
            others.append(uri)
    hosts = (
        *san.value.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)),
    )
    role = roles[0] if len(roles) == 1 else ""
    party = parties[0] if len(parties) == 1 else ""
    if len(roles) > 1 or len(parties) > 1:
        others += [f"{ROLE_URI}{r}" for r in roles] + [f"{PARTY_URI}{p}" for p in parties]
    return role, party, hosts, others


def cert_role(cert: x509.Certificate) -> tuple[str, str]:
    """(role, party) named by a certificate's SAN URIs; ("", "") when it names none."""
    role, party, _, _ = san_identity(cert.extensions)
    return role, party


def check_ca_cert(cert: x509.Certificate, where: str) -> None:
    """Refuse anything but an unexpired self-signed CA certificate, to trust or to serve with."""
    basic = find_extension(cert.extensions, x509.BasicConstraints)
    usage = find_extension(cert.extensions, x509.KeyUsage)
    if not (basic and basic.value.ca) or not (usage and usage.value.key_cert_sign):
        raise UserError(f"{where}: not a CA certificate")
    if cert.issuer != cert.subject or not issued_by(cert, cert):
        raise UserError(f"{where}: not a self-signed CA certificate")
    if cert.not_valid_after_utc <= now_utc():
        raise UserError(f"{where}: the CA expired on {cert.not_valid_after_utc:%Y-%m-%d}")


# -- a party's TLS folder ---------------------------------------------------------------


def load_tls_files(tls_dir: str | Path, identity: str) -> TlsFiles:
    """Read and check one identity's TLS files before serving or dialling.

    Catching a certificate made for another role, signed by another CA, paired with the
    wrong key or expired here gives a one-line error at startup instead of an opaque TLS
    failure at the first connection. Expiry within EXPIRY_WARNING_DAYS is logged and
    returned in ``warnings``.
    """
    if identity not in ROLES:
        raise UserError(f"identity must be one of {', '.join(ROLES)}, got {identity!r}")
    base = Path(tls_dir)
    now = now_utc()
    warnings: list[str] = []
    ca_path = base / CA_CERT
    ca = load_cert(ca_path, "CA certificate")
    check_ca_cert(ca, str(ca_path))
    bundle_path = base / TRUSTED
    imported = (
        load_certs(read_pem_file(bundle_path, "bundle"), bundle_path)
        if bundle_path.exists()
        else []
    )
    for cert in imported:
        where = f"{bundle_path} ({cert.subject.rfc4514_string()})"
        basic = find_extension(cert.extensions, x509.BasicConstraints)
        if not (basic and basic.value.ca):
            raise UserError(f"{where}: not a CA certificate")
        if cert.not_valid_after_utc <= now:
            warnings.append(
                f"{where}: {expiry_warning(cert.not_valid_after_utc, now)}; "
                "its certificates are no longer accepted"
            )
    cert_path, key_path = base / f"{identity}.crt", base / f"{identity}.key"
    cert = load_cert(cert_path, f"certificate of {identity}")
    key = load_key(key_path, f"private key of {identity}")
    role, party = cert_role(cert)
    if not role:
        raise UserError(
            f"{cert_path}: names no ppbn role (made before per-party certificates? "
            "request a new one with `ppbn certs request`)"
        )
    if role != identity:
        raise UserError(f"{cert_path}: certificate is for role {role!r}, expected {identity!r}")
    if not issued_by(cert, ca):
        raise UserError(f"{cert_path}: not signed by the CA in {ca_path}")
    ca_party = cert_role(ca)[1]
    if ca_party and ca_party != party:
        raise UserError(
            f"{cert_path}: certificate of party {party!r} from {ca_path}, the CA of party {ca_party!r}"
        )
    if not same_key(key, cert):
        raise UserError(f"{key_path}: key does not match {cert_path}")
    if cert.not_valid_after_utc <= now:
        raise UserError(
            f"{cert_path}: certificate expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
        )
    if cert.not_valid_before_utc > now:
        raise UserError(
            f"{cert_path}: certificate not valid before "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC (check the clock)"
        )
    for path, not_after in (
        (cert_path, cert.not_valid_after_utc),
        (ca_path, ca.not_valid_after_utc),
    ):
        note = expiry_warning(not_after, now)
        if note:
            warnings.append(f"{path}: {note}")
    if (base / CA_KEY).exists():
        warnings.append(
            f"{base / CA_KEY}: a CA key next to the daemon's files; keep it on the CA host"
        )
    for warning in warnings:
        log.warning("TLS: %s", warning)
    ca_pem = cert_pem(ca)
    return TlsFiles(
        identity=identity,
        party=party,
        ca_pem=ca_pem,
        trusted_pem=ca_pem + b"".join(cert_pem(c) for c in imported),
        cert_pem=cert_pem(cert),
        key_pem=key_pem(key),
        cert_path=cert_path,
        key_path=key_path,
        not_after=cert.not_valid_after_utc,
        warnings=tuple(warnings),
        imported_cas=tuple(imported),
    )


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Server side of mutual TLS: present our certificate, require one from a trusted CA."""
    return grpc.ssl_server_credentials(
        [(files.key_pem, files.cert_pem)],
        root_certificates=files.trusted_pem,
        require_client_auth=True,
    )


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Client side of mutual TLS: check the server against the trusted CAs, present our own."""
    return grpc.ssl_channel_credentials(
        root_certificates=files.trusted_pem,
        private_key=files.key_pem,
        certificate_chain=files.cert_pem,
    )


def _identity(cert: x509.Certificate, files: TlsFiles) -> CertIdentity:
    role, party = cert_role(cert)
    own_ca = x509.load_pem_x509_certificate(files.ca_pem)
    own = issued_by(cert, own_ca)
    issuer = own_ca if own else next((ca for ca in files.imported_cas if issued_by(cert, ca)), None)
    issuer_party = cert_role(issuer)[1] if issuer is not None else ""
    return CertIdentity(
        role, party, common_name(cert.subject), fingerprint(cert), own, issuer_party
    )


def _client_certificate(context: grpc.ServicerContext) -> x509.Certificate | None:
    pems = context.auth_context().get("x509_pem_cert") or []
    if not pems:
        return None
    try:
        return x509.load_pem_x509_certificate(pems[0])
    except ValueError:
        return None


def peer_identity(context: grpc.ServicerContext, files: TlsFiles) -> CertIdentity | None:
    """Who the caller's TLS-verified client certificate is for; None without one (plaintext)."""
    cert = _client_certificate(context)
    return None if cert is None else _identity(cert, files)


def caller_identity(context: grpc.ServicerContext) -> str:
    """The caller's role from its verified certificate (role URI, else CN); "" without TLS."""
    cert = _client_certificate(context)
    if cert is not None:
        role, _ = cert_role(cert)
        if role:
            return role
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode("utf-8", "replace") if names else ""


def split_address(address: str) -> tuple[str, int]:
    """HOST and PORT of ``HOST:PORT`` or ``[IPv6]:PORT``."""
    match = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", address.strip())
    if not match:
        raise UserError(f"address {address!r}: expected HOST:PORT or [IPv6]:PORT")
    host = match.group(1) or match.group(3)
    return host, int(match.group(2) or match.group(4))


def verify_server_role(
    address: str, files: TlsFiles, expected_roles: tuple[str, ...], timeout_s: float = 5.0
) -> CertIdentity:
    """Check that the daemon at ``address`` presents a certificate of one of ``expected_roles``.

    gRPC verifies the CA and the host name but cannot tell us which role the server's
    certificate names, so this opens one short TLS connection of its own (our client
    certificate, the same trusted CAs, ALPN h2 as gRPC, host name checked) and reads the
    role URI of what the server presents.
    """
    host, port = split_address(address)
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cadata=files.trusted_pem.decode("ascii")
    )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert_path, files.key_path)
    context.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except ssl.SSLCertVerificationError as exc:
        why = (
            f"its certificate is not made for host {host}"
            if "mismatch" in str(exc.verify_message).lower()  # host name or IP address
            else "its certificate is not signed by a CA we trust"
        )
        raise UserError(f"TLS with {address} failed: {why} ({exc.verify_message})") from None
    except ssl.SSLError as exc:
        if exc.reason in _NOT_TLS_REASONS:  # e.g. a web server answered our hello in plain text
            raise UserError(
                f"{address} answered, but not with TLS: is it a ppbn daemon? "
                "(check the HOST:PORT given with --peer)"
            ) from None
        raise UserError(f"TLS with {address} failed: {exc.reason or exc}") from None
    except ConnectionRefusedError:
        raise UserError(
            f"{address} refused the connection: is the daemon running and listening there?"
        ) from None
    except TimeoutError:
        raise UserError(f"{address} did not answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise UserError(f"cannot reach {address}: {exc.strerror or exc}") from None
    found = _identity(x509.load_der_x509_certificate(der), files)  # CERT_REQUIRED: never None
    if found.role not in expected_roles:
        raise UserError(
            f"{address} presents a certificate for {found.role or '(no role)'!r} (party "
            f"{found.party or '-'}, CN {found.common_name}), expected {' or '.join(expected_roles)}"
        )
    if found.role != found.party or not found.vouched_for:
        raise UserError(
            f"{address} presents a {found.role!r} certificate issued by a CA of party "
            f"{found.issuer_party or '(none)'!r}: only {found.role}'s own CA (or ours) may issue it"
        )
    return found
