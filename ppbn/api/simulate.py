"""Both parties on this machine: a data set, a throw-away PKI, alice's and bob's daemons as
separate processes over loopback mutual TLS, one job between them, and (for the learn job)
the non-private reference on the same data to compare with. What ``ppbn simulate`` runs.

``path`` picks the protocol: "secure" (the default) runs ``kind``, the private learn job
or any other job kind between alice and bob; "pram" and "perturb" run the PRAM path or a
perturbation learner in setup 1 (alice and bob) or 2 (a third daemon, the miner, learns),
ppbn/api/simulate_paths.py.

Whoever calls this holds both parties' files, so it may compute the reference; a real
deployment cannot (docs/user-guide.md). Every daemon is stopped however the call ends.

    sim = simulate(network="asia", records=5000, max_parents=2)
    sim.matches_reference, sim.network.to_pgmpy()
    pram = simulate(network="asia", records=5000, path="pram", p=0.2, setup=2)
    pram.report["structure_vs_reference"]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.api.result import NETWORK_FILE, NetworkResult, load_result
from ppbn.api.simulate_paths import (
    RANDOMIZED_PATHS,
    PathSimulation,
    check_path_request,
    simulate_randomized,
)
from ppbn.api.spelling import KEYWORDS, Spelling
from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.pair.loopback import LocalPair
    from ppbn.parties.client import JobOutcome

PATHS = ("secure", *RANDOMIZED_PATHS)
ROLES = ("alice", "bob")
TRUTH_FILE = "truth.bif"


@dataclass(frozen=True)
class DataFiles:
    """The public schema and each party's CSV."""

    schema: Path
    alice: Path
    bob: Path

    def csvs(self) -> dict[str, Path]:
        return {"alice": self.alice, "bob": self.bob}


@dataclass
class Simulation:
    """What one simulated job gave: alice's outcome (with bob's own figures), each party's
    learned network, and the reference learned in the clear on the joined data."""

    outcome: JobOutcome
    networks: dict[str, NetworkResult] = field(default_factory=dict)
    reference: NetworkResult | None = None
    check: dict[str, Any] | None = None  # the secure result against the reference
    truth: NetworkResult | None = None  # the network the data was sampled from, if known
    timings: dict[str, float] = field(default_factory=dict)
    folder: Path | None = None  # with ``out``: data, certificates, logs and outputs
    logs: dict[str, str] = field(default_factory=dict)  # the last lines of each daemon's log
    reveal: dict[str, Any] | None = None  # ``reveal_for_testing``: the opened tables' check

    @property
    def succeeded(self) -> bool:
        return self.outcome.state == "SUCCEEDED"

    @property
    def network(self) -> NetworkResult | None:
        """Alice's view of the learned network (the contacted daemon's)."""
        return self.networks.get("alice")

    @property
    def matches_reference(self) -> bool | None:
        """Same structure and edge order as the reference, and CPTs within 1e-9 where this
        party sees them; None when no reference was computed."""
        if self.check is None:
            return None
        diff = self.check["max_abs_cpt_difference"]
        return self.check["same_structure_and_order"] and (diff is None or diff < 1e-9)


def make_data(
    work: Path,
    network: str | None = None,
    records: int | None = None,
    seed: int = 7,
    data: str | Path | None = None,
    bif: str | Path | None = None,
    overlap: float = 1.0,
    missing_rate: float = 0.0,
    spell: Spelling = KEYWORDS,
) -> DataFiles:
    """``data`` (a folder with schema.json, alice.csv, bob.csv), or ``records`` sampled from
    a bundled ``network`` or a ``bif`` file into ``work/data``. Errors name the arguments
    as ``spell`` writes them: the API's keywords, or the command line's flags."""
    if data is not None:
        if missing_rate:
            raise UserError(
                f"{spell('missing_rate')} blanks generated data: give {spell('network')} and "
                f"{spell('records')}, not {spell('data')}"
            )
        base = Path(data)
        files = DataFiles(base / "schema.json", base / "alice.csv", base / "bob.csv")
        for path in (files.schema, files.alice, files.bob):
            if not path.is_file():
                raise UserError(
                    f"{path}: not found ({spell('data')} needs schema.json, alice.csv, bob.csv)"
                )
        return files
    if not (network or bif) or records is None:
        raise UserError(f"give {spell('network')} and {spell('records')} (or {spell('data')} DIR)")
    if isinstance(records, bool) or not isinstance(records, int) or records < 1:
        raise UserError(f"{spell('records')} must be a positive integer (got {records!r})")
    from ppbn.data.datasets import make_dataset

    source, name = network, network
    if bif is not None:
        from ppbn.bn.networks import read_bif

        source, name = read_bif(str(bif))
    out = work / "data"
    make_dataset(source, records, seed, out, overlap=overlap, missing_rate=missing_rate, name=name)
    return DataFiles(out / "schema.json", out / "alice.csv", out / "bob.csv")


