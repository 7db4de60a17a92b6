"""Hypothesis strategies for hostile messages: random, truncated, oversized and mutated.

Values lean towards the edges that break parsers (empty, huge, undefined enum values,
control characters, deep nesting) while staying small enough to send thousands of.
"""

from __future__ import annotations

import json

from fuzzkit import HONEST_PARAMS, MIB, Mutation
from hypothesis import strategies as st

from ppbn.proto import party_pb2

Frame = party_pb2.Frame
U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2, 2**63, 2**64 - 1])
ENUM = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-1, 0, 1, 2, 3, 4, 5, 11, 12, 99])
TEXT = st.text(max_size=40) | st.sampled_from(
    [
        "",
        "alice",
        "bob",
        "miner",
        "operator",
        "job.records",
        "job.done",
        "tables.ciphertexts",
        "ping",
        "pong",
        "learn",
        "tables",
        "pram",
        "../../etc",
        "a\nforged log line",
        "\x00\x1b[31m",
        "x" * 5000,
    ]
)
JOB_KINDS = st.sampled_from(["ping", "tables", "learn", "pram", "pram-miner", "", "nope"]) | TEXT
FLIPS = st.lists(st.tuples(st.integers(0, 2**20), st.integers(1, 255)), min_size=1, max_size=6).map(
    tuple
)


def json_values() -> st.SearchStrategy:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=12)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=12,
    )


@st.composite
def params_json(draw) -> str:
    """Job parameters: random JSON, an honest set with one key changed, deep nesting, junk."""
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return json.dumps(draw(json_values()))
    if choice == 1:
        params = dict(draw(st.sampled_from(sorted(HONEST_PARAMS.items())))[1])
        params[
            draw(st.sampled_from([*params, "seed", "workers", "max_family", "order", "disclosure"]))
        ] = draw(json_values())
        return json.dumps(params)
    if choice == 2:
        depth = draw(st.sampled_from([100, 1_000, 20_000]))
        opener = draw(st.sampled_from(["[", '{"a":']))
        return opener * depth
    if choice == 3:
        return draw(st.text(max_size=200))
    if choice == 4:
        return '{"rounds": 1, "bytes": 8, "pad": "' + "y" * draw(st.integers(60_000, 70_000)) + '"}'
    return json.dumps(draw(st.sampled_from(sorted(HONEST_PARAMS.items())))[1])


def hello_fields() -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("role"), TEXT),
        st.tuples(st.just("protocol_version"), U32),
        st.tuples(st.just("schema_fingerprint"), TEXT),
        st.tuples(st.just("record_count"), U64),
        st.tuples(st.just("identity"), TEXT),
    )


def job_fields() -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("kind"), JOB_KINDS),
        st.tuples(st.just("params_json"), params_json()),
        st.tuples(st.just("job_id"), TEXT),
    )


@st.composite
def random_frames(draw) -> Frame:
    """A frame with arbitrary field values; an empty job id is filled with the stream's own."""
    frame = Frame(
        kind=draw(ENUM),
        job_id=draw(st.just("") | TEXT),
        seq=draw(U64),
        tag=draw(TEXT),
        payload=draw(st.binary(max_size=256)),
        more=draw(st.booleans()),
        code=draw(ENUM),
        parameter=draw(TEXT),
        nonce=draw(st.binary(max_size=40)),
        initiator=draw(TEXT),
    )
    if draw(st.booleans()):
        for name, value in [draw(hello_fields())]:
            setattr(frame.hello, name, value)
    if draw(st.booleans()):
        for name, value in [draw(job_fields())]:
            setattr(frame.job, name, value)
    return frame


def mutations() -> st.SearchStrategy[Mutation]:
    """What to do to frame k of a job stream."""
    named = st.sampled_from(["more", "duplicate", "drop", "end", "close"]).map(Mutation)
    return st.one_of(
        st.builds(Mutation, st.just("flip"), FLIPS),
        st.builds(Mutation, st.just("truncate"), st.integers(0, 2**20)),
        st.builds(
            Mutation, st.just("extend"), st.binary(min_size=1, max_size=64) | st.just(b"\0" * MIB)
        ),
        st.builds(Mutation, st.just("replace_payload"), st.binary(max_size=256)),
        st.builds(Mutation, st.just("tag"), TEXT),
        st.builds(Mutation, st.just("seq"), U64),
        st.builds(Mutation, st.just("kind"), ENUM),
        st.builds(Mutation, st.just("job_id"), TEXT),
        named,
        st.builds(Mutation, st.just("abort"), st.tuples(ENUM, TEXT)),
        st.builds(Mutation, st.just("code"), st.tuples(ENUM, TEXT)),
        st.builds(Mutation, st.just("nonce"), st.binary(max_size=40)),
        st.builds(Mutation, st.just("hello"), hello_fields()),
        st.builds(Mutation, st.just("job"), job_fields()),
        st.builds(Mutation, st.just("raw"), st.binary(max_size=512)),
        st.builds(Mutation, st.just("raw_flip"), FLIPS),
        st.builds(
            Mutation,
            st.just("random_frames"),
            st.lists(random_frames(), min_size=1, max_size=3).map(tuple),
        ),
    )
