"""Attention as word alignment: extraction from a model, and the alignment error rate.

An attention model never sees a word alignment, yet at every target step it puts its weight on
the source words it is translating. Reading the weights as links gives a word alignment that can
be scored against human gold alignments (Bahdanau et al. 2014, section 5.2.1; alignment error
rate of Och & Ney 2003).

Links are 0-based ``(source word, target word)`` pairs (see :mod:`attnmt.align.link_sets`).

From pieces to words
--------------------
Models attend over subword pieces. Teacher forcing gives ``alpha[t, s]``: the weight target piece
``t`` puts on source piece ``s``; the last row (the step that predicts ``</s>``) is dropped, since
``</s>`` is no word. Pieces are merged with the tokenizers' ``word_ids``:

* over a source word's pieces the weights are **summed**: a row stays a probability
  distribution, and a word gets all the attention paid to any of its parts;
* over a target word's pieces the rows are **averaged**: the mean of distributions is again a
  distribution, so a word of many pieces does not count more than a word of one.

Which row of the attention aligns a target word
-----------------------------------------------
Row ``t`` of the teacher-forced attention is the step that *predicts* ``y_t``. Chen et al. (2020,
"Accurate word alignment induction from neural machine translation", Shift-Att) read instead the
first step whose query has already *read* ``y_t``: a decoder decides where to look before it
emits a word, so the step after ``y_t`` is read may point at ``y_t``'s source better. The row
depends on the decoder's equations, declared by each model as ``query_lag`` (how many target
inputs its query is behind the step's own input ``y_{t-1}``; ``y_t`` is the input of step t + 1):

* Bahdanau's order: step i's query is ``s_{i-1}`` (eq. 6), which has read ``y_{i-2}``:
  ``query_lag = 1``, ``y_t`` is read by the query of step ``t + 2``;
* Luong's order: step i's query is ``s_i``, which has read ``y_{i-1}``: ``query_lag = 0``, step ``t + 1``;
* the Transformer: position i's query has read ``y_{i-1}`` through the causal self-attention:
  step ``t + 1``, as in Chen et al.

To have every row, the model is run on ``<s> y_0 ... y_{T-1} </s>`` (one step more than training).

Five ways to turn a word-level matrix into links (``METHODS``):

* ``argmax``: each target word links to the source word with the most weight in the row that
  predicts it (one link per target word, the usual choice for attention);
* ``threshold``: every cell of those rows with weight >= ``threshold`` is a link (none, one or
  several per target word);
* ``shift``: argmax over the rows that have read the word (above);
* ``mutual`` and ``shift-mutual``: the predicting rows, or the shift rows, linked where a cell is
  the largest of its row *and* of its column: the target word attends most to that source word,
  and of all target words it is the one that attends most to it ("ArgMax" of Jalili Sabet et al.
  2020, SimAlign). At most one link per word on either side; words with no clear partner stay
  unaligned, as in a gold alignment.

Soft symmetrization (``agreement``)
-----------------------------------
With a model of each direction, the two word-level matrices (the rows a method reads: predicting
rows for argmax, threshold and mutual, shift rows for shift and shift-mutual) are multiplied cell
by cell, the reverse one transposed to (target, source): ``p(i, j) = alpha_fwd[j, i] *
alpha_rev[i, j]``, the product of the two directions' posteriors that Liang, Taskar & Klein (2006,
"Alignment by agreement") decode with. Links are the mutual maxima of ``p``. Unlike intersecting
two sets of links, a pair that one direction puts second but the other puts first can still win.

A Transformer has one attention per layer and head: ``layer`` and ``head`` choose one, and by
default the last layer's heads are averaged.

Ensembles
---------
Several models of one direction align as one (:func:`mean_attention`): each member's teacher-forced
attention is merged to words and read where that member was taught (its own shift row, its own guided
head), and the ensemble's matrix is the mean of the members' word-level matrices, which every method
above then reads. Members meet at whitespace words, so they need not share a vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from attnmt.align.link_sets import Link
from attnmt.errors import UserError

Method = Literal["argmax", "threshold", "shift", "mutual", "shift-mutual"]
METHODS: tuple[str, ...] = ("argmax", "threshold", "shift", "mutual", "shift-mutual")
AGREEMENT = "agreement"  # the soft symmetrization, on matrices (the others, on links, are in attnmt.align.link_sets)


# ---------------------------------------------------------------- from attention to links


def word_attention(alpha: np.ndarray, src_word_ids: Sequence[int], tgt_word_ids: Sequence[int]) -> np.ndarray:
    """Merge piece-level attention ``alpha`` [T, S] into word level [n_tgt_words, n_src_words].

    ``alpha`` has one row per target piece (the ``</s>`` row already removed) and one column per
    source piece; ``*_word_ids`` give each piece's word (as ``Tokenizer.word_ids`` does, 0, 0, 1, ...).
    Source pieces of a word are summed, target pieces of a word averaged (see the module docstring).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (len(tgt_word_ids), len(src_word_ids)):
        raise ValueError(f"attention has shape {alpha.shape}, but there are {len(tgt_word_ids)} target and "
                         f"{len(src_word_ids)} source pieces")
    n_src = max(src_word_ids, default=-1) + 1
    n_tgt = max(tgt_word_ids, default=-1) + 1
    # Summing matrices: columns of the same source word are added, rows of one target word averaged.
    src_sum = np.zeros((len(src_word_ids), n_src))
    src_sum[np.arange(len(src_word_ids)), src_word_ids] = 1.0
    tgt_mean = np.zeros((n_tgt, len(tgt_word_ids)))
    tgt_mean[tgt_word_ids, np.arange(len(tgt_word_ids))] = 1.0
    counts = tgt_mean.sum(axis=1, keepdims=True)
    tgt_mean = np.divide(tgt_mean, counts, out=np.zeros_like(tgt_mean), where=counts > 0)
    return tgt_mean @ alpha @ src_sum


