"""Making a two-party data set from a reference network (``ppbn datasets make``): one
shipped with pgmpy (``--network``) or a user's own BIF file (``--bif``, ``read_bif``).

Records are sampled, shuffled with the seed, given ids, and the variables are split
between Alice and Bob. Declared domains come from the network, so states that never
occur in the sample are still in the schema. Bob's rows are written in a different order
from Alice's: the loader joins on the record id, never on the row position. With
``overlap`` below 1 each party also holds records the other does not (``--align psi``).

``continuous`` turns chosen variables into numeric columns (test data for continuous
variables without any extra dependency): state k of a variable with d states becomes a
value drawn uniformly in [base + k w, base + (k + 1) w), rounded down to 3 decimals, and
the schema declares the variable continuous with d bins. With ``bins_method`` 'edges'
the schema holds the true cut points (base + k w) as the owner's private edges and the
bins recover the states exactly; with 'quantile' or 'equal-width' they recover them
only approximately (quantile bins are balanced, the states usually are not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppbn.bn.io import write_bif
from ppbn.bn.model import BayesNet
from ppbn.bn.networks import ID_COLUMN, load_network, sample
from ppbn.bn.schema import PARTIES, BinSpec, Schema, Variable
from ppbn.data.outputs import atomic_output_dir, atomic_write_text, check_output_dir
from ppbn.data.party_data import write_party_csv
from ppbn.errors import UserError

SPLITS = ("alternate", "halves")
CONTINUOUS_METHODS = ("quantile", "equal-width", "edges")
VALUE_WIDTH = 10.0  # width of each state's value interval in a made continuous column


def continuous_names(
    spec: str | None, names: tuple[str, ...], owners: dict[str, str]
) -> tuple[str, ...]:
    """The variables ``--continuous`` makes numeric: N (the first N, taken alternately from
    alice's and bob's variables in schema order, so both sides get some) or a comma list."""
    if not spec:
        return ()
    if spec.strip().isdigit():
        count = int(spec)
        if not 0 < count <= len(names):
            raise UserError(
                f"--continuous {spec}: give 1..{len(names)} or a comma list of variables"
            )
        queues = {p: [n for n in names if owners[n] == p] for p in PARTIES}
        chosen: list[str] = []
        while len(chosen) < count:
            for party in PARTIES:
                if queues[party] and len(chosen) < count:
                    chosen.append(queues[party].pop(0))
        return tuple(n for n in names if n in chosen)
    listed = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in listed if n not in names]
    if unknown:
        raise UserError(f"--continuous: {unknown[0]!r} is not a variable of the network")
    return tuple(n for n in names if n in listed)


def continuous_values(
    codes: np.ndarray, card: int, base: float, rng: np.random.Generator
) -> np.ndarray:
    """A value for each coded state: uniform in [base + k w, base + (k + 1) w), 3 decimals."""
    raw = base + (codes + rng.random(codes.shape[0])) * VALUE_WIDTH
    values = np.floor(raw * 1000.0) / 1000.0
    return np.clip(values, base + codes * VALUE_WIDTH, None)


def split_owners(names: tuple[str, ...], split: str) -> dict[str, str]:
    """Owner of each variable: 'alternate', 'halves', or a JSON file {variable: owner}."""
    if split == "alternate":
        return {n: PARTIES[i % 2] for i, n in enumerate(names)}
    if split == "halves":
        half = (len(names) + 1) // 2
        return {n: "alice" if i < half else "bob" for i, n in enumerate(names)}
    path = Path(split)
    if not path.is_file():
        raise UserError(f"--split must be alternate, halves or a JSON file; {split!r} is neither")
    try:
        owners = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(owners, dict):
        raise UserError(f"{path}: must be a JSON object mapping each variable to alice or bob")
    for n in names:
        if owners.get(n) not in PARTIES:
            raise UserError(
                f"{path}: variable {n!r} needs owner 'alice' or 'bob', got {owners.get(n)!r}"
            )
    unknown = sorted(set(owners) - set(names))
    if unknown:
        raise UserError(f"{path}: {unknown[0]!r} is not a variable of the network")
    return {n: owners[n] for n in names}


@dataclass
class MadeDataset:
    schema: Schema
    truth: BayesNet
    codes: np.ndarray  # (n, m), schema order, row i = record ids[i]: the records both parties hold
    ids: list[str]
    blanked: int = 0  # cells emptied by ``missing_rate``


def make_dataset(
    network: str | BayesNet,
    records: int,
    seed: int,
    out: str | Path,
    split: str = "alternate",
    force: bool = False,
    overlap: float = 1.0,
    continuous: str | None = None,
    bins_method: str = "quantile",
    missing_rate: float = 0.0,
    name: str | None = None,
) -> MadeDataset:
    """Sample and write the data set into ``out`` as a whole (built aside, then renamed);
    an existing non-empty ``out`` is refused before any sampling unless ``force``. A write
    the disk refuses is one UserError naming ``out`` and the reason, and leaves nothing.

    Each party gets ``records`` rows; a share ``overlap`` of them are records the other
    party holds too, the rest are records of its own (sampled from the same network).
    ``missing_rate``: cells emptied (``blank_cells``) before the folder is renamed into
    place, so a failure there leaves no data set without its missing cells either.

    ``network``: a name in ``NETWORKS``, or a network already read and checked
    (``ppbn.bn.networks.read_bif``); ``name`` is its name in truth.bif (default: the
    network's name, or 'ppbn')."""
    if not 0.0 < overlap <= 1.0:
        raise UserError(f"--overlap must be in (0, 1], got {overlap:g}")
    shared = round(overlap * records)
    if shared < 1:
        raise UserError(f"--overlap {overlap:g} of {records} records leaves no shared record")
    check_output_dir(out, force=force)
    if bins_method not in CONTINUOUS_METHODS:
        raise UserError(f"--bins-method must be one of {', '.join(CONTINUOUS_METHODS)}")
    truth = load_network(network) if isinstance(network, str) else network
    if name is None:
        name = network if isinstance(network, str) else "ppbn"
    owners = split_owners(truth.names, split)
    if len(set(owners.values())) < 2:
        raise UserError("the split must give each party at least one variable")
    numeric = continuous_names(continuous, truth.names, owners)
    base = {n: 100.0 * (i + 1) for i, n in enumerate(truth.names)}  # per-variable offset

    def declare(n: str) -> Variable:
        if n not in numeric:
            return Variable(n, owners[n], truth.states[n])
        d = len(truth.states[n])
        edges = (
            tuple(base[n] + k * VALUE_WIDTH for k in range(1, d))
            if bins_method == "edges"
            else None
        )
        return Variable.continuous(n, owners[n], BinSpec(bins_method, d, edges))

    schema = Schema(ID_COLUMN, tuple(declare(n) for n in truth.names))
    rng = np.random.default_rng(seed)
    own = records - shared  # records only one party holds
    total = records + own
    codes = sample(truth, total, seed)[rng.permutation(total)]
    value_rng = np.random.default_rng(
        [seed, 1]
    )  # apart from the rows' stream: same records with or without
    values = {
        n: continuous_values(codes[:, j], len(truth.states[n]), base[n], value_rng)
        for j, n in enumerate(truth.names)
        if n in numeric
    }
    width = len(str(total))
    ids = [f"r{i:0{width}d}" for i in range(total)]
    held = {  # rows 0..shared-1 are at both parties, then alice's own, then bob's own
        "alice": np.arange(records),
        "bob": np.concatenate([np.arange(shared), np.arange(records, total)]).astype(np.int64),
    }
    with atomic_output_dir(out, force=force) as folder:
        (folder / "schema.json").write_text(schema.to_json() + "\n", encoding="utf-8")
        column = {n: i for i, n in enumerate(truth.names)}
        for party in PARTIES:
            names = tuple(v.name for v in schema.owned_by(party))
            rows = (
                held[party]
                if party == "alice" and own == 0
                else held[party][rng.permutation(records)]
            )
            write_party_csv(
                folder / f"{party}.csv",
                schema,
                [ids[r] for r in rows],
                names,
                codes[np.ix_(rows, [column[n] for n in names])],
                {n: values[n][rows] for n in names if n in values},
            )
        write_bif(truth, folder / "truth.bif", name)
        blanked = blank_cells(folder, missing_rate, seed) if missing_rate else 0
    return MadeDataset(schema, truth, codes[:shared], ids[:shared], blanked)


def blank_cells(folder: str | Path, rate: float, seed: int) -> int:
    """Empty ``rate`` of the variable cells of both parties' CSVs in ``folder``, each cell
    independently (missing completely at random; the id column is kept). For trying
    ``--missing available-case``; returns how many cells were emptied."""
    import pandas as pd

    from ppbn.data.party_data import CSV_ENCODING

    if not 0.0 <= rate < 1.0:
        raise UserError(f"--missing-rate must be in [0, 1), not {rate}")
    schema = Schema.load(str(Path(folder) / "schema.json"))
    rng = np.random.default_rng([seed, 11])
    blanked = 0
    for party in PARTIES:
        path = Path(folder) / f"{party}.csv"
        frame = pd.read_csv(
            path, dtype=str, keep_default_na=False, na_filter=False, encoding=CSV_ENCODING
        )
        for v in schema.owned_by(party):
            mask = rng.random(len(frame)) < rate
            frame.loc[mask, v.name] = ""
            blanked += int(mask.sum())
        atomic_write_text(path, frame.to_csv(index=False))  # never half a CSV
    return blanked
