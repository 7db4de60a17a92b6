"""Per-party PKI for the daemons and their operators, and gRPC credentials from it.

Trust model: every organisation runs its own small CA (``ppbn certs ca``) and no private
key ever leaves the machine that made it: a daemon or operator host makes its key and a
certificate request locally (``request``), the CA host checks and signs the request
(``sign``), and the two organisations cross-trust each other's CA certificate after
comparing its SHA-256 fingerprint out of band (``trust``). A single CA shared by everybody
works too: then there is nothing to cross-trust.

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
``operator.crt`` + ``operator.key`` for an operator of this party.

Keys are ECDSA P-256: as strong as RSA-3072 for TLS and much faster to make.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import re
import secrets
import shutil
import socket
import ssl
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
ROLES = (*DAEMON_ROLES, OPERATOR)
ROLE_URI = "urn:ppbn:role:"
PARTY_URI = "urn:ppbn:party:"
LEAF_DAYS = 397  # the CA/Browser Forum's ceiling: renewal stays a yearly habit
CA_DAYS = 1825
EXPIRY_WARNING_DAYS = 30
CLOCK_SKEW = dt.timedelta(minutes=5)  # certificates start a little in the past
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
CA_CERT, CA_KEY, TRUSTED = "ca.crt", "ca.key", "trusted.crt"

log = logging.getLogger(__name__)

_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"^{_DNS_LABEL}(?:\.{_DNS_LABEL})*$")
_EKU_NAMES = {
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
}
# what OpenSSL reports when the bytes that come back are not a TLS record at all
_NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST",
                              "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL"})  # fmt: skip
_KEY_USAGES = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
               "key_agreement", "key_cert_sign", "crl_sign")  # fmt: skip


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
        return self.issued_by_own_ca or (bool(self.issuer_party) and self.issuer_party == self.party)


@dataclass(frozen=True)
class CertSummary:
    """What ``ppbn certs inspect`` and ``sign`` show about a certificate or a request."""

    kind: str  # "certificate" or "request"
    subject: str
    role: str
    party: str
    hosts: tuple[str, ...]
    is_ca: bool = False
    issuer: str = ""
    serial: str = ""
    fingerprint: str = ""
    key_usage: tuple[str, ...] = ()
    key_usage_critical: bool = False
    extended_key_usage: tuple[str, ...] = ()
    not_before: dt.datetime | None = None
    not_after: dt.datetime | None = None

    def days_left(self, now: dt.datetime) -> int | None:
        return None if self.not_after is None else (self.not_after - now).days

    def warning(self, now: dt.datetime) -> str:
        return "" if self.not_after is None else expiry_warning(self.not_after, now)

    def to_json(self, now: dt.datetime) -> dict[str, Any]:
        def when(value: dt.datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "kind": self.kind, "subject": self.subject, "role": self.role, "party": self.party,
            "hosts": list(self.hosts), "is_ca": self.is_ca, "issuer": self.issuer,
            "serial": self.serial, "sha256": self.fingerprint, "key_usage": list(self.key_usage),
            "key_usage_critical": self.key_usage_critical,
            "extended_key_usage": list(self.extended_key_usage),
            "not_before": when(self.not_before), "not_after": when(self.not_after),
            "days_left": self.days_left(now), "warning": self.warning(now),
        }  # fmt: skip


# -- small helpers ---------------------------------------------------------------------


def _now() -> dt.datetime:
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


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_file(path: Path, data: bytes, *, private: bool, replace: bool) -> None:
    """One file through ``_write_files``."""
    _write_files([(path, data, private)], replace=replace)


def _write_files(files: Sequence[tuple[Path, bytes, bool]], *, replace: bool) -> None:
    """Write (path, data, private) files that belong together (a key and its certificate
    or request) through temporary files and renames, so a crash never leaves half a key
    and a failure never leaves a key beside a request or certificate it does not match.

    Every target is checked and every temporary file written before the first one is put
    in place. Without ``replace`` the final step is a hard link, which fails rather than
    overwrite a file that appeared meanwhile (a CA key is never replaced); files placed
    before a failure are then removed again. With ``replace`` each old file is first kept
    aside, so a failure part-way puts the old set back: old and new are never mixed.
    """
    for path, _, _ in files:
        if path.exists() and not path.is_file():
            raise UserError(f"cannot write {path}: it exists and is not a file")
    temps: list[str] = []
    placed: list[Path] = []
    kept: dict[Path, str] = {}  # an old file replaced in this call -> its copy kept aside
    try:
        if replace:
            for path, _, _ in files:
                if path.is_file():
                    kept[path] = _keep_aside(path)
                    temps.append(kept[path])
        for path, data, private in files:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                temps.append(tmp)
                os.fchmod(fd, 0o600 if private else 0o644)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:
                raise UserError(f"cannot write {path}: {exc.strerror}") from None
        new_temps = temps[len(kept) :]
        for (path, _, _), tmp in zip(files, new_temps, strict=True):
            try:
                if replace:
                    os.replace(tmp, path)
                else:
                    os.link(tmp, path)
                placed.append(path)
            except FileExistsError:
                raise UserError(f"{path} already exists; not replacing it") from None
            except OSError as exc:
                raise UserError(f"cannot write {path}: {exc.strerror}") from None
        placed.clear()
    finally:
        for path in placed:  # a failure after some new files were placed: take them back
            if path in kept:
                with contextlib.suppress(OSError):
                    os.replace(kept[path], path)
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _keep_aside(path: Path) -> str:
    """A copy of ``path`` beside it (a hard link where the file system has them), so a
    replacement that fails part-way can put the old file back."""
    aside = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.old")
    try:
        try:
            os.link(path, aside)
        except OSError:
            shutil.copy2(path, aside)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(aside)
        raise UserError(f"cannot replace {path}: {exc.strerror}") from None
    return aside


def _refuse_existing(paths: Iterable[Path], force: bool) -> None:
    if force:
        return
    for path in paths:
        if path.exists():
            raise UserError(f"{path} already exists (use --force to replace it)")


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found (see `ppbn certs --help`)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what}: {exc.strerror}") from None


def _load_certs(data: bytes, path: Path) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise UserError(f"{path}: not a PEM certificate") from None
    return certs


def _load_cert(path: Path, what: str) -> x509.Certificate:
    certs = _load_certs(_read(path, what), path)
    if len(certs) != 1:
        raise UserError(f"{path}: holds {len(certs)} certificates, expected one ({what})")
    return certs[0]


def _load_key(path: Path, what: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(_read(path, what), password=None)
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"{path}: cannot read the {what} (unencrypted PEM expected): {exc}"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise UserError(f"{path}: the {what} is not an ECDSA key")
    return key


def _same_key(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> bool:
    return key.public_key().public_numbers() == cert.public_key().public_numbers()


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _common_name(name: x509.Name) -> str:
    values = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else ""


def _extension(extensions: x509.Extensions, kind: type) -> Any:
    try:
        return extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None


def _san_identity(extensions: x509.Extensions) -> tuple[str, str, tuple[str, ...], list[str]]:
    """(role, party, hosts, URIs that are neither) from a SAN; role/party "" when absent."""
    san = _extension(extensions, x509.SubjectAlternativeName)
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
    hosts = (*san.value.get_values_for_type(x509.DNSName),
             *(str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)))  # fmt: skip
    role = roles[0] if len(roles) == 1 else ""
    party = parties[0] if len(parties) == 1 else ""
    if len(roles) > 1 or len(parties) > 1:
        others += [f"{ROLE_URI}{r}" for r in roles] + [f"{PARTY_URI}{p}" for p in parties]
    return role, party, hosts, others


def cert_role(cert: x509.Certificate) -> tuple[str, str]:
    """(role, party) named by a certificate's SAN URIs; ("", "") when it names none."""
    role, party, _, _ = _san_identity(cert.extensions)
    return role, party


