"""Neighbours (Strobelt et al. 2018, Seq2Seq-Vis): for each decoder state of a translation, the nearest decoder
states the model had on other sentences, with their sentences, so that a learner sees which contexts the model
treats alike.

A decoder state is what the model's output layer reads at a step (the vector it turns into the next word's
scores). The index holds the states of the first :data:`MAX_SENTENCES` pairs of the model's training corpus
(``data.train_src`` / ``train_tgt``) when its files are at hand, else of its held-out pairs
(:mod:`attnmt.decode.held_out`: the model folder's test or valid split), each read with teacher forcing on its
target; it is built once per model and kept while the model is. Nearness is cosine similarity.
"""

from __future__ import annotations

import weakref
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmt.data.corpus import iter_lines
from attnmt.decode.forced import forced_batches
from attnmt.decode.held_out import held_out_pairs
from attnmt.errors import UserError
from attnmt.runtime.threads import threads_for

__all__ = ["MAX_NEIGHBOURS", "MAX_SENTENCES", "decoder_states", "index_pairs", "nearest"]

MAX_SENTENCES = 2000  # held-out sentences in a model's index
MAX_NEIGHBOURS = 10
MAX_PIECES = 100  # a longer held-out sentence is left out of the index
_INDEXES: "weakref.WeakKeyDictionary[Any, _Index]" = weakref.WeakKeyDictionary()


class _Index:
    """The unit-length decoder states [N, D] of the held-out sentences, and where each comes from."""

    def __init__(self, origin: str, sentences: list[dict[str, Any]], states: np.ndarray, owner: np.ndarray,
                 at: np.ndarray):
        self.origin, self.sentences, self.states, self.owner, self.at = origin, sentences, states, owner, at


def index_pairs(translator) -> tuple[str, list[tuple[str, str]]]:
    """Where the index's sentences come from (``training`` or ``held-out``) and their (source, target) pairs:
    the first lines of the training corpus when its two files are at hand, else the held-out pairs with
    references."""
    cfg = translator.config.data
    if cfg.train_src and cfg.train_tgt and Path(cfg.train_src).is_file() and Path(cfg.train_tgt).is_file():
        lines = islice(zip(iter_lines(cfg.train_src), iter_lines(cfg.train_tgt)), 2 * MAX_SENTENCES)
        return "training", [(s.strip(), t.strip()) for s, t in lines if s.strip() and t.strip()]
    return "held-out", [(s, t) for s, t in held_out_pairs(translator) if t is not None]


def decoder_states(translator, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[np.ndarray]:
    """Each pair's decoder states [len(target) + 1, D] under teacher forcing (the last one predicts </s>)."""
    output = translator.model.output
    found: list[np.ndarray | None] = [None] * len(src_ids)
    seen: list[torch.Tensor] = []
    handle = output.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    try:
        for forced in forced_batches(translator.model, src_ids, tgt_ids, translator.device):
            states = seen.pop().float().cpu().numpy()
            for row, k in enumerate(forced.index):
                found[k] = states[row, :len(tgt_ids[k]) + 1]
    finally:
        handle.remove()
    return found


def _index(translator) -> _Index | None:
    """The model's index, built on first use; None when it has neither training nor held-out pairs."""
    if translator in _INDEXES:
        return _INDEXES[translator]
    origin, pairs = index_pairs(translator)
    sentences, src_ids, tgt_ids = [], [], []
    for source, reference in pairs:
        src_pieces, tgt_pieces = translator.src.tokens(source), translator.tgt.tokens(reference)
        if not src_pieces or not tgt_pieces or max(len(src_pieces), len(tgt_pieces)) > MAX_PIECES:
            continue
        sentences.append({"source": source, "pieces": tgt_pieces})
        src_ids.append(translator.src.vocab.encode(src_pieces))
        tgt_ids.append(translator.tgt.vocab.encode(tgt_pieces))
        if len(sentences) == MAX_SENTENCES:
            break
    if not sentences:
        return None
    states = decoder_states(translator, src_ids, tgt_ids)
    owner = np.concatenate([np.full(len(s), k) for k, s in enumerate(states)])
    at = np.concatenate([np.arange(len(s)) for s in states])
    stacked = np.concatenate(states)
    unit = stacked / np.maximum(np.linalg.norm(stacked, axis=1, keepdims=True), 1e-9)
    index = _Index(origin, sentences, unit, owner, at)
    _INDEXES[translator] = index
    return index


def nearest(translator, source: str, src_ids: list[int], out_ids: list[int], k: int = 5) -> dict[str, Any] | None:
    """The record's ``neighbours``: for each decoder step of ``out_ids`` (translating ``source``), the ``k``
    nearest held-out states of other sentences (a held-out sentence equal to ``source`` is left out):
    ``sentences`` (``source`` and target ``pieces``, each once) and per step ``[{"sentence", "at",
    "similarity"}]``, ``at`` the position of the piece that state predicts (len(pieces): </s>)."""
    if not 1 <= k <= MAX_NEIGHBOURS:
        raise UserError(f"neighbours={k} is out of range; allowed: 1 to {MAX_NEIGHBOURS} (0: none)")
    with threads_for(translator.threads):
        index = _index(translator)
        if index is None:
            return None
        query = decoder_states(translator, [src_ids], [out_ids])[0]
    query = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-9)
    similarity = query @ index.states.T
    same = [n for n, s in enumerate(index.sentences) if s["source"] == source.strip()]
    similarity[:, np.isin(index.owner, same)] = -np.inf
    kept: dict[int, int] = {}
    steps = []
    for row in similarity:
        best = np.argsort(-row, kind="stable")[:k]
        steps.append([{"sentence": kept.setdefault(int(index.owner[n]), len(kept)), "at": int(index.at[n]),
                       "similarity": round(float(row[n]), 3)} for n in best if np.isfinite(row[n])])
    sentences = sorted(kept, key=kept.get)
    return {"from": index.origin, "states": int(len(index.states)),
            "sentences": [index.sentences[n] for n in sentences], "steps": steps}
