"""Vocabulary: tokens <-> ids, with the four special tokens at fixed ids 0-3."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from attnmt.config.special import (  # the ids live in the leaf
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    SPECIALS,
    UNK,
    UNK_ID,
)

# The raw reader (no control-character cleaning): same file:line errors as the corpus readers.
from attnmt.data.corpus import _read_raw_lines
from attnmt.errors import UserError

__all__ = [
    "BOS",
    "BOS_ID",
    "EOS",
    "EOS_ID",
    "PAD",
    "PAD_ID",
    "SPECIALS",
    "UNK",
    "UNK_ID",
    "Vocabulary",
]


class Vocabulary:
    """An ordered list of distinct tokens; a token's id is its position.

    Ids 0-3 are always ``<pad> <unk> <s> </s>``. A text token spelled like a special (an HTML
    ``<s>`` in the data, say) encodes to UNK, never to the special itself, so data cannot inject
    BOS/EOS/PAD into a sequence; only ``<unk>`` keeps its id, which is the same thing.
    """

    def __init__(self, tokens: Sequence[str]) -> None:
        """``tokens`` in id order, starting with :data:`SPECIALS`."""
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {' '.join(SPECIALS)}")
        self._itos: list[str] = list(tokens)
        self._stoi: dict[str, int] = {}
        for i, token in enumerate(self._itos):
            if not token or "\n" in token or "\r" in token:
                raise ValueError(f"token {i} ({token!r}) is empty or contains a line break")
            if token in self._stoi:
                raise ValueError(f"token {token!r} appears twice (ids {self._stoi[token]} and {i})")
            self._stoi[token] = i

    @classmethod
    def build(
        cls, token_lists: Iterable[Sequence[str]], max_size: int | None = None, min_freq: int = 1
    ) -> Vocabulary:
        """Count tokens and keep those seen at least ``min_freq`` times, most frequent first.

        ``max_size`` caps the number of regular tokens (the four specials come on top, so
        ``len(vocab) <= max_size + 4``). Ties in frequency are broken alphabetically (by code
        point), so the same data always gives the same ids. Specials in the data are not counted.
        """
        if min_freq < 1:
            raise UserError(f"min_freq must be at least 1 (got {min_freq}); fix the vocabulary settings")
        if max_size is not None and max_size < 0:
            raise UserError(f"max_size must be 0 or more (got {max_size}); fix the vocabulary settings")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        for special in SPECIALS:
            counts.pop(special, None)
        counts.pop("", None)  # never a real token; would corrupt the one-token-a-line file
        kept = [(t, c) for t, c in counts.items() if c >= min_freq]
        regular = [t for t, _ in sorted(kept, key=lambda tc: (-tc[1], tc[0]))]
        if max_size is not None:
            regular = regular[:max_size]
        return cls(list(SPECIALS) + regular)

    @property
    def tokens(self) -> tuple[str, ...]:
        """All tokens in id order (specials first)."""
        return tuple(self._itos)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; unknown tokens and spelled-out specials map to UNK_ID."""
        get = self._stoi.get
        # ids below 4 are specials; a text token must not become PAD/BOS/EOS (see class docstring)
        return [i if (i := get(t, UNK_ID)) >= len(SPECIALS) else UNK_ID for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids`` (ints or 0-d tensors); an id outside the vocabulary is an IndexError."""
        itos = self._itos
        out: list[str] = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(itos):
                raise IndexError(f"id {i} is outside the vocabulary of {len(itos)} tokens")
            out.append(itos[i])
        return out

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self._itos == other._itos

    def __hash__(self) -> int:
        return hash(tuple(self._itos))

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens)"

    def save(self, path: str | Path) -> None:
        """Write one token per line (UTF-8, id order, specials first), creating the parent folder."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(t + "\n" for t in self._itos), encoding="utf-8", newline="\n")

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        """Read a file written by :meth:`save`; UserError if missing or not a vocabulary."""
        path = Path(path)
        lines = _read_raw_lines(path)  # raw: a token may legitimately hold a control character
        if tuple(lines[: len(SPECIALS)]) != SPECIALS:
            raise UserError(
                f"{path}:1 is not an attnmt vocabulary (the first lines must be "
                f"{' '.join(SPECIALS)}); rebuild the vocabulary"
            )
        seen: dict[str, int] = {}
        for number, token in enumerate(lines, start=1):
            if not token:
                raise UserError(f"{path}:{number} is an empty token; rebuild the vocabulary")
            if token in seen:
                raise UserError(
                    f"{path}:{number} repeats the token {token!r} of line {seen[token]}; "
                    "rebuild the vocabulary"
                )
            seen[token] = number
        return cls(lines)
