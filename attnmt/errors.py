"""User-facing errors: one clear line (what, where, what to do); the CLI exits with code 2.

`closest` finds the name a user most likely meant (a config key, a registered name, a model folder)
for the "did you mean" of those lines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class UserError(Exception):
    """A problem with the user's input, files or configuration, not a bug in attnmt."""


class Stopped(Exception):
    """A command that a signal ended early, having said where it stopped: the CLI exits with `code` (128 + the
    signal's number: 130 for SIGINT, 143 for SIGTERM), so that a script does not go on as if it had finished."""

    def __init__(self, code: int):
        super().__init__(f"stopped by a signal (exit code {code})")
        self.code = code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (attnmt.cli.main's handler): outputs are cleaned up as for Ctrl-C."""


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance with adjacent transpositions counted as one edit (``trian`` -> ``train``: 1)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            row.append(cost)
        previous2, previous = previous, row
    return previous[-1]


def closest(word: str, options: Iterable[str], aliases: Mapping[str, str] | None = None) -> str | None:
    """The option a user most likely meant by ``word``, or None when none is close.

    An alias (the name another toolkit uses) wins. Otherwise the fewest edits win; among equally
    distant options, one whose ``_``-separated parts all occur in ``word`` (``lr`` for ``lr_rate``)
    comes before one that only shares letters (``lr_patience``), then the one closest in length.
    An option counts as close within a third of the word's length in edits, or when its parts occur in it.
    """
    options = [str(o) for o in options]
    if aliases and aliases.get(word) in options:
        return aliases[word]
    parts = set(word.lower().replace("-", "_").split("_"))

    def within(option: str) -> bool:
        return set(option.lower().replace("-", "_").split("_")) <= parts

    ranked = sorted((edit_distance(word, o), not within(o), abs(len(o) - len(word)), o) for o in options)
    for distance, outside, _, option in ranked:
        if distance <= max(1, len(word) // 3) or not outside:
            return option
    return None
