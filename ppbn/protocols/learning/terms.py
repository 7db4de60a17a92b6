"""Secure cell and row terms on additive shares (Yang-Wright Sec. 5.4 and 6.5).

For every count share (a cell count alpha_ijk or a row count alpha_ij, l_ij = alpha_ij +
d - 1), the normalisation circuit (``circuits/scoring.py``) turns the count into shares of
the mantissa's fraction f and of the multiplier (each output at its own width, as XOR
shares of its bits by Yao's ``bit-shares`` mode, which ``arith.bit_mul`` multiplies into
the ring), and masked lookup indices; the tables on those indices are fetched by OT in one
round (``arith.lookup_batch``); the reduced argument u = m r_j - 1, the Lindell-Pinkas
series, the products and the Stirling terms are evaluated on shares
(``fixedpoint.terms_on`` with the ``SecureBackend``): the same code as the plaintext model.

A ``TermsEngine`` is one conversation's set of sessions; ``scorer.SecureScorer`` owns the
job's, a second one on a lane of the channel when it splits a batch in two, and one in
each process of its terms lanes (``term_lanes.py``). ``build_engine`` makes each from an
``EngineSpec``, which a lane's process receives pickled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.circuits.ir import values_to_bits
from ppbn.circuits.scoring import (
    NormalisationSpec,
    c_index_bits,
    index_bits,
    normalisation_circuit,
    shared_outputs,
)
from ppbn.protocols import arith, ring
from ppbn.protocols.channel import Channel
from ppbn.protocols.executor import ExecutorSource
from ppbn.protocols.fixedpoint import (
    TABLES_ON_J,
    Shift,
    ShiftCoefficients,
    c_table,
    normalisation_spec,
    tables_on_k,
    terms_on,
)
from ppbn.protocols.learning.clock import NORMALISE, SHARE_TERMS, PhaseClock
from ppbn.protocols.learning.config import GARBLER
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.yao import Reveal, YaoParty


class SecureBackend:
    """``fixedpoint.Backend`` on additive shares: local ring operations, ``arith`` products.
    Alice's results may await bob's lift bits (``arith.ArithSession.defer_lifts``): call
    the session's ``settle`` before they leave the backend (``TermsEngine.terms``)."""

    def __init__(self, session: arith.ArithSession, role: str) -> None:
        self.session = session
        self.role = role
        # alice completes her lifts when she next reads, not at once (``arith.lift_share``): a
        # local operation's result awaits bob's bits with its operands (``derive``), a
        # truncation by opening completes its input first, the products settle themselves
        session.defer_lifts = True

    def add(self, x, y):
        return self.session.derive(ring.add(x, y), (x, 1), (y, 1))

    def sub(self, x, y):
        return self.session.derive(ring.sub(x, y), (x, 1), (y, -1))

    def scale(self, x, c: int):
        return self.session.derive(ring.mul_int(x, c), (x, c))

    def scale_each(self, x, cs: list[int]):
        factors = ring.from_ints(cs)
        return self.session.derive(ring.mul(x, factors), (x, factors))

    def constant(self, c: int, like):
        if self.role == GARBLER:
            return np.broadcast_to(ring.constant(c), like.shape).copy()
        return np.zeros_like(like)

    def truncate(self, x, bits: int, bound_bits: int):
        self.session.settle(x)
        return arith.truncate(self.session, x, bits, bound_bits)

    def mul(self, x, y, bits: int, bound_bits: int, operand_bits: tuple[int, int]):
        return arith.mul(
            self.session, x, y, truncate=bits, bound_bits=bound_bits, operand_bits=operand_bits
        )

    def square(self, x, bits: int, bound_bits: int, operand_bits: int):
        return arith.square(
            self.session, x, truncate=bits, bound_bits=bound_bits, operand_bits=operand_bits
        )

    def bit_mul(self, x, y, x_bits: int, y_bits: int):
        if x.shape[1] != x_bits:
            raise ValueError(f"{x.shape[1]} shared bits for a {x_bits}-bit operand")
        return arith.bit_mul(self.session, x, y, y_bits)


