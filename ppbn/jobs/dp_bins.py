"""A DP learn job's binned columns: cut again under DP where the cuts came from the records.

A continuous variable whose cut points the owner computed from its records (quantile,
equal-width, mgas) and did not publish in the schema is cut again by its owner for each DP
job, each cut point a private quantile (``ppbn.dp.quantiles``) paid from the job's epsilon
(``DPPlan.bins_epsilon``); the job learns on those bins and labels them with those cut
points. Cut points the owner gave (method ``edges``) or published (``publish_edges``) do
not depend on the records: they stay, and only published ones label states. So nothing a
DP job writes carries a cut point computed from the records without noise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ppbn.bn.discretize import assign
from ppbn.bn.schema import Schema, Variable
from ppbn.data.party_data import PartyData
from ppbn.dp.quantiles import needs_private_cuts, private_cuts


def private_cut_variables(schema: Schema) -> tuple[Variable, ...]:
    """The continuous variables whose cut points a DP job draws again, both owners'."""
    return tuple(
        v
        for v in schema.continuous()
        if v.bins is not None and needs_private_cuts(v.bins.method) and not v.bins.publish_edges
    )


def private_cut_count(schema: Schema) -> int:
    """How many private cut points a DP job on ``schema`` draws (both owners together)."""
    return sum(v.cardinality - 1 for v in private_cut_variables(schema))


def recut(data: PartyData, epsilon_per_cut: float) -> PartyData:
    """This owner's data with its data-dependent bins cut again under DP: codes of the
    records with a value move to the new bins, ``bins`` holds only the new cut points."""
    codes = data.codes.copy()
    cuts: dict[str, tuple[float, ...]] = {}
    for v in private_cut_variables(data.schema):
        if v.owner != data.role:
            continue
        values = data.values[v.name]
        present = ~np.isnan(values)
        cuts[v.name] = private_cuts(values[present], v.cardinality, epsilon_per_cut)
        j = data.columns.index(v.name)
        codes[present, j] = assign(values[present], np.array(cuts[v.name], dtype=np.float64))
    return dataclasses.replace(data, codes=codes, bins=cuts)
