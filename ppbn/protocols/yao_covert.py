"""Covert Yao: cut-and-choose over hashed garbled copies, against a garbler that cheats.

At the ``covert`` level (and at ``malicious``, which gets the same defence until a
stronger one exists) ``YaoParty.run`` replaces steps 2 and 3 of ``ppbn.protocols.yao``
with these (Aumann and Lindell, "Security against covert adversaries", TCC 2007, Sec. 6,
with the hashed circuits of Goyal, Mohassel and Smith, EUROCRYPT 2008), for lambda =
``COVERT_COPIES`` copies of the run's circuit with its evaluator inputs probe-resistantly
encoded (``probe_encoding.encoded_circuit``, "Input encoding" below):

1. The garbler draws a seed per copy. Everything of a copy derives from its seed alone
   (``copy_key``): its free-XOR offset R_c and the zero-labels of every input wire, the
   evaluator's, the garbler's and the masks' (not the public label seed of the
   semi-honest level: opening a copy would show the garbler's input bits).
2. It garbles every copy and sends, per copy, a SHA-256 digest under ``COMMIT_DOMAIN``
   of the session, the run's index on the ``YaoParty``, the copy's index, and the copy's
   tables, the decoding bits the evaluator receives and the hashes of both labels of each
   garbler input wire (``label_hashes``, ordered by colour bit).
3. The evaluator encodes its n input bits y as m bits y' with M y' = y
   (``ProbeEncoding.encode``). It gets the labels of its encoded wires by one random OT per
   wire and instance (``OTSender.pads``, row by row, instance by instance) for all copies
   at once (``send_labels``): the garbler sends, for each value b, every copy's label of
   value b (``ot_messages``) under the pad of b expanded to lambda blocks (``pad_masks``).
   The evaluator's choice bits go once, the same in every copy, and when the garbler sends
   the labels it cannot know which copy will be evaluated.
4. The evaluator draws the copy e to evaluate from its own randomness (``choose_copy``)
   and sends it; the garbler sends the seeds of the other copies. The evaluator garbles
   each opened copy again from its seed and compares the digest (else
   ``CheatingDetected("yao.circuit")``), and compares every OT label it received in that
   copy with the seed-derived label of its encoded bit (else
   ``CheatingDetected("yao.ot_labels")``). It raises before it evaluates anything or sends
   anything more.
5. The garbler sends copy e: per chunk the active labels of its own inputs and masks and
   the hash of each wire's other label, then the tables; then the decoding bits. The
   evaluator hashes its active labels itself, evaluates, and checks the copy's digest
   (``CheatingDetected("yao.circuit")``) before it sends anything: a label that is
   neither of its wire's two labels changes the digest. Then the outputs go as at the
   semi-honest level.

Deterrence 1 - 1/lambda = 1/2: a garbler that garbles another circuit (or commits other
decoding bits or label hashes) in one copy, or sends a wrong OT label that the evaluator
receives in one copy (one copy's block of an OT message), is caught when that copy is
opened, with probability 1/2; cheating in every copy is always caught. A cheater caught
learns nothing: the evaluator stops before it evaluates. Checks raise ``CheatingDetected``
with evidence for the audit log: the run, the copy, and the expected and found digests.

One OT for all copies: the pads of an OT are random to the receiver but for its choice
(``ot``), and each copy's block of a message is masked by its own fixed-key hash of the
pad (``pad_masks``: MMO under a key per copy), so the opened copies' labels, which the
evaluator then knows, tell nothing of the other copies' masks; the labels of the value
not chosen stay hidden in every copy, copy e's included.

Input encoding (Lindell and Pinkas, EUROCRYPT 2007, Sec. 3.1.1; ``probe_encoding``).
Without it the evaluator's real bits go into every copy, and a garbler that corrupts only
the message m_b of one evaluator input bit (selective failure) sees something go wrong (a
caught run in an opened copy, a wrong or failed output in copy e) exactly when the bit is
b: it learns the bit, at no risk when the corrupted copy is the evaluated one. Here the
evaluator feeds y' with M y' = y, uniform among the solutions, for a public n x m matrix
M whose every nonempty set of rows XORs to weight >= s = ``PROBE_RESISTANCE`` = 40 (a
shortened BCH code, m = n + O(s log n): 299 for n = 128, against 40 n = 5,120 for the
independent XOR shares it replaces); the circuit garbled (every copy, the opened ones
re-garbled by the evaluator) computes y = M y' with XOR gates ahead of the agreed circuit
(free under free-XOR). Both parties build M and the circuit from the agreed circuit and
s, and the ``yao`` header names s, so the header and the copy digests commit to it. Any
fewer than s encoded bits are uniform and independent of y, so whatever OT messages of
up to s - 1 encoded wires the garbler corrupts, whether the run fails is independent of
y; corrupting messages of s or more wires lets the run go on only for one value of those
wires, probability at most 2^-39 whatever y is: the outcome's distribution moves by at
most 2^-39 with y (the argument is in ``probe_encoding``). Each corrupted message the
evaluator receives is still caught with probability 1/2 (opened copy).

Residuals, stated plainly:

- The garbler's inputs need not be consistent across copies: only copy e is evaluated.
  A wrong active label for its own input (the wire's other label) is an input
  substitution, which the ideal functionality allows; any other label fails the digest
  (it would make the evaluator's outputs a garbler-chosen function of the wires it meets).
- Selective failure is closed up to 2^-39 ("Input encoding"); a failure still tells the
  garbler that something of its cheating went through, about uniform encoded bits only.
- Against a cheating evaluator: at this level the OT extension runs the receiver's
  consistency check (``ot_check``, KOS15), so a malicious evaluator cannot learn the
  sender's s and with it both pads of an OT (both labels of a wire, R_c of copy e) beyond
  the check's guessing bound. Nothing else checks the evaluator: it may feed any encoded
  bits (an input substitution: every y' decodes to some y), and open no copy or abort at
  will (the garbler learns that it aborted). It cannot change an output the garbler
  learns ("Authenticated outputs").
- A checked receiver waits for the sender's challenge after each block (``ot``), so the
  two parties must not both act as checked OT receivers at once over one channel; a Yao
  run has one direction (the evaluator receives, the garbler sends), and runs follow one
  another.

Authenticated outputs. For the outputs the garbler learns (``garbler`` and ``both``) the
evaluator returns its output labels of copy e (16 bytes a bit, ``OUTPUT_LABELS``) instead
of their permute bits or values; the garbler, which holds both labels of every output
wire of copy e, reads each value from the label and raises
``CheatingDetected("yao.outputs")`` for a label that is neither. To send the other value
the evaluator would need the wire's other label, which it meets only by guessing R_c
(the free-XOR argument above: probability about 2^-127 per try), so a wrong output is
caught in every run, not half of them. The ``both`` outputs' values the evaluator decodes
itself as before.

Hashes: garbling uses ``FixedKeyHash(COVERT_PROTOCOL, session)``, a permutation of its own
(``circuits.garble``). The copies share the run's tweaks: each copy has its own R_c and
labels, and every copy but e is opened, so the evaluated one is a semi-honest garbling of
its own. A label's hash is two fixed-key AES blocks (MMO, pi(x) XOR x, under two keys of
the session: 256 bits, so a junk label with the hash of a valid one costs about 2^128);
the hash of the inactive label is a random-oracle value at a point the evaluator does not
know, so it tells nothing of R_c. The OT pads' masks are MMO under keys of their own
(``PAD_DOMAIN``).

Cost: the garbler garbles lambda copies, the evaluator lambda - 1 plus one evaluation
(each with the encoding's free XOR gates, about D / 2 per evaluator input bit, D = m - n);
the evaluator's input bits cost m / n random OTs per bit (the extension's u and its
check) and 16 lambda bytes per value and OT, instead of one correlated OT (16 bytes); the
garbler's input bits cost 16 bytes (the active label) plus 32 (the other label's hash)
per instance instead of nothing; an output the garbler learns costs 16 bytes a bit instead
of one bit. The garbler keeps every copy's tables until e is known.
``YaoParty.counters`` counts the agreed circuit's AND gates once and every OT (m per run
instance, m the encoded width of the run's evaluator input bits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.garble import (
    FixedKeyHash,
    evaluate_garbled,
    garble,
    length_prefixed,
    permute_bits,
)
from ppbn.circuits.ir import Circuit
from ppbn.circuits.schedule import Schedule, schedule_of
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.executor import Executor
from ppbn.protocols.ot import OTReceiver, OTSender
from ppbn.protocols.probe_encoding import (
    ENCODED_BUNDLE,
    ProbeEncoding,
    encoded_circuit,
    probe_encoding,
)
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.seeds import SEED_BYTES, RandomStream, TaskSeeds, expand

COVERT_COPIES = 2  # lambda: a cheating garbler is caught with probability 1 - 1/lambda
# s of the evaluator's input encoding (module doc, "Input encoding"): any s - 1 encoded
# bits are uniform whatever the input, and a garbler that corrupts OT messages of s or more
# encoded wires learns something of the input only with probability 2^-(s-1) = 2^-39
PROBE_RESISTANCE = 40
COVERT_PROTOCOL = b"ppbn/yao/half-gates/covert"
COPY_DOMAIN = b"ppbn yao covert copy v1"
COMMIT_DOMAIN = b"ppbn yao covert commitment v1"
LABEL_HASH_DOMAIN = b"ppbn yao covert label hash v1"
PAD_DOMAIN = b"ppbn yao covert OT pad masks v1"
OT_BATCH = 1 << 16  # OTs whose masked labels go in one message (4 MiB at two copies)
DIGEST_BYTES = 32
HASH_WORDS = 4  # a label's hash: 256 bits as uint64 words
OUTPUT_LABELS = "yao.covert.out_labels"  # the evaluator's labels of the garbler's outputs


@dataclass(frozen=True)
class CovertRun:
    """The public shape of one covert run, the same at both parties: the schedule, the
    session, the run's index on its ``YaoParty`` and its tweak base, the instance chunks,
    the input rows of the evaluator (``ot_rows``: its encoded input bits) and of the
    garbler, the output rows whose decoding bits go to the evaluator, and the encoding of
    the evaluator's input bits."""

    schedule: Schedule  # of the encoded circuit (``probe_encoding.encoded_circuit``)
    session: bytes
    run: int
    tweak_base: int
    chunks: tuple[slice, ...]
    ot_rows: np.ndarray
    garbler_rows: np.ndarray
    decode_rows: np.ndarray
    encoding: ProbeEncoding

    @property
    def instances(self) -> int:
        return self.chunks[-1].stop

    @property
    def tweaks(self) -> tuple[int, ...]:
        """Each chunk's tweak base, as at the semi-honest level: the copies share them."""
        return tuple(self.tweak_base + 2 * self.schedule.n_and * c.start for c in self.chunks)


