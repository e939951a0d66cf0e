"""Length and repetition control, applied to a step's log probs by every search (greedy, beam, sampling).

* ``min_len``: no EOS before a hypothesis holds ``min_len`` tokens (fairseq ``--min-len``, OpenNMT-py
  ``-min_length``, Hugging Face ``min_new_tokens``). A sentence whose maximum output length
  (``max_len_a * src_len + max_len_b``, capped) is shorter ends at that maximum: the maximum wins.
* ``no_repeat_ngram`` N: no n-gram of N generated tokens occurs twice in a hypothesis; a token that
  would complete an N-gram the hypothesis already holds gets log prob -inf (fairseq
  ``--no-repeat-ngram-size``, OpenNMT-py ``-block_ngram_repeat``, Hugging Face ``no_repeat_ngram_size``;
  Paulus et al. 2018 block repeated trigrams). N = 1 forbids repeating any token. EOS is never banned
  by it; BOS is not counted.

Both work on the hypotheses' tokens so far (``tokens`` [N, t], row r the hypothesis whose next token
``log_probs[r]`` scores), so one function serves every search.

* a forced ``prefix`` (token ids per sentence): the first ``len(prefix)`` steps may only emit the prefix's
  tokens, each with its own log prob, so the output starts with the prefix and goes on with the best
  continuation the search finds (the explorer's "what if"). The length limits then count the tokens after
  the prefix: the maximum output length and ``min_len`` are moved on by its length (:func:`length_limits`).

The settings are decoding options (:class:`attnmt.config.decoding.DecodeOptions`, which checks their ranges); a
search takes them as keyword arguments (``beam_search(..., min_len=3)``, :func:`constraints_of` of the options) and
hands them here as the options they make (:func:`constraint_options`). A new constraint is a field there, its name in
``CONSTRAINTS`` and its rule in :func:`apply_constraints`: the searches pass it on unread.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from attnmt.config.decoding import DecodeOptions
from attnmt.config.special import BOS_ID, EOS_ID, PAD_ID
from attnmt.errors import UserError

__all__ = ["CONSTRAINTS", "constraints_of", "constraint_options", "min_lengths", "apply_constraints", "prefix_table",
           "length_limits", "apply_prefix", "check_prefix"]

CONSTRAINTS = ("min_len", "no_repeat_ngram")  # the decoding options this module applies


def constraints_of(options: DecodeOptions) -> dict[str, Any]:
    """The constraints that ``options`` sets, as a search takes them (``greedy_search(..., **constraints_of(o))``)."""
    return {name: getattr(options, name) for name in CONSTRAINTS}


def constraint_options(constraints: Mapping[str, Any]) -> DecodeOptions:
    """A search's keyword constraints as the decoding options they make, checked (a value out of range is a
    UserError naming it); a name that is no constraint is a TypeError."""
    for name in constraints:
        if name not in CONSTRAINTS:
            raise TypeError(f"search: {name!r} is not a constraint; the constraints: {', '.join(CONSTRAINTS)}")
    return DecodeOptions(**constraints)


def min_lengths(max_lens: Tensor, min_len: int) -> Tensor | None:
    """Per sentence the fewest tokens before EOS: ``min_len``, or the sentence's maximum if that is lower.

    None when there is no minimum (nothing to apply).
    """
    if min_len <= 0:
        return None
    return max_lens.clamp(max=min_len)


def apply_constraints(log_probs: Tensor, tokens: Tensor, min_lens: Tensor | None, options: DecodeOptions) -> Tensor:
    """Ban, in place, EOS on rows shorter than their minimum and the tokens that would repeat an n-gram.

    ``log_probs`` [N, V]; ``tokens`` [N, t] the tokens generated so far (no BOS); ``min_lens`` [N] per row
    (or None; :func:`length_limits`); ``options``: the constraints. Returns ``log_probs``.
    """
    step = tokens.size(1)
    if min_lens is not None:
        short = min_lens > step
        if bool(short.any()):
            log_probs[short, EOS_ID] = float("-inf")
    n = options.no_repeat_ngram
    if n > 0 and step >= n:
        windows = tokens.unfold(1, n, 1)  # [N, step - n + 1, n]: every n-gram the hypothesis holds
        prefix = tokens[:, step - n + 1:]  # [N, n - 1]: what the next token would complete
        match = (windows[:, :, : n - 1] == prefix.unsqueeze(1)).all(dim=2)  # [N, windows]
        rows, at = match.nonzero(as_tuple=True)
        if rows.numel():
            log_probs[rows, windows[rows, at, n - 1]] = float("-inf")
    return log_probs


def prefix_table(prefix: Sequence[Sequence[int]] | None, batch_size: int, device: torch.device) -> Tensor | None:
    """The forced prefixes (``prefix[i]``: sentence i's token ids) as a [B, P] tensor, -1 after each sentence's
    own; None when no sentence has one. A ValueError for a list of the wrong length or a PAD, BOS or EOS in it."""
    if prefix is None:
        return None
    if len(prefix) != batch_size:
        raise ValueError(f"search: {len(prefix)} prefixes for a batch of {batch_size}")
    longest = max((len(p) for p in prefix), default=0)
    if longest == 0:
        return None
    table = torch.full((batch_size, longest), -1, dtype=torch.long)
    for i, tokens in enumerate(prefix):
        table[i, : len(tokens)] = torch.tensor(list(tokens), dtype=torch.long)
    if bool(((table == PAD_ID) | (table == BOS_ID) | (table == EOS_ID)).any()):
        raise ValueError("search: a forced prefix holds PAD, BOS or EOS; give the tokens of an unfinished output")
    return table.to(device)


def length_limits(max_lens: Sequence[int], options: DecodeOptions, prefix: Tensor | None,
                  device: torch.device) -> tuple[list[int], Tensor, Tensor | None]:
    """Per sentence the most output tokens (a list and a tensor) and the fewest before EOS (None: no minimum,
    ``options.min_len``), both moved on by the length of the sentence's forced prefix (``prefix`` from
    :func:`prefix_table`)."""
    lengths = [0] * len(max_lens) if prefix is None else (prefix >= 0).sum(1).tolist()
    longest = [m + n for m, n in zip(max_lens, lengths)]
    fewest = min_lengths(torch.tensor(list(max_lens), device=device), options.min_len)
    if fewest is not None and prefix is not None:
        fewest = fewest + torch.tensor(lengths, device=device)
    return longest, torch.tensor(longest, device=device), fewest


def apply_prefix(log_probs: Tensor, wanted: Tensor) -> Tensor:
    """Leave, in place, only the forced token (with its log prob) on the rows that have one at this step.

    ``log_probs`` [N, V]; ``wanted`` [N] each row's forced token at this step (-1: none). Returns ``log_probs``.
    The caller passes it only while some prefix is still running (``step < prefix.size(1)``)."""
    rows = (wanted >= 0).nonzero().flatten()
    if rows.numel():
        tokens = wanted[rows]
        kept = log_probs[rows, tokens].clone()
        log_probs[rows] = float("-inf")
        log_probs[rows, tokens] = kept
    return log_probs


def check_prefix(prefix: Sequence[int], options: DecodeOptions) -> None:
    """A UserError for a forced prefix that repeats an n-gram ``options.no_repeat_ngram`` forbids (no output could
    keep it)."""
    n = options.no_repeat_ngram
    seen = set()
    for start in range(len(prefix) - n + 1 if n > 0 else 0):
        gram = tuple(prefix[start:start + n])
        if gram in seen:
            raise UserError(f"the forced prefix repeats the {n}-gram at token {start + 1}, which no_repeat_ngram={n} "
                            "forbids; shorten the prefix or set no_repeat_ngram to 0")
        seen.add(gram)
