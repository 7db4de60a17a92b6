"""Reading the ``cheating`` events of an audit log back, and re-checking what can be.

At the ``malicious`` level an honest daemon that catches its peer writes one ``cheating``
event (``AuditLog.cheating``): the check that failed and its evidence, public values and
digests only. Evidence that carries the public values of its check is re-checked here:
the key check's modulus (a small factor is found in it) or its modulus, the verifier's
seed and the peer's answers (the challenges are derived again from the seed, and an
answer whose N-th power is not its challenge shows the failure). That shows the recorded
values fail the check; that the peer sent them is the honest party's word, as it is for
the other checks (the table phase's weights, the OT extension's consistency), which
compare values only that party holds: ``describe`` says which kind a record is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ppbn.errors import printable
from ppbn.protocols.paillier_proofs import (
    ROOT_CHALLENGES,
    has_small_factor,
    root_challenges,
    roots_hold,
)
from ppbn.protocols.seeds import SEED_BYTES
from ppbn.protocols.tables.checks import KEY_CHECK


@dataclass(frozen=True)
class CheatingRecord:
    """One ``cheating`` event: where it is in the log and what it says."""

    line: int
    party: str
    job: str
    peers: tuple[str, ...]
    check: str
    detail: str
    evidence: dict[str, Any]

    def recheck(self) -> bool | None:
        """True: the evidence shows the failure; False: it does not; None: nothing to recompute.

        The key check's challenges are derived again from the modulus, the verifier's seed
        and the session (``paillier_proofs.root_challenges``), and the peer's recorded
        answers checked against them; a small factor is found in the modulus itself."""
        if self.check != KEY_CHECK:
            return None
        try:
            modulus = int(self.evidence["modulus"], 16)
            session = bytes.fromhex(self.evidence["session"])
            if "seed" not in self.evidence:
                return modulus > 1 and has_small_factor(modulus)
            seed = bytes.fromhex(self.evidence["seed"])
            answers = [int(self.evidence[f"answer_{j}"], 16) for j in range(ROOT_CHALLENGES)]
        except (KeyError, TypeError, ValueError):
            return False
        if modulus < 2 or len(seed) != SEED_BYTES:
            return False
        return not roots_hold(modulus, root_challenges(modulus, seed, session), answers)

    def describe(self) -> str:
        """One line for ``ppbn audit verify``."""
        who = " and ".join(self.peers) or "the peer"
        head = f"line {self.line}: job {self.job}: {who} caught by the {self.check} check"
        verdict = self.recheck()
        if verdict is None:
            return (
                f"{head} ({self.detail}); recorded by {self.party}, not recomputable from the log"
            )
        if verdict:
            return f"{head}; re-checked from the evidence: the peer's values fail the check"
        return f"{head}; the evidence does NOT show a failure (the event may have been altered)"


def cheating_records(log: bytes) -> list[CheatingRecord]:
    """Every ``cheating`` event of a log whose chain was verified (``audit.verify_log``)."""
    records = []
    for number, raw in enumerate(log.split(b"\n"), start=1):
        if b'"event":"cheating"' not in raw:
            continue
        entry = json.loads(raw)
        if entry.get("event") != "cheating":
            continue
        evidence = entry.get("evidence")
        peers = entry.get("peers")
        records.append(
            CheatingRecord(
                line=number,
                party=printable(entry.get("party", ""), 16),
                job=printable(entry.get("job", ""), 64),
                peers=tuple(printable(p, 16) for p in peers) if isinstance(peers, list) else (),
                check=printable(entry.get("check", ""), 64),
                detail=printable(entry.get("detail", ""), 300),
                evidence=evidence if isinstance(evidence, dict) else {},
            )
        )
    return records
