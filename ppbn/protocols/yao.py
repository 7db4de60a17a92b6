"""Semi-honest two-party Yao over a Channel: batched garbled circuits with OT-fed inputs.

Protocol (Yao; Lindell-Pinkas, "A Proof of Security of Yao's Protocol for Two-Party
Computation", J. Cryptology 2009, Sec. 3, with half-gates garbling from
``ppbn.circuits.garble``), for K instances of one circuit:

1. The garbler sends a header: a SHA-256 digest, under the Yao protocol id and the
   channel's session label, of the circuit fingerprint, K, its input bundles, the output
   modes and the tweak base. The evaluator checks it against its own view and fails with
   ``ProtocolError`` on any mismatch (a different session included).
2. Evaluator input labels by correlated OT extension (``ppbn.protocols.ot``) with
   correlation R: the garbler's zero-label of an evaluator input bit is its OT output.
3. In instance chunks (at most ``CHUNK_BYTES`` per message, so the evaluator starts
   while the garbler goes on), the garbler sends the garbled tables (the labels of its
   own input bits follow from a seed: see "Garbler input labels from a seed"); then the
   decoding bits of the outputs the evaluator learns.
4. The evaluator evaluates and returns, for outputs the garbler learns, the permute bits
   of its output labels (the garbler decodes them) and, for outputs both learn, the values
   (above semi-honest, the output labels themselves, which the garbler checks:
   ``yao_covert``, "Authenticated outputs").

Output modes (``Reveal``) of an output bundle of width b:

- ``garbler``, ``evaluator``, ``both``: the value, to that party or to both.
- ``shares``: fresh additive shares mod 2^b. The circuit is extended with a garbler input
  ``mask`` of b bits and outputs value - mask mod 2^b to the evaluator; the garbler's
  share is the uniformly random mask. Costs b AND gates (its labels come from a seed).
- ``bit-shares``: XOR shares of each bit, for free: the garbler's share is the permute
  bit of the output wire's zero-label (the decoding bit, which is then not sent), the
  evaluator's the colour bit of the label it holds; they XOR to the bit (point and permute,
  ZRE15 Sec. 3). The evaluator's colour bit is uniform and independent of the value, as
  every colour bit it sees. No gates, no messages; ``arith.bit_mul`` multiplies such bits
  into ring shares.
- ``integer-shares``: the bundle is a signed two's-complement b-bit value v, shared as
  ring vectors mod 2^128 (``ppbn.protocols.ring``). The circuit computes v' = v + 2^(b-1)
  in [0, 2^b) (the top bit flipped, free) and outputs to the evaluator the integer
  y = v' + r in b + STAT_BITS + 1 bits, with r uniform in [0, 2^(b + STAT_BITS)) the
  garbler's mask: no wrap-around, so the shares are y - 2^(b-1) (evaluator) and -r
  (garbler), which add up to v mod 2^128. Costs b + STAT_BITS AND gates (the mask's
  labels come from a seed), whatever the ring width: a narrow value (a count, a reduced
  argument) does not pay for 128 bits. Security: the distribution of y is within
  statistical distance v' / 2^(b + STAT_BITS) < 2^-STAT_BITS of r's, whatever v is (the
  argument of ``arith.truncate``); the garbler learns nothing new.

Garbler input labels from a seed: no garbler input bit needs a label transfer
(first done for the random masks of the shared outputs, a folklore optimisation of
free-XOR garbling, then for every garbler input: the argument below never uses that the
bit is random). Per run the garbler draws a public seed s of ``LABEL_SEED_BYTES`` from its
``TaskSeeds`` and sends it once ("yao.label_seed") instead of 16 bytes per input bit and
instance. For each chunk both parties expand A = AES-256-CTR under ``label_key``
(SHA-256 under its own domain label ``LABEL_DOMAIN`` of the protocol id, session, s and
the chunk's first instance: a key no other derivation in ppbn produces). The garbler's input
bit r_i (a mask it draws itself, or a bit of its own input) sets the zero-label of wire i
to L_i^0 = A_i XOR r_i R, so the active label L_i^(r_i) is A_i, which the evaluator
computes.
Why the evaluator's view does not change: it still holds exactly one label per wire, and
that label, A_i, is a function of s alone, drawn independently of r and of R; in the plain
protocol the active label L^0 XOR r R is likewise independent of r because L^0 is uniform.
The other label A_i XOR R stays hidden as long as R does, and the security of free-XOR with
half-gates (ZRE15; the hash is circular-correlation robust for inputs the adversary knows)
needs of the input labels only that R be uniform, secret and independent of them, not that
the evaluator's active labels be secret: a simulator draws s itself. The evaluator's colour
bit lsb(A_i) = p_i XOR r_i (p_i the wire's permute bit) is, as before, independent of r_i.
A mask stays uniform and known to the garbler only (drawn from its ``TaskSeeds``, never
sent), and the garbler's share derives from it as before. s is public; R and the input
bits r never leave the garbler.

Domain separation: garbling hashes with ``FixedKeyHash(YAO_PROTOCOL, channel.session)``,
whose fixed AES key is derived from the protocol id and the job's session label (see
``ppbn.circuits.garble``), and the OT extension feeding the evaluator's inputs is the
instance b"yao" of ``ppbn.protocols.ot``. ``dh_bits`` selects the base-OT group
(``base_ot.dh_bits_for`` of the job's Paillier key size; both parties derive it locally).

Executor: each instance chunk of step 3 is garbled by ``garble_chunk`` and
evaluated by ``evaluate_chunk``, pure functions of the schedule, the chunk's tweak base,
its labels and (garbler) R, its input bits and the chunk's label key (the evaluator
expands the seeded labels in the job thread). A run of at least ``gc_inline_below`` AND
gates x instances sends them to the party's own executor; the chunks and tweaks are those
of the message framing, so tables, labels and outputs are the same bytes inline or on a
pool. R and the output masks come from the party's ``TaskSeeds`` and never reach the
peer's executor.

Security levels: this is the ``semi-honest`` protocol; at ``covert`` and ``malicious``
steps 2 and 3 are the cut-and-choose of ``ppbn.protocols.yao_covert`` over the circuit with
its evaluator inputs probe-resistantly encoded, with this one's header, chunks, tweaks
and output modes, and the OT extension runs its receiver check.

Either party may garble any run; each party's inputs are the bundles it passes, the rest
belong to the peer. Values: numpy uint64 arrays for bundles of at most 64 bits, numpy
object arrays of Python ints for wider ones (``ppbn.circuits.ir.as_values``); one entry
per instance. ``YaoParty.counters`` accumulates ``and_gates`` (garbled AND gates times
instances) and ``ots`` (evaluator input bits times instances).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np

from ppbn.circuits import builders
from ppbn.circuits.garble import (
    FixedKeyHash,
    evaluate_garbled,
    garble,
    length_prefixed,
    permute_bits,
)
from ppbn.circuits.ir import Circuit, as_values, bits_to_values, values_to_bits
from ppbn.circuits.schedule import Schedule, schedule_of
from ppbn.protocols import ring, yao_covert
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, dh_group
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, SEMI_HONEST
from ppbn.protocols.executor import Executor, ExecutorSource, executor_for
from ppbn.protocols.fixedpoint import STAT_BITS
from ppbn.protocols.ot import OT_INLINE_BELOW, OTReceiver, OTSender, check_subfield_bits
from ppbn.protocols.security import check_level
from ppbn.protocols.seeds import RandomStream, TaskSeeds

CHUNK_BYTES = 16 * 1024 * 1024
# AND gates x instances of a run below which its chunks stay in the job thread. The default
# keeps every run there: on 2 cores per host the pool cost 1.3 to 1.7x the CPU (the tables
# cross the process boundary) and was slower at every size measured (docs/user-guide.md, "Scale-out");
# a host with spare cores sets the policy's gc_inline_below lower.
GC_INLINE_BELOW = 1 << 40
MASK_PREFIX = "yao.mask."
LABEL_SEED_BYTES = 16
LABEL_DOMAIN = b"ppbn yao input labels v2"
YAO_PROTOCOL = b"ppbn/yao/half-gates"
OT_INSTANCE = b"yao"


class Reveal(StrEnum):
    """Who learns an output bundle."""

    GARBLER = "garbler"
    EVALUATOR = "evaluator"
    BOTH = "both"
    SHARES = "shares"
    INTEGER_SHARES = "integer-shares"
    BIT_SHARES = "bit-shares"


def integer_share_width(width: int) -> int:
    """Bits of the mask r of an ``integer-shares`` output of ``width`` bits."""
    return width + STAT_BITS


@dataclass
class YaoCounters:
    and_gates: int = 0
    ots: int = 0
    instances: int = 0
    runs: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "and_gates": self.and_gates,
            "ots": self.ots,
            "instances": self.instances,
            "runs": self.runs,
        }


@lru_cache(maxsize=64)
def _with_share_outputs(circuit: Circuit, shared: tuple[tuple[str, Reveal], ...]) -> Circuit:
    """The circuit with a garbler mask input per shared output (``shared``: name and mode):
    value - mask mod 2^b (``shares``), or (v + 2^(b-1)) + mask with carry out
    (``integer-shares``, see the module docstring)."""
    if not shared:
        return circuit
    kinds = dict(shared)
    b = builders.CircuitBuilder()
    wires = {bundle.name: b.input(bundle.name, bundle.width) for bundle in circuit.inputs}
    outs = b.embed(circuit, wires)
    for bundle in circuit.outputs:
        bits = outs[bundle.name]
        if kinds.get(bundle.name) == Reveal.SHARES:
            bits = builders.sub(b, bits, b.input(MASK_PREFIX + bundle.name, bundle.width))
        elif kinds.get(bundle.name) == Reveal.INTEGER_SHARES:
            mask = b.input(MASK_PREFIX + bundle.name, integer_share_width(bundle.width))
            offset = [*bits[:-1], b.inv(bits[-1])]  # v + 2^(b-1), in [0, 2^b)
            total, carry = builders.add_with_carry(b, builders.zero_extend(offset, len(mask)), mask)
            bits = [*total, carry]
        b.output(bundle.name, bits)
    return b.build()


def _ring_values(values: np.ndarray) -> np.ndarray:
    """API values (uint64 or Python ints below 2^128) as a ring vector."""
    return ring.from_uint64(values) if values.dtype == np.uint64 else ring.from_ints(values)


def _shared_outputs(
    circuit: Circuit, modes: Mapping[str, Reveal]
) -> tuple[tuple[str, Reveal], ...]:
    return tuple(
        (b.name, modes[b.name])
        for b in circuit.outputs
        if modes[b.name] in (Reveal.SHARES, Reveal.INTEGER_SHARES)
    )


def garbled_circuit(circuit: Circuit, outputs: Mapping[str, Reveal | str]) -> Circuit:
    """The circuit ``YaoParty.run`` garbles for these output modes (the mask inputs and
    additions of the shared outputs included): its AND gates are what a run costs."""
    return _with_share_outputs(
        circuit, _shared_outputs(circuit, {n: Reveal(m) for n, m in outputs.items()})
    )


def random_values(stream: RandomStream, width: int, count: int) -> np.ndarray:
    """Uniform values in [0, 2^width), in the API form."""
    n_bytes = (width + 7) // 8
    raw = stream.bytes(n_bytes * count)
    mask = (1 << width) - 1
    return as_values(
        [
            int.from_bytes(raw[i * n_bytes : (i + 1) * n_bytes], "little") & mask
            for i in range(count)
        ],
        width,
    )


def _labels(stream: RandomStream, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform 128-bit labels, shape + (2,) uint64."""
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(stream.bytes(16 * count), dtype=np.uint64).reshape(*shape, 2).copy()


