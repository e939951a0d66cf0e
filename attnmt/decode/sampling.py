"""Sampling: each next token drawn from the model's distribution, for back-translation and diversity.

The distribution of a step is the model's, with the search's bans (PAD/BOS, the forced EOS at the
maximum length, :mod:`attnmt.decode.constraints`), then

* divided by ``temperature`` (softmax(log p / T): T < 1 sharpens, T > 1 flattens);
* cut to the ``top_k`` most likely tokens (Fan, Lewis & Dauphin 2018; fairseq ``--sampling-topk``,
  OpenNMT-py ``-random_sampling_topk``; tokens tied with the k-th are kept, as in Hugging Face);
* cut to the nucleus: the fewest most likely tokens whose probability reaches ``top_p`` (Holtzman et al.
  2020; fairseq ``--sampling-topp``, Hugging Face ``top_p``), computed after the temperature and top-k.

A sample's ``log_prob`` and ``score`` are those of the model (before temperature and cuts), as in
fairseq, so that samples rank like any other hypothesis. Sampling runs batched like greedy search
(:func:`attnmt.decode.search.left_to_right`): ``n`` samples of a sentence are ``n`` rows of the batch. Draws
come from one ``torch.Generator`` per call, so a seed fixes the samples of a batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from attnmt.decode.search import Hypothesis, left_to_right
from attnmt.errors import UserError

__all__ = ["MAX_SEED", "MAX_TEMPERATURE", "MIN_TEMPERATURE", "Sampling", "filter_logits", "sample_search"]

# Batch b of a translate call draws from a generator seeded with (seed << 20) + b, which must fit
# torch's 64-bit seed; a temperature outside this range turns the scores into inf or NaN in float32
# (0.01 is already all but greedy, 100 all but uniform).
MAX_SEED = 2**44 - 1
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn: temperature, then top-k (0: all), then top-p (1.0: all); ``seed`` fixes them."""

    top_k: int = 0
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 0:
            raise UserError(f"top_k={self.top_k} is out of range; allowed: 0 (no cut) or more tokens")
        if not 0.0 < self.top_p <= 1.0:
            raise UserError(f"top_p={self.top_p} is out of range; allowed: > 0 and <= 1 (a share of the "
                            "probability mass)")
        if not (math.isfinite(self.temperature) and MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE):
            raise UserError(f"temperature={self.temperature} is out of range; allowed: {MIN_TEMPERATURE} to "
                            f"{MAX_TEMPERATURE:g} (1 = the model's distribution)")
        if not 0 <= self.seed <= MAX_SEED:
            raise UserError(f"seed={self.seed} is out of range; allowed: 0 to {MAX_SEED} (2**44 - 1)")


def filter_logits(log_probs: Tensor, sampling: Sampling) -> Tensor:
    """Logits [N, V] to sample from: tempered, then cut to top-k and top-p (cut tokens: -inf)."""
    logits = log_probs / sampling.temperature
    vocab = logits.size(1)
    if 0 < sampling.top_k < vocab:
        kth = logits.topk(sampling.top_k, dim=1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p < 1.0:
        ordered, order = logits.sort(dim=1, descending=True)
        probs = torch.softmax(ordered, dim=1)
        before = probs.cumsum(dim=1) - probs  # the mass of the more likely tokens
        cut = before >= sampling.top_p
        cut[:, 0] = False  # the most likely token always stays
        logits = logits.scatter(1, order, ordered.masked_fill(cut, float("-inf")))
    return logits


def _sampler(sampling: Sampling, generator: torch.Generator):
    def choose(log_probs: Tensor) -> tuple[Tensor, Tensor]:
        logits = filter_logits(log_probs, sampling)
        alive = torch.isfinite(logits).any(dim=1)  # a row with no allowed token ends without a result
        probs = torch.softmax(logits.masked_fill(~alive.unsqueeze(1), 0.0), dim=1)
        tok = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        return log_probs.gather(1, tok.unsqueeze(1)).squeeze(1).masked_fill(~alive, float("-inf")), tok

    return choose


@torch.inference_mode()
def sample_search(model, src: Tensor, src_len: Tensor, n_samples: int = 1, sampling: Sampling = Sampling(),
                  generator: torch.Generator | None = None, max_len_a: float = 1.5, max_len_b: float = 10,
                  max_len_cap: int | None = None, length_penalty: float = 1.0, min_len: int = 0,
                  no_repeat_ngram: int = 0, prefix: Sequence[Sequence[int]] | None = None) -> list[list[Hypothesis]]:
    """Per sentence ``n_samples`` sampled hypotheses, best score first (equal scores: in finishing order).

    ``generator`` (default: a new one seeded with ``sampling.seed``, on the source's device) supplies the
    random draws; the other arguments are those of :func:`attnmt.decode.search.greedy_search`.
    """
    if n_samples < 1:
        raise UserError(f"n_samples={n_samples} is out of range; allowed: 1 or more samples per sentence")
    if generator is None:
        generator = torch.Generator(device=src.device).manual_seed(sampling.seed)
    results = left_to_right(model, src, src_len, _sampler(sampling, generator), n_samples, max_len_a, max_len_b,
                            max_len_cap, length_penalty, min_len, no_repeat_ngram, prefix)
    return [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in results]
