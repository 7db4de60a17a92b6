"""Record alignment at the start of a job: strict (the same ids at both) or by PSI.

``strict`` is the check of ``ppbn.protocols.records``: both parties must hold exactly the
same record ids, compared by a keyed digest that says only "equal" or "different".

``psi`` (``party serve --align psi``) is for two organisations whose id lists overlap only
in part: at the start of every two-party job the daemons run the private set intersection
of ``ppbn.protocols.psi`` on the record ids, under a key that exists for this job only,
and the job then works on the intersection alone, in id order (both parties sort their
rows by id when they load them, so row i of the intersection is the same record at both).
Each party learns the intersection and the size of the other's id set, and nothing else
of the other's ids; both go into its ledger. Each daemon checks the intersection against
its own policy (``min_records``) before anything derived from the data is sent: a tiny
intersection would reveal individual records through the CPTs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

import numpy as np

from ppbn.data.party_data import PartyData
from ppbn.errors import DataError
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, dh_bits_for
from ppbn.protocols.channel import Channel
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.psi import align_records

ALIGNMENTS = ("strict", "psi")
_PSI_KEY_LABEL = b"ppbn record alignment psi v1"


class EmptyIntersection(DataError):
    """The parties share no record id: there is nothing to learn from."""


def psi_key(job_key: bytes) -> bytes:
    """The PSI's per-job key, separated from the record-digest key of the same job."""
    return hmac.new(job_key, _PSI_KEY_LABEL, hashlib.sha256).digest()


def align_by_psi(
    channel: Channel,
    role: str,
    data: PartyData,
    job_key: bytes,
    policy: LocalPolicy,
    ledger: Ledger,
    progress: Callable[[str], None],
    key_bits: int | None = None,
) -> PartyData:
    """Run the PSI with the peer and return this party's data restricted to the intersection.

    The base OTs use the group that matches the job's Paillier keys (``dh_bits_for``), from
    the job's agreed parameters, so both parties pick the same group on their own."""
    progress(f"private set intersection of {data.n_records} record ids")
    dh_bits = dh_bits_for(key_bits) if key_bits else DEFAULT_DH_BITS
    alignment = align_records(
        channel, role, data.ids, psi_key(job_key), ledger=ledger, progress=progress, dh_bits=dh_bits
    )
    if alignment.size == 0:
        raise EmptyIntersection(
            f"{role} holds {data.n_records} record ids, the peer {alignment.peer_set_size}, and they share none: "
            "nothing to learn (check both parties use the same id column and id format)"
        )
    try:
        policy.require_records(alignment.size)
    except PolicyRefusal as exc:
        raise PolicyRefusal(
            "records",
            f"the intersection holds {alignment.size} records, fewer than this party's policy minimum of "
            f"{policy.min_records}: on so few records the CPTs would reveal individual records",
        ) from exc
    rows = np.sort(np.asarray(alignment.positions, dtype=np.int64))
    ledger.record("aligned_record_count", int(rows.size), "private set intersection")
    return data.subset(rows, tuple(data.ids[i] for i in rows))
