"""Every page a code comment or docstring cites exists, and so does the section it names.

Comments cite the project's own documentation (``docs/conventions.md, "Tie rule"``,
``SECURITY.md``); a page renamed or a section moved must not leave a citation pointing
nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(
    r"(?<![\w/])((?:docs/[\w/.-]+|SECURITY|CHANGELOG|README)\.md)"
    r"(?:,\s*(?:section\s+)?[\"']([^\"'\n]+)[\"'])?"
)


def citations() -> list[tuple[str, str, str | None]]:
    found = []
    for folder in ("ppbn", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for match in CITATION.finditer(text):
                found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def headings(page: Path) -> set[str]:
    return {
        line.lstrip("#").strip().lower()
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def test_the_citation_pattern_finds_citations():
    names = {page for _, page, _ in citations()}
    assert {"docs/conventions.md", "SECURITY.md"} <= names


def test_every_cited_page_and_section_exists():
    broken = []
    for source, page, section in citations():
        path = ROOT / page
        if not path.is_file():
            broken.append(f"{source}: {page} does not exist")
        elif section and not any(h.startswith(section.lower()) for h in headings(path)):
            broken.append(f"{source}: {page} has no section {section!r}")
    assert not broken, "\n".join(sorted(set(broken)))
