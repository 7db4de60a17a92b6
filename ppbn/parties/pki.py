"""Per-party PKI for the daemons and their operators, made offline (``ppbn certs``).

Trust model: every organisation runs its own small CA (``ppbn certs ca``) and no private
key ever leaves the machine that made it: a daemon or operator host makes its key and a
certificate request locally (``request``), the CA host checks and signs the request
(``sign``), and the two organisations cross-trust each other's CA certificate after
comparing its SHA-256 fingerprint out of band (``trust``). A single CA shared by everybody
works too: then there is nothing to cross-trust. ``inspect`` shows what people check.

What the certificates name (role and party SAN URIs) and the folder the daemons read
are described in ``ppbn/parties/tls.py``, whose reading helpers this module uses.

Keys are ECDSA P-256: as strong as RSA-3072 for TLS and much faster to make.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import re
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppbn.errors import UserError
from ppbn.parties.cert_summary import CertSummary, summarize
from ppbn.parties.constants import CA_DAYS, LEAF_DAYS  # certificate lifetimes in days
from ppbn.parties.tls import (
    CA_CERT,
    CA_KEY,
    DAEMON_ROLES,
    OPERATOR,
    PARTY_URI,
    ROLE_URI,
    ROLES,
    TRUSTED,
    cert_pem,
    cert_role,
    check_ca_cert,
    common_name,
    find_extension,
    fingerprint,
    key_pem,
    load_cert,
    load_certs,
    load_key,
    now_utc,
    read_pem_file,
    same_key,
    san_identity,
)

CLOCK_SKEW = dt.timedelta(minutes=5)  # certificates start a little in the past
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")

_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_NAME = re.compile(rf"^{_DNS_LABEL}(?:\.{_DNS_LABEL})*$")


# -- writing keys, requests and certificates --------------------------------------


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


# -- identities and inspection ----------------------------------------------------


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
    start = now_utc() - CLOCK_SKEW
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
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if party is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(PARTY_URI + party)]),
            critical=False,
        )
    cert = builder.sign(key, hashes.SHA256())
    _write_files(
        [(key_path, key_pem(key), True), (cert_path, cert_pem(cert), False)], replace=False
    )
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
        [
            (key_path, key_pem(key), True),
            (csr_path, csr.public_bytes(serialization.Encoding.PEM), False),
        ],
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
    role, party, hosts, others = san_identity(csr.extensions)
    if others:
        raise UserError(
            f"{where}: unexpected SAN URIs {', '.join(others)} (one role and one party URI only)"
        )
    san = find_extension(csr.extensions, x509.SubjectAlternativeName)
    allowed = (x509.DNSName, x509.IPAddress, x509.UniformResourceIdentifier)
    if san and not all(isinstance(name, allowed) for name in san.value):
        raise UserError(f"{where}: the SAN may hold only DNS names, IP addresses and the ppbn URIs")
    _check_identity(role, party, hosts, where)
    _host_entries(hosts)  # same syntax rules as `request`
    if common_name(csr.subject) != role or len(csr.subject) != 1:
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
    ski = find_extension(ca_cert.extensions, x509.SubjectKeyIdentifier)
    authority = (
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski.value)
        if ski
        else x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    )
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
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName([*_host_entries(hosts), *uris]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(csr.public_key()), critical=False)
        .add_extension(authority, critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _load_ca(ca_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = load_cert(ca_dir / CA_CERT, "CA certificate")
    key = load_key(ca_dir / CA_KEY, "CA key")
    if not same_key(key, cert):
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
        csr = x509.load_pem_x509_csr(read_pem_file(csr_path, "certificate request"))
    except ValueError:
        raise UserError(f"{csr_path}: not a PEM certificate request") from None
    ca_cert, ca_key = _load_ca(ca_dir)
    ca_end = ca_cert.not_valid_after_utc
    start = now_utc() - CLOCK_SKEW
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
    _write_file(out_path, cert_pem(cert), private=False, replace=force)
    return summarize(cert), end > ca_end


# -- cross-trust ----------------------------------------------------------------------


def normalize_fingerprint(text: str) -> str:
    """A pinned fingerprint as ``fingerprint`` prints it; colons, spaces and case are free."""
    digits = re.sub(r"[\s:]", "", text).upper()
    if not re.fullmatch(r"[0-9A-F]{64}", digits):
        raise UserError(f"--fingerprint {text!r}: expected 64 hex digits (SHA-256), colons allowed")
    return ":".join(digits[i : i + 2] for i in range(0, 64, 2))


def trust_ca(
    tls_dir: str | Path, ca_path: str | Path, pinned: str | None = None
) -> tuple[str, bool]:
    """Add another party's CA certificate to tls_dir/trusted.crt after checking it.

    With ``pinned`` (the fingerprint the other party gave out of band) a mismatch is
    refused. Returns (its fingerprint, whether it was added; False when already trusted).
    """
    base, ca_path = Path(tls_dir), Path(ca_path)
    cert = load_cert(ca_path, "CA certificate")
    check_ca_cert(cert, str(ca_path))
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
    known = (
        load_certs(read_pem_file(bundle_path, "bundle"), bundle_path)
        if bundle_path.exists()
        else []
    )
    if own_path.exists():
        own = load_cert(own_path, "CA certificate")
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
    _write_file(
        bundle_path, b"".join(cert_pem(c) for c in [*known, cert]), private=False, replace=True
    )
    return found, True


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
