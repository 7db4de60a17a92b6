"""`ppbn certs make` and the startup checks of the TLS files."""

from __future__ import annotations

import ipaddress
import shutil
import stat

import pytest
from cryptography import x509

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.parties.tls import load_tls_files, make_certificates


def test_certs_make_writes_a_ca_and_one_identity_per_party(tmp_path, capsys):
    out = tmp_path / "certs"
    assert ppbn_main(["certs", "make", "--out", str(out), "--hosts", "alice.example.org", "10.0.0.7"]) == 0
    assert "keep ca.key offline" in capsys.readouterr().out
    for identity in ("alice", "bob", "operator"):
        files = load_tls_files(out, identity)
        assert files.identity == identity
        assert stat.S_IMODE((out / f"{identity}.key").stat().st_mode) == 0o600
    alice = x509.load_pem_x509_certificate((out / "alice.crt").read_bytes())
    san = alice.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"alice", "ppbn-party", "localhost", "alice.example.org"} <= set(san.get_values_for_type(x509.DNSName))
    assert {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.7")} <= set(
        san.get_values_for_type(x509.IPAddress)
    )
    operator = x509.load_pem_x509_certificate((out / "operator.crt").read_bytes())
    names = operator.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["operator"]  # cannot pose as a daemon


def test_files_that_do_not_fit_together_are_refused_at_startup(tmp_path):
    make_certificates(tmp_path / "a")
    make_certificates(tmp_path / "b")
    mixed = tmp_path / "mixed"
    shutil.copytree(tmp_path / "a", mixed)
    shutil.copy(tmp_path / "b" / "ca.crt", mixed / "ca.crt")
    with pytest.raises(UserError, match=r"alice.crt: not signed by the CA in .*ca.crt"):
        load_tls_files(mixed, "alice")
    swapped = tmp_path / "swapped"
    shutil.copytree(tmp_path / "a", swapped)
    shutil.copy(swapped / "bob.crt", swapped / "alice.crt")
    with pytest.raises(UserError, match=r"certificate is for \['bob'\], expected common name 'alice'"):
        load_tls_files(swapped, "alice")
    shutil.copy(tmp_path / "a" / "alice.crt", swapped / "alice.crt")
    shutil.copy(swapped / "bob.key", swapped / "alice.key")
    with pytest.raises(UserError, match="key does not match"):
        load_tls_files(swapped, "alice")
    with pytest.raises(UserError, match="certificate of carol not found"):
        load_tls_files(swapped, "carol")
