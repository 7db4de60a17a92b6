"""BIF and JSON export of a learned network.

BIF follows the format of the bnlearn repository (readable by pgmpy's BIFReader). The
JSON shape is shared by ``ppbn reference``, the secure path and the PRAM path:
``{"order", "edges" (in the order added), "parents", "parameters", "score", "tau"}``;
``parameters[v]`` = ``{"parents", "states", "table" (one row per parent configuration,
C order over the parents, first parent slowest), "unobserved" (rows with no records:
uniform)}``.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from ppbn.bn.model import BayesNet

# what the BIF grammar (as pgmpy reads it) accepts: variable names are words, states
# anything without the separators , ; { } ( ) and without surrounding blanks
_BIF_NAME = re.compile(r"^[\w.\-]+$")
_BIF_STATE = re.compile(r"^[^\s,;{}()](?:[^,;{}()\n]*[^\s,;{}()])?$")


def _bif_token(text: str) -> str:
    if not _BIF_NAME.match(text):
        raise ValueError(f"variable name {text!r} cannot be written to BIF (use letters, digits, _ . -)")
    return text


def _bif_state(text: str) -> str:
    if not _BIF_STATE.match(text):
        raise ValueError(f"state {text!r} cannot be written to BIF (no , ; {{ }} ( ) or edge blanks)")
    return text


def _prob(p: float) -> str:
    return repr(float(p))


def bif_text(net: BayesNet, network_name: str = "ppbn") -> str:
    lines = [f"network {_bif_token(network_name)} {{", "}"]
    for v in net.names:
        states = ", ".join(_bif_state(s) for s in net.states[v])
        lines += [
            f"variable {_bif_token(v)} {{",
            f"  type discrete [ {len(net.states[v])} ] {{ {states} }};",
            "}",
        ]
    for v in net.names:
        ps = net.parents[v]
        cpt = net.cpts[v]
        if not ps:
            lines += [f"probability ( {v} ) {{", f"  table {', '.join(map(_prob, cpt[0]))};", "}"]
            continue
        lines.append(f"probability ( {v} | {', '.join(ps)} ) {{")
        for j, config in enumerate(itertools.product(*(net.states[p] for p in ps))):
            lines.append(f"  ({', '.join(config)}) {', '.join(map(_prob, cpt[j]))};")
        lines.append("}")
    return "\n".join(lines) + "\n"


def write_bif(net: BayesNet, path: str | Path, network_name: str = "ppbn") -> None:
    Path(path).write_text(bif_text(net, network_name), encoding="utf-8")


def network_json(
    net: BayesNet, order: tuple[str, ...], edges: list[tuple[str, str]], score: str, tau: float
) -> dict[str, Any]:
    return {
        "order": list(order),
        "edges": [[p, c] for p, c in edges],
        "parents": {v: list(net.parents[v]) for v in net.names},
        "parameters": {
            v: {
                "parents": list(net.parents[v]),
                "states": list(net.states[v]),
                "table": net.cpts[v].tolist(),
                "unobserved": list(net.unobserved.get(v, ())),
            }
            for v in net.names
        },
        "score": score,
        "tau": tau,
    }
