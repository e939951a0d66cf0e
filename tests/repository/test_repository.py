"""The repository keeps what its documents use, and its documents stay readable.

- every JSON in benchmarks/results/ and every figure in docs/img/ and recipes/ is cited by a document
  (README, docs/, recipes/*/README.md, benchmarks/README.md), and every result or figure a document
  cites exists;
- no document is longer than about 400 lines (README.md keeps its own 200-line limit in test_docs.py),
  and no table cell is longer than 300 characters;
- the library and the recipes' configs never point at the development machine's shared data folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DOCUMENTS = sorted(
    [p for p in ROOT.glob("*.md")] + [ROOT / "benchmarks" / "README.md"] + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "recipes").rglob("*.md"))
)
DOCUMENTS = [p for p in DOCUMENTS if p.exists()]
GENERATED = {ROOT / "docs" / "bad_inputs.md", ROOT / "CHANGELOG.md"}  # a table written by a test; a history
MAX_LINES = 400
MAX_CELL = 300
FIGURE_SUFFIXES = {".png", ".svg", ".gif", ".jpg", ".mp4", ".html"}

RESULT = re.compile(r"benchmarks/results/[\w.\-/]+?\.json")
BARE = re.compile(r"`([\w.\-]+\.json)`")  # a result named in code by its file name alone, as in benchmarks/README.md
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_SRC = re.compile(r"""<(?:img|a|video|source)\b[^>]*?\b(?:src|href)=["']([^"']+)["']""", re.IGNORECASE)
FENCE = re.compile(r"^\s*(```|~~~)")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def cited(documents=DOCUMENTS, root: Path = ROOT) -> set[Path]:
    """Every file a document names: a result JSON by its path from the root, or any file by a relative link."""
    found: set[Path] = set()
    for doc in documents:
        text = doc.read_text(encoding="utf-8")
        for m in RESULT.finditer(text):
            found.add((root / m.group(0)).resolve())
        for m in BARE.finditer(text):
            found.add((root / "benchmarks" / "results" / m.group(1)).resolve())
        for pattern in (LINK, HTML_SRC):
            for m in pattern.finditer(text):
                target = m.group(1).partition("#")[0]
                if target and not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    found.add((doc.parent / target).resolve())
    return found


def kept(root: Path = ROOT) -> list[Path]:
    """The results and figures the repository keeps: they are there for a document to show."""
    files = sorted((root / "benchmarks" / "results").glob("*.json")) if (root / "benchmarks" / "results").is_dir() \
        else []
    for folder in (root / "docs" / "img", root / "recipes"):
        if folder.is_dir():
            files += sorted(p for p in folder.rglob("*") if p.suffix in FIGURE_SUFFIXES and p.is_file())
    return files


def test_every_result_and_figure_is_cited_by_a_document():
    names = cited()
    orphans = [_rel(p) for p in kept() if p.resolve() not in names]
    assert not orphans, ("results or figures no document cites (cite them where their numbers are shown, "
                         "or delete them: git keeps them):\n" + "\n".join(orphans))


def test_every_cited_result_exists():
    missing = []
    for doc in DOCUMENTS:
        for m in RESULT.finditer(doc.read_text(encoding="utf-8")):
            if not (ROOT / m.group(0)).is_file():
                missing.append(f"{_rel(doc)}: {m.group(0)}")
    assert not missing, "documents cite results that are not in the repository:\n" + "\n".join(missing)


def test_the_citation_check_sees_paths_and_links_and_catches_orphans(tmp_path):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "img").mkdir(parents=True)
    for name in ("benchmarks/results/a.json", "benchmarks/results/b.json", "docs/img/x.png", "docs/img/y.png"):
        (tmp_path / name).write_text("{}")
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("Measured by `python -m benchmarks.demo` (benchmarks/results/a.json).\n\n![x](img/x.png)\n")
    names = cited([doc], tmp_path)
    orphans = [p.name for p in kept(tmp_path) if p.resolve() not in names]
    assert orphans == ["b.json", "y.png"]
    doc.write_text("Its JSON: `b.json`.\n")
    assert [p.name for p in kept(tmp_path) if p.resolve() not in cited([doc], tmp_path)] == ["a.json", "x.png", "y.png"]


def table_rows(text: str):
    """(line number, line, its cells) of every Markdown table row outside code fences."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if inside or not line.lstrip().startswith("|"):
            continue
        yield number, line, [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _table_cells(text: str):
    """(line number, cell) of every Markdown table cell outside code fences."""
    for number, _, cells in table_rows(text):
        for cell in cells:
            yield number, cell


@pytest.mark.parametrize("path", [p for p in DOCUMENTS if p not in GENERATED], ids=_rel)
def test_documents_are_read_in_one_sitting(path):
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= MAX_LINES, f"{_rel(path)} has {lines} lines (at most {MAX_LINES}): split it or say less"
    long = [f"{_rel(path)}:{n}: {len(c)} characters: {c[:80]}..." for n, c in _table_cells(text) if len(c) > MAX_CELL]
    assert not long, f"table cells over {MAX_CELL} characters:\n" + "\n".join(long)


def test_the_cell_check_reads_cells_outside_code():
    text = "| a | b |\n|---|---|\n| " + "x" * 301 + " | `a\\|b` |\n```\n| " + "y" * 400 + " |\n```\n"
    cells = [c for _, c in _table_cells(text)]
    assert "x" * 301 in cells and not any("y" in c for c in cells)


SHARED = re.compile(r"(?:\.\./)+shared/|/work/shared|shared/data/")


def _shared_paths(paths):
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SHARED.search(line):
                yield f"{_rel(path)}:{number}: {line.strip()}"


def test_no_development_machine_path_in_the_library_or_the_recipes():
    files = sorted((ROOT / "attnmt").rglob("*.py"))
    for folder in ("recipes", "configs", "studies"):
        if (ROOT / folder).is_dir():
            files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    found = list(_shared_paths(files))
    assert not found, ("the library and the recipes must not default to this machine's shared data; make the "
                       "location an argument or a config value that tests pass:\n" + "\n".join(found))