def argmax_links(word_alpha: np.ndarray) -> set[Link]:
    """One link per target word: to the source word with the most attention (first one on ties)."""
    if word_alpha.size == 0:
        return set()
    return {(int(i), j) for j, i in enumerate(word_alpha.argmax(axis=1))}


def mutual_links(word_alpha: np.ndarray) -> set[Link]:
    """Links at the cells that are the largest of their row and of their column (first one on ties)."""
    if word_alpha.size == 0:
        return set()
    by_row = {(int(i), j) for j, i in enumerate(word_alpha.argmax(axis=1))}
    by_column = {(i, int(j)) for i, j in enumerate(word_alpha.argmax(axis=0))}
    return by_row & by_column


def threshold_links(word_alpha: np.ndarray, threshold: float) -> set[Link]:
    """Every (source, target) word pair whose attention weight is at least ``threshold``."""
    tgt, src = np.nonzero(word_alpha >= threshold)
    return {(int(i), int(j)) for i, j in zip(src, tgt)}


def reads_shift_rows(method: str) -> bool:
    """Whether ``method`` reads the shift rows (shift, shift-mutual) rather than the predicting rows."""
    if method not in METHODS:
        raise ValueError(f"unknown alignment method {method!r}; use one of {', '.join(METHODS)}")
    return method.startswith("shift")


def method_rows(matrix: "WordAttention", method: str) -> np.ndarray:
    """The word-level rows ``method`` reads: the shift rows for shift and shift-mutual, else the predicting rows."""
    return matrix.shifted if reads_shift_rows(method) else matrix.weights