def normalisation_modes(spec: NormalisationSpec) -> dict[str, Reveal]:
    """Who gets what of the normalisation circuit: x1 and p, or f, x2 and p, as XOR shares
    of their bits (``shared_outputs``; ``arith.bit_mul`` takes them), the masked table
    indices to the evaluator."""
    masked = ["k_masked", "j_masked"] + (["c_masked"] if c_index_bits(spec.mode) else [])
    return {
        **dict.fromkeys(shared_outputs(spec), Reveal.BIT_SHARES),
        **dict.fromkeys(masked, Reveal.EVALUATOR),
    }


def take_counters(counters: object) -> dict[str, int]:
    """The integer counters of a session's counters dataclass, which then start again from
    zero: what a second set of sessions hands to the job's (its lane's or its process's)."""
    values = dict(vars(counters))
    for name in values:
        setattr(counters, name, 0)
    return values


@dataclass(frozen=True)
class EngineSpec:
    """What a set of term sessions is built from: the job's public facts (mode, count bits,
    shift fraction, base-OT group, OT extension k) and this party's own settings (inline
    thresholds, whether tests keep the openings). Plain values, so a terms lane's process
    receives it."""

    role: str
    mode: str
    count_bits: int
    shift_frac: int
    dh_bits: int
    ot_k: int  # SoftSpokenOT's k (``constants.SUBFIELD_CHOICES``)
    gc_inline_below: int
    ot_inline_below: int
    keep_openings: bool = False


