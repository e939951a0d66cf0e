"""Attention as word alignment: extraction from a model, and the alignment error rate.

An attention model never sees a word alignment, yet at every target step it puts its weight on
the source words it is translating. Reading the weights as links gives a word alignment that can
be scored against human gold alignments (Bahdanau et al. 2014, section 5.2.1; alignment error
rate of Och & Ney 2003).

Conventions
-----------
* In memory a link is a 0-based ``(i, j)`` pair: source word ``i``, target word ``j``. Words are
  the whitespace-separated tokens of the text, the unit that gold alignments count in.
* Written output is Pharaoh ``i-j`` text, **0-based by default**, as fast_align writes it;
  ``one_based=True`` gives the 1-based numbering of the NAACL 2003 gold files.
* Gold files are read **1-based by default**: ``i-j`` is a sure link, ``ipj`` a possible one
  (the NAACL 2003 format). Every sure link is also possible (S is a subset of P).

From pieces to words
--------------------
Models attend over subword pieces. Teacher forcing gives ``alpha[t, s]``: the weight target piece
``t`` puts on source piece ``s``; the last row (the step that predicts ``</s>``) is dropped, since
``</s>`` is no word. Pieces are merged with the tokenizers' ``word_ids``:

* over a source word's pieces the weights are **summed**: a row stays a probability
  distribution, and a word gets all the attention paid to any of its parts;
* over a target word's pieces the rows are **averaged**: the mean of distributions is again a
  distribution, so a word of many pieces does not count more than a word of one.

Two ways to turn a word-level matrix into links:

* ``argmax``: each target word links to the source word with the most weight (one link per
  target word, the usual choice for attention);
* ``threshold``: every cell with weight >= ``threshold`` is a link (none, one or several per
  target word; a word with no weight that large stays unaligned).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from attnmt.errors import UserError

Link = tuple[int, int]  # 0-based (source word, target word)
Method = Literal["argmax", "threshold"]
METHODS: tuple[str, ...] = ("argmax", "threshold")


# ---------------------------------------------------------------- links as text


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence pair's gold links: ``sure`` and ``possible`` (sure links are possible too)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            raise ValueError("every sure link must also be possible (S is a subset of P)")


def parse_gold(line: str, one_based: bool = True) -> GoldAlignment:
    """Parse ``"1-1 2p3 ..."``: ``i-j`` sure links and ``ipj`` possible links.

    Raises ValueError naming the bad item; a link listed as both sure and possible is sure.
    """
    offset = 1 if one_based else 0
    sure: set[Link] = set()
    possible: set[Link] = set()
    for item in line.split():
        sep = "-" if "-" in item else "p"
        i, found, j = item.partition(sep)
        if not found or not i.isdigit() or not j.isdigit():
            raise ValueError(f"not an i-j (sure) or ipj (possible) link: {item!r}")
        link = (int(i) - offset, int(j) - offset)
        if min(link) < 0:
            raise ValueError(f"link {item!r} has a position below {offset}; are the links {offset}-based?")
        (sure if sep == "-" else possible).add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible | sure))


def read_gold(path: str | Path, one_based: bool = True) -> list[GoldAlignment]:
    """Read a gold alignment file, one sentence pair a line; UserError with file:line on a bad link."""
    from attnmt.data.corpus import read_lines

    gold = []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            gold.append(parse_gold(line, one_based))
        except ValueError as e:
            raise UserError(f"{path}:{number}: {e}; gold links are 1-based 'i-j' (sure) or 'ipj' (possible)") from None
    return gold


def format_links(links: Iterable[Link], one_based: bool = False) -> str:
    """``"i-j i-j ..."`` sorted by source then target position; 0-based unless ``one_based``."""
    offset = 1 if one_based else 0
    return " ".join(f"{i + offset}-{j + offset}" for i, j in sorted(links))


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


def threshold_links(word_alpha: np.ndarray, threshold: float) -> set[Link]:
    """Every (source, target) word pair whose attention weight is at least ``threshold``."""
    tgt, src = np.nonzero(word_alpha >= threshold)
    return {(int(i), int(j)) for i, j in zip(src, tgt)}


def links_from_attention(word_alpha: np.ndarray, method: Method = "argmax", threshold: float = 0.5) -> set[Link]:
    if method == "argmax":
        return argmax_links(word_alpha)
    if method == "threshold":
        return threshold_links(word_alpha, threshold)
    raise ValueError(f"unknown alignment method {method!r}; use one of {', '.join(METHODS)}")


def diagonal_links(n_src: int, n_tgt: int) -> set[Link]:
    """The baseline that needs no model: target word j links to the source word at the same relative
    position, ``i = floor((j + 0.5) * n_src / n_tgt)`` (the centre of word j, scaled)."""
    if n_src == 0:
        return set()
    return {(min(int((j + 0.5) * n_src / n_tgt), n_src - 1), j) for j in range(n_tgt)}


# ---------------------------------------------------------------- scores


@dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level alignment quality: links are counted over all sentences, then divided.

    ``aer = 1 - (|A & S| + |A & P|) / (|A| + |S|)`` (Och & Ney 2003), ``precision = |A & P| / |A|``,
    ``recall = |A & S| / |S|``; A the predicted, S the sure and P the possible links.
    """

    aer: float
    precision: float
    recall: float
    sentences: int
    predicted: int  # |A|
    sure: int  # |S|
    possible: int  # |P| (sure links included)
    hits_sure: int  # |A & S|
    hits_possible: int  # |A & P|


