"""The package's layers: every import points down, and no modules import each other.

Each top-level folder of ``ppbn`` is one layer (docs/architecture.md): pure libraries at
the bottom, then the two-party protocols, the party's files, the job kinds, the gRPC
daemon, the experiments, the commands. A module may import its own layer and the layers
below it, never one above; and no chain of imports, at module level or inside a
function, leads from a module back to itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ppbn"
# low to high; a layer may import any layer listed before it
LAYERS = (
    ("errors",),
    ("kernels",),
    ("bn", "circuits", "dp"),
    ("randomized",),
    ("protocols",),
    ("data",),
    ("jobs",),
    ("proto", "parties"),
    ("lab",),
    ("api",),
    ("commands",),
    ("cli", "__init__", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every ppbn module ``path`` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ppbn"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("ppbn"))
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        # "from ppbn.x import y" names module ppbn.x.y when it exists, else ppbn.x
        edges[name] = {m for m in imports_of(path) if m in modules and m != name}
    return edges


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_belongs_to_a_layer():
    assert {layer(m) for m in graph()} <= set(RANK), sorted({layer(m) for m in graph()} - set(RANK))


def test_no_import_points_up():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if RANK[layer(target)] > RANK[layer(module)]
    )
    assert not upward, "\n".join(upward)


def test_no_import_loop():
    edges = graph()
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                loops.append(
                    path[path.index(target) :] + [target] if target in path else [module, target]
                )
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not loops, "\n".join(" -> ".join(loop) for loop in loops)


def test_the_checker_sees_an_upward_import_and_a_loop(tmp_path):
    """The walk itself works: it reads imports wherever they stand."""
    source = tmp_path / "m.py"
    source.write_text(
        "def f():\n    from ppbn.parties.daemon import PartyDaemon\nimport ppbn.bn.model\n"
    )
    assert imports_of(source) == {
        "ppbn.parties.daemon",
        "ppbn.parties.daemon.PartyDaemon",
        "ppbn.bn.model",
    }
