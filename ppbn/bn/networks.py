"""The bnlearn reference networks shipped inside pgmpy, and forward sampling from them.

The networks are read from the ``.bif.gz`` files inside the installed pgmpy package
(``pgmpy/utils/example_models``), never fetched at run time. Sampling is our own
vectorised ancestral sampler: one categorical draw per node for all records at once.
"""

from __future__ import annotations

import gzip
import importlib.resources
import warnings

import numpy as np

from ppbn.bn.model import BayesNet, topological_order
from ppbn.errors import UserError

NETWORKS = (
    "asia",
    "cancer",
    "earthquake",
    "sachs",
    "survey",
    "alarm",
    "barley",
    "child",
    "insurance",
    "mildew",
    "water",
    "hailfinder",
    "hepar2",
    "win95pts",
)


def _network_file(name: str):
    return importlib.resources.files("pgmpy") / "utils" / "example_models" / f"{name}.bif.gz"


def load_network(name: str) -> BayesNet:
    """Load a bnlearn network shipped with pgmpy, variables in a topological order."""
    from pgmpy.readwrite import BIFReader

    resource = _network_file(name)
    if name not in NETWORKS or not resource.is_file():
        raise UserError(f"unknown network {name!r}; choose one of: {', '.join(NETWORKS)}")
    text = gzip.decompress(resource.read_bytes()).decode("utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BIFReader(string=text).get_model()
    declared = tuple(model.nodes())
    states: dict[str, tuple[str, ...]] = {}
    parents: dict[str, tuple[str, ...]] = {}
    raw_cpds = {}
    for cpd in model.get_cpds():
        child = cpd.variable
        states[child] = tuple(str(s) for s in cpd.state_names[child])
        parents[child] = tuple(cpd.variables[1:])
        raw_cpds[child] = cpd
    cpts = {}
    for child, cpd in raw_cpds.items():
        # pgmpy's values have shape (d, card(p1), card(p2), ...), each axis in the CPD's own
        # state order; permute every axis to the variable's declared order.
        values = np.asarray(cpd.values, dtype=float)
        for axis, var in enumerate(cpd.variables):
            local = [str(s) for s in cpd.state_names[var]]
            perm = [local.index(s) for s in states[var]]
            values = np.take(values, perm, axis=axis)
        d = len(states[child])
        cpts[child] = np.moveaxis(values, 0, -1).reshape(-1, d)
    order = topological_order(declared, parents)
    return BayesNet(order, states, parents, cpts)


def sample(net: BayesNet, n: int, seed: int) -> np.ndarray:
    """Ancestral sampling: codes of shape (n, len(net.names)), columns in ``net.names`` order."""
    if n < 1:
        raise UserError(f"--records must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    column = {name: i for i, name in enumerate(net.names)}
    codes = np.zeros((n, len(net.names)), dtype=np.int64)
    for name in net.topological_order():
        ps = net.parents[name]
        if ps:
            dims = tuple(net.cardinality(p) for p in ps)
            config = np.ravel_multi_index(tuple(codes[:, column[p]] for p in ps), dims)
        else:
            config = np.zeros(n, dtype=np.int64)
        cumulative = np.cumsum(net.cpts[name], axis=1)[config]
        cumulative[:, -1] = 1.0
        u = rng.random(n)[:, None]
        codes[:, column[name]] = (u >= cumulative).sum(axis=1)
    return codes