def _delta(stream: RandomStream) -> np.ndarray:
    """The free-XOR offset R: 128 random bits with the point-and-permute bit set (ZRE15 Sec. 3)."""
    delta = _labels(stream, ())
    delta[0] |= np.uint64(1)
    return delta


def label_key(session: bytes, seed: bytes, first: int) -> bytes:
    """The public AES-256 key of the garbler's input labels in the chunk whose first
    instance is ``first``, in a run with label seed ``seed``: its own SHA-256 domain, so it
    never equals a key or label derived for anything else (module doc, "Garbler input
    labels from a seed")."""
    framed = length_prefixed(YAO_PROTOCOL, session, seed, first.to_bytes(8, "big"))
    return hashlib.sha256(LABEL_DOMAIN + framed).digest()


def seeded_labels(key: bytes, rows: int, size: int) -> np.ndarray:
    """The evaluator's active labels A of ``rows`` garbler input wires x ``size`` instances,
    (rows, size, 2) uint64: both parties compute them, so the garbler need not send them."""
    return _labels(RandomStream(key), (rows, size))


def garble_chunk(
    schedule: Schedule,
    session: bytes,
    tweak: int,
    delta: np.ndarray,
    ot_rows: np.ndarray,
    ot_zero: np.ndarray,
    seeded_rows: np.ndarray,
    seeded_bits: np.ndarray,
    seed_key: bytes,
) -> tuple[np.ndarray, np.ndarray]:
    """Garble one chunk of instances, a pure function for the garbler's own executor.

    The zero-labels of the evaluator's input rows ``ot_rows`` are its OT outputs
    ``ot_zero``; those of the garbler's own rows ``seeded_rows`` are A XOR r R with
    A = ``seeded_labels(seed_key)`` and r = ``seeded_bits`` ((rows, instances) input bits),
    so that the evaluator's active label is A (module doc). Returns the half-gates tables
    (ZRE15 Sec. 3, ``circuits.garble``) and the output zero-labels. R, the input bits and
    the OT outputs never leave this party: the executor is its own.
    """
    size = seeded_bits.shape[1]
    zero = np.empty((len(schedule.input_slots), size, 2), dtype=np.uint64)
    zero[ot_rows] = ot_zero
    if seeded_rows.size:
        active = seeded_labels(seed_key, seeded_rows.size, size)
        zero[seeded_rows] = active ^ yao_covert.times_delta(seeded_bits, delta)
    return garble(schedule, zero, delta, tweak, FixedKeyHash(YAO_PROTOCOL, session))


