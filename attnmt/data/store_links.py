"""Guided alignment's word links in the token store: one entry per stored pair, beside its ids.

`attnmt prepare` (attnmt/data/store_prepare.py) writes them when data.transforms has a ``links`` entry::

    links.ij       int32 [n, 2]: every stored pair's links (source word, target word), concatenated
    links.off      int64 [pairs + 1]: pair i's links are links.ij[off[i]:off[i + 1]]
    links.guided   uint8 [pairs]: 1 when pair i carries guidance; 0 for text that no links line gives
                   (added text), and for a pair whose source or target equals a sentence of an
                   ``align_text`` transform (the text a model is scored on never carries guidance)

A corpus pair has its line's links; a pair the transforms joined has its parts' links, each
shifted by the words before it (its origin, attnmt/data/transforms.py). The batcher reads a pair's
links with its ids (`StoreLinks[i]`, attnmt/train/guidance.py), so guidance holds nothing in memory that
grows with the corpus.
"""

from __future__ import annotations

import os
import re
import struct
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from attnmt.data.chunks import iter_corpora
from attnmt.data.corpus import read_parallel
from attnmt.data.pharaoh import Link, parse_links
from attnmt.data.transforms import AlignText, links_transform, transforms_of
from attnmt.errors import UserError

_OFFSETS = struct.Struct("=qq")


class LineLinks:
    """The links file as arrays: line k's links are ij[off[k]:off[k + 1]]; `guided[k]` is 0 for a line
    whose pair equals an align_text sentence."""

    def __init__(self, off: np.ndarray, ij: np.ndarray, guided: np.ndarray):
        self.off, self.ij, self.guided = off, ij, guided

    @classmethod
    def read(cls, path: str, lines: int) -> LineLinks:
        """Read a file of 0-based Pharaoh links, one line per corpus line (checked: one line per pair),
        parsed a block of lines at a time by numpy (a line that is not ``i-j ...`` is parse_links' error)."""
        from attnmt.data.corpus import iter_lines

        if not Path(path).is_file():
            raise UserError(f"links file not found: {path}; give a file of Pharaoh links (i-j, 0-based), one line "
                            "per sentence pair")
        counts: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        block: list[str] = []
        n = 0
        for n, line in enumerate(iter_lines(path), start=1):
            if not _PHARAOH.fullmatch(line):
                try:
                    parse_links(line)
                except ValueError as e:
                    raise UserError(f"{path}:{n}: {e}") from None
            block.append(line)
            if len(block) == BLOCK_LINES:
                _parse_block(block, counts, parts)
                block = []
        _parse_block(block, counts, parts)
        if n != lines:
            raise UserError(f"{path} has {n} lines but the training corpus has {lines}; the links file must be "
                            "line-aligned with the corpus")
        per_line = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
        ij = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int32)
        return cls(np.concatenate([[0], np.cumsum(per_line)]).astype(np.int64), ij, np.ones(lines, dtype=np.uint8))

    def check_text(self, path: str, pairs: Iterator[tuple[str, str]], gold: tuple[set[str], set[str]]) -> int:
        """Check every line's links against its pair's words (a link past a sentence's end is an error,
        never silently dropped) and unguide the pairs equal to an align_text sentence; how many were."""
        sources, targets = gold
        words = array("q")
        for k, (src, tgt) in enumerate(pairs):
            words.append(len(src.split()))
            words.append(len(tgt.split()))
            if sources and (same_text(src) in sources or same_text(tgt) in targets):
                self.guided[k] = 0
        n_words = np.frombuffer(words, dtype=np.int64).reshape(-1, 2)
        line_of = np.repeat(np.arange(len(self.off) - 1), np.diff(self.off))
        past = np.flatnonzero((self.ij >= n_words[line_of]).any(axis=1))
        if len(past):
            k, (i, j) = int(line_of[past[0]]), self.ij[past[0]]
            n_src, n_tgt = n_words[k]
            raise UserError(f"{path}:{k + 1}: link {i}-{j} points past the sentence pair ({n_src} source, "
                            f"{n_tgt} target words); the links must be 0-based and belong to this corpus")
        return int((self.guided == 0).sum())


BLOCK_LINES = 20_000  # lines of a links file parsed together
_PHARAOH = re.compile(r"(?:[0-9]+-[0-9]+(?: +[0-9]+-[0-9]+)*)? *")


def _parse_block(block: list[str], counts: list, parts: list) -> None:
    """Append the links of a block of checked lines: each line's count, and its (i, j) pairs in order."""
    if not block:
        return
    counts.append(np.fromiter((line.count("-") for line in block), dtype=np.int64, count=len(block)))
    numbers = " ".join(block).replace("-", " ").split()
    parts.append(np.array(numbers, dtype=np.int32).reshape(-1, 2))


