"""The non-private reference of a pair's secure run: the same learner in the clear on the
joined data the two daemons loaded, under the parameters the job ran with. ``ppbn.simulate``
and ``ppbn bench k2 --check-reference`` compare the secure result with it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppbn.bn.learn import LearnedNetwork
    from ppbn.bn.schema import Schema


def learn_pair_reference(
    schema_path: Path,
    alice_csv: Path,
    bob_csv: Path,
    job_params: dict[str, Any],
    missing: str,
    align: str,
) -> tuple[LearnedNetwork, Schema, dict[str, Any]]:
    """The reference learned from the parties' files (read back from the CSVs, so emptied
    cells and the ``missing`` rule are the daemons'), the schema, and the job's parameters
    in their normalised form (every default filled in, as in the job's result.json)."""
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import load_joined
    from ppbn.jobs.learn import check_learn_params
    from ppbn.jobs.search_params import hc_options_from

    schema = Schema.load(str(schema_path))
    params = check_learn_params(job_params, schema)
    names, codes = load_joined(
        schema, alice_csv, bob_csv, missing_rule=missing, intersect=align == "psi"
    )
    reference = learn_reference(
        names,
        {v.name: v.states for v in schema.variables},
        codes,
        params["max_parents"],
        params["score"],
        params["tau"],
        params["order"] or names,
        params["c_star"],
        available_case=missing == "available-case",
        search=params["search"],
        ess=params["ess"],
        hc=hc_options_from(params, schema) if params["search"] == "hc" else None,
    )
    return reference, schema, params
