"""The bnlearn reference networks shipped inside pgmpy, a user's own BIF file, and forward
sampling from them.

The networks are read from the ``.bif.gz`` files inside the installed pgmpy package
(``pgmpy/utils/example_models``), never fetched at run time. ``read_bif`` reads a user's
file with the same reader and checks it first (a valid discrete network whose names and
states the outputs can carry). Sampling is our own vectorised ancestral sampler: one
categorical draw per node for all records at once.

The module imports nothing heavy at its top (numpy, pgmpy inside the functions): the
command line reads ``NETWORKS`` for its help text.
"""

from __future__ import annotations

import gzip
import importlib.resources
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.errors import DataError, UserError

if TYPE_CHECKING:
    import numpy as np

    from ppbn.bn.model import BayesNet

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

ID_COLUMN = "record_id"  # the id column of a made data set: no variable may take its name


def _network_file(name: str):
    return importlib.resources.files("pgmpy") / "utils" / "example_models" / f"{name}.bif.gz"


def _bif_model(text: str) -> Any:
    """pgmpy's model of BIF ``text`` (its reader's warnings kept quiet)."""
    from pgmpy.readwrite import BIFReader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BIFReader(string=text).get_model()


def bayes_net(model: Any) -> BayesNet:
    """Our network of a pgmpy model, variables in a topological order (ties: the model's
    node order, which is the file's declaration order)."""
    import numpy as np

    from ppbn.bn.model import BayesNet, topological_order

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


def load_network(name: str) -> BayesNet:
    """Load a bnlearn network shipped with pgmpy, variables in a topological order."""
    resource = _network_file(name)
    if name not in NETWORKS or not resource.is_file():
        raise UserError(f"unknown network {name!r}; choose one of: {', '.join(NETWORKS)}")
    text = gzip.decompress(resource.read_bytes()).decode("utf-8")
    return bayes_net(_bif_model(text))


# -- a user's own BIF file ------------------------------------------------------------------

# what pgmpy's reader drops before it reads: comments outside double quotes
_COMMENT = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")|(/\*.*?\*/|//[^\n]*)', re.DOTALL)
# a variable declaration as pgmpy's reader finds it: everything up to "{" is the name
_DECLARATION = re.compile(r"(?:^|\n)\s*variable\s+([^{]*)\{")
_LOOP = re.compile(r"edge from \((.+?)\) forms a loop")
_SUM = re.compile(r"probabilities for node (.+) is not equal to 1")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _row_sum_problem(net: BayesNet, name: str) -> str:
    """The CPT row of ``name`` farthest from summing to 1, in words."""
    import numpy as np

    if name not in net.cpts:
        return f"the probabilities of {name!r} do not sum to 1"
    sums = net.cpts[name].sum(axis=1)
    row = int(np.argmax(np.abs(sums - 1.0)))
    parents = net.parents[name]
    codes = np.unravel_index(row, tuple(len(net.states[p]) for p in parents)) if parents else ()
    given = ", ".join(f"{p}={net.states[p][int(c)]}" for p, c in zip(parents, codes, strict=True))
    return (
        f"the probabilities of {name!r}"
        + (f" given {given}" if given else "")
        + f" sum to {sums[row]:.6g}, not 1"
    )


def _read_text(path: Path) -> str:
    """The file's text, line ends made '\\n' and a final one added (pgmpy's reader ends a
    block at '}' and a line break)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: BIF file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not a BIF file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a BIF file (not UTF-8 text)") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"[ \t]+\n", "\n", text.rstrip() + "\n")


def _check_declared_names(path: Path, text: str) -> None:
    """The declared variable names, before pgmpy reads them (a name like 'table1' or two
    names differing in case break its reader with an unrelated message): each one the
    outputs can carry, none the id column, no two differing only in letter case."""
    from ppbn.bn.io import bif_case_clash, bif_name_fix, bif_name_problem

    text = _COMMENT.sub(lambda m: m.group(1) or "", text)
    names = [m.group(1).replace('"', " ").strip() for m in _DECLARATION.finditer(text)]
    if not names:
        raise DataError(f"{path}: not a BIF file (no 'variable' declaration)")
    for name in names:
        problem = bif_name_problem(name)
        if problem:
            raise DataError(
                f"{path}: variable {name!r}: the name {problem}; "
                f"{bif_name_fix(name, ' in the file')}"
            )
        if name == ID_COLUMN:
            raise DataError(
                f"{path}: variable {name!r}: the name is the data set's id column; rename it "
                "in the file"
            )
    clash = bif_case_clash(names)
    if clash:
        raise DataError(
            f"{path}: variables {clash[0]!r} and {clash[1]!r} differ only in letter case, which "
            "pgmpy's BIF reader cannot tell apart; rename one of them in the file"
        )


def _check_states(path: Path, net: BayesNet) -> None:
    """Every variable has two states or more, each one the outputs can carry."""
    from ppbn.bn.io import STATE_CHARS, bif_state_problem

    for name in net.names:
        states = net.states[name]
        if len(states) < 2:
            raise DataError(
                f"{path}: variable {name!r} has one state ({states[0]!r}); a variable needs at "
                "least two"
            )
        for state in states:
            problem = bif_state_problem(state)
            if problem:
                raise DataError(
                    f"{path}: variable {name!r}, state {state!r}: the state {problem}; rename it "
                    f"in the file ({STATE_CHARS})"
                )


def read_bif(path: str | Path) -> tuple[BayesNet, str]:
    """A user's BIF file as a network (variables in a topological order) and the name for
    its truth.bif (the file's own network name, else 'ppbn'). Refused with one DataError
    naming the file: a missing or unreadable file, text that is not BIF, a network pgmpy
    refuses (a cycle, a CPT row that does not sum to 1: its ``check_model``), or a variable
    name or state that the outputs (schema, CSVs, BIF) cannot carry."""
    from pgmpy.readwrite import BIFReader

    from ppbn.bn.io import bif_text_problem

    path = Path(path)
    text = _read_text(path)
    _check_declared_names(path, text)
    problem = bif_text_problem(text)
    if problem:
        raise DataError(f"{path}: {problem}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reader = BIFReader(string=text)
        except Exception as exc:  # pgmpy's reader fails in many ways on text it cannot parse
            detail = _one_line(exc)
            if isinstance(exc, KeyError):
                detail = f"{detail} is used but not declared as a variable"
            elif "NaN to integer" in detail:
                detail = "a probability row names a state its variables do not declare"
            raise DataError(f"{path}: not a readable BIF file: {detail}") from None
        try:
            model = reader.get_model()
        except Exception as exc:  # a cycle (DAG.add_edge), repeated states (TabularCPD)
            detail = _one_line(exc)
            loop = _LOOP.search(detail)
            if loop:
                detail = f"the graph has a cycle (the edge {loop.group(1)} closes it)"
            raise DataError(f"{path}: not a valid Bayesian network: {detail}") from None
        try:
            model.check_model()
        except Exception as exc:
            detail = _one_line(exc)
            bad = _SUM.search(detail)
            if bad:
                detail = _row_sum_problem(bayes_net(model), bad.group(1))
            raise DataError(
                f"{path}: not a valid Bayesian network (pgmpy's check_model): {detail}"
            ) from None
    net = bayes_net(model)
    _check_states(path, net)
    return net, reader.network_name or "ppbn"


def sample(net: BayesNet, n: int, seed: int) -> np.ndarray:
    """Ancestral sampling: codes of shape (n, len(net.names)), columns in ``net.names`` order."""
    import numpy as np

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
