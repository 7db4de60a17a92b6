"""A learned network as a Python object: what a job wrote (``network.json``, ``ledger.json``,
``stats.json``) read back, and turned into the objects a notebook works with: a pgmpy
``DiscreteBayesianNetwork`` with its CPDs, a networkx ``DiGraph``, DOT text.

The document is the one ``ppbn reference --format json`` prints and every learn job writes
(docs/user-guide.md; the CPT layout is in docs/conventions.md, "Table layouts": rows are
the parent configurations, first parent slowest, columns the child's states). A party sees
only the CPTs its disclosure mode allows; the others are listed in ``withheld`` and
``to_pgmpy`` says so rather than inventing them.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.errors import DataError, UserError

if TYPE_CHECKING:
    import networkx
    import numpy as np
    import pandas
    from pgmpy.models import DiscreteBayesianNetwork

    from ppbn.bn.model import BayesNet

NETWORK_FILE = "network.json"
LEDGER_FILE = "ledger.json"
STATS_FILE = "stats.json"
ROW_SUM_TOLERANCE = 0.01  # as pgmpy's check_model; rows are renormalised before sampling


class WithheldCptsError(UserError, ValueError):
    """Sampling needs every CPT and this party was not shown some (owner disclosure)."""


@dataclass(frozen=True)
class Cpt:
    """One variable's conditional probability table, in ppbn's layout."""

    parents: tuple[str, ...]
    states: tuple[str, ...]
    table: tuple[tuple[float, ...], ...]  # one row per parent configuration
    unobserved: tuple[int, ...] = ()  # rows no record backed (uniform)

    def array(self) -> np.ndarray:
        import numpy as np

        return np.array(self.table, dtype=float)


@dataclass(frozen=True)
class NetworkResult:
    """The structure (always) and the CPTs this party may see, plus the party's ledger of
    what it learned in the clear and its own figures, when the job folder holds them."""

    variables: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]  # in the order the search added them
    parents: Mapping[str, tuple[str, ...]]
    cpts: Mapping[str, Cpt] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)
    # role -> display name, from the writing party's own schema (display only)
    party_names: Mapping[str, str] = field(default_factory=dict)
    withheld: tuple[str, ...] = ()  # variables whose CPT this party was not shown
    score: str | None = None
    search: str | None = None
    ledger: tuple[dict[str, Any], ...] = ()  # what this party learned in the clear
    stats: Mapping[str, Any] = field(default_factory=dict)  # this party's time, bytes, rounds
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)
    source: str = NETWORK_FILE  # where it was read, for messages

    @classmethod
    def from_document(
        cls,
        document: Any,
        owners: Mapping[str, str] | None = None,
        ledger: list[dict[str, Any]] | None = None,
        stats: Mapping[str, Any] | None = None,
        source: str = NETWORK_FILE,
        party_names: Mapping[str, str] | None = None,
    ) -> NetworkResult:
        """Read a network document (``network.json``, or a job's result without CPTs); one
        DataError naming ``source`` when it is not one. ``owners`` (public: the schema is
        shared) and ``party_names`` (role -> display name, a local schema's) fill in for a
        document that has none."""
        if not isinstance(document, dict):
            raise _not_a_result(source, "the top level is not a JSON object")
        parents = document.get("parents")
        if not isinstance(parents, dict) or not parents:
            raise _not_a_result(source, "no 'parents' object")
        _check_structure(document, parents, source)
        order = document.get("order")
        named = isinstance(order, list) and set(order) == set(parents)
        variables = tuple(order) if named else tuple(parents)
        from_parents = [(p, c) for c in variables for p in parents[c]]
        listed = [(p, c) for p, c in document.get("edges") or ()]
        # the order the search added them in, when the list agrees with the parents
        edges = listed if sorted(listed) == sorted(from_parents) else from_parents
        found_owners = document.get("owners") or owners or {}
        if not isinstance(found_owners, Mapping) or not all(
            isinstance(o, str) for o in found_owners.values()
        ):
            raise _not_a_result(source, "'owners' is not an object of party names")
        found_names = document.get("party_names") or party_names or {}
        if not isinstance(found_names, Mapping) or not all(
            isinstance(role, str) and isinstance(name, str) for role, name in found_names.items()
        ):
            raise _not_a_result(source, "'party_names' is not an object of display names")
        stats = stats or document.get("stats") or {}
        if not isinstance(stats, Mapping):
            raise _not_a_result(source, "'stats' is not an object")
        parameters = document.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise _not_a_result(source, "'parameters' is not an object")
        cpts = {}
        for v, entry in parameters.items():
            try:
                cpts[v] = Cpt(
                    tuple(_names(entry["parents"])),
                    tuple(_names(entry["states"])),
                    tuple(tuple(float(x) for x in _row(row)) for row in entry["table"]),
                    tuple(int(j) for j in entry.get("unobserved", ())),
                )
            except KeyError as exc:
                raise _not_a_result(
                    source, f"the CPT entry of {v!r} has no {exc.args[0]!r}"
                ) from None
            except (TypeError, ValueError, AttributeError) as exc:
                raise _not_a_result(
                    source, f"the CPT entry of {v!r} is malformed ({exc})"
                ) from None
        return cls(
            variables=variables,
            edges=tuple(edges),
            parents={v: tuple(parents[v]) for v in variables},
            cpts=cpts,
            owners=dict(found_owners),
            party_names=dict(found_names),
            withheld=tuple(v for v in variables if v not in cpts),
            score=document.get("score") or None,
            search=document.get("search"),
            ledger=tuple(ledger or ()),
            stats=dict(stats),
            document=dict(document),
            source=source,
        )

    def plot(
        self,
        png: str | Path,
        reference: NetworkResult | None = None,
        title: str | None = None,
    ) -> dict[str, list[tuple[str, str]]]:
        """Draw the DAG into a PNG (ppbn/bn/draw.py): each variable coloured by its owner
        (the legend names the parties by their display names when known), and, against a ``reference`` (a true network, or the non-private result), the
        extra, missing and reversed edges marked. Returns those marks."""
        from ppbn.bn.draw import draw_network
        from ppbn.data.outputs import atomic_write_bytes, check_output_file, reason

        check_output_file(png, "--plot")
        try:
            picture, marks = draw_network(
                self.variables,
                self.edges,
                self.owners or None,
                reference.edges if reference is not None else None,
                title,
                self.party_names or None,
            )
        except ValueError as exc:
            raise UserError(f"{self.source}: cannot draw the network: {exc}") from None
        try:
            Path(png).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(png, picture)
            return marks
        except OSError as exc:
            raise UserError(f"--plot {png}: cannot write ({reason(exc)})") from None

    # -- the objects of other libraries -------------------------------------------------

    def to_pgmpy(self) -> DiscreteBayesianNetwork:
        """A pgmpy model with one ``TabularCPD`` per variable (pgmpy's columns are the parent
        configurations, first parent slowest: ppbn's rows, transposed)."""
        from pgmpy.factors.discrete import TabularCPD
        from pgmpy.models import DiscreteBayesianNetwork

        if self.withheld:
            raise UserError(
                f"the CPTs of {', '.join(self.withheld)} were not disclosed to this party: a "
                "pgmpy model needs every CPT (to_networkx and to_dot give the structure)"
            )
        model = DiscreteBayesianNetwork()
        model.add_nodes_from(self.variables)
        model.add_edges_from(self.edges)
        states = {v: list(self.cpts[v].states) for v in self.variables}
        for v in self.variables:
            cpt = self.cpts[v]
            model.add_cpds(
                TabularCPD(
                    v,
                    len(cpt.states),
                    cpt.array().T,
                    evidence=list(cpt.parents) or None,
                    evidence_card=[len(states[p]) for p in cpt.parents] or None,
                    state_names={name: states[name] for name in (v, *cpt.parents)},
                )
            )
        model.check_model()
        return model

    def to_networkx(self) -> networkx.DiGraph:
        """The DAG; each node carries its ``owner`` (when known) and ``states`` (when seen)."""
        import networkx as nx

        graph = nx.DiGraph()
        for v in self.variables:
            attributes: dict[str, Any] = {}
            if v in self.owners:
                attributes["owner"] = self.owners[v]
            if v in self.cpts:
                attributes["states"] = list(self.cpts[v].states)
            graph.add_node(v, **attributes)
        graph.add_edges_from(self.edges)
        return graph

    def to_dot(self, name: str = "ppbn") -> str:
        """Graphviz DOT text, one colour per owner."""
        palette = ("lightblue", "lightsalmon", "palegreen", "plum")
        parties = sorted(set(self.owners.values()))
        colour = {party: palette[i % len(palette)] for i, party in enumerate(parties)}
        lines = [f"digraph {_dot_id(name)} {{", "  node [style=filled];"]
        for v in self.variables:
            owner = self.owners.get(v)
            extra = f', fillcolor={colour[owner]}, tooltip="{owner}"' if owner else ""
            lines.append(f"  {_dot_id(v)} [label={_dot_id(v)}{extra}];")
        lines += [f"  {_dot_id(p)} -> {_dot_id(c)};" for p, c in self.edges]
        lines.append("}")
        return "\n".join(lines) + "\n"

    def sample(
        self, records: int, seed: int | None = None, *, columns: Sequence[str] | None = None
    ) -> pandas.DataFrame:
        """``records`` synthetic records by forward sampling in a topological order, with
        the sampler of ``ppbn datasets make`` (``ppbn.bn.networks.sample``): one categorical
        column per variable (``columns``, default the file's order: network.json's
        ``parents``, a BIF's variables as read), values the state names. The same seed gives
        the same records; none draws a fresh one. A ``WithheldCptsError`` (a ValueError)
        naming the variables when some CPTs were withheld from this party; a DataError
        naming the file when a CPT is malformed. (``ppbn.sample`` also writes a file.)"""

        import numpy as np
        import pandas as pd

        from ppbn.bn.networks import sample as forward_sample

        check_size(self, records)
        if columns is None:
            listed = self.document.get("parents")
            file_order = isinstance(listed, dict) and set(listed) == set(self.variables)
            columns = tuple(listed) if file_order else self.variables
        unknown = [v for v in columns if v not in self.parents]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a variable of {self.source}")
        net = self.bayes_net()
        if seed is None:
            seed = int(np.random.SeedSequence().entropy)  # fresh OS entropy
        codes = forward_sample(net, int(records), seed)
        position = {v: j for j, v in enumerate(net.names)}
        return pd.DataFrame(
            {
                v: pd.Categorical.from_codes(codes[:, position[v]], categories=list(net.states[v]))
                for v in columns
            }
        )

    def bayes_net(self) -> BayesNet:
        """The network as ppbn's ``BayesNet`` (what the sampler takes), every CPT checked:
        one DataError naming the file; ``WithheldCptsError`` when a CPT was withheld. Rows
        summing to 1 within pgmpy's tolerance are renormalised."""
        import numpy as np

        from ppbn.bn.model import BayesNet

        source = self.source
        if self.withheld:
            raise WithheldCptsError(
                f"{source}: the CPTs of {', '.join(self.withheld)} are withheld from this "
                "party (owner disclosure): sampling needs every CPT"
            )
        states: dict[str, tuple[str, ...]] = {}
        cpts: dict[str, np.ndarray] = {}
        for v in self.variables:
            cpt = self.cpts[v]
            if tuple(cpt.parents) != tuple(self.parents[v]):
                raise DataError(
                    f"{source}: the CPT of {v!r} is over parents {list(cpt.parents)}, but the "
                    f"structure gives {list(self.parents[v])}"
                )
            if not cpt.states or len(set(cpt.states)) != len(cpt.states):
                raise DataError(f"{source}: the states of {v!r} are empty or repeated")
            states[v] = tuple(cpt.states)
            try:
                table = cpt.array()
            except ValueError:  # rows of different lengths
                table = None
            if table is None or table.ndim != 2 or table.shape[1] != len(cpt.states):
                raise DataError(f"{source}: the CPT of {v!r} does not have one column per state")
            if not np.all(np.isfinite(table)) or np.any(table < 0):
                raise DataError(f"{source}: the CPT of {v!r} has a negative or non-finite entry")
            sums = table.sum(axis=1)
            bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOLERANCE)
            if bad.size:
                raise DataError(
                    f"{source}: row {int(bad[0])} of the CPT of {v!r} sums to "
                    f"{sums[bad[0]]:.6g}, not 1"
                )
            cpts[v] = table / sums[:, None]
        try:
            net = BayesNet(self.variables, states, dict(self.parents), cpts)
            net.topological_order()
        except ValueError as exc:  # a CPT's row count against its parents' states, a cycle
            raise DataError(f"{source}: not a valid network: {exc}") from None
        return net

    def structural_hamming_distance(self, other: NetworkResult) -> int:
        """Edges to add, remove or reverse to turn this structure into ``other``'s."""
        from ppbn.bn.model import structural_hamming_distance

        return structural_hamming_distance(self.parents, other.parents)

    def max_cpt_difference(self, other: NetworkResult) -> float:
        """The largest absolute difference between two networks' CPT cells (same structure
        and states needed)."""
        import numpy as np

        if dict(self.parents) != dict(other.parents):
            raise UserError("the two networks have different structures: compare the edges")
        shared = [v for v in self.variables if v in self.cpts and v in other.cpts]
        return max(
            (float(np.max(np.abs(self.cpts[v].array() - other.cpts[v].array()))) for v in shared),
            default=0.0,
        )


def _names(value: Any) -> list[str]:
    """``value`` when it is a list of strings (a CPT's parents or states); TypeError otherwise
    (a string would pass as a list of its letters)."""
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise TypeError(f"{value!r} is not a list of names")
    return value


def _row(value: Any) -> list[Any]:
    """A CPT row when it is a list (a string would pass as a list of its digits)."""
    if not isinstance(value, list):
        raise TypeError(f"row {value!r} is not a list")
    return value


def _check_structure(document: dict[str, Any], parents: dict[str, Any], source: str) -> None:
    """The structure fields of a network document: each parent list names variables, once
    each; 'order' and 'edges', when present, hold names and [parent, child] pairs; the
    edges form no cycle (a DataError naming one, rather than a reader's bare ValueError)."""
    from ppbn.bn.model import find_cycle

    for child, ps in parents.items():
        if not isinstance(ps, list) or not all(isinstance(p, str) for p in ps):
            raise _not_a_result(source, f"'parents' of {child!r} is not a list of names")
        unknown = [p for p in ps if p not in parents]
        if unknown:
            raise _not_a_result(source, f"{child!r} has parent {unknown[0]!r}, not a variable")
        twice = [p for p in ps if ps.count(p) > 1]
        if twice:
            raise _not_a_result(source, f"'parents' of {child!r} names {twice[0]!r} twice")
    order = document.get("order")
    if order is not None and (
        not isinstance(order, list) or not all(isinstance(v, str) for v in order)
    ):
        raise _not_a_result(source, "'order' is not a list of names")
    edges = document.get("edges")
    if edges is not None and (
        not isinstance(edges, list)
        or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(v, str) for v in e)
            for e in edges
        )
    ):
        raise _not_a_result(source, "'edges' is not a list of [parent, child] pairs")
    for key in ("score", "search"):
        if document.get(key) is not None and not isinstance(document[key], str):
            raise _not_a_result(source, f"{key!r} is not a string")
    cycle = find_cycle(parents)
    if cycle:
        raise DataError(f"{source}: the edges form a cycle {' -> '.join(cycle)}")