def links_from_attention(matrix: "WordAttention | np.ndarray", method: Method = "argmax",
                         threshold: float = 0.5) -> set[Link]:
    """The links of one sentence pair's attention by ``method`` (see the module docstring).

    ``matrix``: a :class:`WordAttention`, or a word-level matrix alone for the methods that read the
    predicting rows (argmax, threshold, mutual).
    """
    if isinstance(matrix, np.ndarray):
        if reads_shift_rows(method):
            raise ValueError(f"the {method} method reads other rows of the attention: give a WordAttention")
        weights = matrix
    else:
        weights = method_rows(matrix, method)
    if method in ("argmax", "shift"):
        return argmax_links(weights)
    if method == "threshold":
        return threshold_links(weights, threshold)
    if method in ("mutual", "shift-mutual"):
        return mutual_links(weights)
    raise ValueError(f"unknown alignment method {method!r}; use one of {', '.join(METHODS)}")


def agreement_links(forward: "WordAttention", reverse: "WordAttention", method: str) -> set[Link]:
    """Soft symmetrization of one pair (module docstring): the mutual maxima of the product of the
    forward model's rows and the reverse model's (run target -> source), both read as ``method`` reads.
    Links in (source, target) order."""
    fwd, rev = method_rows(forward, method), method_rows(reverse, method)
    if fwd.shape != rev.T.shape:
        raise ValueError(f"forward attention {fwd.shape} and reverse attention {rev.shape} are not one pair's")
    return mutual_links(fwd * rev.T)


def shifted_rows(alpha: np.ndarray, n_tgt: int, query_lag: int, offset: int | None = None) -> np.ndarray:
    """The rows of ``alpha`` (run on ``<s> y </s>``, [n_tgt + 2, S]) whose query has read y_t, t < n_tgt:
    row t + 1 + query_lag, or row t + ``offset`` when an offset is given (to measure other rows)."""
    rows = np.arange(n_tgt) + (1 + query_lag if offset is None else offset)
    if n_tgt and rows[-1] >= alpha.shape[0]:
        raise ValueError(f"attention has {alpha.shape[0]} rows; shifting {n_tgt} target pieces by "
                         f"{1 + query_lag} needs {rows[-1] + 1}")
    return alpha[rows]


def diagonal_links(n_src: int, n_tgt: int) -> set[Link]:
    """The baseline that needs no model: target word j links to the source word at the same relative
    position, ``i = floor((j + 0.5) * n_src / n_tgt)`` (the centre of word j, scaled)."""
    if n_src == 0:
        return set()
    return {(min(int((j + 0.5) * n_src / n_tgt), n_src - 1), j) for j in range(n_tgt)}


# ---------------------------------------------------------------- running a model


@dataclass
class WordAttention:
    """Teacher-forced attention of one sentence pair, merged to whitespace-separated words."""

    src_words: list[str]
    tgt_words: list[str]
    weights: np.ndarray  # [len(tgt_words), len(src_words)]: the rows that predict each word; rows sum to 1
    src_pieces: list[str]
    tgt_pieces: list[str]
    piece_weights: np.ndarray  # [len(tgt_pieces), len(src_pieces)], the </s> row removed
    shifted: np.ndarray  # like weights, from the rows whose query has read each word (method shift)


def _word_ids(tokenizer, pieces: list[str], text: str, side: str) -> list[int]:
    """The tokenizer's word of each piece, checked against the whitespace words of ``text``."""
    ids = tokenizer.word_ids(pieces)
    words = len(text.split())
    if max(ids, default=-1) + 1 != words:
        raise UserError(f"{side} sentence {text[:60]!r}: the tokenizer's {max(ids, default=-1) + 1} words do not "
                        f"match its {words} whitespace-separated words; give tokenized text (spaces between words)")
    return ids