@dataclass
class GarbledCopy:
    """One copy as its garbler holds it until the evaluator has chosen."""

    seed: bytes
    tables: list[np.ndarray]
    label_hashes: list[np.ndarray]
    out_zero: np.ndarray
    digest: bytes


def covert_run(
    circuit: Circuit,
    evaluator_bundles: tuple[str, ...],
    session: bytes,
    run: int,
    tweak_base: int,
    chunks: tuple[slice, ...],
    decode_rows: np.ndarray,
) -> CovertRun:
    """The public shape of a covert run of ``circuit`` (the share outputs' masks included),
    whose ``evaluator_bundles`` the evaluator feeds, encoded ``PROBE_RESISTANCE``-probe-
    resistantly; the rest of the arguments as ``CovertRun``'s."""
    encoded = encoded_circuit(circuit, evaluator_bundles, PROBE_RESISTANCE)
    evaluator = (*evaluator_bundles, ENCODED_BUNDLE)
    rows: dict[bool, list[int]] = {False: [], True: []}
    pos = 0
    for bundle in encoded.inputs:
        rows[bundle.name in evaluator] += range(pos, pos + bundle.width)
        pos += bundle.width
    n = sum(b.width for b in circuit.inputs if b.name in evaluator_bundles)
    ot_rows, garbler_rows = (np.array(rows[side], dtype=np.intp) for side in (True, False))
    return CovertRun(
        schedule_of(encoded),
        session,
        run,
        tweak_base,
        chunks,
        ot_rows,
        garbler_rows,
        decode_rows,
        probe_encoding(n, PROBE_RESISTANCE),
    )