def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _not_a_result(source: str, why: str) -> DataError:
    return DataError(f"{source}: not a ppbn network.json: {why}")


def load_result(path: str | Path, schema: str | Path | None = None) -> NetworkResult:
    """A job folder (``ppbn-out/JOB``, with network.json and, when present, ledger.json and
    stats.json), a party's output folder holding one job, a network.json file, or a BIF
    file; ``schema`` supplies the owners and party names when the document has none. One
    DataError naming the file when it is none of these."""
    path = Path(path)
    if path.is_dir():
        path = _result_file(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    owners = party_names = None
    if schema is not None:
        from ppbn.bn.schema import Schema

        loaded = Schema.load(str(schema))
        owners = {v.name: v.owner for v in loaded.variables}
        party_names = loaded.party_names
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: neither a network.json nor a BIF file (not UTF-8 text)") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    if path.suffix.lower() == ".bif" or (
        path.suffix.lower() != ".json" and not text.lstrip().startswith("{")
    ):
        return NetworkResult.from_document(
            _bif_document(path), owners, source=str(path), party_names=party_names
        )
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    ledger = _side_file(path.parent / LEDGER_FILE)
    stats = _side_file(path.parent / STATS_FILE)
    return NetworkResult.from_document(
        document,
        owners,
        ledger=ledger.get("entries") if isinstance(ledger, dict) else None,
        stats=stats.get("self") if isinstance(stats, dict) else None,
        source=str(path),
        party_names=party_names,
    )