def same_text(text: str) -> str:
    """A sentence as align_text sentences are matched: case and spacing ignored."""
    return " ".join(text.split()).lower()


def write_store_links(folder: Path, table: LineLinks, corpus_lines: np.ndarray, added: list) -> dict:
    """Write the links of the stored pairs: the corpus pairs (their corpus lines, in store order), then
    the pairs the transforms added (their origins, None for none). Returns the counts meta.json keeps."""
    counts = np.diff(table.off)
    guided = table.guided[corpus_lines]
    n_links = counts[corpus_lines] * guided
    starts = table.off[:-1][corpus_lines]
    total = int(n_links.sum())
    take = np.repeat(starts - (np.cumsum(n_links) - n_links), n_links) + np.arange(total)
    extra_ij, extra_n, extra_guided = [], [], []
    for origin in added:
        ij = _joined(origin, table)
        extra_guided.append(ij is not None)
        extra_n.append(0 if ij is None else len(ij))
        if ij is not None:
            extra_ij.append(ij)
    all_n = np.concatenate([n_links, np.asarray(extra_n, dtype=np.int64)])
    with open(folder / "links.ij", "wb") as f:
        f.write(np.ascontiguousarray(table.ij[take], dtype=np.int32).tobytes())
        for ij in extra_ij:
            f.write(ij.astype(np.int32).tobytes())
    np.concatenate([[0], np.cumsum(all_n)]).astype(np.int64).tofile(folder / "links.off")
    flags = np.concatenate([guided, np.asarray(extra_guided, dtype=np.uint8)]).astype(np.uint8)
    flags.tofile(folder / "links.guided")
    return {"guided": int(flags.sum()), "unguided": int(len(flags) - flags.sum()), "links": int(all_n.sum())}


def _joined(origin, table: LineLinks) -> np.ndarray | None:
    """The links of a pair of ``origin``: each part's line's links, shifted to where it starts (None when
    the pair has no origin or a part's line carries no guidance)."""
    if origin is None or any(not table.guided[line] for line, _, _ in origin):
        return None
    parts = [table.ij[table.off[line]:table.off[line + 1]] + np.array([s, t], dtype=np.int32)
             for line, s, t in origin]
    return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int32)


def store_corpus_links(cfg, corpora: list[dict], counts: list[int], folder: Path, added: list) -> dict | None:
    """The links transform's links of every pair of the store being prepared in `folder` (its dropped.npy
    written): the corpus pairs', then those of the pairs the transforms added (`added`: their origins).
    None without a links transform; else the counts meta.json keeps."""
    transform = links_transform(cfg)
    if transform is None:
        return None
    table = LineLinks.read(transform.path, sum(counts))
    sources, targets = set(), set()
    for gold in (t for t in transforms_of(cfg) if isinstance(t, AlignText)):
        for src, tgt in read_parallel(gold.src, gold.tgt):
            sources.add(same_text(src))
            targets.add(same_text(tgt))
    text = iter_corpora(corpora, counts, (cfg.tsv_src_column, cfg.tsv_tgt_column))
    unguided = table.check_text(transform.path, text, (sources, targets))
    dropped = np.load(folder / "dropped.npy")
    corpus_lines = np.delete(np.arange(sum(counts), dtype=np.int64), dropped)
    return {"path": transform.path, **write_store_links(folder, table, corpus_lines, added),
            "unguided_equal_to_align_text": unguided}


class StoreLinks:
    """The stored pairs' links, read with `os.pread` one pair at a time (nothing of them stays mapped)."""

    def __init__(self, folder: Path, pairs: int):
        self.folder, self.n = Path(folder), pairs
        for name, size in (("links.off", 8 * (pairs + 1)), ("links.guided", pairs)):
            path = self.folder / name
            if not path.is_file() or path.stat().st_size != size:
                raise UserError(f"{path} is missing or truncated (expected {size} bytes); prepare the store again: "
                                "attnmt prepare CONFIG")
        self._off = open(self.folder / "links.off", "rb", buffering=0)
        self._guided = open(self.folder / "links.guided", "rb", buffering=0)
        self._ij = open(self.folder / "links.ij", "rb", buffering=0)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> set[Link] | None:
        i = int(i)
        if not 0 <= i < self.n:
            raise IndexError(i)
        if os.pread(self._guided.fileno(), 1, i) != b"\x01":
            return None
        a, b = _OFFSETS.unpack(os.pread(self._off.fileno(), 16, 8 * i))
        flat = memoryview(os.pread(self._ij.fileno(), (b - a) * 8, a * 8)).cast("i").tolist()
        return set(zip(flat[0::2], flat[1::2]))
