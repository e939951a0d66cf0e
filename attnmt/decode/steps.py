"""One sentence's translation, step by step: the explore record that the explorer page draws (docs/explore.md).

:func:`explore` runs the beam search with its tree recorded (:class:`attnmt.decode.beam_tree.BeamTree`),
optionally with a forced target prefix, then reads the found output once more with teacher forcing,
which gives at every decoder step exactly what the search saw (the decoder is causal and runs in eval
mode): the model's top-k next pieces and their probabilities, the attention row over the source (every
decoder layer and head for a Transformer), and, for an RNN attention model, the parts of its equation
``e_ij``, ``alpha_ij = softmax_j(e_ij)`` and ``c_i = sum_j alpha_ij h_j``. Source and output are given
both as pieces (what the model reads) and as whitespace words (the default display), with the attention
columns summed per source word.

The record is plain JSON data (dicts, lists, rounded floats); its keys are documented in docs/explore.md
and stay stable: keys are only ever added.
"""

from __future__ import annotations

import math
import re
from contextlib import nullcontext
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from attnmt.config.special import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attnmt.data.batching import collate
from attnmt.data.pretokenize import segmented_sides
from attnmt.decode.beam_tree import BeamTree
from attnmt.decode.constraints import check_prefix
from attnmt.decode.evaluate import bleu_tokenize_for, sentence_scores
from attnmt.decode.forced import eval_mode, force, forced_batches
from attnmt.decode.inputs import InputRefused, SentenceTooLong, gated_tokens
from attnmt.decode.neighbours import nearest
from attnmt.decode.pinning import can_pin, check_pin, pinned
from attnmt.decode.search import beam_search
from attnmt.decode.translation import search_arguments
from attnmt.errors import UserError
from attnmt.models.attention import Attention
from attnmt.runtime.threads import threads_for

__all__ = ["FORMAT", "MAX_TOP_K", "explore", "model_info", "pin_choices", "pin_outcomes", "prefix_ids", "what_if",
           "words_of"]

FORMAT = "attnmt-explore/1"
MAX_TOP_K = 50
COMPONENTS = 6  # components of h_j and c_i shown with the equation
DECIMALS = 4  # probabilities and attention
SCORE_DECIMALS = 3  # scores, log probs, e_ij and norms
SELF_DECIMALS = 3  # self-attention (every layer and head of the encoder and decoder: the record's largest part)
# Scripts written without spaces between words (CJK ideographs, kana): there, each piece counts as a word
WORD_START = "\u2581"  # sentencepiece's mark of a piece that starts a word
_UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def prefix_ids(translator, prefix: str | None = None, prefix_tokens: Sequence[str] | None = None) -> list[int]:
    """The target ids of a forced prefix given as text (tokenized by the model) or as pieces (each one of the
    model's target vocabulary); [] for none. A UserError for both, for a piece the model does not know, or for a
    prefix over the translator's limits (the input gate, :mod:`attnmt.decode.inputs`)."""
    if prefix is not None and prefix_tokens is not None:
        raise UserError("give the forced prefix once: as text (prefix) or as pieces (prefix_tokens), not both")
    vocab = translator.tgt.vocab
    limits = translator.limits.replace(sentences=None, request_tokens=None)
    if prefix_tokens is None:
        try:
            return vocab.encode(gated_tokens([prefix], translator.tgt.tokens, limits)[0]) if prefix else []
        except InputRefused as e:
            raise e.named("the prefix") from None
    most = limits.sentence_tokens
    if most is not None and len(prefix_tokens) > most:
        raise SentenceTooLong(0, len(prefix_tokens), most, "the prefix")
    specials = {vocab.decode([i])[0] for i in (PAD_ID, BOS_ID, EOS_ID)}
    for i, piece in enumerate(prefix_tokens):
        if piece in specials or piece not in vocab:
            raise UserError(f"prefix_tokens[{i}] {piece!r} is not a piece the model can output; use pieces of its "
                            "output or top-k lists")
    return vocab.encode(prefix_tokens)