def evaluate_chunk(
    schedule: Schedule, session: bytes, tweak: int, labels: np.ndarray, tables: np.ndarray
) -> np.ndarray:
    """Evaluate one chunk of garbled instances (``circuits.garble.evaluate_garbled``), a
    pure function for the evaluator's own executor: its output labels."""
    return evaluate_garbled(schedule, labels, tables, tweak, FixedKeyHash(YAO_PROTOCOL, session))


class YaoParty:
    """One party's end of a series of Yao runs over one channel.

    ``dh_bits``: the base-OT group of the job (``base_ot.dh_bits_for(key_bits)``), the same at
    both parties, as ``ot_k``, SoftSpokenOT's k of its OT extension. The garbling hash is
    keyed by ``YAO_PROTOCOL`` and ``channel.session``.
    ``seeds`` supplies this party's randomness (R, its input labels, output masks, the OT's);
    ``executor`` is this party's executor: a run of at least ``gc_inline_below`` AND gates
    times instances garbles (or evaluates) its chunks there, one task each, and an OT call
    of at least ``ot_inline_below`` OTs its extension blocks. The chunks and their tweaks
    do not depend on the executor, so neither do the tables, labels or outputs.
    ``security`` (``protocols.constants``): ``covert`` and ``malicious`` run the cut-and-choose
    of ``yao_covert`` (the same defence) and the OT's check; both pass the same level.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        dh_bits: int = DEFAULT_DH_BITS,
        ot_k: int = DEFAULT_SUBFIELD_BITS,
        seeds: TaskSeeds | None = None,
        executor: ExecutorSource | None = None,
        gc_inline_below: int = GC_INLINE_BELOW,
        ot_inline_below: int = OT_INLINE_BELOW,
        security: str = SEMI_HONEST,
    ) -> None:
        self.channel = channel
        self.security = check_level(security)
        self.dh_bits = dh_group(dh_bits).bits  # checked now, used when the OT starts
        self.ot_k = check_subfield_bits(ot_k)
        self.counters = YaoCounters()
        self._ot_sender: OTSender | None = None
        self._ot_receiver: OTReceiver | None = None
        self._tweak_base = 0
        self._seeds = seeds if seeds is not None else TaskSeeds()
        self._executor = executor
        self._gc_inline_below = gc_inline_below
        self._ot_options = {
            "dh_bits": self.dh_bits,
            "subfield_bits": self.ot_k,
            "instance": OT_INSTANCE,
            "seeds": self._seeds,
            "executor": executor,
            "inline_below": ot_inline_below,
            "security": self.security,  # above semi-honest: the receiver's consistency check
        }

    # -- public entry point ------------------------------------------------------------
    def run(
        self,
        circuit: Circuit,
        *,
        garbler: bool,
        inputs: Mapping[str, Iterable[int] | np.ndarray],
        outputs: Mapping[str, Reveal | str],
        instances: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Run K instances of ``circuit``; both parties call this with the same ``outputs``.

        ``garbler`` says whether this party garbles; ``inputs`` holds this party's bundles
        (the others are the peer's). Every output bundle needs a mode in ``outputs``.
        Returns this party's view: the outputs it learns, and its share of shared outputs
        (``integer-shares``: (K, 2) uint64 ring vectors mod 2^128, see ``ring``).
        """
        modes = {name: Reveal(mode) for name, mode in outputs.items()}
        names = [b.name for b in circuit.outputs]
        if sorted(modes) != sorted(names):
            raise ValueError(f"outputs must give a mode for each of {names}, got {sorted(modes)}")
        unknown = sorted(set(inputs) - {b.name for b in circuit.inputs})
        if unknown:
            raise ValueError(f"unknown input bundles {unknown}")
        values = {name: as_values(v, circuit.input(name).width) for name, v in inputs.items()}
        counts = {len(v) for v in values.values()} | (
            {instances} if instances is not None else set()
        )
        if len(counts) != 1:
            raise ValueError(
                f"inputs and instances disagree on the instance count: {sorted(counts)}"
            )
        k = counts.pop()
        if k < 1:
            raise ValueError("at least one instance is needed")
        shared = _shared_outputs(circuit, modes)
        full = _with_share_outputs(circuit, shared)
        # every garbler input is labelled from the run's seed (module doc): the masks and
        # the garbler's own bundles, which the evaluator knows as the ones it does not hold
        garbler_inputs = set(values) if garbler else {b.name for b in circuit.inputs} - set(values)
        seeded = {MASK_PREFIX + n for n, _ in shared} | garbler_inputs
        ots_before = self._ots_done()
        if garbler:
            stream = RandomStream(self._seeds.next())
            masks = {
                n: random_values(stream, full.input(MASK_PREFIX + n).width, k) for n, _ in shared
            }
            values.update({MASK_PREFIX + n: v for n, v in masks.items()})
            result = self._garble_side(full, values, modes, k, seeded)
            for n, m in shared:  # the garbler's share: the mask, or -r in the ring
                result[n] = (
                    ring.neg(_ring_values(masks[n])) if m == Reveal.INTEGER_SHARES else masks[n]
                )
        else:
            result = self._evaluate_side(full, values, modes, k, seeded)
            for n in (n for n, m in shared if m == Reveal.INTEGER_SHARES):
                offset = ring.constant(1 << (circuit.output(n).width - 1))
                result[n] = ring.sub(_ring_values(result[n]), offset)
        self.counters.ots += self._ots_done() - ots_before
        self.counters.and_gates += schedule_of(full).n_and * k
        self.counters.instances += k
        self.counters.runs += 1
        self._tweak_base += 2 * schedule_of(full).n_and * k
        return result

    # -- shared helpers ------------------------------------------------------------------
    def _ots_done(self) -> int:
        return sum(end.ots for end in (self._ot_sender, self._ot_receiver) if end is not None)

    def _sender(self) -> OTSender:
        if self._ot_sender is None:
            self._ot_sender = OTSender(self.channel, **self._ot_options)
        return self._ot_sender

    def _receiver(self) -> OTReceiver:
        if self._ot_receiver is None:
            self._ot_receiver = OTReceiver(self.channel, **self._ot_options)
        return self._ot_receiver

    def _gc_executor(self, full: Circuit, k: int) -> Executor:
        return executor_for(self._executor, schedule_of(full).n_and * k, self._gc_inline_below)

    def _covert_run(
        self, full: Circuit, k: int, seeded: set[str], decode_rows: np.ndarray
    ) -> yao_covert.CovertRun:
        """This run's public shape for ``yao_covert``: the evaluator feeds the bundles not
        ``seeded``; ``decode_rows``: the output rows whose decoding bits go to it."""
        evaluator = tuple(b.name for b in full.inputs if b.name not in seeded)
        session, run, chunks = self.channel.session, self.counters.runs, self._chunks(full, k)
        return yao_covert.covert_run(
            full, evaluator, session, run, self._tweak_base, tuple(chunks), decode_rows
        )

    def _header(
        self,
        circuit: Circuit,
        k: int,
        garbler_bundles: list[str],
        modes: Mapping[str, Reveal],
        tweak: int,
    ) -> bytes:
        body = {
            "circuit": circuit.fingerprint.hex(),
            "instances": k,
            "garbler_inputs": sorted(garbler_bundles),
            "outputs": {n: m.value for n, m in sorted(modes.items())},
            "tweak_base": tweak,
        }
        if self.security != SEMI_HONEST:  # the semi-honest header stays as it was
            body["security"] = self.security
            body["probe_resistance"] = yao_covert.PROBE_RESISTANCE
        domain = b"ppbn yao header v3" + length_prefixed(YAO_PROTOCOL, self.channel.session)
        return hashlib.sha256(domain + json.dumps(body, sort_keys=True).encode()).digest()

    @staticmethod
    def _partition(
        circuit: Circuit, seeded: set[str], values: Mapping[str, np.ndarray], k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Input rows of the evaluator's bundles (labelled by OT) and of the garbler's
        (``seeded``: labelled from the run's seed), and this party's bits of the rows it
        holds ((rows, k), the garbler's of the seeded rows, the evaluator's of the others)."""
        rows: dict[bool, list[int]] = {False: [], True: []}
        bits: list[np.ndarray] = []
        pos = 0
        for b in circuit.inputs:
            rows[b.name in seeded] += range(pos, pos + b.width)
            if b.name in values:
                bits.append(values_to_bits(values[b.name], b.width))
            pos += b.width
        mine = np.concatenate(bits, axis=0) if bits else np.empty((0, k), dtype=np.uint8)
        return np.array(rows[False], dtype=np.intp), np.array(rows[True], dtype=np.intp), mine

    @staticmethod
    def _chunks(circuit: Circuit, k: int) -> list[slice]:
        per_instance = max(1, 32 * schedule_of(circuit).n_and)
        per = max(1, CHUNK_BYTES // per_instance)
        return [slice(s, min(k, s + per)) for s in range(0, k, per)]

    @staticmethod
    def _output_rows(circuit: Circuit, wanted: set[str]) -> np.ndarray:
        rows, pos = [], 0
        for b in circuit.outputs:
            if b.name in wanted:
                rows.extend(range(pos, pos + b.width))
            pos += b.width
        return np.array(rows, dtype=np.intp)

    @classmethod
    def _bit_shares(
        cls, circuit: Circuit, modes: Mapping[str, Reveal], bits: np.ndarray
    ) -> dict[str, np.ndarray]:
        """This party's XOR shares of the ``bit-shares`` outputs: the garbler's decoding
        bits or the evaluator's colour bits (``bits``, one row per output bit)."""
        names = [b.name for b in circuit.outputs if modes[b.name] == Reveal.BIT_SHARES]
        return (
            cls._split(circuit, bits[cls._output_rows(circuit, set(names))], names) if names else {}
        )

    @staticmethod
    def _split(
        circuit: Circuit, bits_by_row: np.ndarray, wanted: list[str]
    ) -> dict[str, np.ndarray]:
        out, pos = {}, 0
        for b in circuit.outputs:
            if b.name in wanted:
                out[b.name] = bits_to_values(bits_by_row[pos : pos + b.width], b.width)
                pos += b.width
        return out

    # -- garbler -----------------------------------------------------------------------
    def _garble_side(
        self,
        full: Circuit,
        values: dict[str, np.ndarray],
        modes: Mapping[str, Reveal],
        k: int,
        seeded: set[str],
    ) -> dict[str, np.ndarray]:
        mine = set(values)
        self.channel.send(
            "yao.header", self._header(full, k, sorted(mine), modes, self._tweak_base)
        )
        ot_rows, seeded_rows, seeded_bits = self._partition(full, seeded, values, k)
        to_evaluator = {n for n, m in modes.items() if m not in (Reveal.GARBLER, Reveal.BIT_SHARES)}
        eval_rows = self._output_rows(full, to_evaluator)
        chosen = None
        if self.security == SEMI_HONEST:
            decode = permute_bits(self._garble_tables(full, k, ot_rows, seeded_rows, seeded_bits))
            if eval_rows.size:
                self.channel.send_bits("yao.decode", decode[eval_rows])
        else:
            chosen = yao_covert.garble_covert(
                self._covert_run(full, k, seeded, eval_rows),
                self.channel,
                self._sender() if ot_rows.size else None,
                self._seeds,
                seeded_bits,
                self._gc_executor(full, k),
            )
            decode = chosen.decode
        result = self._bit_shares(full, modes, decode)
        garbler_names = [n for n in (b.name for b in full.outputs) if modes[n] == Reveal.GARBLER]
        both_names = [n for n in (b.name for b in full.outputs) if modes[n] == Reveal.BOTH]
        g_rows = self._output_rows(full, set(garbler_names))
        b_rows = self._output_rows(full, set(both_names))
        if chosen is not None:  # authenticated outputs (``yao_covert``)
            g_values, b_values = chosen.receive(self.channel, g_rows, b_rows)
        else:
            g_values = self.channel.recv_bits("yao.out_permute", g_rows.size, k) ^ decode[g_rows]
            b_values = self.channel.recv_bits("yao.out_values", b_rows.size, k)
        result.update(self._split(full, g_values, garbler_names))
        result.update(self._split(full, b_values, both_names))
        return result

    def _garble_tables(
        self,
        full: Circuit,
        k: int,
        ot_rows: np.ndarray,
        seeded_rows: np.ndarray,
        seeded_bits: np.ndarray,
    ) -> np.ndarray:
        """Semi-honest steps 2 and 3: the label seed, the OT, the tables; returns the
        output zero-labels."""
        delta = _delta(RandomStream(self._seeds.next()))
        sched = schedule_of(full)
        seed = b""  # public: the evaluator's labels of the garbler's inputs follow from it
        if seeded_rows.size:
            seed = self._seeds.next()[:LABEL_SEED_BYTES]
            self.channel.send("yao.label_seed", seed)
        session = self.channel.session
        ot_zero = np.empty((len(ot_rows), k, 2), dtype=np.uint64)
        if ot_rows.size:
            ot_zero = (
                self._sender().send_correlated(len(ot_rows) * k, delta).reshape(len(ot_rows), k, 2)
            )
        chunks = self._chunks(full, k)
        tweaks = [self._tweak_base + 2 * sched.n_and * c.start for c in chunks]
        tasks = (
            (
                sched,
                session,
                tweak,
                delta,
                ot_rows,
                np.ascontiguousarray(ot_zero[:, chunk]),
                seeded_rows,
                np.ascontiguousarray(seeded_bits[:, chunk]),
                label_key(session, seed, chunk.start) if seed else b"",
            )
            for chunk, tweak in zip(chunks, tweaks, strict=True)
        )
        out_zero = np.empty((len(sched.output_slots), k, 2), dtype=np.uint64)
        for chunk, (tables, chunk_out) in zip(
            chunks, self._gc_executor(full, k).map(garble_chunk, tasks), strict=True
        ):
            self.channel.send_array("yao.tables", tables)
            out_zero[:, chunk] = chunk_out
        return out_zero

    # -- evaluator -----------------------------------------------------------------------
    def _evaluate_side(
        self,
        full: Circuit,
        values: dict[str, np.ndarray],
        modes: Mapping[str, Reveal],
        k: int,
        seeded: set[str],
    ) -> dict[str, np.ndarray]:
        mine = set(values)
        garbler_bundles = sorted(b.name for b in full.inputs if b.name not in mine)
        got = self.channel.recv("yao.header", max_bytes=32)
        if got != self._header(full, k, garbler_bundles, modes, self._tweak_base):
            raise ProtocolError(
                "Yao header mismatch: the parties disagree on the circuit, instance count, "
                "input ownership, output modes, run sequence, session or security level"
            )
        ot_rows, seeded_rows, own_bits = self._partition(full, seeded, values, k)
        order = [b.name for b in full.outputs]
        to_me = [n for n in order if modes[n] not in (Reveal.GARBLER, Reveal.BIT_SHARES)]
        my_rows = self._output_rows(full, set(to_me))
        if self.security == SEMI_HONEST:
            permuted = permute_bits(self._evaluate_tables(full, k, ot_rows, seeded_rows, own_bits))
            decode = self.channel.recv_bits("yao.decode", my_rows.size, k)
        else:
            out_labels, decode = yao_covert.evaluate_covert(
                self._covert_run(full, k, seeded, my_rows),
                self.channel,
                self._receiver() if ot_rows.size else None,
                self._seeds,
                own_bits,
                self._gc_executor(full, k),
            )
            permuted = permute_bits(out_labels)
        result = self._bit_shares(full, modes, permuted)
        if my_rows.size:
            result.update(self._split(full, permuted[my_rows] ^ decode, to_me))
        garbler_names = [n for n in order if modes[n] == Reveal.GARBLER]
        g_rows = self._output_rows(full, set(garbler_names))
        both_names = [n for n in order if modes[n] == Reveal.BOTH]
        if self.security != SEMI_HONEST:  # authenticated outputs (``yao_covert``)
            b_rows = self._output_rows(full, set(both_names))
            yao_covert.send_output_labels(self.channel, out_labels, g_rows, b_rows)
            return result
        if g_rows.size:
            self.channel.send_bits("yao.out_permute", permuted[g_rows])
        if both_names:
            both_bits = np.concatenate(
                [values_to_bits(result[n], full.output(n).width) for n in both_names]
            )
            self.channel.send_bits("yao.out_values", both_bits)
        return result

    def _evaluate_tables(
        self,
        full: Circuit,
        k: int,
        ot_rows: np.ndarray,
        seeded_rows: np.ndarray,
        own_bits: np.ndarray,
    ) -> np.ndarray:
        """Semi-honest steps 2 and 3 at the evaluator; returns its output labels."""
        sched = schedule_of(full)
        session = self.channel.session
        labels = np.empty((len(sched.input_slots), k, 2), dtype=np.uint64)
        seed = b""
        if seeded_rows.size:
            seed = self.channel.recv("yao.label_seed", max_bytes=LABEL_SEED_BYTES)
            if len(seed) != LABEL_SEED_BYTES:
                raise ProtocolError(
                    f"yao.label_seed has {len(seed)} bytes, expected {LABEL_SEED_BYTES}"
                )
        if ot_rows.size:
            received = self._receiver().receive_correlated(own_bits.reshape(-1))
            labels[ot_rows] = received.reshape(len(ot_rows), k, 2)
        chunks = self._chunks(full, k)

        def tasks():
            for chunk in chunks:
                size = chunk.stop - chunk.start
                if seeded_rows.size:  # the garbler's inputs' active labels, from the seed
                    labels[seeded_rows, chunk] = seeded_labels(
                        label_key(session, seed, chunk.start), seeded_rows.size, size
                    )
                tables = self.channel.recv_array("yao.tables", np.uint64, (2, sched.n_and, size, 2))
                tweak = self._tweak_base + 2 * sched.n_and * chunk.start
                yield sched, session, tweak, np.ascontiguousarray(labels[:, chunk]), tables

        out_labels = np.empty((len(sched.output_slots), k, 2), dtype=np.uint64)
        executor = self._gc_executor(full, k)
        for chunk, chunk_out in zip(chunks, executor.map(evaluate_chunk, tasks()), strict=True):
            out_labels[:, chunk] = chunk_out
        return out_labels
