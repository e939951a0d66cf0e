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
"""

from __future__ import annotations

from torch import Tensor

from attnmt.errors import UserError
from attnmt.special import EOS_ID

__all__ = ["check_constraints", "min_lengths", "apply_constraints"]


def check_constraints(min_len: int, no_repeat_ngram: int, max_len_cap: int | None = None) -> None:
    """A UserError for a negative value, or a minimum length that the length cap makes impossible."""
    if min_len < 0:
        raise UserError(f"min_len={min_len} is out of range; allowed: 0 (no minimum) or more output tokens")
    if no_repeat_ngram < 0:
        raise UserError(f"no_repeat_ngram={no_repeat_ngram} is out of range; allowed: 0 (off) or an n-gram size "
                        ">= 1")
    if max_len_cap is not None and min_len > max_len_cap:
        raise UserError(f"min_len={min_len} is above the maximum output length {max_len_cap} (max_len_cap); "
                        "lower the minimum or raise the maximum")


def min_lengths(max_lens: Tensor, min_len: int) -> Tensor | None:
    """Per sentence the fewest tokens before EOS: ``min_len``, or the sentence's maximum if that is lower.

    None when there is no minimum (nothing to apply).
    """
    if min_len <= 0:
        return None
    return max_lens.clamp(max=min_len)


def apply_constraints(log_probs: Tensor, tokens: Tensor, min_lens: Tensor | None, no_repeat_ngram: int) -> Tensor:
    """Ban, in place, EOS on rows shorter than their minimum and the tokens that would repeat an n-gram.

    ``log_probs`` [N, V]; ``tokens`` [N, t] the tokens generated so far (no BOS); ``min_lens`` [N] per row
    (or None). Returns ``log_probs``.
    """
    step = tokens.size(1)
    if min_lens is not None:
        short = min_lens > step
        if bool(short.any()):
            log_probs[short, EOS_ID] = float("-inf")
    n = no_repeat_ngram
    if n > 0 and step >= n:
        windows = tokens.unfold(1, n, 1)  # [N, step - n + 1, n]: every n-gram the hypothesis holds
        prefix = tokens[:, step - n + 1:]  # [N, n - 1]: what the next token would complete
        match = (windows[:, :, : n - 1] == prefix.unsqueeze(1)).all(dim=2)  # [N, windows]
        rows, at = match.nonzero(as_tuple=True)
        if rows.numel():
            log_probs[rows, windows[rows, at, n - 1]] = float("-inf")
    return log_probs

