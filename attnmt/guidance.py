"""Guided alignment training (Garg et al. 2019, "Jointly Learning to Align and Translate with
Transformer Models"; Chen et al. 2016 for RNNs): word links from a statistical aligner supervise
one attention distribution while the model learns to translate.

For the target piece ``y_t`` the links give a set of source words; every source piece of those
words gets an equal share, which makes the target distribution ``G_t`` over source pieces
(``G_t = 0`` when ``y_t``'s word has no link, and for the ``</s>`` step). The loss added to the
translation loss is the cross-entropy of the supervised attention ``alpha_t`` against it,

    L_align = - sum_t sum_j G_tj log alpha_tj         (Garg et al. 2019, eq. 6, summed over tokens)

weighted by ``train.guided_alignment.weight`` (``lambda``) and divided by the batch's target
tokens like the translation loss. The supervised attention is the RNN attention, or one
cross-attention head of one Transformer layer (``layer``, ``head``). ``row`` chooses which of its
rows carries ``G_t``, the same choice as ``attnmt align --method`` makes when reading it:

* ``predict``: row ``t``, the attention the model predicts ``y_t`` with. Its query has not read
  ``y_t`` (in Bahdanau's order not even ``y_{t-1}``), so it must guess which word comes next.
* ``shift``: row ``t + 1 + query_lag``, the first row whose query has read ``y_t`` (Chen et al.
  2020's Shift-Att, here as the supervised row; Garg et al. 2019 give the aligner the target word
  by attending over the full target for the same reason). In Bahdanau's order (``query_lag = 1``)
  the last piece's row is the step after ``</s>`` is read: the guided batch runs the decoder on
  ``<s> y </s>``, one step longer, and the translation loss is taken from the first ``n + 1`` rows,
  which the causal decoder computes exactly as from ``<s> y``.

Links file: 0-based Pharaoh ``i-j`` per line, line-aligned with the training corpus
(``attnmt align-prepare`` makes one with eflomal), given as the data transform
``{name: links, path: FILE}``. The data layer carries each pair's origin and the links by corpus
line (attnmt/data/transforms.py); `Guidance` turns a batch's pairs into piece links as the
training loop asks for them, the same way for pairs in memory and pairs of a token store.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnmt.config import Config
from attnmt.data.links import Link
from attnmt.data.transforms import links_transform, pair_links
from attnmt.errors import UserError

# Guidance of one training pair: for each target piece, the source pieces it is linked to.
PieceLinks = list[list[int]]


def piece_links(links: set[Link], src_word_ids: Sequence[int], tgt_word_ids: Sequence[int]) -> PieceLinks:
    """Word links -> for each target piece, the (sorted) source pieces of its word's linked words."""
    pieces_of: dict[int, list[int]] = {}
    for piece, word in enumerate(src_word_ids):
        pieces_of.setdefault(word, []).append(piece)
    linked: dict[int, list[int]] = {}
    for i, j in links:
        linked.setdefault(j, []).extend(pieces_of.get(i, []))
    return [sorted(set(linked.get(word, []))) for word in tgt_word_ids]