def simulate(
    network: str | None = None,
    records: int | None = None,
    *,
    path: str = "secure",
    setup: int | None = None,
    randomization_seed: str | None = None,
    data: str | Path | None = None,
    bif: str | Path | None = None,
    seed: int = 7,
    kind: str = "learn",
    params: dict[str, Any] | None = None,
    out: str | Path | None = None,
    force: bool = False,
    policy: LocalPolicy | dict[str, Any] | None = None,
    missing: str = "error",
    align: str = "strict",
    overlap: float | None = None,
    missing_rate: float = 0.0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    check_reference: bool = True,
    reveal_for_testing: bool = False,
    progress: Callable[[Any], None] | None = None,
    on_daemons_up: Callable[[LocalPair], None] | None = None,
    spell: Spelling = KEYWORDS,
    **learn_params: Any,
) -> Simulation | PathSimulation:
    """Run one job between local daemons and return what it gave: a ``Simulation`` on the
    secure path, a ``PathSimulation`` on the PRAM and perturbation paths.

    ``learn_params`` (or ``params``) are the job's parameters (``max_parents``, ``score``,
    ``search``, ``disclosure``, ``dp_epsilon`` for a differentially private release, ...);
    each daemon fills in its defaults and checks them against the local ``policy``: a
    ``LocalPolicy``, a dict of its settings (as in a policy file: ``{"min_records": 50}``,
    read by ``LocalPolicy.from_mapping``, an error naming the setting at fault), or None
    for the built-in one. A parameter that needs another one (``white_list`` without
    ``search="hc"``, ``dp_delta`` without ``dp_epsilon``) is refused before any work,
    naming it. ``missing`` and ``align`` are the daemons' ``--missing`` and ``--align``.
    With ``out`` the run's files are kept there (built aside, renamed into place at the
    end); otherwise they live in a temporary folder until the call returns, and the result
    objects hold everything read from them.

    ``path="pram"`` takes the pram job's parameters (``p`` or ``randomization``, a dict or
    a JSON file, then ``max_parents``, ``score``, ``eta``, ``counts``, ...), ``"perturb"``
    the perturbation learner's (``params={"learner": "nb", "class": "dysp", "theta":
    0.8}``); ``setup`` is 1 (default) or 2, and ``randomization_seed`` (TESTING ONLY)
    fixes every daemon's randomization. ``reveal_for_testing`` (the tables job only, TESTING
    ONLY) adds both parties' shares and checks them against the plaintext counts.
    ``spell`` names the arguments in refusals (``ppbn simulate`` passes its flags).
    """
    from ppbn.data.outputs import check_output_dir, relocate, work_folder
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki

    job_params = _checked_arguments(
        path,
        setup,
        randomization_seed,
        kind,
        reveal_for_testing,
        {**(params or {}), **learn_params},
        missing,
        spell,
    )
    policy = _policy(policy)
    if overlap is None:
        overlap = 0.6 if align == "psi" else 1.0
    if overlap < 1.0 and align != "psi":
        raise UserError(
            f"{spell.setting('overlap', overlap)}: parties with different records need "
            f"{spell.setting('align', 'psi')}"
        )
    if out:  # before any work: a bad folder must not cost the run
        check_output_dir(out, force=force)
    timings: dict[str, float] = {}
    with work_folder(str(out) if out else None, "ppbn-simulate-", force) as work:
        started = time.perf_counter()
        files = make_data(work, network, records, seed, data, bif, overlap, missing_rate, spell)
        timings["data_s"] = time.perf_counter() - started
        if path in RANDOMIZED_PATHS:
            return simulate_randomized(
                path,
                1 if setup is None else setup,
                job_params,
                files.schema,
                files.csvs(),
                work,
                Path(out) if out else None,
                timeout_s=timeout_s,
                policy=policy,
                randomization_seed=randomization_seed,
                missing=missing,
                align=align,
                progress=progress,
                on_daemons_up=on_daemons_up,
                spell=spell,
            )
        started = time.perf_counter()
        make_local_pki(work / "certs", ROLES)
        timings["certs_s"] = time.perf_counter() - started
        pair_files = PairFiles(files.schema, files.csvs(), work / "certs", work)
        started = time.perf_counter()
        with LocalPair(
            pair_files, timeout_s, policy=policy, missing_rule=missing, align=align
        ) as pair:
            timings["daemons_start_s"] = time.perf_counter() - started
            if on_daemons_up is not None:
                on_daemons_up(pair)
            started = time.perf_counter()
            with pair.client("alice") as client:
                job_id = client.start(kind, job_params)
                outcome = client.wait(job_id, None, progress)
            timings["job_s"] = time.perf_counter() - started
            outcome = pair.with_peer_figures(outcome)
            logs = {role: pair.log_tail(role, 3) for role in ROLES}
            networks = {
                role: load_result(pair.out_dir(role) / job_id, files.schema)
                for role in ROLES
                if (pair.out_dir(role) / job_id / NETWORK_FILE).is_file()
            }
        reference = check = reveal = None
        # a DP release is noisy by design: its utility is measured by `ppbn bench dp`
        exact = job_params.get("dp_epsilon") is None
        if kind == "learn" and check_reference and exact and "alice" in networks:
            reference, check = reference_check(files, outcome, networks["alice"], missing, align)
        if reveal_for_testing and outcome.state == "SUCCEEDED":
            shares = {role: pair.out_dir(role) / job_id for role in ROLES}
            reveal = reveal_tables(files, shares, missing, align == "psi")
        truth_file = files.schema.parent / TRUTH_FILE  # what `ppbn datasets make` writes
        truth = load_result(truth_file, files.schema) if truth_file.is_file() else None
    simulation = Simulation(
        outcome, networks, reference, check, truth, timings, logs=logs, reveal=reveal
    )
    if out:  # the run's files were written aside and are now in ``out``
        moved = relocate({"out_dir": outcome.out_dir, "result": outcome.result}, work, Path(out))
        simulation.outcome = dataclasses.replace(outcome, **moved)
        simulation.folder = Path(out)
    return simulation


