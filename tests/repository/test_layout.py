"""The package's shape: docs/architecture.md's tree is the package, and modules and functions stay small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "attnmt"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
SMALL = (PACKAGE, ROOT / "benchmarks", ROOT / "scripts")  # the code held to those sizes (the tests are not)


def documented_tree() -> set[str]:
    """The paths (relative to attnmt/) that the first code block of docs/architecture.md lists."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```\nattnmt/\n(.*?)```", text, re.S).group(1)
    paths, stack = set(), []
    for line in block.splitlines():
        depth = (len(line) - len(line.lstrip())) // 2 - 1
        name = line.split()[0]
        stack[depth:] = [name.rstrip("/")]
        if name.endswith(".py"):
            paths.add("/".join(stack))
    return paths


def package_modules() -> set[str]:
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
            if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts}


def test_the_architecture_tree_lists_every_module_and_nothing_else():
    documented, actual = documented_tree(), package_modules()
    assert not actual - documented, f"modules missing from docs/architecture.md's tree: {sorted(actual - documented)}"
    assert not documented - actual, f"docs/architecture.md lists missing modules: {sorted(documented - actual)}"


def test_modules_and_functions_stay_small():
    too_long = []
    for path in sorted(p for folder in SMALL for p in folder.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        if source.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{name}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, (f"over {MAX_MODULE_LINES} lines per module or {MAX_FUNCTION_LINES} per function: "
                          + "; ".join(too_long))


def test_the_tests_mirror_the_package():
    """tests/<package>/ holds the tests of attnmt/<package>/; tests/repository/ those of the repository as a whole
    (docs, layout, recipes, packaging), tests/slow/ the slow end-to-end runs; no test module lies at tests/."""
    tests = ROOT / "tests"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages <= {"repository", "slow"}, sorted(folders - packages - {"repository", "slow"})
    assert not sorted(tests.glob("test_*.py")), "tests at tests/: move each into the folder of what it tests"
