"""Word links as text and as sets: gold files, Pharaoh links, and symmetrization.

Conventions
-----------
* In memory a link is a 0-based ``(i, j)`` pair: source word ``i``, target word ``j``. Words are
  the whitespace-separated tokens of the text, the unit that gold alignments count in.
* Written output is Pharaoh ``i-j`` text, **0-based by default**, as fast_align and eflomal write
  it; ``one_based=True`` gives the 1-based numbering of the NAACL 2003 gold files.
* Gold files are read **1-based by default**: ``i-j`` is a sure link, ``ipj`` a possible one
  (the NAACL 2003 format). Every sure link is also possible (S is a subset of P).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError

Link = tuple[int, int]  # 0-based (source word, target word)


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence pair's gold links: ``sure`` and ``possible`` (sure links are possible too)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            raise ValueError("every sure link must also be possible (S is a subset of P)")


def parse_gold(line: str, one_based: bool = True) -> GoldAlignment:
    """Parse ``"1-1 2p3 ..."``: ``i-j`` sure links and ``ipj`` possible links.

    Raises ValueError naming the bad item; a link listed as both sure and possible is sure.
    """
    offset = 1 if one_based else 0
    sure: set[Link] = set()
    possible: set[Link] = set()
    for item in line.split():
        sep = "-" if "-" in item else "p"
        i, found, j = item.partition(sep)
        if not found or not i.isdigit() or not j.isdigit():
            raise ValueError(f"not an i-j (sure) or ipj (possible) link: {item!r}")
        link = (int(i) - offset, int(j) - offset)
        if min(link) < 0:
            raise ValueError(f"link {item!r} has a position below {offset}; are the links {offset}-based?")
        (sure if sep == "-" else possible).add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible | sure))


def read_gold(path: str | Path, one_based: bool = True) -> list[GoldAlignment]:
    """Read a gold alignment file, one sentence pair a line; UserError with file:line on a bad link."""
    from attnmt.data.corpus import read_lines

    gold = []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            gold.append(parse_gold(line, one_based))
        except ValueError as e:
            raise UserError(f"{path}:{number}: {e}; gold links are 1-based 'i-j' (sure) or 'ipj' (possible)") from None
    return gold


def format_links(links: Iterable[Link], one_based: bool = False) -> str:
    """``"i-j i-j ..."`` sorted by source then target position; 0-based unless ``one_based``."""
    offset = 1 if one_based else 0
    return " ".join(f"{i + offset}-{j + offset}" for i, j in sorted(links))


def parse_links(line: str, one_based: bool = False) -> set[Link]:
    """Parse one line of Pharaoh links ``"0-0 1-2 ..."`` (0-based unless ``one_based``) into 0-based
    ``(source, target)`` positions; ValueError naming the bad item."""
    offset = 1 if one_based else 0
    links: set[Link] = set()
    for item in line.split():
        i, found, j = item.partition("-")
        if not found or not i.isdigit() or not j.isdigit():
            raise ValueError(f"not a Pharaoh link i-j ({offset}-based source-target word positions): {item!r}")
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


# ---------------------------------------------------------------- symmetrization

SYMMETRIZATIONS: tuple[str, ...] = ("intersection", "union", "grow-diag-final-and")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """Koehn, Och & Marcu (2003) / Moses' ``grow-diag-final-and``.

    Start from the intersection. grow-diag: while some link of the union neighbours (horizontally,
    vertically or diagonally) a link already taken and one of its two words is still unaligned,
    take it. final-and: then take each remaining link of ``forward``, then of ``reverse``, whose
    two words are both still unaligned. Links are visited in sorted order, so the result is unique.
    """
    union = forward | reverse
    alignment = set(forward & reverse)
    src_aligned = {i for i, _ in alignment}
    tgt_aligned = {j for _, j in alignment}

    def take(link: Link) -> None:
        alignment.add(link)
        src_aligned.add(link[0])
        tgt_aligned.add(link[1])

    grew = True
    while grew:
        grew = False
        for i, j in sorted(alignment):
            for di, dj in _NEIGHBOURS:
                new = (i + di, j + dj)
                if new in union and new not in alignment and (new[0] not in src_aligned or new[1] not in tgt_aligned):
                    take(new)
                    grew = True
    for direction in (forward, reverse):
        for link in sorted(direction):
            if link[0] not in src_aligned and link[1] not in tgt_aligned:
                take(link)
    return alignment


def symmetrize(forward: Sequence[Iterable[Link]], reverse: Sequence[Iterable[Link]], how: str) -> list[set[Link]]:
    """Combine the links of two directions, sentence by sentence; both in (source, target) order.

    ``how``: ``intersection`` (precise), ``union`` (complete) or ``grow-diag-final-and`` (the
    intersection grown towards the union; the usual choice of statistical pipelines).
    """
    if len(forward) != len(reverse):
        raise ValueError(f"{len(forward)} forward but {len(reverse)} reverse alignments")
    if how not in SYMMETRIZATIONS:
        raise ValueError(f"unknown symmetrization {how!r}; use one of {', '.join(SYMMETRIZATIONS)}")
    result = []
    for f, r in zip(forward, reverse):
        f, r = set(f), set(r)
        result.append(f & r if how == "intersection" else f | r if how == "union" else grow_diag_final_and(f, r))
    return result
