"""What a certificate or a certificate request says, for the people who check it before
trusting, signing or deploying it (``ppbn certs inspect`` and ``sign``): subject, role,
party, hosts, issuer, serial, SHA-256 fingerprint, key usages and validity.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from ppbn.errors import UserError
from ppbn.parties.tls import (
    expiry_warning,
    find_extension,
    fingerprint,
    load_certs,
    read_pem_file,
    san_identity,
)

_EKU_NAMES = {
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
}
_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
)


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
            "kind": self.kind,
            "subject": self.subject,
            "role": self.role,
            "party": self.party,
            "hosts": list(self.hosts),
            "is_ca": self.is_ca,
            "issuer": self.issuer,
            "serial": self.serial,
            "sha256": self.fingerprint,
            "key_usage": list(self.key_usage),
            "key_usage_critical": self.key_usage_critical,
            "extended_key_usage": list(self.extended_key_usage),
            "not_before": when(self.not_before),
            "not_after": when(self.not_after),
            "days_left": self.days_left(now),
            "warning": self.warning(now),
        }


def summarize(item: x509.Certificate | x509.CertificateSigningRequest) -> CertSummary:
    """The fields people check before trusting, signing or deploying a certificate."""
    role, party, hosts, _ = san_identity(item.extensions)
    basic = find_extension(item.extensions, x509.BasicConstraints)
    is_ca = bool(basic and basic.value.ca)
    if isinstance(item, x509.CertificateSigningRequest):
        return CertSummary("request", item.subject.rfc4514_string(), role, party, hosts, is_ca)
    usage = find_extension(item.extensions, x509.KeyUsage)
    key_usage = tuple(n for n in _KEY_USAGES if usage and getattr(usage.value, n))
    eku = find_extension(item.extensions, x509.ExtendedKeyUsage)
    ext_usage = tuple(_EKU_NAMES.get(oid, oid.dotted_string) for oid in (eku.value if eku else ()))
    return CertSummary(
        "certificate",
        item.subject.rfc4514_string(),
        role,
        party,
        hosts,
        is_ca,
        issuer=item.issuer.rfc4514_string(),
        serial=f"{item.serial_number:x}",
        fingerprint=fingerprint(item),
        key_usage=key_usage,
        key_usage_critical=bool(usage and usage.critical),
        extended_key_usage=ext_usage,
        not_before=item.not_valid_before_utc,
        not_after=item.not_valid_after_utc,
    )


def load_inspectable(path: Path) -> list[x509.Certificate | x509.CertificateSigningRequest]:
    """Every certificate (a bundle holds several) or the request in a PEM file; keys refused."""
    data = read_pem_file(path, "file")
    if b"PRIVATE KEY-----" in data:
        raise UserError(f"{path}: is a private key; inspect reads certificates and requests only")
    if b"-----BEGIN CERTIFICATE REQUEST-----" in data:
        try:
            return [x509.load_pem_x509_csr(data)]
        except ValueError:
            raise UserError(f"{path}: not a readable PEM certificate request") from None
    return list(load_certs(data, path))


def summary_lines(path: str, summary: CertSummary, now: dt.datetime) -> list[str]:
    """``ppbn certs inspect`` for a person: one line per field, and the expiry warning."""

    def when(value: dt.datetime | None) -> str:
        return "-" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"

    usage = ", ".join(summary.key_usage) or "-"
    rows = [
        ("subject", summary.subject),
        ("role", summary.role or ("- (a CA)" if summary.is_ca else "- (none)")),
        ("party", summary.party or "-"),
        ("hosts", ", ".join(summary.hosts) or "-"),
    ]
    if summary.kind == "certificate":
        rows += [
            ("issuer", summary.issuer),
            ("serial", summary.serial),
            ("sha256", summary.fingerprint),
            ("key usage", f"{usage}{' (critical)' if summary.key_usage_critical else ''}"),
            ("ext. key usage", ", ".join(summary.extended_key_usage) or "-"),
            ("not before", when(summary.not_before)),
            ("not after", when(summary.not_after)),
            ("days left", str(summary.days_left(now))),
        ]
    lines = [f"{path}: {'CA certificate' if summary.is_ca else summary.kind}"]
    lines += [f"  {name:<15}{value}" for name, value in rows]
    if summary.warning(now):
        lines.append(f"  WARNING: {summary.warning(now)}")
    return lines