@dataclass
class TermsEngine:
    """One conversation's sessions for secure terms: the job's own (on the channel), or a
    second set on a lane of its own (``SecureScorer._lane_engine``) that runs half of a
    large batch beside it. Each set has its own base OTs, OT extensions, garbling tweaks
    and, on the lane, hashes keyed by the lane's own session label."""

    yao: YaoParty
    arith: arith.ArithSession
    backend: SecureBackend
    role: str
    mode: str
    count_bits: int
    shift_frac: int  # bdeu's shifts' fraction bits (``fixedpoint.shift_frac_for``), else 0

    def normalise(
        self, x_shares: np.ndarray, shift: Shift | None
    ) -> tuple[dict, dict[str, np.ndarray]]:
        """One run of the normalisation circuit: XOR shares of the bits of its shared
        outputs by name ((n, w) 0/1 arrays; ``shared_outputs``, ``fixedpoint.normalise``),
        and this party's view of the masked table indices (alice's pads, bob's masked
        values)."""
        mode = self.mode
        spec = normalisation_spec(self.count_bits, mode, shift)
        circuit = normalisation_circuit(spec)
        n = x_shares.shape[0]
        outputs = normalisation_modes(spec)
        shared = {name: out.width for name, out in shared_outputs(spec).items()}
        masked = [name for name, how in outputs.items() if how == Reveal.EVALUATOR]
        low = x_shares & np.uint64((1 << self.count_bits) - 1)
        if self.role == GARBLER:
            rng = ring.RandomRing()
            widths = {
                "k": index_bits(self.count_bits + spec.shift_frac),
                "j": spec.mantissa_bits,
                "c": c_index_bits(mode),
            }
            pads = {
                name: rng.uint64(n) & np.uint64((1 << w) - 1) for name, w in widths.items() if w
            }
            out = self.yao.run(
                circuit,
                garbler=True,
                outputs=outputs,
                inputs={"xa": low, **{f"mu_{name}": pad for name, pad in pads.items()}},
            )
            return {name: values_to_bits(out[name], w).T for name, w in shared.items()}, pads
        out = self.yao.run(circuit, garbler=False, outputs=outputs, inputs={"xb": low})
        bits = {name: values_to_bits(out[name], w).T for name, w in shared.items()}
        return bits, {m[0]: np.asarray(out[m], dtype=np.uint64) for m in masked}

    def terms(
        self,
        x_shares: np.ndarray,
        shifts: Sequence[float] | None,
        mark: Callable[[str], None],
        clock: PhaseClock,
    ) -> np.ndarray:
        """``SecureScorer.terms`` on this set of sessions: the normalisation circuit, one
        round of lookups, then the products of ``fixedpoint.terms_on``; ``mark`` names the
        phase of the products when it starts, ``clock`` takes this thread's wall and CPU
        seconds per phase."""
        mode = self.mode
        n = x_shares.shape[0]
        groups: dict[float | None, np.ndarray] = {None: np.arange(n)}
        if shifts is not None:
            values = np.asarray(shifts, dtype=float)
            groups = {float(a): np.flatnonzero(values == a) for a in np.unique(values)}
        started = time.perf_counter()  # the caller named the phase "ln terms (Yao)"
        runs = {
            a: self.normalise(x_shares[idx], None if a is None else Shift(a, self.shift_frac))
            for a, idx in groups.items()
        }
        clock.add(NORMALISE, started)
        started = time.perf_counter()
        mark("ln terms (shares)")

        def gathered(name: str) -> np.ndarray:
            first = next(iter(runs.values()))[0][name]
            bits = np.empty((n, first.shape[1]), dtype=np.uint8)
            for a, idx in groups.items():
                bits[idx] = runs[a][0][name]
            return bits

        def index(name: str) -> np.ndarray:
            out = np.zeros(n, dtype=np.uint64)
            for a, idx in groups.items():
                out[idx] = runs[a][1][name]
            return out

        # every table in one lookup round: those on k, those on j (one OT set and one
        # message per index), and the C-table(s) on c; each entry at its own width
        shift_frac = self.shift_frac if mode == "bdeu" else 0
        requests = [
            (tables_on_k(mode, self.count_bits, shift_frac), index("k")),
            (list(TABLES_ON_J), index("j")),
        ]
        if mode in ("exact", "yw0"):
            requests.append(([c_table(mode)], index("c")))
        elif mode == "bdeu":
            requests += [
                ([c_table(mode, Shift(a, self.shift_frac))], runs[a][1]["c"]) for a in groups
            ]
        (k_ln2,), (ln_r, reciprocal), *on_c = arith.lookup_batch(self.arith, requests)
        c_entry = None
        if mode in ("exact", "yw0"):
            c_entry = on_c[0][0]
        elif mode == "bdeu":
            self.arith.settle()  # alice's shares are copied below: complete them first
            c_entry = np.zeros((n, 2), dtype=np.uint64)
            for (share,), idx in zip(on_c, groups.values(), strict=True):
                c_entry[idx] = share
        coefficients = None
        if shifts is not None:
            coefficients = ShiftCoefficients.of([Shift(float(a), self.shift_frac) for a in shifts])
        result = terms_on(
            self.backend,
            mode,
            self.count_bits,
            {name: gathered(name) for name in next(iter(runs.values()))[0]},
            reciprocal,
            k_ln2,
            ln_r,
            c_entry,
            coefficients,
            shift_frac,
        )
        self.arith.settle()  # the last product's lift, before the result leaves the terms
        clock.add(SHARE_TERMS, started)
        return result


def build_engine(
    spec: EngineSpec, channel: Channel, seeds: TaskSeeds, executor: ExecutorSource | None
) -> TermsEngine:
    """Garbling and share-arithmetic sessions over ``channel`` with their own randomness
    (``seeds``), their bulk blocks on ``executor`` (None: this thread)."""
    batches = {"seeds": seeds, "executor": executor}
    yao = YaoParty(
        channel,
        dh_bits=spec.dh_bits,
        ot_k=spec.ot_k,
        gc_inline_below=spec.gc_inline_below,
        ot_inline_below=spec.ot_inline_below,
        **batches,
    )
    session = arith.ArithSession(
        channel,
        spec.role,
        spec.keep_openings,
        dh_bits=spec.dh_bits,
        ot_k=spec.ot_k,
        ot_inline_below=spec.ot_inline_below,
        **batches,
    )
    return TermsEngine(
        yao,
        session,
        SecureBackend(session, spec.role),
        spec.role,
        spec.mode,
        spec.count_bits,
        spec.shift_frac,
    )