def explore(translator, sentence: str, beam: int | None = None, prefix: str | None = None,
            prefix_tokens: Sequence[str] | None = None, top_k: int = 10, name: str | None = None,
            heads: bool = True, tree: bool = True, reference: str | None = None,
            pin: Sequence[int] | None = None, neighbours: int = 0) -> dict[str, Any]:
    """The explore record of ``sentence`` translated by ``translator``
    (an :class:`attnmt.decode.translator.Translator`).

    ``beam``: the beam size (default the model's decode.beam; 1 is greedy search); the other decoding
    settings are the model's decode.*. ``prefix`` (text) or ``prefix_tokens`` (target pieces): force the
    output to start with it; the rest is the best continuation. ``top_k``: next pieces listed per step.
    ``heads=False`` leaves out a Transformer's per-head attention (cross- and self-attention), ``tree=False``
    the search tree. ``reference``: a known translation of the sentence, which the record gives with the
    output's sentence BLEU and chrF against it. ``pin``: source piece positions that share the attention
    equally at the step right after the forced prefix (an RNN's attention, a Transformer's cross-attention in
    every layer and head; :mod:`attnmt.decode.pinning`): the record is the translation written from there.
    ``neighbours``: that many nearest decoder states per step, and encoder states per source piece, of the
    model's training (or held-out) sentences (:mod:`attnmt.decode.neighbours`; 0: none).
    """
    if translator.members is not None:
        raise UserError("explore reads one model's attention; pass one model folder, not an ensemble")
    if not 1 <= top_k <= MAX_TOP_K:
        raise UserError(f"top_k={top_k} is out of range; allowed: 1 to {MAX_TOP_K}")
    options = translator.decode_options(beam=beam)  # as translate() builds and checks them
    src_pieces = translator.read([sentence])[1][0]  # through the input gate, split as the model's training text
    if not src_pieces:
        raise UserError("the sentence is empty; give a sentence to translate")
    forced = prefix_ids(translator, prefix, prefix_tokens)
    check_prefix(forced, options)
    src_ids = translator.src.vocab.encode(src_pieces)
    recorder = BeamTree() if tree else None
    pin = None if pin is None else check_pin(translator.model, pin, len(src_ids))
    hyp, out_ids, (steps, attention, annotations, self_attention) = _decoded(
        translator, src_ids, forced, options, recorder, pin, top_k, heads)
    tgt = translator.tgt
    out_pieces = tgt.vocab.decode(out_ids)
    spaced = segmented_sides(translator.config.data)
    source = _side(translator.src, sentence, src_pieces, spaced[0])
    source.update(annotations=annotations, unknown=[j for j, i in enumerate(src_ids) if i == UNK_ID])
    output = _side(tgt, tgt.detokenize(out_ids), out_pieces, spaced[1])
    output["score"] = _finite(hyp.score if hyp is not None else float("-inf"), SCORE_DECIMALS)
    output["log_prob"] = _finite(hyp.log_prob if hyp is not None else float("-inf"), SCORE_DECIMALS)
    for i, step in enumerate(steps):
        step["output_word"] = output["piece_word"][i] if i < len(out_pieces) else None
        step["forced"] = i < len(forced)
    return {
        "format": FORMAT,
        "model": model_info(translator, name),
        "source": source,
        "output": output,
        "prefix": tgt.vocab.decode(forced),
        "decode": {"beam": options.beam, "length_penalty": options.length_penalty, "top_k": top_k},
        "steps": steps,
        "attention": None if attention is None else _attention(attention, source["piece_word"]),
        "beam": None if recorder is None or hyp is None else _tree(recorder, hyp, options.beam, tgt.vocab),
        "alternatives": None,
        "reference": None if reference is None else _reference(translator, output["text"], reference),
        "self_attention": self_attention,
        "pin": None if pin is None else {"step": len(forced), "source": pin},
        "neighbours": nearest(translator, sentence, src_ids, out_ids, neighbours) if neighbours else None,
    }