def _host_entries(hosts: Iterable[str]) -> list[x509.GeneralName]:
    """SAN entries for host names and IP addresses, refusing anything else (ports, wildcards)."""
    entries: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
            continue
        except ValueError:
            pass
        name = host.lower().rstrip(".")
        if len(name) > 253 or not _DNS_NAME.match(name):
            raise UserError(
                f"--host {host!r}: give a DNS name or an IP address (no port, no wildcard)"
            )
        entries.append(x509.DNSName(name))
    return entries


def _check_identity(role: str, party: str, hosts: Sequence[str], where: str) -> None:
    """The rules every request and certificate obeys: daemons name themselves and at least
    one host; operators name the party they act for and no host (they never serve)."""
    if role not in ROLES:
        raise UserError(f"{where}: role {role or '(none)'!r} is not one of {', '.join(ROLES)}")
    if role == OPERATOR:
        if party not in DAEMON_ROLES:
            raise UserError(
                f"{where}: an operator needs --party {'|'.join(DAEMON_ROLES)}, "
                f"got {party or '(none)'!r}"
            )
        if hosts:
            raise UserError(
                f"{where}: an operator certificate names no host, got {', '.join(hosts)}"
            )
        return
    if party != role:
        raise UserError(f"{where}: a {role} certificate is for party {role!r}, not {party!r}")
    if not hosts:
        raise UserError(
            f"{where}: the {role} daemon's certificate needs at least one --host "
            "(a DNS name or IP address it is dialled at)"
        )


