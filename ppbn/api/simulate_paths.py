"""The PRAM and perturbation modes of ``ppbn.simulate`` (``path="pram"``, ``path="perturb"``).

PRAM follows Ma and Sivakumar (Sec. III-A): setup 1 runs the ``pram`` job between alice
and bob, setup 2 the ``pram-miner`` job started at a third daemon, the miner, which
learns from both parties' randomized columns. The perturbation path runs a perturbation
learner the same way (``perturb-learn``, ``perturb-learn-miner``). Both are checked here
before any daemon starts (the refusals name the arguments as ``Spelling`` writes them),
run over every daemon of the setup, and compared with the same learner on the joined
original data, which whoever runs the simulation may compute: they hold both parties'
files. ppbn/api/simulate.py makes the data set and calls ``simulate_randomized``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.api.spelling import Spelling
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.bn.schema import Schema
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.pair.loopback import LocalPair
    from ppbn.parties.client import JobOutcome

RANDOMIZED_PATHS = ("pram", "perturb")
SETUPS = (1, 2)
PATH_NAMES = {"pram": "the PRAM path", "perturb": "the perturbation path"}
PERTURB_EXAMPLE = '{"learner": "nb", "class": VAR, "theta": 0.8}'


@dataclass
class PathSimulation:
    """What a PRAM or perturbation run gave. ``report`` holds what ``ppbn simulate --path
    pram|perturb --format json`` prints: path, setup, kind, job_id, state, params,
    transport, timings and parties (every daemon's state, error, stats and result), then
    the comparison with the reference learned on the joined original data (PRAM:
    reference_edges, structure_vs_reference, privacy, edges; perturbation: reference_model)."""

    report: dict[str, Any]
    outcomes: dict[str, JobOutcome]  # every daemon's, by role
    logs: dict[str, str] = field(default_factory=dict)  # the last lines of each daemon's log
    folder: Path | None = None  # with ``out``: data, certificates, logs and outputs

    @property
    def succeeded(self) -> bool:
        return self.report["state"] == "SUCCEEDED"


def check_path_request(
    path: str, setup: int, params: Mapping[str, Any], missing: str, spell: Spelling
) -> dict[str, Any]:
    """The job parameters of ``path`` as far as they can be checked without the data (a
    PRAM randomization file read), or a UserError naming the argument at fault."""
    if setup not in SETUPS:
        raise UserError(f"{spell('setup')} must be 1 or 2 (got {setup!r})")
    if missing == "available-case":
        raise UserError(
            f"{spell.setting('missing', 'available-case')} runs on the secure path only: "
            f"{PATH_NAMES[path]} sends randomized columns, which would show the receiver which "
            f"cells are missing (use {spell.setting('missing', 'category')})"
        )
    if path == "perturb":
        if not params:
            raise UserError(
                f"{spell.setting('path', 'perturb')} needs the job parameters: "
                f"{spell.usage('params', repr(PERTURB_EXAMPLE), PERTURB_EXAMPLE)}"
            )
        return dict(params)
    request = {k: v for k, v in params.items() if k not in ("p", "randomization") or v is not None}
    if ("p" in request) == ("randomization" in request):
        raise UserError(
            f"{spell.setting('path', 'pram')} needs exactly one of {spell.usage('p', 'P')} and "
            f"{spell.usage('randomization', 'FILE')}"
        )
    if isinstance(request.get("randomization"), str | Path):
        request["randomization"] = read_randomization(Path(request["randomization"]))
    if request.get("search") == "hc" and setup == 1:
        raise UserError(
            f"{spell.setting('search', 'hc')} on the PRAM path needs {spell.setting('setup', 2)} "
            "(a miner): in setup I each child's owner scores its own families, and a move is "
            "chosen among both parties' families"
        )
    return request


def read_randomization(path: Path) -> dict[str, Any]:
    """A per-variable randomization JSON file {variable or a+b: {kind, ...}}."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: randomization file not found") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON (line {exc.lineno}): {exc.msg}") from None


def checked_order(order: Sequence[str] | None, names: Sequence[str], spell: Spelling) -> list[str]:
    """The K2 node order: the schema's by default, else every variable named once."""
    if not order:
        return list(names)
    unknown = [v for v in order if v not in names]
    if unknown:
        raise UserError(f"{spell('order')}: {unknown[0]!r} is not a variable of the schema")
    if len(set(order)) != len(order) or len(order) != len(names):
        missing = [v for v in names if v not in order]
        raise UserError(
            f"{spell('order')} must name every variable exactly once "
            f"(missing: {', '.join(missing) or 'none'})"
        )
    return list(order)


