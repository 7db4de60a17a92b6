"""Making a two-party data set from a reference network (``ppbn datasets make``).

Records are sampled, shuffled with the seed, given ids, and the variables are split
between Alice and Bob. Declared domains come from the network, so states that never
occur in the sample are still in the schema. Bob's rows are written in a different order
from Alice's: the loader joins on the record id, never on the row position. With
``overlap`` below 1 each party also holds records the other does not (``--align psi``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppbn.bn.io import write_bif
from ppbn.bn.model import BayesNet
from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import PARTIES, Schema, Variable
from ppbn.errors import UserError
from ppbn.parties.data import write_party_csv
from ppbn.parties.outputs import atomic_output_dir, check_output_dir

SPLITS = ("alternate", "halves")


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
            raise UserError(f"{path}: variable {n!r} needs owner 'alice' or 'bob', got {owners.get(n)!r}")
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


def make_dataset(
    network: str,
    records: int,
    seed: int,
    out: str | Path,
    split: str = "alternate",
    force: bool = False,
    overlap: float = 1.0,
) -> MadeDataset:
    """Sample and write the data set into ``out`` as a whole (built aside, then renamed);
    an existing non-empty ``out`` is refused before any sampling unless ``force``.

    Each party gets ``records`` rows; a share ``overlap`` of them are records the other
    party holds too, the rest are records of its own (sampled from the same network)."""
    if not 0.0 < overlap <= 1.0:
        raise UserError(f"--overlap must be in (0, 1], got {overlap:g}")
    shared = round(overlap * records)
    if shared < 1:
        raise UserError(f"--overlap {overlap:g} of {records} records leaves no shared record")
    check_output_dir(out, force=force)
    truth = load_network(network)
    owners = split_owners(truth.names, split)
    if len(set(owners.values())) < 2:
        raise UserError("the split must give each party at least one variable")
    schema = Schema(
        "record_id",
        tuple(Variable(n, owners[n], truth.states[n]) for n in truth.names),
    )
    rng = np.random.default_rng(seed)
    own = records - shared  # records only one party holds
    total = records + own
    codes = sample(truth, total, seed)[rng.permutation(total)]
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
            rows = held[party] if party == "alice" and own == 0 else held[party][rng.permutation(records)]
            write_party_csv(
                folder / f"{party}.csv",
                schema,
                [ids[r] for r in rows],
                names,
                codes[np.ix_(rows, [column[n] for n in names])],
            )
        write_bif(truth, folder / "truth.bif", network)
    return MadeDataset(schema, truth, codes[:shared], ids[:shared])


def blank_cells(folder: str | Path, rate: float, seed: int) -> int:
    """Empty ``rate`` of the variable cells of both parties' CSVs in ``folder``, each cell
    independently (missing completely at random; the id column is kept). For trying
    ``--missing available-case``; returns how many cells were emptied."""
    import pandas as pd

    from ppbn.parties.data import CSV_ENCODING

    if not 0.0 <= rate < 1.0:
        raise UserError(f"--missing-rate must be in [0, 1), not {rate}")
    schema = Schema.load(str(Path(folder) / "schema.json"))
    rng = np.random.default_rng([seed, 11])
    blanked = 0
    for party in PARTIES:
        path = Path(folder) / f"{party}.csv"
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding=CSV_ENCODING)
        for v in schema.owned_by(party):
            mask = rng.random(len(frame)) < rate
            frame.loc[mask, v.name] = ""
            blanked += int(mask.sum())
        frame.to_csv(path, index=False)
    return blanked