def _decoded(translator, src_ids: list[int], forced: list[int], options, recorder: BeamTree | None,
             pin: list[int] | None, top_k: int, heads: bool):
    """The search's best hypothesis (None: none finished), its ids and :func:`_forced_steps` of them, with the
    attention pinned to ``pin`` at the step after the forced prefix in both passes."""
    with eval_mode(translator.model), torch.inference_mode(), threads_for(translator.threads):
        with _pinned(translator, forced, pin):
            hyp = _search(translator, src_ids, [forced], options, recorder)[0]
        out_ids = hyp.tokens if hyp is not None else []
        with _pinned(translator, forced, pin):
            return hyp, out_ids, _forced_steps(translator, src_ids, out_ids, top_k, heads)


def _pinned(translator, forced: list[int], pin: list[int] | None):
    """The attention pinned to ``pin`` at the step after the forced prefix; nothing when ``pin`` is None."""
    return nullcontext() if pin is None else pinned(translator.model, len(forced), [pin])


def _reference(translator, hypothesis: str, reference: str) -> dict[str, Any]:
    tokenize = bleu_tokenize_for(translator.config.data.tgt_lang)
    bleu, chrf = sentence_scores(hypothesis, reference, tokenize)
    return {"text": reference, "bleu": round(bleu, 1), "chrf": round(chrf, 1), "tokenize": tokenize}


def model_info(translator, name: str | None = None) -> dict[str, Any]:
    """What the page says about a model: its name, type, languages and attention layout."""
    config = translator.config
    heads = translator.has_heads
    folder = translator.model_dir
    return {"name": name or (folder.name if folder is not None else config.model.type),
            "type": config.model.type, "has_attention": translator.has_attention,
            "can_pin": can_pin(translator.model),
            "layers": config.model.dec_layers if heads else None, "heads": config.model.n_heads if heads else None,
            "src_lang": config.data.src_lang, "tgt_lang": config.data.tgt_lang}


def what_if(translator, record: dict[str, Any], alternatives: int = 3,
            beam: int | None = None) -> dict[str, list[dict]]:
    """The record's what-if re-decodings, by step (a str): for each step i, the output forced to start with
    the pieces before step i and then, in turn, each of the first ``alternatives`` pieces of the step's top-k
    other than the chosen one and ``</s>`` (one that would repeat an n-gram the decoding options forbid is
    skipped). ``beam``: as :func:`explore`'s.

    All of them are decoded in one batched beam search and one batched teacher-forced pass. The records
    hold what the what-if view draws: ``prefix``, ``output`` (with its ``score``), ``steps`` (``output``,
    ``output_word``, ``forced``) and ``attention`` (``pieces`` and ``words``, ``mean`` only); their source
    and model are the record's."""
    options = translator.decode_options(beam=beam)  # as explore's
    chosen = [step["output"] for step in record["steps"]]
    prefixes = []
    for i, step in enumerate(record["steps"]):
        others = [c["piece"] for c in step["top_k"] if c["piece"] not in (step["output"], "</s>")][:alternatives]
        for piece in others:
            ids = prefix_ids(translator, prefix_tokens=chosen[:i] + [piece])
            try:
                check_prefix(ids, options)
            except UserError:
                continue
            prefixes.append((str(i), ids))
    src_ids = translator.src.vocab.encode(record["source"]["pieces"])
    with eval_mode(translator.model), torch.inference_mode(), threads_for(translator.threads):
        hyps = _search(translator, src_ids, [ids for _, ids in prefixes], options)
        outputs = [hyp.tokens if hyp is not None else [] for hyp in hyps]
        attention = _forced_attention(translator, src_ids, outputs)
    result: dict[str, list[dict]] = {}
    for (step, ids), hyp, weights in zip(prefixes, hyps, attention):
        result.setdefault(step, []).append(_what_if_record(translator, ids, hyp, weights,
                                                           record["source"]["piece_word"]))
    return result


def pin_choices(record: dict[str, Any]) -> list[list[int]]:
    """The pins the Edit attention view offers for a record: each source word's pieces, then each piece of a
    word of several pieces on its own (as source piece positions)."""
    piece_word = record["source"]["piece_word"]
    words = [[k for k, w in enumerate(piece_word) if w == word] for word in range(max(piece_word, default=-1) + 1)]
    return words + [[k] for group in words if len(group) > 1 for k in group]


