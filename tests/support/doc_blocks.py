"""The code blocks of a Markdown page that a test runs, and their commands.

A block is marked by an HTML comment on the line before its opening fence, which neither
GitHub nor mkdocs shows:

    <!-- test: NAME -->
    ```
    ppbn ...
    ```

``blocks(page)`` returns every fenced block, marked or not (``name`` is None when not),
so a test can insist that each block of the page is accounted for. ``Block.commands`` are
the shell commands as a person would type them: ``\\`` continuations joined, ``#``
comments and blank lines dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^<!--\s*test:\s*(\S+)\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")


@dataclass(frozen=True)
class Block:
    name: str | None  # the marker's NAME; None for an unmarked block
    line: int  # 1-based line of the opening fence in the page
    text: str  # the lines between the fences

    @property
    def commands(self) -> list[str]:
        return commands(self.text)

    def where(self, page: Path) -> str:
        return f"{page.name}:{self.line} (block {self.name or '(unmarked)'})"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence.group(1)):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.name}:{i + 1}: code block never closed")
        found.append(
            Block(marker.group(1) if marker else None, i + 1, "\n".join(lines[i + 1 : end]))
        )
        i = end + 1
    return found


def marked(page: Path) -> dict[str, Block]:
    """The marked blocks by name; a name used twice is an error."""
    out: dict[str, Block] = {}
    for block in blocks(page):
        if block.name is None:
            continue
        if block.name in out:
            raise ValueError(
                f"{block.where(page)}: the name is also used at line {out[block.name].line}"
            )
        out[block.name] = block
    return out


def commands(text: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blank lines gone."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = strip_comment(raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = (pending + line.strip()).strip()
        pending = ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def strip_comment(line: str) -> str:
    """``line`` without a shell comment: a ``#`` at the start of a word, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line