def simulate_randomized(
    path: str,
    setup: int,
    request: dict[str, Any],
    schema_path: Path,
    csvs: dict[str, Path],
    work: Path,
    out: Path | None,
    *,
    timeout_s: float,
    policy: LocalPolicy | None,
    randomization_seed: str | None,
    missing: str,
    align: str,
    progress: Callable[[Any], None] | None,
    on_daemons_up: Callable[[LocalPair], None] | None,
    spell: Spelling,
) -> PathSimulation:
    """Run the job of ``path`` and ``setup`` over every daemon (files under ``work``, named
    as under ``out`` where the run's folder will be), then learn the reference here."""
    from ppbn.bn.schema import Schema
    from ppbn.data.outputs import relocate
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki

    schema = Schema.load(str(schema_path))
    kind, settings = _checked_params(path, setup, request, schema, spell)
    start_role = "miner" if setup == 2 else "alice"
    make_local_pki(work / "certs")
    files = PairFiles(schema_path, csvs, work / "certs", work)
    started = time.perf_counter()
    with LocalPair(
        files,
        timeout_s,
        miner=setup == 2,
        policy=policy,
        fixed_seed_for_testing=randomization_seed,
        missing_rule=missing,
        align=align,
    ) as pair:
        up = time.perf_counter() - started
        if on_daemons_up is not None:
            on_daemons_up(pair)
        started = time.perf_counter()
        job_id, outcomes = pair.run_job(start_role, kind, request, progress)
        job_s = time.perf_counter() - started
        logs = {role: pair.log_tail(role, 3) for role in pair.roles}
    if out is not None:  # the run's files are renamed into ``out`` when the call ends
        outcomes = {
            role: dataclasses.replace(
                o, **relocate({"out_dir": o.out_dir, "result": o.result}, work, out)
            )
            for role, o in outcomes.items()
        }
    ok = all(o.state == "SUCCEEDED" for o in outcomes.values())
    report: dict[str, Any] = {
        "path": path,
        "setup": setup,
        "kind": kind,
        "job_id": job_id,
        "state": "SUCCEEDED" if ok else "FAILED",
        "params": request,
        "transport": f"gRPC over mutual TLS, loopback, {len(outcomes)} processes",
        "timings": {"daemons_start_s": round(up, 3), "job_s": round(job_s, 3)},
        "parties": {
            role: {"state": o.state, "error": o.error, "stats": o.stats, "result": o.result}
            for role, o in sorted(outcomes.items())
        },
    }
    joined = (schema, csvs, missing, align)
    if path == "pram":
        report.update(_pram_comparison(settings, outcomes[start_role].result, *joined))
    else:
        report["reference_model"] = _perturb_reference(settings, *joined)
    return PathSimulation(report, outcomes, logs, out)


def _checked_params(
    path: str, setup: int, request: dict[str, Any], schema: Schema, spell: Spelling
) -> tuple[str, dict[str, Any]]:
    """The job kind, and every setting of the job as both daemons will read it (checked as
    they check it, before any starts); the K2 order goes into ``request`` in full."""
    if path == "pram":
        from ppbn.jobs.pram import (
            SETUP_ONE_KIND,
            SETUP_TWO_KIND,
            check_pram_params,
            check_setup_one_params,
        )

        if request.get("search", "k2") != "hc":
            request["order"] = checked_order(request.get("order"), schema.names, spell)
        if setup == 1:
            return SETUP_ONE_KIND, check_setup_one_params(request, schema)
        return SETUP_TWO_KIND, check_pram_params(request, schema)
    from ppbn.jobs.perturb import SETUP_ONE_KIND, SETUP_TWO_KIND, full_params

    kind = SETUP_ONE_KIND if setup == 1 else SETUP_TWO_KIND
    return kind, full_params(kind, request, schema, setup)


def _pram_comparison(
    settings: dict[str, Any],
    result: dict[str, Any] | None,
    schema: Schema,
    csvs: dict[str, Path],
    missing: str,
    align: str,
) -> dict[str, Any]:
    """The PRAM network against K2 (or hill climbing) in the clear on the joined data."""
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.model import structure_diff
    from ppbn.data.party_data import load_joined
    from ppbn.jobs.search_params import hc_options_from

    names, codes = load_joined(
        schema, csvs["alice"], csvs["bob"], missing_rule=missing, intersect=align == "psi"
    )
    hc = settings["search"] == "hc"
    reference = learn_reference(
        names,
        {v.name: v.states for v in schema.variables},
        codes,
        settings["max_parents"],
        settings["score"],
        settings["tau"],
        settings["order"],
        settings["c_star"],
        search=settings["search"],
        ess=settings["ess"],
        hc=hc_options_from(settings, schema, "pram") if hc else None,
    )
    if not result:
        return {}
    reference_parents = {v: list(ps) for v, ps in reference.search.parents.items()}
    return {
        "reference_edges": len(reference.search.edges),
        "structure_vs_reference": structure_diff(result["parents"], reference_parents),
        "privacy": result["privacy"],
        "edges": result["edges"],
    }


def _perturb_reference(
    settings: dict[str, Any], schema: Schema, csvs: dict[str, Path], missing: str, align: str
) -> dict[str, Any]:
    """A few figures of the same learner fitted to the joined original data."""
    from ppbn.data.party_data import load_joined_with_bins
    from ppbn.jobs.perturb import learner_options, model_summary
    from ppbn.randomized.perturb.estimated import RandomizedData
    from ppbn.randomized.perturb.learners import ITEM_STATES, fit_learner, item_codes, model_dict
    from ppbn.randomized.pram.operators import RandomizationScheme

    names, codes, bins = load_joined_with_bins(
        schema, csvs["alice"], csvs["bob"], missing_rule=missing, intersect=align == "psi"
    )
    states = schema.state_names(bins)
    learner = settings["learner"]
    if learner == "rules":  # association rules mine items: code 1 where the item is present
        codes = item_codes(names, codes, states)
        states = dict.fromkeys(names, ITEM_STATES)
    plain = RandomizationScheme({name: len(states[name]) for name in names})
    model = fit_learner(
        learner,
        RandomizedData(names, codes, plain),
        settings["class"],
        learner_options(settings),
        states,
    )
    return model_summary(learner, model_dict(model, states))