def pin_outcomes(translator, record: dict[str, Any], beam: int | None = None,
                 max_steps: int | None = None) -> dict[str, list[dict]]:
    """The record's Edit attention outcomes, by step (a str): for each step that writes one of the output's
    first ``max_steps`` pieces (None: all) and each of :func:`pin_choices`, the translation decoded with the
    output's pieces before that step forced and that step's attention pinned to those source pieces, as
    :func:`explore`'s ``pin`` decodes it. The pins of one step share the forced prefix, so they are decoded
    together: one search and one teacher-forced pass per batch of pins (as many copies of the source as the
    options' ``batch_size`` and ``batch_tokens`` allow), each copy pinned to its own pieces. Each outcome holds
    what the view draws: :func:`what_if`'s parts and ``pin`` (``step``, ``source``); their source and model are
    the record's. {} for a model that cannot be pinned."""
    if not can_pin(translator.model):
        return {}
    options = translator.decode_options(beam=beam)  # as explore's
    chosen = record["output"]["pieces"]
    src_ids = translator.src.vocab.encode(record["source"]["pieces"])
    choices = pin_choices(record)
    per_batch = max(1, min(options.batch_size, options.batch_tokens // max(1, len(src_ids))))
    result: dict[str, list[dict]] = {}
    with eval_mode(translator.model), torch.inference_mode(), threads_for(translator.threads):
        for i in range(len(chosen) if max_steps is None else min(max_steps, len(chosen))):
            forced = prefix_ids(translator, prefix_tokens=chosen[:i])
            for start in range(0, len(choices), per_batch):
                pins = choices[start:start + per_batch]
                with pinned(translator.model, i, pins):
                    hyps = _search(translator, src_ids, [forced] * len(pins), options)
                outputs = [hyp.tokens if hyp is not None else [] for hyp in hyps]
                with pinned(translator.model, i, pins):
                    weights = _forced_attention(translator, src_ids, outputs, in_order=True)
                for pin, hyp, attention in zip(pins, hyps, weights):
                    outcome = _what_if_record(translator, forced, hyp, attention, record["source"]["piece_word"])
                    outcome["pin"] = {"step": i, "source": pin}
                    result.setdefault(str(i), []).append(outcome)
    return result


def _what_if_record(translator, forced: list[int], hyp, weights: np.ndarray | None,
                    source_piece_word: list[int]) -> dict[str, Any]:
    tgt = translator.tgt
    out_ids = hyp.tokens if hyp is not None else []
    pieces = tgt.vocab.decode(out_ids)
    output = _side(tgt, tgt.detokenize(out_ids), pieces)
    output["score"] = _finite(hyp.score if hyp is not None else float("-inf"), SCORE_DECIMALS)
    steps = [{"output": pieces[i] if i < len(pieces) else "</s>",
              "output_word": output["piece_word"][i] if i < len(pieces) else None, "forced": i < len(forced)}
             for i in range(len(pieces) + 1)]
    attention = None
    if weights is not None:
        full = _attention(weights, source_piece_word)
        attention = {level: {"mean": full[level]["mean"]} for level in ("pieces", "words")}
    return {"format": FORMAT, "prefix": tgt.vocab.decode(forced), "output": output, "steps": steps,
            "attention": attention}


def _search(translator, src_ids: list[int], prefixes: list[list[int]], options, recorder: BeamTree | None = None):
    """The best hypothesis (None: none finished) of the beam search of one source with ``options`` (a
    DecodeOptions), once per forced prefix, all in one batch."""
    if not prefixes:
        return []
    batch = collate([(src_ids, None)] * len(prefixes), list(range(len(prefixes)))).to(translator.device)
    found = beam_search(translator.model, batch.src, batch.src_len, beam_size=options.beam, stopping=options.stopping,
                        coverage_penalty=options.coverage_penalty, prefix=prefixes, record=recorder,
                        **search_arguments(options))
    return [hyps[0] if hyps else None for hyps in found]


def _forced_attention(translator, src_ids: list[int], outputs: list[list[int]],
                      in_order: bool = False) -> list[np.ndarray | None]:
    """The search's attention [T, S] over one source for each output (a row per output piece and one for
    </s>), from one teacher-forced pass; None for each when the model has no attention. ``in_order``: the
    outputs are one batch in the order given (what :class:`pinned` with a pin per output needs), not batches
    grouped by length."""
    result: list[np.ndarray | None] = [None] * len(outputs)
    for forced in forced_batches(translator.model, [src_ids] * len(outputs), outputs, translator.device,
                                 in_order=in_order):
        if forced.attention is None:
            continue
        weights = forced.attention.float().cpu().numpy()
        for row, k in enumerate(forced.index):
            result[k] = weights[row, :len(outputs[k]) + 1, :len(src_ids)]
    return result


# ------------------------------------------------------------------------------------------ parts


def _side(processor, text: str, pieces: list[str], spaced: bool = False) -> dict[str, Any]:
    """Text, pieces, words and the word of each piece."""
    words, piece_word = words_of(processor.tokenizer, pieces, spaced)
    return {"text": text, "pieces": pieces, "words": words, "piece_word": piece_word}


def words_of(tokenizer, pieces: Sequence[str], spaced: bool = False) -> tuple[list[str], list[int]]:
    """The words that ``pieces`` make, and the word of each piece. Words are the whitespace-separated ones,
    except in a script written without spaces (Chinese, Japanese), where each piece is a word of its own
    unless ``spaced``: text segmented into words (a model trained on it) has its words between spaces."""
    groups: list[list[str]] = []
    last = None
    for piece, word in zip(pieces, tokenizer.word_ids(pieces) if pieces else []):
        mark_alone = word == last and set(groups[-1]) == {WORD_START}  # "▁" + "我": one word, not "" and "我"
        if not mark_alone and (word != last or not spaced and (_UNSPACED.search(piece)
                                                                or _UNSPACED.search(groups[-1][-1]))):
            groups.append([])
        groups[-1].append(piece)
        last = word
    return [tokenizer.decode(group) for group in groups], [w for w, group in enumerate(groups) for _ in group]


def _forced_steps(translator, src_ids: list[int], out_ids: list[int], top_k: int, heads: bool):
    """Per decoder step (one per output piece and one for </s>) the input, output, top-k and equation; the
    attention (pieces) [T, S], or [L, H, T, S] with heads; the annotations h_j of an RNN attention model;
    with heads, a Transformer's self-attention (the record's ``self_attention``, else None)."""
    model, vocab = translator.model, translator.tgt.vocab
    batch = collate([(src_ids, out_ids)], [0]).to(translator.device)
    self_attention = None
    with _EquationProbe(model) as probe:
        if heads and translator.has_self_attention:
            logits, attention, encoder, decoder = model.forward_with_self_attention(batch.src, batch.src_len,
                                                                                    batch.tgt_in)
            self_attention = {"encoder": _rounded(encoder[:, :, 0].float().cpu().numpy(), SELF_DECIMALS),
                              "decoder": _rounded(decoder[:, :, 0].float().cpu().numpy(), SELF_DECIMALS)}
        else:
            logits, attention = force(model, batch, heads=heads and translator.has_heads)
    log_probs = F.log_softmax(logits[0].float(), dim=-1)
    log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")  # never generated (attnmt.decode.search)
    best, best_ids = log_probs.topk(min(top_k, log_probs.size(1)), dim=-1)
    outputs = out_ids + [EOS_ID]
    inputs = vocab.decode(out_ids)
    steps = []
    for i, token in enumerate(outputs):
        steps.append({
            "input": "<s>" if i == 0 else inputs[i - 1],
            "output": "</s>" if token == EOS_ID else inputs[i],
            "p": _round(math.exp(float(log_probs[i, token])), DECIMALS),
            "top_k": [{"piece": "</s>" if j == EOS_ID else vocab.decode([j])[0], "p": _round(math.exp(v), DECIMALS)}
                      for v, j in zip(best[i].tolist(), best_ids[i].tolist())],
            "equation": probe.equation(i),
        })
    if attention is not None:
        attention = attention.float().cpu().numpy()
        attention = attention[:, :, 0] if attention.ndim == 5 else attention[0]
    return steps, attention, probe.annotations(), self_attention


class _EquationProbe:
    """Captures e_ij, c_i and h_j from an RNN attention model's :class:`Attention` during one forced pass."""

    def __init__(self, model) -> None:
        module = getattr(getattr(model, "decoder", None), "attention", None)
        self.module = module if isinstance(module, Attention) else None
        self.e: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.h: np.ndarray | None = None

    def __enter__(self) -> "_EquationProbe":
        if self.module is not None:
            self.handle = self.module.register_forward_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.module is not None:
            self.handle.remove()

    def _hook(self, module: Attention, args: tuple, kwargs: dict, output) -> None:
        query, keys, values = args[0], args[1], args[2]
        projected = args[4] if len(args) > 4 and args[4] is not None else kwargs.get("projected_keys")
        if projected is None:
            projected = module.project_keys(keys)
        e = module.score(query, projected, kwargs.get("coverage")) if module.uses_coverage else \
            module.score(query, projected)
        self.e.append(e[0].float().cpu().numpy())
        self.c.append(output[0][0].float().cpu().numpy())
        if self.h is None:
            self.h = values[0].float().cpu().numpy()

    def equation(self, step: int) -> dict[str, Any] | None:
        if step >= len(self.e):
            return None
        c = self.c[step]
        return {"e": _rounded(self.e[step], SCORE_DECIMALS), "c_norm": _round(float(np.linalg.norm(c)), SCORE_DECIMALS),
                "c_head": _rounded(c[:COMPONENTS], DECIMALS)}

    def annotations(self) -> dict[str, Any] | None:
        if self.h is None:
            return None
        return {"norm": _rounded(np.linalg.norm(self.h, axis=1), SCORE_DECIMALS),
                "head": _rounded(self.h[:, :COMPONENTS], DECIMALS)}


def _attention(weights: np.ndarray, piece_word: list[int]) -> dict[str, Any]:
    """Pieces and words, the search's attention (``mean``) and, from [L, H, T, S] weights, every head's."""
    layered = weights.ndim == 4
    mean = weights[-1].mean(axis=0) if layered else weights
    words = np.zeros((len(piece_word), max(piece_word, default=-1) + 1))
    words[np.arange(len(piece_word)), piece_word] = 1.0  # sums the columns of each word's pieces
    return {
        "pieces": {"mean": _rounded(mean, DECIMALS), "layers": _rounded(weights, DECIMALS) if layered else None},
        "words": {"mean": _rounded(mean @ words, DECIMALS),
                  "layers": _rounded(weights @ words, DECIMALS) if layered else None},
    }


def _tree(recorder: BeamTree, hyp, beam: int, vocab) -> dict[str, Any]:
    def piece(token: int) -> str:
        return "<s>" if token == BOS_ID else "</s>" if token == EOS_ID else vocab.decode([token])[0]

    nodes = []
    for node in recorder.trees[0]:
        entry = {"id": node.id, "step": node.step, "parent": node.parent, "piece": piece(node.token),
                 "log_prob": _finite(node.log_prob, SCORE_DECIMALS), "status": node.status}
        if node.status != "root":
            entry.update(token_log_prob=_finite(node.token_log_prob, SCORE_DECIMALS), rank=node.rank,
                         forced=node.forced)
        if node.status == "finished":
            entry["score"] = _finite(node.score, SCORE_DECIMALS)
        nodes.append(entry)
    return {"size": beam, "nodes": nodes, "best": recorder.path(0, hyp)}


def _round(x: float, decimals: int) -> float:
    return round(float(x), decimals)


def _rounded(x: np.ndarray, decimals: int) -> list:
    return np.round(np.asarray(x, dtype=np.float64), decimals).tolist()


def _finite(x: float | None, decimals: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), decimals)