def score_alignments(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> AlignmentScores:
    """AER, precision and recall of ``predicted`` links against ``gold``, sentence by sentence."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    a = s = p = a_s = a_p = 0
    for links, g in zip(predicted, gold):
        links = set(links)
        a += len(links)
        s += len(g.sure)
        p += len(g.possible)
        a_s += len(links & g.sure)
        a_p += len(links & g.possible)
    denominator = a + s
    return AlignmentScores(
        aer=1.0 - (a_s + a_p) / denominator if denominator else 0.0,
        precision=a_p / a if a else 0.0,
        recall=a_s / s if s else 0.0,
        sentences=len(gold), predicted=a, sure=s, possible=p, hits_sure=a_s, hits_possible=a_p,
    )


# ---------------------------------------------------------------- running a model


@dataclass
class WordAttention:
    """Teacher-forced attention of one sentence pair, merged to whitespace-separated words."""

    src_words: list[str]
    tgt_words: list[str]
    weights: np.ndarray  # [len(tgt_words), len(src_words)], each row sums to 1
    src_pieces: list[str]
    tgt_pieces: list[str]
    piece_weights: np.ndarray  # [len(tgt_pieces), len(src_pieces)], the </s> row removed


def _word_ids(tokenizer, pieces: list[str], text: str, side: str) -> list[int]:
    """The tokenizer's word of each piece, checked against the whitespace words of ``text``."""
    ids = tokenizer.word_ids(pieces)
    words = len(text.split())
    if max(ids, default=-1) + 1 != words:
        raise UserError(f"{side} sentence {text[:60]!r}: the tokenizer's {max(ids, default=-1) + 1} words do not "
                        f"match its {words} whitespace-separated words; give tokenized text (spaces between words)")
    return ids


@torch.inference_mode()
def attention_matrices(translator, sources: Sequence[str], targets: Sequence[str],
                       batch_tokens: int = 3000) -> list[WordAttention]:
    """Run ``translator``'s model with teacher forcing on each (source, target) pair.

    ``translator`` is an :class:`attnmt.translator.Translator`. Raises UserError for a model
    without attention (seq2seq) or line counts that differ.
    """
    from attnmt.data.batching import collate, token_batches

    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} source sentences but {len(targets)} target sentences; the files must be "
                        "line-aligned")
    model = translator.model
    was_training = model.training
    model.eval()
    src_pieces = [translator.src.tokens(s) for s in sources]
    tgt_pieces = [translator.tgt.tokens(t) for t in targets]
    src_ids = [translator.src.vocab.encode(p) for p in src_pieces]
    tgt_ids = [translator.tgt.vocab.encode(p) for p in tgt_pieces]
    results: list[WordAttention | None] = [None] * len(sources)
    # Empty sides are legal (a gold file may hold them) and have no links; batch the rest.
    todo = [k for k in range(len(sources)) if src_ids[k] and tgt_ids[k]]
    for k in set(range(len(sources))) - set(todo):
        results[k] = WordAttention(sources[k].split(), targets[k].split(),
                                   np.zeros((len(targets[k].split()), len(sources[k].split()))),
                                   src_pieces[k], tgt_pieces[k], np.zeros((len(tgt_ids[k]), len(src_ids[k]))))
    device = translator.device
    for batch_index in token_batches([len(src_ids[k]) for k in todo], [len(tgt_ids[k]) for k in todo], batch_tokens,
                                     shuffle=False, seed=0, epoch=0):
        chosen = [todo[b] for b in batch_index]
        batch = collate([(src_ids[k], tgt_ids[k]) for k in chosen], chosen).to(device)
        _, alpha = model(batch.src, batch.src_len, batch.tgt_in)
        if alpha is None:
            raise UserError(f"the model is a {translator.model_type} model, which has no attention to align with; "
                            "use an rnnsearch or transformer model")
        alpha = alpha.float().cpu().numpy()
        for row, k in enumerate(chosen):
            pieces = alpha[row, : len(tgt_ids[k]), : len(src_ids[k])]  # drops the </s> row and the padding
            src_w = _word_ids(translator.src.tokenizer, src_pieces[k], sources[k], "source")
            tgt_w = _word_ids(translator.tgt.tokenizer, tgt_pieces[k], targets[k], "target")
            results[k] = WordAttention(sources[k].split(), targets[k].split(), word_attention(pieces, src_w, tgt_w),
                                       src_pieces[k], tgt_pieces[k], pieces)
    if was_training:
        model.train()
    return results  # type: ignore[return-value]