def summarize(item: x509.Certificate | x509.CertificateSigningRequest) -> CertSummary:
    """The fields people check before trusting, signing or deploying a certificate."""
    role, party, hosts, _ = _san_identity(item.extensions)
    basic = _extension(item.extensions, x509.BasicConstraints)
    is_ca = bool(basic and basic.value.ca)
    if isinstance(item, x509.CertificateSigningRequest):
        return CertSummary("request", item.subject.rfc4514_string(), role, party, hosts, is_ca)
    usage = _extension(item.extensions, x509.KeyUsage)
    key_usage = tuple(n for n in _KEY_USAGES if usage and getattr(usage.value, n))
    eku = _extension(item.extensions, x509.ExtendedKeyUsage)
    ext_usage = tuple(_EKU_NAMES.get(oid, oid.dotted_string) for oid in (eku.value if eku else ()))
    return CertSummary(
        "certificate", item.subject.rfc4514_string(), role, party, hosts, is_ca,
        issuer=item.issuer.rfc4514_string(), serial=f"{item.serial_number:x}",
        fingerprint=fingerprint(item), key_usage=key_usage,
        key_usage_critical=bool(usage and usage.critical), extended_key_usage=ext_usage,
        not_before=item.not_valid_before_utc, not_after=item.not_valid_after_utc,
    )  # fmt: skip


def load_inspectable(path: Path) -> list[x509.Certificate | x509.CertificateSigningRequest]:
    """Every certificate (a bundle holds several) or the request in a PEM file; keys refused."""
    data = _read(path, "file")
    if b"PRIVATE KEY-----" in data:
        raise UserError(f"{path}: is a private key; inspect reads certificates and requests only")
    if b"-----BEGIN CERTIFICATE REQUEST-----" in data:
        try:
            return [x509.load_pem_x509_csr(data)]
        except ValueError:
            raise UserError(f"{path}: not a readable PEM certificate request") from None
    return list(_load_certs(data, path))


# -- the CA, requests and signing -------------------------------------------------------


def make_ca(
    out_dir: str | Path, name: str | None = None, days: int = CA_DAYS, party: str | None = None
) -> tuple[Path, Path]:
    """Write out_dir/ca.crt and out_dir/ca.key (0600); refuse if either exists.

    A CA key is never replaced: certificates it signed, and the fingerprint the other
    party pinned, would silently stop matching. With ``party`` the CA certificate names
    its party (``urn:ppbn:party:P``): the other parties then accept from it only daemon
    certificates of that party, so one party's CA cannot issue the other's role. A CA
    without a party is for one CA shared by everybody. Returns (cert path, key path).
    """
    if party is not None and party not in DAEMON_ROLES:
        raise UserError(f"--party must be one of {', '.join(DAEMON_ROLES)}, got {party!r}")
    if days < 1:
        raise UserError(f"--days must be at least 1, got {days}")
    out = Path(out_dir)
    cert_path, key_path = out / CA_CERT, out / CA_KEY
    for path in (key_path, cert_path):
        if path.exists():
            raise UserError(
                f"{path} already exists: a CA is never replaced (remove it by hand if you mean it)"
            )
    ca_name = name or f"ppbn CA {socket.gethostname()} {secrets.token_hex(4)}"
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    start = _now() - CLOCK_SKEW
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )  # fmt: skip
    if party is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(PARTY_URI + party)]),
            critical=False,
        )
    cert = builder.sign(key, hashes.SHA256())
    _write_files([(key_path, _key_pem(key), True), (cert_path, _pem(cert), False)], replace=False)
    return cert_path, key_path


