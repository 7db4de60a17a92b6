"""docs/architecture.md's picture of the layers matches the code: its layer table lists
the layers of tests/test_layers.py in the same order, and its tree names every top-level
folder of the package."""

from __future__ import annotations

import re

from test_layers import LAYERS, PACKAGE

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def table_layers(text: str) -> list[tuple[str, ...]]:
    """The first column of the layer table, each row's names in order."""
    rows = []
    for line in text.splitlines():
        match = re.match(r"\| (`[^|]+) \| [^|]+ \|$", line)
        if match:
            rows.append(tuple(re.findall(r"`([^`]+)`", match.group(1))))
    return rows


def test_the_layer_table_lists_the_layers_in_order():
    documented = [names for names in table_layers(ARCHITECTURE.read_text()) if names]
    # the table joins commands and cli in one row; the code's last layer adds the entry points
    code = [
        tuple(sorted(n for n in names if n not in ("__init__", "__main__"))) for names in LAYERS
    ]
    code = [names for names in code if names]
    merged = code[:-2] + [tuple(sorted(code[-2] + code[-1]))]
    assert [tuple(sorted(names)) for names in documented] == merged


def test_the_tree_names_every_folder_of_the_package():
    text = ARCHITECTURE.read_text()
    tree = text[text.index("## Tree") : text.index("## Layers")]
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    missing = [name for name in folders if not re.search(rf"^\s+{name}/", tree, re.MULTILINE)]
    assert not missing, f"docs/architecture.md's tree does not name: {missing}"


def test_the_table_reader_sees_a_row():
    assert table_layers("| `lab`, `bench` | the above |") == [("lab", "bench")]
