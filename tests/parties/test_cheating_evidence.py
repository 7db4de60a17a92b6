"""A caught cheater's record in the audit log, and ``ppbn audit verify`` reading it back.

The key check's evidence (modulus, the verifier's seed, the peer's answers) is public and
re-checked from the log alone; answers that pass are reported as not showing a failure.
"""

from __future__ import annotations

from ppbn.cli import main
from ppbn.parties.audit import AuditLog
from ppbn.parties.cheating_evidence import cheating_records
from ppbn.protocols.paillier_proofs import answer_root_challenges, root_challenges

P, Q = 1000003, 1000033  # a toy modulus: only its arithmetic is checked here
N = P * Q


def _log_with(tmp_path, evidence: dict, check: str = "tables.key"):
    path = tmp_path / "audit.log"
    log = AuditLog(path, "bob")
    log.started("j1", "tables", ["alice"], "malicious")
    log.cheating("j1", ["alice"], check, "the peer's answer is no N-th root", evidence)
    log.close()
    return path


SEED = bytes(range(32))
SESSION = b"job j1"


def _key_evidence(answers: list[int]) -> dict:
    evidence = {"modulus": format(N, "x"), "session": SESSION.hex(), "seed": SEED.hex()}
    evidence.update({f"answer_{j}": format(a, "x") for j, a in enumerate(answers)})
    return evidence


def test_a_failed_key_answer_is_rechecked_from_the_log(tmp_path, capsys):
    path = _log_with(tmp_path, _key_evidence([42, 43, 44]))
    (record,) = cheating_records(path.read_bytes())
    assert record.recheck() is True and record.peers == ("alice",)
    assert main(["audit", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 cheating event(s)" in out
    assert "job j1: alice caught by the tables.key check; re-checked from the evidence" in out


def test_evidence_that_passes_the_check_is_called_so(tmp_path):
    honest = answer_root_challenges(N, P, Q, root_challenges(N, SEED, SESSION))
    path = _log_with(tmp_path, _key_evidence(honest))
    (record,) = cheating_records(path.read_bytes())
    assert record.recheck() is False
    assert "does NOT show a failure" in record.describe()


def test_a_small_factor_is_rechecked_and_other_checks_are_records(tmp_path):
    path = _log_with(tmp_path, {"modulus": format(3 * N, "x"), "session": SESSION.hex()})
    assert cheating_records(path.read_bytes())[0].recheck() is True
    (tmp_path / "w").mkdir()
    evidence = {"group": 0, "expected": "ab" * 8, "found": "cd" * 8}
    other = _log_with(tmp_path / "w", evidence, check="tables.weights")
    (record,) = cheating_records(other.read_bytes())
    assert record.recheck() is None
    assert "not recomputable from the log" in record.describe()


def test_a_log_without_cheating_says_nothing_of_it(tmp_path, capsys):
    path = tmp_path / "audit.log"
    log = AuditLog(path, "bob")
    log.started("j1", "ping", ["alice"], "semi-honest")
    log.close()
    assert main(["audit", "verify", str(path)]) == 0
    assert "cheating event" not in capsys.readouterr().out