def _checked_arguments(
    path: str,
    setup: int | None,
    randomization_seed: str | None,
    kind: str,
    reveal_for_testing: bool,
    job_params: dict[str, Any],
    missing: str,
    spell: Spelling,
) -> dict[str, Any]:
    """What ``simulate`` refuses before any work, naming the argument; returns the job's
    parameters (on a randomized path with its randomization file read)."""
    from ppbn.jobs.unused_params import refuse_unused

    if path not in PATHS:
        raise UserError(f"{spell('path')} must be one of {', '.join(PATHS)} (got {path!r})")
    refuse_unused(job_params)
    if reveal_for_testing and (kind != "tables" or path != "secure"):
        raise UserError(f"{spell('reveal_for_testing')} applies to the tables job only")
    if path in RANDOMIZED_PATHS:
        if kind != "learn":
            raise UserError(
                f"{spell.setting('kind', kind)} needs {spell.setting('path', 'secure')}: "
                f"{spell.setting('path', path)} runs the job of its setup"
            )
        return check_path_request(path, 1 if setup is None else setup, job_params, missing, spell)
    if "security" in job_params:  # a level the kind has no defences for: before any work
        from ppbn.jobs.base import checked_level
        from ppbn.jobs.registry import job_kind

        checked_level(job_kind(kind), job_params["security"])
    for name, value in (("setup", setup), ("randomization_seed", randomization_seed)):
        if value is not None:
            raise UserError(
                f"{spell(name)} needs {spell.setting('path', 'pram')} or "
                f"{spell.setting('path', 'perturb')}"
            )
    return job_params