def make_request(
    out_dir: str | Path,
    role: str,
    party: str | None = None,
    hosts: Sequence[str] = (),
    force: bool = False,
) -> tuple[Path, Path]:
    """Make a key and a certificate request on the host that will use them.

    Writes out_dir/ROLE.key (0600) and out_dir/ROLE.csr; only the request goes to the CA.
    Returns (key path, request path).
    """
    party = party or (role if role in DAEMON_ROLES else "")
    _check_identity(role, party, list(hosts), "request")
    entries = _host_entries(hosts)
    out = Path(out_dir)
    key_path, csr_path = out / f"{role}.key", out / f"{role}.csr"
    _refuse_existing((key_path, csr_path), force)
    key = ec.generate_private_key(ec.SECP256R1())
    uris = [
        x509.UniformResourceIdentifier(ROLE_URI + role),
        x509.UniformResourceIdentifier(PARTY_URI + party),
    ]
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, role)]))
        .add_extension(x509.SubjectAlternativeName([*entries, *uris]), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_files(
        [(key_path, _key_pem(key), True), (csr_path, csr.public_bytes(serialization.Encoding.PEM), False)],
        replace=force,
    )
    return key_path, csr_path


def check_request(
    csr: x509.CertificateSigningRequest, where: str
) -> tuple[str, str, tuple[str, ...]]:
    """(role, party, hosts) of a request fit to sign, or a one-line UserError saying why not.

    The CA copies only the SAN from a request and sets every other extension itself, so
    a request asking for anything else is refused rather than signed without it.
    """
    if not csr.is_signature_valid:
        raise UserError(f"{where}: the request's signature does not verify (corrupted or forged)")
    public = csr.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey) or public.curve.name != "secp256r1":
        raise UserError(
            f"{where}: the request's key is not ECDSA P-256 (make it with `ppbn certs request`)"
        )
    extra = [
        ext.oid.dotted_string
        for ext in csr.extensions
        if ext.oid != x509.SubjectAlternativeName.oid
    ]
    if extra:
        raise UserError(
            f"{where}: the request asks for extensions besides the SAN ({', '.join(extra)})"
        )
    role, party, hosts, others = _san_identity(csr.extensions)
    if others:
        raise UserError(
            f"{where}: unexpected SAN URIs {', '.join(others)} (one role and one party URI only)"
        )
    san = _extension(csr.extensions, x509.SubjectAlternativeName)
    allowed = (x509.DNSName, x509.IPAddress, x509.UniformResourceIdentifier)
    if san and not all(isinstance(name, allowed) for name in san.value):
        raise UserError(f"{where}: the SAN may hold only DNS names, IP addresses and the ppbn URIs")
    _check_identity(role, party, hosts, where)
    _host_entries(hosts)  # same syntax rules as `request`
    if _common_name(csr.subject) != role or len(csr.subject) != 1:
        raise UserError(f"{where}: subject {csr.subject.rfc4514_string()!r} should be CN={role}")
    return role, party, hosts