def choose_attention(model, attention: torch.Tensor | None, layer: int | None = None,
                     head: int | None = None) -> torch.Tensor:
    """One attention [B, T, S] out of a teacher-forced pass (:func:`attnmt.decode.forced.force` with heads=True).

    A model with heads (``model.has_heads``) gives ``layer``'s cross-attention (default the last),
    ``head``'s alone or averaged over the heads; a model with one attention refuses ``layer``/``head``.
    """
    if getattr(model, "has_heads", False):
        n_layers, n_heads = attention.shape[:2]  # [L, H, B, T, S]
        if layer is not None and not -n_layers <= layer < n_layers:
            raise UserError(f"--layer {layer} is out of range: the model has {n_layers} decoder layers "
                            f"(0 to {n_layers - 1}, or -1 for the last)")
        if head is not None and not 0 <= head < n_heads:
            raise UserError(f"--head {head} is out of range: the model has {n_heads} heads (0 to {n_heads - 1})")
        chosen = attention[-1 if layer is None else layer]
        return chosen.mean(dim=0) if head is None else chosen[head]
    if layer is not None or head is not None:
        raise UserError(f"--layer / --head choose a Transformer's attention head; this {model.model_type} model has "
                        "one attention: leave them out")
    if attention is None:
        raise UserError(f"the model is a {getattr(model, 'model_type', type(model).__name__)} model, which has no "
                        "attention to align with; use a model with attention (rnnsearch, transformer)")
    return attention


def model_method(config) -> str:
    """The extraction method a model is read with by default: ``shift`` for a model whose guided
    alignment supervised the row that has read each word (train.guided_alignment.row), else ``argmax``."""
    from attnmt.config.schema import is_guided

    return "shift" if is_guided(config) and config.train.guided_alignment.row == "shift" else "argmax"


def guided_head(config, layer: int | None, head: int | None) -> tuple[int | None, int | None, bool]:
    """``layer``/``head``, or when neither is given, the cross-attention that guided alignment
    supervised (train.guided_alignment.layer / head): a guided model is read where it was taught.
    The third value says whether that attention comes from the full-context pass: only the supervised
    head of a model guided with ``full_context``; every other head was trained in the causal pass."""
    from attnmt.config.schema import is_guided

    guided = config.train.guided_alignment
    if not is_guided(config):
        return layer, head, False
    if layer is None and head is None:
        return guided.layer, guided.head, guided.full_context
    n = config.model.dec_layers
    same_layer = (-1 if guided.layer is None else guided.layer) % n == (-1 if layer is None else layer) % n
    return layer, head, guided.full_context and same_layer and head == guided.head


@torch.inference_mode()
def _forced_attention(translator, model, src_ids, tgt_ids, batch_tokens: int, layer, head, full_context: bool):
    """(pair indices, their attention [B, T, S] as numpy) per batch of a teacher-forced pass over the pairs; an
    exported model (:meth:`attnmt.export.ct2_translator.CT2Translator.forced_attention`) gives them all at once."""
    from attnmt.decode.forced import forced_batches

    if model is None:
        rows = translator.forced_attention(src_ids, tgt_ids)
        alpha = np.zeros((len(rows), max((r.shape[0] for r in rows), default=0),
                          max((r.shape[1] for r in rows), default=0)), dtype=np.float32)
        for b, r in enumerate(rows):
            alpha[b, : r.shape[0], : r.shape[1]] = r
        yield list(range(len(rows))), alpha
        return
    for forced in forced_batches(model, src_ids, tgt_ids, translator.device, batch_tokens, with_eos=not full_context,
                                 heads=True, full_context=full_context, logits=False):  # attention only
        yield forced.index, choose_attention(model, forced.attention, layer, head).float().cpu().numpy()


