"""The served models and the decoding of one batch: Translator output -> API response objects.

Everything here runs in the batcher's worker thread (decoding, per-head attention, turning arrays
into JSON-ready lists), so the event loop only routes requests.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple

import numpy as np
import torch

from attnmt.align import align_translations
from attnmt.config.decoding import DecodeOptions
from attnmt.config.load_options import LoadOptions
from attnmt.decode.forced import forced_batches
from attnmt.decode.held_out import example_sources, references
from attnmt.decode.steps import explore
from attnmt.decode.translator import Translation as TranslatorOutput
from attnmt.decode.translator import Translator
from attnmt.errors import UserError
from attnmt.serve.schema import Hypothesis, ModelInfo, Translation

__all__ = ["BatchKey", "ExploreItem", "Item", "ServedModel", "decode_batch", "load_models", "parse_model_spec",
           "sentence_costs", "served_model"]

# Attention weights are sent rounded: 4 decimals are more than a heatmap can show and keep the JSON small.
ATTENTION_DECIMALS = 4
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class ServedModel:
    """A loaded model under its public name."""

    name: str
    translator: Translator
    info: ModelInfo
    references: Mapping[str, str] = field(default_factory=dict)  # held-out source -> its reference translation


class BatchKey(NamedTuple):
    """Requests are batched only with requests that decode the same way.

    ``options`` holds the values decoding uses (a request's omitted option is the model's default), so a
    request that names the default is batched with one that leaves it out. A sampling request carries
    its own number in ``job``: it is decoded on its own, so its samples depend on the request alone
    (the seed, the texts), never on which other requests arrived with it.
    """

    model: str
    options: DecodeOptions
    job: int = 0
    explore: bool = False  # explore records (ExploreItem), each request decoded on its own (its own job)


class Item(NamedTuple):
    """One sentence of a request, with what the request wants back."""

    text: str
    attention: bool
    heads: bool
    alignment: str | None = None  # the extraction method, when the request wants word links


class ExploreItem(NamedTuple):
    """The sentence of an explore request, with its forced prefix, how many next pieces to list, the source
    pieces its attention is pinned to and how many neighbours to list per step."""

    text: str
    prefix: str | None = None
    prefix_tokens: tuple[str, ...] | None = None
    top_k: int = 10
    pin: tuple[int, ...] | None = None
    neighbours: int = 0


def parse_model_spec(spec: str) -> tuple[str, Path]:
    """``NAME=DIR`` -> (NAME, DIR); a plain ``DIR`` is named after its folder."""
    name, sep, directory = spec.partition("=")
    if sep and MODEL_NAME.match(name):
        return name, Path(directory)
    path = Path(spec)
    name = path.resolve().name
    if not MODEL_NAME.match(name):
        raise UserError(f"serve: cannot name the model folder {spec!r} after itself; pass --model NAME={spec} "
                        "with a NAME of letters, digits, '.', '_' or '-'")
    return name, path


def load_models(specs: list[str], options: LoadOptions | None = None, **settings) -> dict[str, Translator]:
    """Load every ``--model`` spec (see :func:`parse_model_spec`) as ``options`` with ``settings`` on top say
    (:class:`attnmt.config.load_options.LoadOptions`); names must be unique."""
    from attnmt.decode.translator import load

    if not specs:
        raise UserError("serve: no model; pass --model DIR (or --model NAME=DIR), repeatable")
    models: dict[str, Translator] = {}
    for spec in specs:
        name, directory = parse_model_spec(spec)
        if name in models:
            raise UserError(f"serve: two models are named {name!r}; name them with --model NAME=DIR")
        models[name] = load(directory, LoadOptions.of(options, **settings))
    return models


def served_model(name: str, translator: Translator, max_beam: int) -> ServedModel:
    """Describe a translator for GET /models."""
    if not MODEL_NAME.match(name):
        raise ValueError(f"model name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    config = translator.config
    heads = translator.has_heads
    info = ModelInfo(
        name=name, src_lang=config.data.src_lang, tgt_lang=config.data.tgt_lang, model_type=config.model.type,
        parameters=translator.parameter_count(),
        default_beam=min(config.decode.beam, max_beam),
        has_attention=translator.has_attention,
        layers=config.model.dec_layers if heads else None,
        heads=config.model.n_heads if heads else None,
        examples=example_sources(translator),
    )
    return ServedModel(name, translator, info, references(translator))


def sentence_costs(lengths: list[int], beam: int, n_best: int) -> list[int]:
    """The queue's estimate of the decoding work of each sentence of ``lengths`` source tokens:
    ``beam x n_best x (source tokens + 1)``.

    The decoder runs about one step per output token (roughly as many as the source's, and one for
    </s>) over ``beam`` hypotheses (1 when sampling), and an n-best list keeps the search going until
    ``n_best`` hypotheses have finished. The product errs high for long n-best lists of beam search,
    which is the safe side for a bound.
    """
    return [beam * n_best * (length + 1) for length in lengths]


def decode_batch(models: Mapping[str, ServedModel], key: BatchKey,
                 items: list[Item] | list[ExploreItem]) -> list[Translation] | list[dict]:
    """Translate a batch of sentences that share the decoding settings of ``key`` (the batcher's run_batch);
    for an explore key, the explore record of each ExploreItem (:func:`attnmt.decode.steps.explore`)."""
    translator = models[key.model].translator
    if key.explore:
        known = models[key.model].references
        return [explore(translator, item.text, beam=key.options.beam, prefix=item.prefix, top_k=item.top_k,
                        name=key.model, prefix_tokens=None if item.prefix_tokens is None else list(item.prefix_tokens),
                        reference=known.get(item.text.strip()), pin=item.pin,
                        neighbours=item.neighbours)
                for item in items]
    outputs = translator.translate([item.text for item in items], options=key.options)
    wants_heads = [i for i, item in enumerate(items) if item.heads and outputs[i].src_tokens]
    heads = dict(zip(wants_heads, head_attention(translator, [outputs[i] for i in wants_heads])))
    for method in {item.alignment for item in items if item.alignment}:
        align_translations(translator, [out for out, item in zip(outputs, items) if item.alignment == method], method)
    return [_to_api(out, item, heads.get(i)) for i, (out, item) in enumerate(zip(outputs, items))]


@torch.inference_mode()
def head_attention(translator: Translator, outputs: list[TranslatorOutput]) -> list[np.ndarray]:
    """Each output's cross-attention per decoder layer and head, [L, H, len(tgt)+1, len(src)].

    Search keeps only the head-averaged last layer, so the found translations are re-read with
    teacher forcing (one batched forward pass); in eval mode this reproduces the search's
    attention exactly, since the decoder is causal.
    """
    if not outputs:
        return []
    src_ids = [translator.src.vocab.encode(out.src_tokens) for out in outputs]
    tgt_ids = [translator.tgt.vocab.encode(out.tgt_tokens) for out in outputs]
    heads: list[np.ndarray] = [None] * len(outputs)  # type: ignore[list-item]
    for forced in forced_batches(translator.model, src_ids, tgt_ids, translator.device, heads=True):
        weights = forced.attention.float().cpu().numpy()  # [L, H, B, T, S]
        for row, b in enumerate(forced.index):
            heads[b] = weights[:, :, row, :len(tgt_ids[b]) + 1, :len(src_ids[b])]
    return heads


def _to_api(out: TranslatorOutput, item: Item, heads: np.ndarray | None) -> Translation:
    """A translation as the response sends it: each field of the translator's (in its JSON: rounded attention,
    finite scores or null, sorted links, only what the request asked for) and the server's own."""
    sent = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    sent.update(
        source=item.text, score=_finite(out.score),
        attention=_rounded(out.attention) if item.attention and out.attention is not None else None,
        attention_heads=_rounded(heads) if heads is not None else None,
        alignment=sorted(out.alignment) if item.alignment and out.alignment is not None else None,
        n_best=[_hypothesis(option) for option in out.n_best or [out]],
    )
    return Translation(**sent)


def _hypothesis(out: TranslatorOutput) -> Hypothesis:
    """An entry of the n-best list: the fields Hypothesis has, the score finite or null."""
    sent = {name: getattr(out, name) for name in Hypothesis.model_fields}
    return Hypothesis(**{**sent, "score": _finite(out.score)})


def _rounded(weights: np.ndarray) -> list:
    """Nested lists of floats, rounded in float64 (float32 would print as 0.23989999294281006)."""
    return np.round(weights.astype(np.float64), ATTENTION_DECIMALS).tolist()


def _finite(x: float) -> float | None:
    """JSON has no infinity or NaN; a score that is not finite is sent as null."""
    return x if math.isfinite(x) else None