def issue_certificate(
    csr: x509.CertificateSigningRequest,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    not_before: dt.datetime,
    not_after: dt.datetime,
    where: str = "request",
) -> x509.Certificate:
    """Check a request and sign it for exactly the given validity (tests make expired ones)."""
    role, party, hosts = check_request(csr, where)
    uris = [
        x509.UniformResourceIdentifier(ROLE_URI + role),
        x509.UniformResourceIdentifier(PARTY_URI + party),
    ]
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if role != OPERATOR:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    ski = _extension(ca_cert.extensions, x509.SubjectKeyIdentifier)
    authority = (
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski.value)
        if ski else x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    )  # fmt: skip
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, role)]))
        .issuer_name(ca_cert.subject)
        .public_key(csr.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName([*_host_entries(hosts), *uris]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(csr.public_key()), critical=False)
        .add_extension(authority, critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip


def _load_ca(ca_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = _load_cert(ca_dir / CA_CERT, "CA certificate")
    key = _load_key(ca_dir / CA_KEY, "CA key")
    if not _same_key(key, cert):
        raise UserError(f"{ca_dir / CA_KEY}: does not match {ca_dir / CA_CERT}")
    return cert, key


def sign_request(
    ca_dir: str | Path,
    csr_path: str | Path,
    out_path: str | Path,
    days: int = LEAF_DAYS,
    force: bool = False,
    allow_other_party: bool = False,
) -> tuple[CertSummary, bool]:
    """Sign a request with ca_dir/ca.key; reads no other key (the requester keeps theirs).

    A CA made for one party refuses a request of another party unless ``allow_other_party``:
    every daemon refuses such a certificate later, so making it is almost always a mix-up
    of folders. The certificate ends with the CA at the latest. Returns (what was signed,
    whether its lifetime was cut to the CA's).
    """
    if days < 1:
        raise UserError(f"--days must be at least 1, got {days}")
    ca_dir, csr_path, out_path = Path(ca_dir), Path(csr_path), Path(out_path)
    _refuse_existing((out_path,), force)
    try:
        csr = x509.load_pem_x509_csr(_read(csr_path, "certificate request"))
    except ValueError:
        raise UserError(f"{csr_path}: not a PEM certificate request") from None
    ca_cert, ca_key = _load_ca(ca_dir)
    ca_end = ca_cert.not_valid_after_utc
    start = _now() - CLOCK_SKEW
    if ca_end <= start + CLOCK_SKEW:
        raise UserError(f"{ca_dir / CA_CERT}: the CA expired on {ca_end:%Y-%m-%d}")
    end = start + dt.timedelta(days=days)
    _, party, _ = check_request(csr, str(csr_path))
    ca_party = cert_role(ca_cert)[1]
    if ca_party and party != ca_party and not allow_other_party:
        raise UserError(
            f"{csr_path}: a request of party {party!r}, but {ca_dir} is the CA of party "
            f"{ca_party!r}: sign it with {party}'s CA (or pass --allow-other-party if you mean it)"
        )
    cert = issue_certificate(csr, ca_cert, ca_key, start, min(end, ca_end), str(csr_path))
    _write_file(out_path, _pem(cert), private=False, replace=force)
    return summarize(cert), end > ca_end


# -- cross-trust ----------------------------------------------------------------------


def normalize_fingerprint(text: str) -> str:
    """A pinned fingerprint as ``fingerprint`` prints it; colons, spaces and case are free."""
    digits = re.sub(r"[\s:]", "", text).upper()
    if not re.fullmatch(r"[0-9A-F]{64}", digits):
        raise UserError(f"--fingerprint {text!r}: expected 64 hex digits (SHA-256), colons allowed")
    return ":".join(digits[i : i + 2] for i in range(0, 64, 2))


def _check_ca_cert(cert: x509.Certificate, where: str) -> None:
    basic = _extension(cert.extensions, x509.BasicConstraints)
    usage = _extension(cert.extensions, x509.KeyUsage)
    if not (basic and basic.value.ca) or not (usage and usage.value.key_cert_sign):
        raise UserError(f"{where}: not a CA certificate")
    if cert.issuer != cert.subject or not _issued_by(cert, cert):
        raise UserError(f"{where}: not a self-signed CA certificate")
    if cert.not_valid_after_utc <= _now():
        raise UserError(f"{where}: the CA expired on {cert.not_valid_after_utc:%Y-%m-%d}")


def trust_ca(
    tls_dir: str | Path, ca_path: str | Path, pinned: str | None = None
) -> tuple[str, bool]:
    """Add another party's CA certificate to tls_dir/trusted.crt after checking it.

    With ``pinned`` (the fingerprint the other party gave out of band) a mismatch is
    refused. Returns (its fingerprint, whether it was added; False when already trusted).
    """
    base, ca_path = Path(tls_dir), Path(ca_path)
    cert = _load_cert(ca_path, "CA certificate")
    _check_ca_cert(cert, str(ca_path))
    found = fingerprint(cert)
    party = cert_role(cert)[1]
    if party not in DAEMON_ROLES:
        raise UserError(
            f"{ca_path}: this CA names no party, so it could issue any party's certificates; "
            "its owner should make it with `ppbn certs ca --party alice|bob|miner`"
        )
    if pinned is not None and normalize_fingerprint(pinned) != found:
        raise UserError(
            f"{ca_path}: SHA-256 fingerprint is {found}, "
            f"not the pinned {normalize_fingerprint(pinned)}"
        )
    own_path, bundle_path = base / CA_CERT, base / TRUSTED
    known = _load_certs(_read(bundle_path, "bundle"), bundle_path) if bundle_path.exists() else []
    if own_path.exists():
        own = _load_cert(own_path, "CA certificate")
        if fingerprint(own) == found:
            raise UserError(
                f"{ca_path}: is this party's own CA ({own_path}); trust the other party's"
            )
        known_all = [own, *known]
    else:
        known_all = known
    for other in known_all:
        if fingerprint(other) == found:
            return found, False
        if other.subject == cert.subject:
            raise UserError(
                f"{ca_path}: another CA named {cert.subject.rfc4514_string()!r} is already "
                "trusted here; CA names must differ (`ppbn certs ca --name`)"
            )
    _write_file(bundle_path, b"".join(_pem(c) for c in [*known, cert]), private=False, replace=True)
    return found, True


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
    now = _now()
    warnings: list[str] = []
    ca_path = base / CA_CERT
    ca = _load_cert(ca_path, "CA certificate")
    _check_ca_cert(ca, str(ca_path))
    bundle_path = base / TRUSTED
    imported = (
        _load_certs(_read(bundle_path, "bundle"), bundle_path) if bundle_path.exists() else []
    )
    for cert in imported:
        where = f"{bundle_path} ({cert.subject.rfc4514_string()})"
        basic = _extension(cert.extensions, x509.BasicConstraints)
        if not (basic and basic.value.ca):
            raise UserError(f"{where}: not a CA certificate")
        if cert.not_valid_after_utc <= now:
            warnings.append(
                f"{where}: {expiry_warning(cert.not_valid_after_utc, now)}; "
                "its certificates are no longer accepted"
            )
    cert_path, key_path = base / f"{identity}.crt", base / f"{identity}.key"
    cert = _load_cert(cert_path, f"certificate of {identity}")
    key = _load_key(key_path, f"private key of {identity}")
    role, party = cert_role(cert)
    if not role:
        raise UserError(f"{cert_path}: names no ppbn role (made before per-party certificates? "
                        "request a new one with `ppbn certs request`)")  # fmt: skip
    if role != identity:
        raise UserError(f"{cert_path}: certificate is for role {role!r}, expected {identity!r}")
    if not _issued_by(cert, ca):
        raise UserError(f"{cert_path}: not signed by the CA in {ca_path}")
    ca_party = cert_role(ca)[1]
    if ca_party and ca_party != party:
        raise UserError(f"{cert_path}: certificate of party {party!r} from {ca_path}, the CA of party {ca_party!r}")
    if not _same_key(key, cert):
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
    ca_pem = _pem(ca)
    return TlsFiles(
        identity=identity, party=party, ca_pem=ca_pem,
        trusted_pem=ca_pem + b"".join(_pem(c) for c in imported),
        cert_pem=_pem(cert), key_pem=_key_pem(key), cert_path=cert_path, key_path=key_path,
        not_after=cert.not_valid_after_utc, warnings=tuple(warnings), imported_cas=tuple(imported),
    )  # fmt: skip


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
    own = _issued_by(cert, own_ca)
    issuer = own_ca if own else next((ca for ca in files.imported_cas if _issued_by(cert, ca)), None)
    issuer_party = cert_role(issuer)[1] if issuer is not None else ""
    return CertIdentity(
        role, party, _common_name(cert.subject), fingerprint(cert), own, issuer_party
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


# -- local demo PKI -------------------------------------------------------------------


def make_local_pki(
    out_dir: str | Path, roles: Sequence[str] = DAEMON_ROLES, hosts: Sequence[str] = LOCAL_HOSTS
) -> dict[str, Path]:
    """Run the whole per-party flow on one machine for demos, simulations and tests.

    One CA per role in out_dir/ca-ROLE, a daemon and an operator certificate per role
    (request, then sign: the same functions as the CLI), and every role's folder trusting
    every other role's CA. Throwaway keys: folders a previous call made are replaced.
    Returns {role: out_dir/ROLE}, each laid out as ``ppbn party serve --tls-dir`` expects.
    """
    out = Path(out_dir)
    for role in roles:
        if role not in DAEMON_ROLES:
            raise UserError(f"make_local_pki: {role!r} is not a daemon role")
        for folder in (out / f"ca-{role}", out / role):
            shutil.rmtree(folder, ignore_errors=True)
    tls_dirs: dict[str, Path] = {}
    for role in roles:
        ca_dir, tls_dir = out / f"ca-{role}", out / role
        make_ca(ca_dir, name=f"ppbn {role} CA", party=role)
        for identity in (role, OPERATOR):
            _, csr = make_request(tls_dir, identity, role, hosts if identity == role else ())
            sign_request(ca_dir, csr, tls_dir / f"{identity}.crt")
        shutil.copyfile(ca_dir / CA_CERT, tls_dir / CA_CERT)
        tls_dirs[role] = tls_dir
    for role, tls_dir in tls_dirs.items():
        for other in roles:
            if other != role:
                trust_ca(tls_dir, out / f"ca-{other}" / CA_CERT)
    return tls_dirs
