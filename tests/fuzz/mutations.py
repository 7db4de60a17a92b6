"""Mutations of one frame of a job stream: what the fuzz harness sends instead of it."""

from __future__ import annotations

from dataclasses import dataclass

from ppbn.proto import party_pb2

Frame = party_pb2.Frame


@dataclass(frozen=True)
class Mutation:
    """What happens to frame k: ``name`` says which field or act, ``value`` its new value."""

    name: str
    value: object = None

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={describe(self.value)}"


def describe(value: object) -> str:
    """A short text for a fuzz value (a frame's repr can be megabytes)."""
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes {bytes(value[:16])!r}"
    if isinstance(value, Frame):
        return (
            f"Frame(kind={value.kind}, job_id={value.job_id[:20]!r}, seq={value.seq}, tag={value.tag[:20]!r}, "
            f"payload {len(value.payload)} bytes, more={value.more}, code={value.code})"
        )
    if isinstance(value, tuple | list):
        shown = ", ".join(describe(v) for v in value[:3])
        return f"[{shown}{', ...' if len(value) > 3 else ''}] ({len(value)} items)"
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


END = object()  # in a mutation's output: end the stream here (premature half-close)


def mutate(frame: Frame, mutation: Mutation) -> list[object]:
    """The items to send instead of ``frame``: Frames, raw bytes, or END."""
    name, value = mutation.name, mutation.value
    out = Frame()
    out.CopyFrom(frame)
    if name == "flip":
        payload = bytearray(out.payload) or bytearray(b"\0")
        for position, mask in value:  # type: ignore[union-attr]
            payload[position % len(payload)] ^= mask or 1
        out.payload = bytes(payload)
    elif name == "truncate":
        out.payload = out.payload[: int(value) % max(len(out.payload), 1)]  # type: ignore[arg-type]
    elif name == "extend":
        out.payload = out.payload + value  # type: ignore[operator]
    elif name == "replace_payload":
        out.payload = value  # type: ignore[assignment]
    elif name == "tag":
        out.tag = value  # type: ignore[assignment]
    elif name == "seq":
        out.seq = value  # type: ignore[assignment]
    elif name == "kind":
        out.kind = value  # type: ignore[assignment]
    elif name == "job_id":
        out.job_id = value  # type: ignore[assignment]
    elif name == "more":
        out.more = not out.more
    elif name == "nonce":
        out.nonce = value  # type: ignore[assignment]
    elif name == "hello":
        field_name, field_value = value  # type: ignore[misc]
        setattr(out.hello, field_name, field_value)
    elif name == "job":
        field_name, field_value = value  # type: ignore[misc]
        setattr(out.job, field_name, field_value)
    elif name == "code":
        out.code, out.parameter = value  # type: ignore[misc]
    elif name == "duplicate":
        return [frame, frame]
    elif name == "drop":
        return []
    elif name == "end":
        return [END]
    elif name == "abort":
        code, parameter = value  # type: ignore[misc]
        return [Frame(kind=Frame.ABORT, job_id=frame.job_id, code=code, parameter=parameter), END]
    elif name == "close":
        return [Frame(kind=Frame.CLOSE, job_id=frame.job_id), END]
    elif name == "raw":
        return [value]
    elif name == "raw_flip":
        data = bytearray(frame.SerializeToString()) or bytearray(b"\0")
        for position, mask in value:  # type: ignore[union-attr]
            data[position % len(data)] ^= mask or 1
        return [bytes(data)]
    elif name == "random_frames":
        frames = []
        for each in value:  # type: ignore[union-attr]
            copy = Frame()
            copy.CopyFrom(each)
            copy.job_id = copy.job_id or frame.job_id
            frames.append(copy)
        return frames
    else:
        raise ValueError(f"unknown mutation {name!r}")
    return [out]
