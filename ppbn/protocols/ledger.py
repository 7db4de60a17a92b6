"""What a party learned in the clear during a job, and where it came from.

The security model (docs/design.md, "What each party learns" and "Security model") allows a party to
learn the public schema, the record count, the structure, the order in which edges were
added, and the parameters its disclosure mode allows. Every protocol step that reveals a
value records it here; tests read the ledger and fail on any other kind of entry.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

ALLOWED_KINDS = frozenset(
    {
        "schema",  # the public schema fingerprint and variables
        "record_count",  # n
        "records_match",  # one bit: both parties hold the same record ids (keyed per job)
        "security_level",  # the level the job ran at (in the request both daemons checked)
        # the peer's offer of terms lanes for a job that leaves their number to the parties
        # (protocols/learning/lanes_agreement.py): a count about its host, not its data
        "term_lanes_offer",
        "k2_decision",  # one K2 step's outcome: the chosen parent, or "stop"
        "hc_move",  # one hill-climbing step's outcome: the move applied (kind and edge)
        "hc_stop",  # hill climbing stopped: no move improves the score by more than tau
        "edge",  # an edge added, in order
        "structure",  # the final parent sets
        "parameter",  # a CPT the disclosure mode lets this party see
        # A differentially private release (protocols/learning/dp.py): the noisy counts of
        # every family of the learned network, opened to both; the CPTs follow from them.
        "dp_counts",
        # The marginal release (protocols/learning/dp_marginals.py): each pair of its tree,
        # as the noisy choice revealed it; its noisy 1-way and 2-way counts are dp_counts.
        "dp_pair",
        # Available-case analysis only (``--missing available-case``): the number of
        # complete records each family of the learned network was counted on.
        "family_records",
        # The PRAM path's disclosures (Ma and Sivakumar, Sec. III-A): the receiver of
        # randomized columns learns them and the public matrices that randomized them.
        "randomized_data",  # randomized columns received (variables, record count)
        "randomization_matrix",  # the matrix of a randomization block received with them
        # The perturbation learners as jobs (protocols/perturb/vertical.py): the classifier
        # or the association rules learned, the job's output, received from whoever learned it.
        "model",
        # Private record alignment (--align psi, protocols/psi.py): the peer's id-set size, the
        # size of the intersection, which of the party's own records are in it (a count here),
        # and the number of records the job then runs on.
        "psi_peer_set_size",
        "psi_intersection_size",
        "psi_membership",
        "aligned_record_count",
    }
)


@dataclass(frozen=True)
class LedgerEntry:
    kind: str
    value: Any
    source: str


@dataclass
class Ledger:
    """Append-only list of revealed values of one party."""

    party: str
    entries: list[LedgerEntry] = field(default_factory=list)

    def record(self, kind: str, value: Any, source: str) -> None:
        if kind not in ALLOWED_KINDS:
            raise ValueError(f"ledger kind {kind!r} is not an allowed disclosure")
        self.entries.append(LedgerEntry(kind, value, source))

    def kinds(self) -> set[str]:
        return {e.kind for e in self.entries}

    def to_json(self) -> str:
        return json.dumps(
            {"party": self.party, "entries": [asdict(e) for e in self.entries]},
            indent=2,
            default=str,
        )
