"""Word links as text: Pharaoh ``i-j`` lines, one per sentence pair, line-aligned with a corpus.

In memory a link is a 0-based ``(i, j)`` pair: source word ``i``, target word ``j``, where words
are the whitespace-separated tokens of the text. Written and read **0-based by default**, as
fast_align and eflomal write them; ``one_based=True`` gives the numbering of the NAACL 2003 gold
files. The data layer writes them (the synthetic corpus's ``.align`` files) and reads them
(guided alignment's links); gold files and symmetrization are in :mod:`attnmt.align.link_sets`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from attnmt.errors import UserError

Link = tuple[int, int]  # 0-based (source word, target word)


def format_links(links: Iterable[Link], one_based: bool = False) -> str:
    """``"i-j i-j ..."`` sorted by source then target position; 0-based unless ``one_based``."""
    offset = 1 if one_based else 0
    return " ".join(f"{i + offset}-{j + offset}" for i, j in sorted(links))


def is_position(text: str) -> bool:
    """Whether ``text`` is a word position as links write it: ASCII digits only (``str.isdigit`` also takes
    Arabic-Indic, superscript and other digits, which no aligner writes)."""
    return text.isascii() and text.isdigit()


def parse_links(line: str, one_based: bool = False) -> set[Link]:
    """Parse one line of Pharaoh links ``"0-0 1-2 ..."`` (0-based unless ``one_based``) into 0-based
    ``(source, target)`` positions; ValueError naming the bad item."""
    offset = 1 if one_based else 0
    links: set[Link] = set()
    for item in line.split():
        i, found, j = item.partition("-")
        if not found or not is_position(i) or not is_position(j):
            raise ValueError(f"not a Pharaoh link i-j ({offset}-based source-target word positions in ASCII digits): "
                             f"{item!r}")
        links.add((int(i) - offset, int(j) - offset))
    return links


def read_links(path: str | Path, pairs: Sequence[tuple[str, str]] | None = None) -> list[set[Link]]:
    """Read a file of 0-based Pharaoh links, one sentence pair a line (empty line: no links).

    With ``pairs`` (the line-aligned sentence pairs), the line count must match and every link must
    point at a word of its pair: a link past a sentence's end is an error, never silently dropped.
    Raises UserError naming ``file:line``.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"links file not found: {path}; give a file of Pharaoh links (i-j, 0-based), one line per "
                        "sentence pair")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text; give a file of Pharaoh links (i-j, 0-based)") from None
    if pairs is not None and len(lines) != len(pairs):
        raise UserError(f"{path} has {len(lines)} lines but the corpus has {len(pairs)} sentence pairs; the links "
                        "file must be line-aligned with the corpus")
    result = []
    for number, line in enumerate(lines, start=1):
        try:
            links = parse_links(line)
        except ValueError as e:
            raise UserError(f"{path}:{number}: {e}") from None
        if pairs is not None and links:
            n_src, n_tgt = (len(side.split()) for side in pairs[number - 1])
            i, j = max(links, key=lambda link: (link[0] >= n_src or link[1] >= n_tgt, link))
            if i >= n_src or j >= n_tgt:
                raise UserError(f"{path}:{number}: link {i}-{j} points past the sentence pair ({n_src} source, "
                                f"{n_tgt} target words); the links must be 0-based and belong to this corpus")
        result.append(links)
    return result
