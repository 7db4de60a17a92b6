"""Both parties of a secure learn job in threads over the memory channel, for the tests of
the secure path (test_resume, test_secure_hc, test_secure_dp): a schema that alternates
owners, a run that can start from checkpoints and keep them, and a run of any work on
both parties' scorers."""

from __future__ import annotations

from pathlib import Path

from ppbn.bn.schema import Schema, Variable
from ppbn.data.party_data import load_party_data
from ppbn.jobs.base import JobContext
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import Ledger


def alternating_schema(net) -> Schema:
    """alice owns the even-numbered variables of ``net``, bob the odd ones."""
    return Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )


def learn_both(schema, codes, names, config, resume=None, saved=None):
    """(alice's result, bob's result, {role: ledger}); ``resume`` maps each role to its
    checkpoint, ``saved`` to a list that receives every checkpoint."""
    column = {v: i for i, v in enumerate(names)}
    ledgers = {r: Ledger(r) for r in ("alice", "bob")}

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]
        keep = None if saved is None else saved[role].append
        start = None if resume is None else resume[role]
        return lambda ch: learn_secure(
            ch, role, schema, codes[:, mine], config, ledgers[role], resume=start, checkpoint=keep
        )

    alice, bob = run_two_party(side("alice"), side("bob"), pair=memory_channel_pair(timeout_s=300))
    return alice, bob, ledgers


def scorers_run(schema, codes, names, config, work, keep_transcript=False):
    """Run ``work(scorer)`` at both parties on fresh scorers; returns both results and the
    channel pair (its transcripts with ``keep_transcript``)."""
    column = {v: i for i, v in enumerate(names)}

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]

        def run(channel):
            scorer = SecureScorer(
                channel, role, schema, codes[:, mine], codes.shape[0], config, Ledger(role)
            )
            try:
                return work(scorer)
            finally:
                scorer.tables.close()

        return run

    pair = memory_channel_pair(timeout_s=300, keep_transcript=keep_transcript)
    alice, bob = run_two_party(side("alice"), side("bob"), pair=pair)
    return alice, bob, pair


def learn_job_context(
    schema: Schema, data_dir: Path, role: str, params: dict, out_dir: Path, **extra
) -> JobContext:
    """One party's context for ``jobs.learn.run_learn_job``: its own rows of the data set in
    ``data_dir`` (``role``.csv), its own ledger and ``out_dir``; ``extra`` sets the rest
    (``policy``, ``job_id``)."""
    return JobContext(
        job_id=extra.pop("job_id", "learn-test"),
        kind="learn",
        role=role,
        schema=schema,
        data=load_party_data(schema, role, data_dir / f"{role}.csv"),
        params=params,
        out_dir=out_dir,
        ledger=Ledger(role),
        **extra,
    )
