"""Word links as sets: gold files and symmetrization (Pharaoh links as text: :mod:`attnmt.data.pharaoh`).

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

# Pharaoh links as text (reading, writing) live with the data; re-exported here beside the gold files.
from attnmt.data.pharaoh import Link, format_links, is_position, parse_links, read_links  # noqa: F401
from attnmt.errors import UserError


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
        if not found or not is_position(i) or not is_position(j):
            raise ValueError(f"not an i-j (sure) or ipj (possible) link of ASCII digits: {item!r}")
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
