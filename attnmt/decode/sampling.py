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

The settings are decoding options (``sample``, ``top_k``, ``top_p``, ``temperature``, ``seed`` of
:class:`attnmt.config.decoding.DecodeOptions`, with their defaults and ranges); :class:`Sampling` holds the four
of them alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnmt.config.decoding import DecodeOptions
from attnmt.decode.search import Hypothesis, left_to_right
from attnmt.errors import UserError

__all__ = ["Sampling", "filter_logits", "sample_search"]


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn: temperature, then top-k (0: all), then top-p (1.0: all); ``seed`` fixes them. The
    sampling options of :class:`attnmt.config.decoding.DecodeOptions` alone: their defaults, and their ranges
    checked there."""

    top_k: int = DecodeOptions.top_k
    top_p: float = DecodeOptions.top_p
    temperature: float = DecodeOptions.temperature
    seed: int = DecodeOptions.seed

    def __post_init__(self) -> None:
        DecodeOptions(sample=True, beam=1, **dataclasses.asdict(self))

    @classmethod
    def of(cls, options: DecodeOptions) -> "Sampling":
        """The sampling settings of ``options``."""
        return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)})


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
                  generator: torch.Generator | None = None, **settings: Any) -> list[list[Hypothesis]]:
    """Per sentence ``n_samples`` sampled hypotheses, best score first (equal scores: in finishing order).

    ``generator`` (default: a new one seeded with ``sampling.seed``, on the source's device) supplies the
    random draws; the ``settings`` are the keyword arguments of :func:`attnmt.decode.search.greedy_search`
    (length limits, length penalty, prefix, constraints).
    """
    if n_samples < 1:
        raise UserError(f"n_samples={n_samples} is out of range; allowed: 1 or more samples per sentence")
    if generator is None:
        generator = torch.Generator(device=src.device).manual_seed(sampling.seed)
    results = left_to_right(model, src, src_len, _sampler(sampling, generator), n_samples, **settings)
    return [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in results]
