"""Ensembles: several trained models decoding as one (``attnmt translate --model A --model B``).

At every step each member scores the next token from its own encoder output and decoder state, and
the ensemble's log probs are the members' weighted mean (a product of the members' distributions, as
Marian's ensembles score; OpenNMT-py and fairseq ensemble the same way at every step):
``log p(y) = sum_m w_m log p_m(y)`` with the weights normalised to sum to 1. The attention reported
is the mean of the members' attention (members without attention, seq2seq, are left out; None if
none has any); word alignments (``translate --alignments``) are read from the mean of the members'
teacher-forced attention, as ``attnmt align --model A --model B`` does. :class:`Ensemble` implements
the model interface (docs/architecture.md), so greedy search, beam search and sampling run on it
unchanged; an ensemble of one is that model, exactly.

The members must share the source and the target vocabulary (the same token ids); any mix of
seq2seq, rnnsearch and transformer models that do is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torch import Tensor, nn

from attnmt.config.load_options import LoadOptions
from attnmt.data.vocab import Vocabulary
from attnmt.errors import UserError

__all__ = ["Ensemble", "load_ensemble"]


class Ensemble(nn.Module):
    """The model interface over several members whose step log probs are averaged (weights sum to 1)."""

    def __init__(self, members: Sequence[nn.Module], weights: Sequence[float] | None = None):
        super().__init__()
        if not members:
            raise UserError("ensemble: no models; pass --model DIR at least once")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members):
            raise UserError(f"ensemble: {len(weights)} weights for {len(members)} models; give one weight per model")
        if any(not w > 0 for w in weights):
            raise UserError(f"ensemble: the weights must be positive, got {weights}")
        self.members = nn.ModuleList(members)
        self.weights = [w / sum(weights) for w in weights]  # one model: exactly 1.0

    def encode(self, src: Tensor, src_len: Tensor) -> dict:
        encoded = [m.encode(src, src_len) for m in self.members]
        return {"members": encoded, "mask": encoded[0]["mask"]}

    def init_state(self, enc: dict) -> dict:
        return {"members": [m.init_state(e) for m, e in zip(self.members, enc["members"])]}

    def decode_step(self, y_prev: Tensor, state: dict, enc: dict):
        outputs = [m.decode_step(y_prev, s, e) for m, s, e in zip(self.members, state["members"], enc["members"])]
        log_probs = sum(w * lp.float() for w, (lp, _, _) in zip(self.weights, outputs))
        alphas = [alpha.float() for _, _, alpha in outputs if alpha is not None]
        alpha = None if not alphas else alphas[0] if len(alphas) == 1 else sum(alphas) / len(alphas)
        return log_probs, {"members": [s for _, s, _ in outputs]}, alpha

    def forward(self, *args, **kwargs):
        raise UserError("ensemble: teacher-forced scoring needs one model; pass a single --model")


def _first_difference(a: Vocabulary, b: Vocabulary) -> str:
    for i, (x, y) in enumerate(zip(a.tokens, b.tokens)):
        if x != y:
            return f"id {i} is {x!r} in one and {y!r} in the other"
    return f"one has {len(a)} tokens and the other {len(b)}"


def check_vocabularies(translators: Sequence, names: Sequence[str]) -> None:
    """A UserError naming the first member whose source or target vocabulary differs from the first's."""
    first = translators[0]
    for translator, name in zip(translators[1:], names[1:]):
        for side in ("tgt", "src"):
            mine, theirs = getattr(first, side).vocab, getattr(translator, side).vocab
            if mine != theirs:
                what = "target" if side == "tgt" else "source"
                raise UserError(f"ensemble: {name}'s {what} vocabulary differs from {names[0]}'s "
                                f"({_first_difference(mine, theirs)}); an ensemble needs models that share both "
                                "vocabularies (trained with the same data and data.* settings)")


def load_ensemble(model_dirs: Sequence[str | Path], options: LoadOptions | None = None,
                  weights: Sequence[float] | None = None, **settings):
    """A Translator over the ensemble of the model folders (the first one's tokenizers and decode settings), each
    loaded as ``options`` with ``settings`` on top say (:class:`attnmt.config.load_options.LoadOptions`)."""
    from attnmt.decode.translator import Translator, load

    if weights is not None and len(weights) != len(model_dirs):
        raise UserError(f"ensemble: {len(weights)} weights for {len(model_dirs)} models; give one weight per model")
    options = LoadOptions.of(options, **settings)
    if options.compile_step:
        raise UserError("--compile decodes one model; drop it for an ensemble")
    if options.inter_threads != 1 or options.threads is not None:
        raise UserError("--threads and --inter-threads set an exported model's threads; an ensemble decodes with "
                        "--workers")
    translators = [load(d, options) for d in model_dirs]
    check_vocabularies(translators, [str(d) for d in model_dirs])
    first = translators[0]
    ensemble = Ensemble([t.model for t in translators], weights).eval()
    translator = Translator(ensemble, first.src, first.tgt, first.config, limits=first.limits)
    translator.model_dir = first.model_dir
    translator.split_source, translator.split_target = first.split_source, first.split_target
    translator.members = translators  # word alignments read each member's attention (attnmt.align.align_translations)
    return translator
