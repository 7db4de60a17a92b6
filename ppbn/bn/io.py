"""BIF and JSON export of a learned network.

BIF follows the format of the bnlearn repository (readable by pgmpy's BIFReader). The
JSON shape is shared by ``ppbn reference``, the secure path and the PRAM path:
``{"order", "edges" (in the order added), "parents", "parameters", "score", "tau"}``,
and ``"owners"`` (variable -> party, from the public schema) where the writer knows them;
``parameters[v]`` = ``{"parents", "states", "table" (one row per parent configuration,
C order over the parents, first parent slowest), "unobserved" (rows with no records:
uniform)}``.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppbn.bn.model import BayesNet
from ppbn.errors import DataError

# What pgmpy's BIFReader reads back exactly (see docs/decisions/bif-names.md). A variable name is one word: a root's header
# "probability ( mean radius )" is read as child 'mean' with parent 'radius'. A state is
# any text between separators that the reader strips and splits on; the conservative set
# below also keeps the file readable by stricter BIF readers.
NAME_CHARS = "letters, digits, '_', '-', '.'"
STATE_CHARS = (
    'any text without , ; ( ) { } | " // /* or a control character, no blank at either end'
)
_STATE_FORBIDDEN = ',;(){}|"'
# pgmpy looks for the words "table" and "default" anywhere in a probability header: one
# followed by a number character starts a phantom table row
_KEYWORD_NUMBER = re.compile(r"(table|default)([0-9eE.+\-])")


def _char_name(ch: str) -> str:
    if ch == " ":
        return "a space"
    if ch == "\t":
        return "a tab"
    if ch in "\n\r":
        return "a line break"
    if ch.isspace():
        return f"a blank ({ch!r})"
    return repr(ch)


def bif_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a variable name in a BIF file that pgmpy reads back (a clause
    to follow "the name"), or None when it can."""
    if not name:
        return "is empty"
    for ch in name:
        if not (ch.isalnum() or ch in "_-."):
            return f"has {_char_name(ch)}, which a BIF file cannot carry"
    keyword = _KEYWORD_NUMBER.search(name)
    if keyword:
        return (
            f"has {keyword.group(1)!r} followed by {keyword.group(2)!r}, which pgmpy's BIF reader "
            "takes for a probability table"
        )
    return None


def suggest_bif_name(name: str) -> str | None:
    """A nearby name that ``bif_name_problem`` accepts (blanks and other characters become
    '_'), or None if nothing is left."""
    fixed = re.sub(r"[^\w.\-]+|_+", "_", name).strip("_")
    fixed = _KEYWORD_NUMBER.sub(lambda m: f"{m.group(1)}_{m.group(2)}", fixed)
    return fixed if fixed and bif_name_problem(fixed) is None else None


def bif_state_problem(state: str) -> str | None:
    """Why ``state`` cannot be a state name in a BIF file (a clause to follow "the state"
    or "value ..."), or None when it can."""
    if not state:
        return "is empty"
    if state != state.strip():
        return "has a blank at its start or end, which a BIF file cannot carry"
    for ch in state:
        if ch in _STATE_FORBIDDEN or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"has {_char_name(ch)}, which a BIF file cannot carry"
    for pair in ("//", "/*"):
        if pair in state:
            return f"has {pair!r}, which a BIF reader takes for the start of a comment"
    return None


def bif_name_fix(name: str, where: str = "") -> str:
    """What to do about a refused variable name (``where``: " in the schema and the data"):
    the allowed characters, and a suggestion."""
    suggestion = suggest_bif_name(name)
    return f"rename it{where} ({NAME_CHARS})" + (f", e.g. {suggestion!r}" if suggestion else "")


def _bif_token(text: str) -> str:
    problem = bif_name_problem(text)
    if problem:
        raise ValueError(f"variable {text!r}: the name {problem}; {bif_name_fix(text)}")
    return text


def _bif_state(variable: str, text: str) -> str:
    problem = bif_state_problem(text)
    if problem:
        raise ValueError(
            f"variable {variable!r}, state {text!r}: the state {problem}; rename it ({STATE_CHARS})"
        )
    return text


def _prob(p: float) -> str:
    return repr(float(p))


def bif_case_clash(names: list[str] | tuple[str, ...]) -> tuple[str, str] | None:
    """Two names that differ only in letter case (pgmpy's BIF reader matches names in
    lower case, so it would merge them), or None."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            return other, name
    return None


def bif_text(net: BayesNet, network_name: str = "ppbn") -> str:
    """The network as BIF text; ValueError naming the variable or state that a BIF file
    cannot carry (the schema loader refuses those first, so a learned network never has one)."""
    if not re.fullmatch(r"[\w\-]+", network_name):
        raise ValueError(f"network name {network_name!r}: use letters, digits, '_', '-'")
    clash = bif_case_clash(net.names)
    if clash:
        raise ValueError(
            f"variables {clash[0]!r} and {clash[1]!r} differ only in letter case, which pgmpy's BIF "
            "reader cannot tell apart"
        )
    lines = [f"network {network_name} {{", "}"]
    for v in net.names:
        states = ", ".join(_bif_state(v, s) for s in net.states[v])
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
    """Write ``net`` as BIF. A name the format cannot carry is one DataError naming the file,
    before anything is written; a failing write (full disk) stays an OSError for the
    caller's output handling, which names the file and removes what was half written."""
    try:
        text = bif_text(net, network_name)
    except ValueError as exc:
        raise DataError(f"{path}: cannot write the network: {exc}") from None
    Path(path).write_text(text, encoding="utf-8")


def network_json(
    net: BayesNet,
    order: tuple[str, ...],
    edges: list[tuple[str, str]],
    score: str,
    tau: float,
    owners: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The result document; ``owners`` (variable -> party, public: from the schema) is
    written as ``"owners"`` when given."""
    document = {
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
    if owners is not None:
        document["owners"] = {v: owners[v] for v in net.names if v in owners}
    return document