def copy_key(session: bytes, seed: bytes, purpose: bytes, first: int) -> bytes:
    """The AES-256 key of one of a copy's derivations (``purpose``, from instance
    ``first``): a function of the copy's seed alone, in its own SHA-256 domain."""
    framed = length_prefixed(COVERT_PROTOCOL, session, seed, purpose, first.to_bytes(8, "big"))
    return hashlib.sha256(COPY_DOMAIN + framed).digest()


def _blocks(key: bytes, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(expand(key, 16 * count), dtype=np.uint64).reshape(*shape, 2).copy()


def copy_delta(session: bytes, seed: bytes) -> np.ndarray:
    """The copy's free-XOR offset R_c, point-and-permute bit set."""
    delta = _blocks(copy_key(session, seed, b"delta", 0), ())
    delta[0] |= np.uint64(1)
    return delta


def copy_input_labels(session: bytes, seed: bytes, first: int, rows: int, size: int) -> np.ndarray:
    """The zero-labels of all ``rows`` input wires of the chunk of ``size`` instances from
    ``first``, (rows, size, 2) uint64."""
    return _blocks(copy_key(session, seed, b"inputs", first), (rows, size))


def session_keys(domain: bytes, session: bytes, count: int) -> list[bytes]:
    """``count`` AES-128 keys of the session in the SHA-256 domain ``domain``."""
    root = hashlib.sha256(domain + length_prefixed(COVERT_PROTOCOL, session)).digest()
    keys = expand(root, 16 * count)
    return [keys[16 * i : 16 * i + 16] for i in range(count)]


def fixed_key_mmo(keys: list[bytes], blocks: np.ndarray) -> np.ndarray:
    """pi_i(x) ^ x for each 128-bit block (..., 2) and each key, pi_i fixed-key AES-128:
    (..., 2 len(keys)) uint64, block i the hash under key i."""
    blocks = np.ascontiguousarray(blocks, dtype=np.uint64)
    out = np.empty((*blocks.shape[:-1], 2 * len(keys)), dtype=np.uint64)
    for i, key in enumerate(keys):
        encrypted = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(blocks.tobytes())
        out[..., 2 * i : 2 * i + 2] = (
            np.frombuffer(encrypted, dtype=np.uint64).reshape(blocks.shape) ^ blocks
        )
    return out


def hash_labels(session: bytes, labels: np.ndarray) -> np.ndarray:
    """A 256-bit hash of each label (..., 2) -> (..., 4) uint64: MMO under two keys of the
    session (module doc, "Hashes")."""
    return fixed_key_mmo(session_keys(LABEL_HASH_DOMAIN, session, 2), labels)


def pad_masks(session: bytes, pads: np.ndarray) -> np.ndarray:
    """Each OT pad (count, 2) expanded to one mask per copy, (count, COVERT_COPIES, 2):
    MMO under a key per copy, so one copy's mask tells nothing of another's."""
    masks = fixed_key_mmo(session_keys(PAD_DOMAIN, session, COVERT_COPIES), pads)
    return masks.reshape(pads.shape[0], COVERT_COPIES, 2)


def label_hashes(session: bytes, zero: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The hashes of both labels of each wire, (..., 2, 4): entry c is the hash of the
    label whose colour bit is c, so the order says nothing of which label means 0."""
    zero_hash, one_hash = hash_labels(session, zero), hash_labels(session, zero ^ delta)
    permute = (zero[..., 0] & np.uint64(1)).astype(bool)[..., None]
    return np.stack(
        [np.where(permute, one_hash, zero_hash), np.where(permute, zero_hash, one_hash)], axis=-2
    )


def colour_ordered(session: bytes, active: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The label hashes of ``label_hashes`` as the evaluator rebuilds them: the hash of its
    active label at its colour, ``other`` (sent) at the other colour."""
    own = hash_labels(session, active)
    colour = (active[..., 0] & np.uint64(1)).astype(bool)[..., None]
    return np.stack([np.where(colour, other, own), np.where(colour, own, other)], axis=-2)


def times_delta(bits: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """bit * R for (rows, instances) bits: (rows, instances, 2) uint64."""
    return np.negative(bits.astype(np.uint64))[..., None] & delta


def garble_copy_chunk(
    schedule: Schedule,
    session: bytes,
    tweak: int,
    seed: bytes,
    first: int,
    size: int,
    garbler_rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Garble one chunk of one copy from the copy's seed, a pure function for either
    party's executor (the evaluator garbles the opened copies again): the tables, the
    output zero-labels and the label hashes of the garbler's input rows."""
    delta = copy_delta(session, seed)
    zero = copy_input_labels(session, seed, first, len(schedule.input_slots), size)
    tables, out_zero = garble(schedule, zero, delta, tweak, FixedKeyHash(COVERT_PROTOCOL, session))
    return tables, out_zero, label_hashes(session, zero[garbler_rows], delta)


def evaluate_copy_chunk(
    schedule: Schedule, session: bytes, tweak: int, labels: np.ndarray, tables: np.ndarray
) -> np.ndarray:
    """Evaluate one chunk of the chosen copy, a pure function for the evaluator's executor."""
    return evaluate_garbled(schedule, labels, tables, tweak, FixedKeyHash(COVERT_PROTOCOL, session))


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """(rows, instances) bits as the bytes they travel in."""
    return np.packbits(bits.astype(np.uint8), axis=1, bitorder="little")


def copy_hasher(run: CovertRun, copy: int) -> hashlib._Hash:
    """The running digest of copy ``copy`` of ``run`` (step 2 of the module doc)."""
    framed = length_prefixed(
        COVERT_PROTOCOL, run.session, run.run.to_bytes(8, "big"), copy.to_bytes(8, "big")
    )
    return hashlib.sha256(COMMIT_DOMAIN + framed)


def garble_copy(run: CovertRun, copy: int, seed: bytes, executor: Executor) -> GarbledCopy:
    """Copy ``copy`` garbled from ``seed``, with its digest."""
    tasks = (
        (run.schedule, run.session, tweak, seed, c.start, c.stop - c.start, run.garbler_rows)
        for c, tweak in zip(run.chunks, run.tweaks, strict=True)
    )
    out_zero = np.empty((len(run.schedule.output_slots), run.instances, 2), dtype=np.uint64)
    tables: list[np.ndarray] = []
    hashes: list[np.ndarray] = []
    digest = copy_hasher(run, copy)
    for chunk, (chunk_tables, chunk_out, chunk_hashes) in zip(
        run.chunks, executor.map(garble_copy_chunk, tasks), strict=True
    ):
        digest.update(chunk_hashes.tobytes())
        digest.update(chunk_tables.tobytes())
        tables.append(chunk_tables)
        hashes.append(chunk_hashes)
        out_zero[:, chunk] = chunk_out
    digest.update(pack_bits(permute_bits(out_zero)[run.decode_rows]).tobytes())
    return GarbledCopy(seed, tables, hashes, out_zero, digest.digest())


def garble_copies(run: CovertRun, seeds: list[bytes], executor: Executor) -> list[GarbledCopy]:
    """Every copy of the run, garbled by the garbler (one seed each)."""
    return [garble_copy(run, copy, seed, executor) for copy, seed in enumerate(seeds)]


def evaluator_labels(run: CovertRun, seed: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Both labels of the evaluator's input wires in the copy of ``seed``: (zero, R_c),
    zero (ot_rows, instances, 2)."""
    zero = np.empty((run.ot_rows.size, run.instances, 2), dtype=np.uint64)
    rows = len(run.schedule.input_slots)
    for chunk in run.chunks:
        size = chunk.stop - chunk.start
        zero[:, chunk] = copy_input_labels(run.session, seed, chunk.start, rows, size)[run.ot_rows]
    return zero, copy_delta(run.session, seed)


def ot_messages(run: CovertRun, copies: list[GarbledCopy]) -> tuple[np.ndarray, np.ndarray]:
    """The OT messages of step 3, for values 0 and 1: every copy's label of that value of
    each evaluator input wire, row by row, instance by instance, (rows x instances,
    copies, 2)."""
    zeros, ones = [], []
    for copy in copies:
        zero, delta = evaluator_labels(run, copy.seed)
        zeros.append(zero.reshape(-1, 2))
        ones.append((zero ^ delta).reshape(-1, 2))
    return np.stack(zeros, axis=1), np.stack(ones, axis=1)


def send_labels(
    channel: Channel, sender: OTSender, session: bytes, m0: np.ndarray, m1: np.ndarray
) -> None:
    """Step 3 at the garbler: one random OT per row of ``m0``/``m1`` (``ot_messages``), then
    both messages under their pads' masks (``pad_masks``), ``OT_BATCH`` OTs a message."""
    pad0, pad1 = sender.pads(m0.shape[0])
    for start in range(0, m0.shape[0], OT_BATCH):
        rows = slice(start, start + OT_BATCH)
        masked = np.stack(
            [m0[rows] ^ pad_masks(session, pad0[rows]), m1[rows] ^ pad_masks(session, pad1[rows])],
            axis=1,
        )
        channel.send_array("yao.covert.ot", masked)


def receive_labels(
    channel: Channel, receiver: OTReceiver, session: bytes, choices: np.ndarray
) -> np.ndarray:
    """Step 3 at the evaluator: every copy's label of each choice bit, (choices, copies, 2)."""
    pads = receiver.pads(choices)
    out = np.empty((choices.size, COVERT_COPIES, 2), dtype=np.uint64)
    for start in range(0, choices.size, OT_BATCH):
        rows = slice(start, start + OT_BATCH)
        size = pads[rows].shape[0]
        masked = channel.recv_array("yao.covert.ot", np.uint64, (size, 2, COVERT_COPIES, 2))
        chosen = masked[np.arange(size), choices[rows].astype(np.intp)]
        out[rows] = chosen ^ pad_masks(session, pads[rows])
    return out


@dataclass(frozen=True)
class ChosenOutputs:
    """The evaluated copy's output zero-labels and offset, which the garbler keeps to read
    the labels the evaluator returns for the outputs the garbler learns ("Authenticated
    outputs" in the module doc)."""

    zero: np.ndarray  # (output rows, instances, 2)
    delta: np.ndarray
    run: int

    @property
    def decode(self) -> np.ndarray:
        """The decoding bits of every output row."""
        return permute_bits(self.zero)

    def receive(
        self, channel: Channel, garbler_rows: np.ndarray, both_rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The values of the output rows the garbler learns alone and with the evaluator,
        from the evaluator's labels (``OUTPUT_LABELS``, one message for both, none when
        there are no such rows): 0 for a wire's zero-label, 1 for its one-label; any other
        label is ``CheatingDetected("yao.outputs")``."""
        rows = np.concatenate([garbler_rows, both_rows])
        if not rows.size:
            none = np.empty((0, self.zero.shape[1]), dtype=np.uint8)
            return none, none
        zero = self.zero[rows]
        got = channel.recv_array(OUTPUT_LABELS, np.uint64, zero.shape)
        one = (got == zero ^ self.delta).all(axis=-1)
        wrong = np.argwhere(~(got == zero).all(axis=-1) & ~one)
        if wrong.size:
            row, instance = (int(v) for v in wrong[0])
            raise CheatingDetected(
                "yao.outputs",
                f"{len(wrong)} output labels of Yao run {self.run} are neither label of their "
                "wire: the evaluator changed outputs the garbler learns",
                {
                    "run": self.run,
                    "output": int(rows[row]),
                    "instance": instance,
                    "found": _digest_hex(got[row, instance]),
                },
            )
        values = one.astype(np.uint8)
        return values[: garbler_rows.size], values[garbler_rows.size :]


def send_output_labels(
    channel: Channel, labels: np.ndarray, garbler_rows: np.ndarray, both_rows: np.ndarray
) -> None:
    """The evaluator's output ``labels`` of the rows the garbler learns alone and with it,
    for ``ChosenOutputs.receive``."""
    rows = np.concatenate([garbler_rows, both_rows])
    if rows.size:
        channel.send_array(OUTPUT_LABELS, labels[rows])


def garble_covert(
    run: CovertRun,
    channel: Channel,
    sender: OTSender | None,
    seeds: TaskSeeds,
    garbler_bits: np.ndarray,
    executor: Executor,
) -> ChosenOutputs:
    """The garbler's steps 1 to 5; returns the chosen copy's output labels (its decoding
    bits, and the check of the labels the evaluator returns). ``sender``: the OT
    extension, None when the evaluator has no input bits."""
    copies = garble_copies(run, [seeds.next() for _ in range(COVERT_COPIES)], executor)
    channel.send("yao.covert.commit", b"".join(copy.digest for copy in copies))
    if sender is not None:
        send_labels(channel, sender, run.session, *ot_messages(run, copies))
    choice = channel.recv("yao.covert.choice", max_bytes=1)
    if len(choice) != 1 or choice[0] >= COVERT_COPIES:
        raise ProtocolError(f"yao.covert.choice must name one of {COVERT_COPIES} copies")
    chosen = copies[choice[0]]
    channel.send("yao.covert.seeds", b"".join(copy.seed for copy in copies if copy is not chosen))
    delta = copy_delta(run.session, chosen.seed)
    rows = len(run.schedule.input_slots)
    for chunk, tables, hashes in zip(run.chunks, chosen.tables, chosen.label_hashes, strict=True):
        if run.garbler_rows.size:
            size = chunk.stop - chunk.start
            zero = copy_input_labels(run.session, chosen.seed, chunk.start, rows, size)
            active = zero[run.garbler_rows] ^ times_delta(garbler_bits[:, chunk], delta)
            colour = (active[..., 0] & np.uint64(1)).astype(np.intp)
            other = np.take_along_axis(hashes, (1 - colour)[..., None, None], axis=-2)
            channel.send_array("yao.covert.labels", active)
            channel.send_array("yao.covert.other_hashes", other[..., 0, :])
        channel.send_array("yao.tables", tables)
    outputs = ChosenOutputs(chosen.out_zero, delta, run.run)
    if run.decode_rows.size:
        channel.send_array("yao.decode", pack_bits(outputs.decode[run.decode_rows]))
    return outputs


def _digest_hex(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _check_opened(
    run: CovertRun,
    copy: int,
    seed: bytes,
    committed: bytes,
    received: np.ndarray | None,
    choices: np.ndarray,
    executor: Executor,
) -> None:
    """Step 4 for one opened copy: its digest, then the OT labels this party received."""
    redone = garble_copy(run, copy, seed, executor)
    if redone.digest != committed:
        raise CheatingDetected(
            "yao.circuit",
            f"copy {copy} of Yao run {run.run} is not the agreed circuit garbled from its seed",
            {
                "run": run.run,
                "copy": copy,
                "expected": redone.digest.hex(),
                "found": committed.hex(),
            },
        )
    if received is None:
        return
    zero, delta = evaluator_labels(run, seed)
    expected = (zero ^ times_delta(choices, delta)).reshape(-1, 2)
    wrong = np.flatnonzero((expected != received).any(axis=1))
    if wrong.size:
        first = int(wrong[0])
        raise CheatingDetected(
            "yao.ot_labels",
            f"{wrong.size} OT labels of copy {copy} of Yao run {run.run} are not those of its seed",
            {
                "run": run.run,
                "copy": copy,
                "ot": first,
                "expected": _digest_hex(expected[first]),
                "found": _digest_hex(received[first]),
            },
        )


def choose_copy(seeds: TaskSeeds) -> int:
    """Step 4: the copy the evaluator evaluates, from its own randomness, drawn once the
    garbler is bound to every copy (digests and OT messages)."""
    return RandomStream(seeds.next()).randbelow(COVERT_COPIES)


def evaluate_covert(
    run: CovertRun,
    channel: Channel,
    receiver: OTReceiver | None,
    seeds: TaskSeeds,
    choices: np.ndarray,
    executor: Executor,
) -> tuple[np.ndarray, np.ndarray]:
    """The evaluator's steps 2 to 5 with its input bits ``choices`` (one row per evaluator
    input bit of the agreed circuit, instances), which it encodes first (``run.encoding``);
    returns the chosen copy's output labels and the decoding bits of ``run.decode_rows``.
    Raises ``CheatingDetected`` before it sends anything after its choice."""
    choices = run.encoding.encode(choices, RandomStream(seeds.next()))
    commits = channel.recv("yao.covert.commit", max_bytes=COVERT_COPIES * DIGEST_BYTES)
    if len(commits) != COVERT_COPIES * DIGEST_BYTES:
        raise ProtocolError(f"yao.covert.commit must hold {COVERT_COPIES} digests")
    digests = [commits[i : i + DIGEST_BYTES] for i in range(0, len(commits), DIGEST_BYTES)]
    received = None
    if receiver is not None:
        received = receive_labels(channel, receiver, run.session, choices.reshape(-1))
    chosen = choose_copy(seeds)
    channel.send("yao.covert.choice", bytes([chosen]))
    opened = [copy for copy in range(COVERT_COPIES) if copy != chosen]
    raw = channel.recv("yao.covert.seeds", max_bytes=len(opened) * SEED_BYTES)
    if len(raw) != len(opened) * SEED_BYTES:
        raise ProtocolError(f"yao.covert.seeds must hold {len(opened)} seeds")
    for i, copy in enumerate(opened):
        seed = raw[i * SEED_BYTES : (i + 1) * SEED_BYTES]
        own = None if received is None else received[:, copy]
        _check_opened(run, copy, seed, digests[copy], own, choices, executor)
    labels = np.empty((len(run.schedule.input_slots), run.instances, 2), dtype=np.uint64)
    if received is not None:
        labels[run.ot_rows] = received[:, chosen].reshape(run.ot_rows.size, run.instances, 2)
    digest = copy_hasher(run, chosen)
    n_and, garbler_rows = run.schedule.n_and, run.garbler_rows.size

    def tasks() -> Iterator[tuple]:
        for chunk, tweak in zip(run.chunks, run.tweaks, strict=True):
            size = chunk.stop - chunk.start
            if garbler_rows:
                active = channel.recv_array("yao.covert.labels", np.uint64, (garbler_rows, size, 2))
                other = channel.recv_array(
                    "yao.covert.other_hashes", np.uint64, (garbler_rows, size, HASH_WORDS)
                )
                digest.update(colour_ordered(run.session, active, other).tobytes())
                labels[run.garbler_rows, chunk] = active
            tables = channel.recv_array("yao.tables", np.uint64, (2, n_and, size, 2))
            digest.update(tables.tobytes())
            yield run.schedule, run.session, tweak, np.ascontiguousarray(labels[:, chunk]), tables

    out_labels = np.empty((len(run.schedule.output_slots), run.instances, 2), dtype=np.uint64)
    for chunk, chunk_out in zip(
        run.chunks, executor.map(evaluate_copy_chunk, tasks()), strict=True
    ):
        out_labels[:, chunk] = chunk_out
    width = (run.instances + 7) // 8
    packed = np.empty((0, width), dtype=np.uint8)
    if run.decode_rows.size:
        packed = channel.recv_array("yao.decode", np.uint8, (run.decode_rows.size, width))
        digest.update(packed.tobytes())
    if digest.digest() != digests[chosen]:
        raise CheatingDetected(
            "yao.circuit",
            f"copy {chosen} of Yao run {run.run} is not the copy its garbler committed to",
            {
                "run": run.run,
                "copy": chosen,
                "expected": digests[chosen].hex(),
                "found": digest.hexdigest(),
            },
        )
    decode = np.unpackbits(packed, axis=1, count=run.instances, bitorder="little")
    return out_labels, decode
