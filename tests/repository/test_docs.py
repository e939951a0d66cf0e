"""The repository's text speaks to its users: links resolve, no work-log narrative, a short README.

- every relative link (and image) in README.md, README.zh-CN.md, the other top-level Markdown files,
  benchmarks/README.md, docs/*.md and recipes/*/README.md points to a file that exists, and a ``#anchor``
  into a Markdown file to one of its headings;
- no "session", no issue reference ("issue 17", "#17", "the issue's"), no "commit 1a2b3c4" and no
  run dates in that text, in the comments and docstrings of attnmt/, in benchmarks/*.py (comments
  and strings), in the shell scripts, or in configs/, studies/ and recipes/;
- every file of the package or the tests that the text names in backticks (`attnmt/.../x.py`, `tests/.../x.py`)
  exists: the tests mirror the package's layers, and a module that moved must not leave its old path in the docs;
- README.md is at most 200 lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MARKDOWN = sorted(
    [p for p in ROOT.glob("*.md")] + [ROOT / "benchmarks" / "README.md"] + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "recipes").rglob("*.md"))
)
MARKDOWN = [p for p in MARKDOWN if p.exists()]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""<(?:img|a)\b[^>]*?\b(?:src|href)=["']([^"']+)["']""", re.IGNORECASE)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")

# What the repository's text must not say: work-log words and references to the tracker.
FORBIDDEN = [
    (re.compile(r"\bsessions?\b", re.IGNORECASE), "the word 'session'"),
    (re.compile(r"\bissues?\b", re.IGNORECASE), "a reference to an issue"),
    (re.compile(r"\b(?:PR|pull request)\s*#?\d+", re.IGNORECASE), "a reference to a pull request"),
    (re.compile(r"(?<![\w&#/])#\d{1,4}(?![\w-])"), "an issue number (#N)"),
]
MARKDOWN_ONLY = [
    (re.compile(r"\bcommit\s+[0-9a-f]{7,40}\b", re.IGNORECASE), "a commit hash"),
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), "the date of a run"),
]


def _outside_code_fences(text: str):
    """(line number, line) of the lines of a Markdown text that are not inside ``` fences."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def _without_inline_code(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (letters of any script kept), spaces -> '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for _, line in _outside_code_fences(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def links(path: Path):
    """(line number, target) of every link and image in a Markdown file, outside code."""
    for number, line in _outside_code_fences(path.read_text(encoding="utf-8")):
        line = _without_inline_code(line)
        for pattern in (LINK, HTML_LINK):
            for m in pattern.finditer(line):
                yield number, m.group(1)


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)  # http:, https:, mailto:...


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for number, target in links(path):
        if not _relative(target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not destination.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{where} (no heading with the anchor #{anchor})")
    assert not broken, "broken links:\n" + "\n".join(broken)


# A file of the package or the tests named in inline code; a capitalised part is a placeholder (attnmt/models/NAME.py).
NAMED_PATH = re.compile(r"`((?:attnmt|tests)/[\w/.-]*?[a-z0-9_]\.(?:py|json|js|css|html|yaml))`")


def named_paths(path: Path) -> list[tuple[int, str]]:
    """(line number, path) of each package or test file the Markdown file names in inline code."""
    return [(number, named) for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for named in NAMED_PATH.findall(line) if not re.search(r"/[A-Z]+[./]", named)]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_file_exists(path):
    missing = [f"{path.relative_to(ROOT)}:{number}: {named}" for number, named in named_paths(path)
               if not (ROOT / named).exists()]
    assert not missing, "files named that do not exist (moved?):\n" + "\n".join(missing)


def test_the_named_file_check_sees_paths_and_skips_placeholders(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("`attnmt/decode/search.py`, `tests/test_gone.py` and `attnmt/models/NAME.py`; "
                   "`attnmt/viz/demo_curve.json`\n", encoding="utf-8")
    assert named_paths(doc) == [(1, "attnmt/decode/search.py"), (1, "tests/test_gone.py"),
                                (1, "attnmt/viz/demo_curve.json")]


def test_the_link_check_sees_links_anchors_and_breakage(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## The model interface (what search.py relies on)\n\n## 我爱你：中文\n",
                                   encoding="utf-8")
    doc = tmp_path / "b.md"
    doc.write_text("[ok](a.md#the-model-interface-what-searchpy-relies-on) ![img](a.md) [zh](a.md#我爱你中文)\n"
                   "```\n[in code](missing.md)\n```\n[web](https://example.org) `[code](nope.md)`\n",
                   encoding="utf-8")
    assert [t for _, t in links(doc)] == ["a.md#the-model-interface-what-searchpy-relies-on", "a.md",
                                          "a.md#我爱你中文", "https://example.org"]
    assert anchors(tmp_path / "a.md") == {"top", "the-model-interface-what-searchpy-relies-on", "我爱你中文"}


def _python_text(path: Path, strings: bool):
    """(line number, text) of the comments and docstrings of a Python file (and all its strings if asked)."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT or (strings and token.type == tokenize.STRING):
            yield token.start[0], token.string
    if not strings:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    yield body[0].lineno, body[0].value.value


def _texts():
    """(file, line number, text) of everything the narrative check reads."""
    for path in MARKDOWN:
        for number, line in _outside_code_fences(path.read_text(encoding="utf-8")):
            yield path, number, line, True
    for path in sorted((ROOT / "attnmt").rglob("*.py")):
        for number, text in _python_text(path, strings=False):
            yield path, number, text, False
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for number, text in _python_text(path, strings=True):
            yield path, number, text, False
    for path in sorted((ROOT / "benchmarks").glob("*.sh")) + [ROOT / ".ci" / "run", ROOT / "scripts" / "setup.sh"]:
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                yield path, number, line, False
    for folder in ("configs", "studies", "recipes"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".yaml", ".yml", ".md", ".txt") and path.is_file():
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    yield path, number, line, False


def test_no_work_log_narrative_in_the_repository_text():
    found = []
    for path, number, text, markdown in _texts():
        checks = FORBIDDEN + (MARKDOWN_ONLY if markdown else [])
        for pattern, what in checks:
            for m in pattern.finditer(text):
                found.append(f"{path.relative_to(ROOT)}:{number}: {what}: {m.group(0)!r}")
    assert not found, "text that speaks of how the work went rather than to users:\n" + "\n".join(found)


@pytest.mark.parametrize("text, caught", [
    ("as measured in the session before", True), ("Sessions", True), ("past the issue's 38", True),
    ("see #17", True), ("(issue 5, goal 4)", True), ("tatoeba.org #538123 (CM)", False),
    ("name#2 if taken", False), ("## The decoder", False), ("an HTTP client", False),
])
def test_the_narrative_check_catches_what_it_should(text, caught):
    assert any(p.search(text) for p, _ in FORBIDDEN) == caught


def test_the_markdown_checks_catch_hashes_and_dates():
    assert all(p.search(s) for (p, _), s in zip(MARKDOWN_ONLY, ["its JSON is in commit 908d040",
                                                                "decoding.json, 2026-11-30"]))


def test_readme_is_at_most_200_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move detail into docs/ and link it"