def extract_alignments(translator, sources: Sequence[str], targets: Sequence[str], method: Method = "argmax",
                       threshold: float = 0.5) -> list[set[Link]]:
    """Word alignments of each pair from the model's attention (see the module docstring)."""
    return [links_from_attention(m.weights, method, threshold) for m in attention_matrices(translator, sources, targets)]


# ---------------------------------------------------------------- the `attnmt align` command


@dataclass
class AlignResult:
    """What `attnmt align` computed: links per method, and scores when gold was given."""

    links: dict[str, list[set[Link]]]  # method -> one link set per sentence pair
    scores: dict[str, AlignmentScores]  # method -> scores (empty without gold)


def align_files(model_dir: str | Path | None, src_path: str | Path, tgt_path: str | Path,
                gold_path: str | Path | None = None, threshold: float = 0.5, baseline: bool = False,
                checkpoint: str = "best") -> AlignResult:
    """Align line-aligned, tokenized ``src_path``/``tgt_path`` with a model (argmax and threshold)
    or, with ``baseline``, the diagonal; score against ``gold_path`` (1-based, NAACL format) if given."""
    from attnmt.data.corpus import read_parallel

    if not 0.0 < threshold <= 1.0:
        raise UserError(f"--threshold {threshold} is out of range; allowed: > 0 and <= 1")
    pairs = read_parallel(src_path, tgt_path)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    links: dict[str, list[set[Link]]] = {}
    if baseline:
        links["diagonal"] = [diagonal_links(len(s.split()), len(t.split())) for s, t in pairs]
    if model_dir is not None:
        from attnmt.translator import load

        matrices = attention_matrices(load(model_dir, checkpoint=checkpoint), sources, targets)
        links["argmax"] = [argmax_links(m.weights) for m in matrices]
        links["threshold"] = [threshold_links(m.weights, threshold) for m in matrices]
    if not links:
        raise UserError("align: nothing to align with; pass --model DIR, --baseline diagonal, or both")
    scores: dict[str, AlignmentScores] = {}
    if gold_path is not None:
        gold = read_gold(gold_path)
        if len(gold) != len(pairs):
            raise UserError(f"{gold_path} has {len(gold)} lines but {src_path} has {len(pairs)}; they must be "
                            "line-aligned")
        _check_gold_in_range(gold, pairs, gold_path)
        scores = {method: score_alignments(found, gold) for method, found in links.items()}
    return AlignResult(links, scores)


def _check_gold_in_range(gold: Sequence[GoldAlignment], pairs: Sequence[tuple[str, str]], path) -> None:
    """A gold link beyond a sentence's words means the files do not belong together."""
    for number, (g, (s, t)) in enumerate(zip(gold, pairs), start=1):
        n_src, n_tgt = len(s.split()), len(t.split())
        bad = [(i, j) for i, j in g.possible if i >= n_src or j >= n_tgt]
        if bad:
            i, j = bad[0]
            raise UserError(f"{path}:{number}: link {i + 1}-{j + 1} is outside the sentence pair ({n_src} source, "
                            f"{n_tgt} target words); check that the gold file belongs to these sentences")


def format_scores(scores: dict[str, AlignmentScores]) -> str:
    """A small Markdown table: method, AER, precision, recall, links."""
    lines = ["| method | AER | precision | recall | links |", "|---|---:|---:|---:|---:|"]
    for method, s in scores.items():
        lines.append(f"| {method} | {s.aer:.3f} | {s.precision:.3f} | {s.recall:.3f} | {s.predicted} |")
    return "\n".join(lines)
