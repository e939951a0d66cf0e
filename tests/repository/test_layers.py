"""Layers point one way: a module imports only from its own layer or the layers below, and no
modules import each other in a circle (docs/architecture.md, "Layers").

Every import of every module under attnmt/ counts, read with ``ast``: at the top, inside a
function, under ``if TYPE_CHECKING``. Importing ``attnmt.a.b`` also runs the package ``attnmt.a``
(its ``__init__.py``), so that package counts as imported too, unless the importer is inside it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "attnmt"

# The layers, lowest first. A name covers the module and, for a package, everything in it; a module
# belongs to the longest name that covers it. "attnmt" is the package's own __init__ (attnmt.load).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # attnmt.train.schedulers: the scheduler registry, whose names the config checks
    ("errors, config, runtime", ("attnmt.errors", "attnmt.config", "attnmt.runtime", "attnmt.train.schedulers")),
    ("models and data", ("attnmt.models", "attnmt.data")),
    ("model folder", ("attnmt.folder",)),
    ("decode, train, export", ("attnmt", "attnmt.decode", "attnmt.train", "attnmt.export")),
    ("align, serve, explore, study, viz", ("attnmt.align", "attnmt.serve", "attnmt.explore", "attnmt.study",
                                           "attnmt.viz")),
    ("cli", ("attnmt.cli", "attnmt.__main__")),
]
# Packages of one layer that know nothing of each other: the models take token ids, not a vocabulary.
SIBLINGS = [("attnmt.models", "attnmt.data")]


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> int | None:
    best, layer = -1, None
    for number, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "attnmt" and module.startswith(name + "."))
            if covers and len(name) > best:
                best, layer = len(name), number
    return layer


def imported(module: str, path: Path, known: dict[str, Path], quiet: set[str]) -> set[str]:
    """The package's modules that `module` imports, anywhere in its file."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            # `from a import b` imports the module a.b where there is one, else a name from a's __init__
            names += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = set()
    for name in names:
        while name and name not in known:  # `from attnmt.x import function` imports attnmt.x
            name = name.rpartition(".")[0]
        if not name.startswith("attnmt"):
            continue
        found.add(name)
        parent = name.rpartition(".")[0]
        while parent.count("."):  # its packages run first (attnmt's own is every module's)
            if parent not in quiet and not (module == parent or module.startswith(parent + ".")):
                found.add(parent)
            parent = parent.rpartition(".")[0]
    found.discard(module)
    return found


def quiet_packages(known: dict[str, Path]) -> set[str]:
    """Packages whose __init__ imports nothing: importing one of their modules runs no other code."""
    def imports_nothing(path: Path) -> bool:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return not any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(tree))
    return {name for name, path in known.items() if path.name == "__init__.py" and imports_nothing(path)}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    quiet = quiet_packages(known)
    return {name: imported(name, path, known, quiet) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer():
    missing = sorted(name for name in modules() if layer_of(name) is None)
    assert not missing, f"modules without a layer in tests/repository/test_layers.py's LAYERS: {missing}"


def test_no_import_runs_up_a_layer():
    upward = []
    for module, targets in sorted(import_graph().items()):
        own = layer_of(module)
        for target in sorted(targets):
            if own is not None and (theirs := layer_of(target)) is not None and theirs > own:
                upward.append(f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[theirs][0]})")
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_siblings_do_not_import_each_other():
    crossing = [f"{module} imports {target}" for module, targets in sorted(import_graph().items())
                for target in sorted(targets) for a, b in SIBLINGS + [(b, a) for a, b in SIBLINGS]
                if _inside(module, a) and _inside(target, b)]
    assert not crossing, "imports between sibling packages:\n" + "\n".join(crossing)


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_modules_import_each_other_in_a_circle():
    found = cycles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_see_what_they_check():
    """The graph is the real one: a known downward import is in it, and a circle is found."""
    graph = import_graph()
    assert "attnmt.errors" in graph["attnmt.config.schema"]
    assert "attnmt.models" in graph["attnmt.decode.translator"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("attnmt.align.link_sets") == 4 and layer_of("attnmt") == 3 and layer_of("attnmt.models.int8") == 1
    assert layer_of("attnmt.train.schedulers") == 0 and layer_of("attnmt.train.loss") == 3
    assert layer_of("attnmt.config.decoding") == 0 and layer_of("attnmt.decode.search") == 3


def test_package_root_holds_only_the_public_api():
    """The root keeps the public API (__init__), errors and __main__; everything else lives in its layer."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "errors.py"], root
