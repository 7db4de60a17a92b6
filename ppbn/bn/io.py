"""BIF and JSON export of a learned network, and the checks a user's BIF file passes before
pgmpy's reader sees it (``bif_text_problem``).

BIF follows the format of the bnlearn repository (readable by pgmpy's BIFReader). The
JSON shape is shared by ``ppbn reference``, the secure path and the PRAM path:
``{"order", "edges" (in the order added), "parents", "parameters", "score", "tau"}``,
and ``"owners"`` (variable -> party, from the public schema) where the writer knows them,
``"party_names"`` (role -> display name, from the writer's own schema) where it has some;
``parameters[v]`` = ``{"parents", "states", "table" (one row per parent configuration,
C order over the parents, first parent slowest), "unobserved" (rows with no records:
uniform)}``.
"""

from __future__ import annotations

import itertools
import math
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
    party_names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The result document; ``owners`` (variable -> party, public: from the schema) is
    written as ``"owners"`` when given, ``party_names`` (role -> display name, the writer's
    own) as ``"party_names"`` when it names any party."""
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
    if party_names:
        document["party_names"] = dict(party_names)
    return document


# -- checks of a user's BIF text, before pgmpy's reader ---------------------------------------
# pgmpy's reader finds blocks with regular expressions and skips what they do not match: a
# block cut short, a state count that disagrees with the states, a repeated declaration or
# a cell that is not a number are read silently, or fail later with a message that names
# neither the variable nor the line. ``bif_text_problem`` names both.

_COMMENT = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")|(/\*.*?\*/|//[^\n]*)', re.DOTALL)
_BLOCK = re.compile(r"\b(network|variable|probability)\b")
_TYPE = re.compile(r"type\s+\w+\s*\[\s*(\d+)\s*\]\s*\{([^}]*)\}\s*;")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# a row of non-negative finite numbers (an exponent of two digits at most): the common case,
# checked at once; any other row is checked cell by cell for the message
_PLAIN = r"\+?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,2})?"
_PLAIN_ROW = re.compile(rf"[\s,]*(?:{_PLAIN}(?:[\s,]+|$))*")
_BRACE = re.compile(r"[{}]")


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _blocks(text: str) -> list[tuple[str, str, str, int, int]]:
    """(kind, header, body, line of the block, index of the body) for every top-level block;
    ValueError("line N: ...") for a block whose closing '}' never comes."""
    found = []
    pos = 0
    while match := _BLOCK.search(text, pos):
        kind, start = match.group(1), match.start()
        opening = text.find("{", match.end())
        header = text[match.end() : opening if opening >= 0 else len(text)]
        name = header.split("|")[0].strip(" \t\n()").split(" ")[0] if kind != "network" else ""
        what = f"the {kind} block" + (f" of {name!r}" if name else "")
        if opening < 0 or ";" in header or "}" in header:
            raise ValueError(f"line {_line(text, start)}: {what} has no '{{' after its header")
        depth, end = 0, opening
        for brace in _BRACE.finditer(text, opening):
            depth += 1 if brace.group() == "{" else -1
            end = brace.start()
            if depth == 0:
                break
        if depth:
            raise ValueError(
                f"line {_line(text, start)}: {what} is incomplete: the file ends before its "
                "closing '}' (is the file cut short?)"
            )
        found.append((kind, header, text[opening + 1 : end], _line(text, start), opening + 1))
        pos = end + 1
    return found


def _states_of(raw: str) -> list[str]:
    """The states of a declaration as pgmpy's reader splits them."""
    if "," in raw:
        return [s.strip() for s in raw.split(",") if s.strip()]
    return raw.split()


def _declarations(
    text: str, blocks: list[tuple[str, str, str, int, int]]
) -> dict[str, tuple[list[str], int]]:
    """Each declared variable's states and line: a count that disagrees with the states
    listed, a missing type line and a second declaration refused."""
    declared: dict[str, tuple[list[str], int]] = {}
    for kind, header, body, line, _ in blocks:
        if kind != "variable":
            continue
        name = header.strip()
        if name in declared:
            raise ValueError(
                f"line {line}: variable {name!r} is declared twice (lines {declared[name][1]} "
                f"and {line})"
            )
        match = _TYPE.search(body)
        if match is None:
            raise ValueError(
                f"line {line}: variable {name!r} has no 'type discrete [ N ] {{ ... }};' line"
            )
        states = _states_of(match.group(2))
        if int(match.group(1)) != len(states):
            raise ValueError(
                f"line {line}: variable {name!r} declares {match.group(1)} states but lists "
                f"{len(states)} ({', '.join(states)})"
            )
        declared[name] = (states, line)
    return declared