def attention_matrices(translator, sources: Sequence[str], targets: Sequence[str], batch_tokens: int = 3000,
                       layer: int | None = None, head: int | None = None,
                       shift_offset: int | None = None) -> list[WordAttention]:
    """Run ``translator``'s model with teacher forcing on each (source, target) pair.

    ``translator`` is an :class:`attnmt.decode.translator.Translator`; ``layer``/``head`` as in
    :func:`choose_attention` (neither given: a guided model's supervised head, :func:`guided_head`);
    ``shift_offset`` (0 to 2) replaces the model's shift row t + 1 + query_lag by t + offset in
    ``WordAttention.shifted``, to measure other rows. Raises UserError for a model without attention
    (seq2seq) or line counts that differ.
    """
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} source sentences but {len(targets)} target sentences; the files must be "
                        "line-aligned")
    exported = getattr(translator, "forced_attention", None)  # an exported model (attnmt.export) reads its own
    model = None if exported else translator.model
    lag = getattr(model, "query_lag", 0)
    layer, head, full_context = guided_head(translator.config, layer, head)
    if exported:
        translator.check_attention_choice(layer, head, full_context)
    src_pieces = [translator.src.tokens(s) for s in sources]
    tgt_pieces = [translator.tgt.tokens(t) for t in targets]
    src_ids = [translator.src.vocab.encode(p) for p in src_pieces]
    tgt_ids = [translator.tgt.vocab.encode(p) for p in tgt_pieces]
    results: list[WordAttention | None] = [None] * len(sources)
    # Empty sides are legal (a gold file may hold them) and have no links; batch the rest.
    todo = [k for k in range(len(sources)) if src_ids[k] and tgt_ids[k]]
    for k in set(range(len(sources))) - set(todo):
        empty = np.zeros((len(targets[k].split()), len(sources[k].split())))
        results[k] = WordAttention(sources[k].split(), targets[k].split(), empty, src_pieces[k], tgt_pieces[k],
                                   np.zeros((len(tgt_ids[k]), len(src_ids[k]))), empty)
    # <s> y </s> as the input: the rows after the last word are there for the shift method. A full-context
    # pass is run on <s> y as in training (every row would see </s>), which has the rows query_lag = 0 needs.
    for index, alpha in _forced_attention(translator, model, [src_ids[k] for k in todo], [tgt_ids[k] for k in todo],
                                          batch_tokens, layer, head, full_context):
        for row, k in enumerate(todo[b] for b in index):
            n_tgt, n_src = len(tgt_ids[k]), len(src_ids[k])
            full = alpha[row, : n_tgt + (1 if full_context else 2), :n_src]
            src_w = _word_ids(translator.src.tokenizer, src_pieces[k], sources[k], "source")
            tgt_w = _word_ids(translator.tgt.tokenizer, tgt_pieces[k], targets[k], "target")
            pieces = full[:n_tgt]  # the rows that predict each piece: the </s> rows and the padding dropped
            results[k] = WordAttention(sources[k].split(), targets[k].split(), word_attention(pieces, src_w, tgt_w),
                                       src_pieces[k], tgt_pieces[k], pieces,
                                       word_attention(shifted_rows(full, n_tgt, lag, shift_offset), src_w, tgt_w))
    return results  # type: ignore[return-value]


def mean_attention(members: Sequence[Sequence[WordAttention]]) -> list[WordAttention]:
    """The ensemble's attention of each pair: the mean of the members' word-level matrices (``weights`` and
    ``shifted``). ``members`` holds one :func:`attention_matrices` result per model, over the same pairs; the
    piece-level fields are the first member's. One member is returned as it is."""
    if len(members) == 1:
        return list(members[0])
    if len({len(m) for m in members}) != 1:
        raise ValueError(f"ensemble members aligned different numbers of pairs: {[len(m) for m in members]}")
    return [replace(pair[0], weights=np.mean([m.weights for m in pair], axis=0),
                    shifted=np.mean([m.shifted for m in pair], axis=0)) for pair in zip(*members)]


def extract_alignments(translator, sources: Sequence[str], targets: Sequence[str], method: Method = "argmax",
                       threshold: float = 0.5, layer: int | None = None, head: int | None = None) -> list[set[Link]]:
    """Word alignments of each pair from the model's attention (see the module docstring)."""
    return [links_from_attention(m, method, threshold)
            for m in attention_matrices(translator, sources, targets, layer=layer, head=head)]


