"""The package's layers: every import points down, and no modules import each other.

Each top-level folder of ``ppbn`` is one layer (docs/architecture.md): pure libraries at
the bottom, then the two-party protocols, the party's files, the job kinds, the gRPC
daemon, the experiments, the commands. A module may import its own layer and the layers
below it, never one above; and no chain of imports, at module level or inside a
function, leads from a module back to itself.
"""

from __future__ import annotations

import ast
import functools
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
    ("pair",),
    ("lab", "bench"),
    ("api",),
    ("commands",),
    ("cli", "__init__", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
# rooms a layer must not import although they stand below it: the public API stands on
# the loopback pair, never on the experiments or the benchmarks
FORBIDDEN = {"api": {"lab", "bench"}, "lab": {"bench"}, "bench": set()}
MAX_MODULE_LINES = 700
MAX_COMMANDS_LINES = 5300  # docs/decisions/commands-floor.md
MAX_COMMAND_MODULE_LINES = 250


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


@functools.cache
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


def test_no_import_into_a_forbidden_room():
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if layer(target) in FORBIDDEN.get(layer(module), set())
    )
    assert not crossing, "\n".join(crossing)


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_over_the_size_bound():
    large = sorted(
        f"{path.relative_to(PACKAGE.parent)}: {lines_of(path)} lines"
        for path in PACKAGE.rglob("*.py")
        if "proto" not in path.parts and lines_of(path) > MAX_MODULE_LINES
    )
    assert not large, "\n".join(large)


def test_commands_parse_and_print_only():
    """The commands' floor stays thin: its engines live in the rooms below it."""
    modules = sorted((PACKAGE / "commands").rglob("*.py"))
    total = sum(lines_of(path) for path in modules)
    large = [
        f"{path.name}: {lines_of(path)} lines"
        for path in modules
        if lines_of(path) > MAX_COMMAND_MODULE_LINES
    ]
    assert total <= MAX_COMMANDS_LINES, f"ppbn/commands holds {total} lines"
    assert not large, "\n".join(large)