def _probability_header(header: str) -> tuple[str, list[str]]:
    inner = header.strip().strip("()").strip()
    if "|" in inner:
        child, given = inner.split("|", 1)
        return child.strip(), [p.strip() for p in given.split(",") if p.strip()]
    words = inner.replace(",", " ").split()
    return (words[0] if words else ""), words[1:]


def _cells_problem(variable: str, row: str, cells: str, width: int) -> str | None:
    """Why the numbers of one row are not probabilities (a clause after the line)."""
    values = [c for c in re.split(r"[\s,]+", cells.strip()) if c]
    where = f"the probabilities of {variable!r} {row}"
    for cell in () if _PLAIN_ROW.fullmatch(cells) else values:
        if not _NUMBER.fullmatch(cell):
            return f"{where}: {cell!r} is not a number"
        if float(cell) < 0:
            return f"{where}: {cell} is negative"
        if not math.isfinite(float(cell)):
            return f"{where}: {cell} is not a finite number"
    if width and len(values) != width:
        count = f"{len(values)} number" + ("" if len(values) == 1 else "s")
        return f"{where}: {count}, but {variable!r} has {width} states"
    return None


def _probability_problem(
    text: str, header: str, body: str, line: int, at: int, declared: Mapping[str, Any]
) -> tuple[str, str | None]:
    """The variable of a probability block and what is wrong with its rows, if anything."""
    child, parents = _probability_header(header)
    folded = {name.lower(): name for name in declared}  # pgmpy matches these names in any case
    child, parents = folded.get(child.lower(), child), [folded.get(p.lower(), p) for p in parents]
    known = child in declared and all(p in declared for p in parents)
    width = len(declared[child][0]) if known else 0
    configs: set[tuple[str, ...]] = set()
    default = False
    pos = 0
    for raw in body.split(";"):
        entry = raw.strip()
        start, pos = at + pos + len(raw) - len(raw.lstrip()), pos + len(raw) + 1
        if not entry or entry.startswith("property"):
            continue
        if entry.startswith("("):
            close = entry.find(")")
            config = tuple(s.strip() for s in entry[1:close].split(","))
            given = ", ".join(f"{p}={s}" for p, s in zip(parents, config, strict=False))
            problem = _cells_problem(child, f"given {given}", entry[close + 1 :], width)
            configs.add(config)
        elif entry.startswith(("table", "default")):
            keyword = entry.split()[0]
            default = default or keyword == "default"
            problem = _cells_problem(child, f"in its {keyword} line", entry[len(keyword) :], 0)
        else:
            problem = (
                f"the probability block of {child!r} has a line it cannot read: {entry[:40]!r}"
            )
        if problem:
            return child, f"line {_line(text, start)}: {problem}"
    if known and parents and configs and not default:
        for config in itertools.product(*(declared[p][0] for p in parents)):
            if config not in configs:
                given = ", ".join(f"{p}={s}" for p, s in zip(parents, config, strict=True))
                return child, (
                    f"line {line}: the probability block of {child!r} has no row for {given}"
                )
    return child, None


def bif_text_problem(text: str) -> str | None:
    """What keeps BIF ``text`` from being read as written, beginning "line N: " and naming
    the variable (None when nothing does): a block cut short, a variable declared twice or
    whose state count disagrees with its states, a probability cell that is not a
    non-negative number, a row missing, a variable without a probability block."""
    if "/*" in text or "//" in text:
        text = _COMMENT.sub(lambda m: m.group(1) or "\n" * m.group(0).count("\n"), text)
    text = text.replace('"', " ")
    try:
        blocks = _blocks(text)
        declared = _declarations(text, blocks)
    except ValueError as exc:
        return str(exc)
    covered: dict[str, int] = {}
    for kind, header, body, line, at in blocks:
        if kind != "probability":
            continue
        child, problem = _probability_problem(text, header, body, line, at, declared)
        if problem:
            return problem
        if child in covered:
            return (
                f"line {line}: a second probability block of {child!r} (the first is on line "
                f"{covered[child]})"
            )
        covered[child] = line
    for name, (_, line) in declared.items():
        if name not in covered:
            return (
                f"line {line}: variable {name!r} has no probability block (is the file cut short?)"
            )
    return None