class Guidance:
    """The guidance of a training set's pairs, for the indices of a batch: each pair's word links (its
    origin's lines' links, attnmt/data/transforms.py) as piece links of its token ids."""

    def __init__(self, data, src_proc, tgt_proc):
        self.data, self.src_proc, self.tgt_proc = data, src_proc, tgt_proc
        self.text = getattr(data, "src_text", None) is not None  # pairs in memory: their text is checked
        # A pair's piece links never change: made once per pair held in memory (not for a store, whose
        # pairs may be millions).
        self._made: dict[int, PieceLinks | None] | None = {} if self.text else None

    def __call__(self, indices: Sequence[int]) -> list[PieceLinks | None]:
        if self._made is None:
            return [self.pair(i) for i in indices]
        return [self._made[i] if i in self._made else self._made.setdefault(i, self.pair(i)) for i in indices]

    def pair(self, i: int) -> PieceLinks | None:
        links = pair_links(self.data.origins[i], self.data.links)
        if links is None:
            return None
        src_w = self.src_proc.tokenizer.word_ids(self.src_proc.vocab.decode(self.data.src_ids[i]))
        tgt_w = self.tgt_proc.tokenizer.word_ids(self.tgt_proc.vocab.decode(self.data.tgt_ids[i]))
        n_src, n_tgt = max(src_w, default=-1) + 1, max(tgt_w, default=-1) + 1
        if self.text:
            src, tgt = self.data.src_text[i], self.data.tgt_text[i]
            wrong = n_src != len(src.split()) or n_tgt != len(tgt.split())
            what = f"of {src[:40]!r} / {tgt[:40]!r}"
        else:
            wrong = any(a >= n_src or b >= n_tgt for a, b in links)
            what = f"of training pair {i} of the store (corpus lines {[p[0] + 1 for p in self.data.origins[i]]})"
        if wrong:
            raise UserError(f"train.guided_alignment: the tokenizer's words {what} differ from the whitespace words "
                            "its links count; guided alignment needs a subword tokenizer (bpe, unigram)")
        return piece_links(links, src_w, tgt_w)

    def stats(self) -> dict:
        """How many pairs are guided, how many not, and their links."""
        table = self.data.links
        origins = self.data.origins
        per_line = np.array([-1 if links is None else len(links) for links in table], dtype=np.int64)
        if hasattr(origins, "lines"):  # a store: the corpus pairs' lines as an array, the added pairs apart
            plain = per_line[origins.lines()]  # -1: a line without guidance (guidance_table)
            added = [f for f in (pair_links(o, table) for o in origins.parts.values()) if f is not None]
            guided = int((plain >= 0).sum()) + len(added)
            links = int(plain[plain >= 0].sum()) + sum(len(j) for j in added)
        else:
            found = [pair_links(o, self.data.links) for o in origins]
            guided, links = sum(f is not None for f in found), sum(len(f) for f in found if f is not None)
        return {"guided": guided, "unguided": len(origins) - guided, "links": links}


def make_guidance(config: Config, data, src_proc, tgt_proc, log) -> Guidance | None:
    """The training data's guidance when it carries word links (the links transform), else None."""
    if getattr(data, "links", None) is None:
        return None
    guidance = Guidance(data, src_proc, tgt_proc)
    log.event("data", split="train", guided_alignment=links_transform(config.data).path, **guidance.stats())
    return guidance


def guidance_matrix(guidance: Sequence[PieceLinks | None], src_len: int, tgt_len: int,
                    device: torch.device, offset: int = 0, extra_rows: int = 0) -> Tensor:
    """G [B, tgt_len, src_len] for a batch: row ``t + offset`` is y_t's target distribution over
    source pieces. A pair of n pieces has the rows 0..n (inputs <s> y_0 .. y_{n-1}), and
    ``extra_rows`` more when the decoder also read ``</s>``; a piece whose row falls past them gets
    none, so that no padded step is supervised."""
    # The cells and their shares are gathered in Python, then written in one indexed assignment: one
    # assignment per piece is about 8x slower on a CPU (benchmarks/cpu_training.py).
    batch, rows, columns, shares = [], [], [], []
    for b, pair in enumerate(guidance):
        last_row = min(len(pair or []) + extra_rows, tgt_len - 1)
        for t, sources in enumerate(pair or []):
            if sources and t + offset <= last_row:
                batch += [b] * len(sources)
                rows += [t + offset] * len(sources)
                columns += sources
                shares += [1.0 / len(sources)] * len(sources)
    G = torch.zeros(len(guidance), tgt_len, src_len)
    G[torch.tensor(batch, dtype=torch.long), torch.tensor(rows, dtype=torch.long),
      torch.tensor(columns, dtype=torch.long)] = torch.tensor(shares)
    return G.to(device)


def guided_row_offset(row: str, query_lag: int) -> int:
    """How many rows after y_t's predicting row its guidance lies: 0 (``predict``), or the first row
    whose query has read y_t (``shift``: y_t is the input of row t + 1, read ``query_lag`` rows later)."""
    return 0 if row == "predict" else 1 + query_lag


def alignment_loss(alpha: Tensor, G: Tensor) -> Tensor:
    """Summed cross-entropy ``- sum G log alpha`` over the guided rows (see the module docstring)."""
    # alpha is exactly 0 only at padding, where G is 0 too; the floor keeps 0 * log 0 at 0.
    return -(G * torch.log(alpha.float().clamp_min(1e-12))).sum()