def _result_file(folder: Path) -> Path:
    """network.json in ``folder``, or in its only sub-folder holding one (a party's output
    folder with one job)."""
    if (folder / NETWORK_FILE).is_file():
        return folder / NETWORK_FILE
    found = sorted(folder.glob(f"*/{NETWORK_FILE}"))
    if len(found) == 1:
        return found[0]
    if found:
        jobs = ", ".join(p.parent.name for p in found)
        raise UserError(
            f"{folder}: {len(found)} job folders hold a {NETWORK_FILE}; name one: {jobs}"
        )
    raise DataError(f"{folder}: no {NETWORK_FILE} in this folder")


def _bif_document(path: Path) -> dict[str, Any]:
    """A BIF file in the network.json shape (no score: a BIF carries none)."""
    from ppbn.bn.io import network_json
    from ppbn.bn.networks import read_bif

    net, _ = read_bif(path)
    document = network_json(net, net.names, net.edges(), "", 0.0)
    del document["score"], document["tau"]
    return document


def _side_file(path: Path) -> Any:
    """ledger.json or stats.json beside the network, when the folder has a readable one."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# the most cells (records x variables) one sample builds: the table is made whole in memory
MAX_CELLS = 100_000_000


def check_size(result: NetworkResult, records: object, name: str = "records") -> None:
    """Refuse, before any work, a record count that is not a positive integer or whose
    table would pass ``MAX_CELLS``; ``name`` is the argument as the caller spells it."""
    if isinstance(records, bool) or not isinstance(records, numbers.Integral) or records < 1:
        raise ValueError(f"{name} must be a positive integer, not {records!r}")
    cells = int(records) * len(result.variables)
    if cells > MAX_CELLS:
        raise UserError(
            f"{name} {records}: {records:,} records of {len(result.variables)} variables are "
            f"{cells:,} cells, over the cap of {MAX_CELLS:,} (the table is built whole in "
            "memory before it is written); sample fewer, or several files with different seeds"
        )
