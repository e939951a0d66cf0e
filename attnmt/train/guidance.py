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
``{name: links, path: FILE}``. The token store keeps each pair's word links beside its ids
(attnmt/data/store_links.py); `Guidance` turns a batch's pairs into piece links as the training
loop asks for them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnmt.config.schema import Config
from attnmt.data.pharaoh import Link
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
    """The guidance of a store's pairs, for the indices of a batch: each pair's word links (stored with
    the pair, attnmt/data/store_links.py) as piece links of its token ids."""

    def __init__(self, data, src_proc, tgt_proc):
        self.data, self.src_proc, self.tgt_proc = data, src_proc, tgt_proc

    def __call__(self, indices: Sequence[int]) -> list[PieceLinks | None]:
        return [self.pair(i) for i in indices]

    def pair(self, i: int) -> PieceLinks | None:
        links = self.data.links[i]
        if links is None:
            return None
        src_w = self.src_proc.tokenizer.word_ids(self.src_proc.vocab.decode(self.data.src_ids[i]))
        tgt_w = self.tgt_proc.tokenizer.word_ids(self.tgt_proc.vocab.decode(self.data.tgt_ids[i]))
        n_src, n_tgt = max(src_w, default=-1) + 1, max(tgt_w, default=-1) + 1
        if any(a >= n_src or b >= n_tgt for a, b in links):
            origin = self.data.origins[i]
            where = "text the transforms added" if origin is None else f"corpus lines {[p[0] + 1 for p in origin]}"
            raise UserError(f"train.guided_alignment: the tokenizer's words of training pair {i} of the store "
                            f"({where}) differ from the whitespace words its links count; guided alignment needs a "
                            "subword tokenizer (bpe, unigram)")
        return piece_links(links, src_w, tgt_w)


def make_guidance(config: Config, data, src_proc, tgt_proc, log) -> Guidance | None:
    """The training data's guidance when its store holds word links (the links transform), else None."""
    if data.links is None:
        return None
    links = data.meta["links"]
    log.event("data", split="train", guided_alignment=links["path"],
              **{key: links[key] for key in ("guided", "unguided", "links")})
    return Guidance(data, src_proc, tgt_proc)


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