def _policy(policy: LocalPolicy | dict[str, Any] | None) -> LocalPolicy | None:
    """``simulate``'s ``policy``: a dict of settings read as a policy file's would be."""
    from ppbn.jobs.policy import LocalPolicy

    if policy is None or isinstance(policy, LocalPolicy):
        return policy
    if isinstance(policy, dict):
        return LocalPolicy.from_mapping(policy, "policy")
    raise TypeError(
        f"policy must be a LocalPolicy or a dict of policy settings, not {type(policy).__name__}"
    )


def reveal_tables(
    files: DataFiles, shares: Mapping[str, Path], rule: str = "error", intersect: bool = False
) -> dict[str, Any]:
    """Add both parties' table shares (each party's job folder in ``shares``) and compare
    with counts from the joined plaintext (under ``rule``: available-case counts leave out
    records missing in the family; with ``intersect``: on the records both hold, as
    ``align="psi"``). TESTING ONLY: no deployment may ever open the shares."""
    import numpy as np

    from ppbn.bn.k2 import count_table
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import load_joined
    from ppbn.jobs.tables import load_shares
    from ppbn.protocols.tables import reconstruct

    schema = Schema.load(str(files.schema))
    names, codes = load_joined(
        schema, files.alice, files.bob, missing_rule=rule, intersect=intersect
    )
    column = {name: j for j, name in enumerate(names)}
    counts = reconstruct(load_shares(shares["alice"]), load_shares(shares["bob"]))
    wrong = []
    for family, table in counts.items():
        truth = count_table(codes, [column[v] for v in family], schema.cardinalities(family))
        if not np.array_equal(table.astype(np.int64), truth):
            wrong.append("|".join(family))
    return {"tables_checked": len(counts), "tables_wrong": wrong, "all_equal": not wrong}


def reference_check(
    files: DataFiles, outcome: JobOutcome, learned: NetworkResult, missing: str, align: str
) -> tuple[NetworkResult, dict[str, Any]]:
    """The non-private reference on the joined data, under the parameters the daemons ran
    (their normalised form, every default filled in, as in the job's result.json), and how
    the secure result compares with it."""
    from ppbn.bn.io import network_json
    from ppbn.pair.reference import learn_pair_reference

    ref, schema, params = learn_pair_reference(
        files.schema, files.alice, files.bob, _job_params(outcome), missing, align
    )
    owners = {v.name: v.owner for v in schema.variables}
    document = network_json(
        ref.network, ref.search.order, ref.search.edges, params["score"], params["tau"]
    )
    reference = NetworkResult.from_document(document, owners=owners, source="reference")
    same_moves = ref.same_moves(learned.document["moves"]) if "moves" in learned.document else None
    diff = None
    if learned.cpts and learned.parents == reference.parents:
        diff = learned.max_cpt_difference(reference)
    records = ref.family_records()
    check = {
        "same_structure_and_order": list(learned.edges) == list(reference.edges)
        and same_moves is not False,
        **({"same_moves": same_moves} if same_moves is not None else {}),
        "reference_edges": [list(e) for e in reference.edges],
        "max_abs_cpt_difference": diff,
        "same_family_records": (learned.document.get("family_records") or {}).get("families")
        == records,
        "reference_family_records": records,
    }
    return reference, check


def _job_params(outcome: JobOutcome) -> dict[str, Any]:
    """The parameters the job ran with, from its result.json at the contacted daemon."""
    import json

    path = Path(outcome.out_dir or "") / "result.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["params"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: cannot read the job's parameters: {exc}") from None
