"""Neighbours (Strobelt et al. 2018, Seq2Seq-Vis): for each decoder state of a translation, and for each encoder
state of its source, the nearest states the model had on other sentences, with their sentences, so that a learner
sees which contexts the model treats alike.

A decoder state is what the model's output layer reads at a step (the vector it turns into the next word's
scores). An encoder state is what the decoder reads of one source piece: an RNN attention model's annotation
h_j, a Transformer's encoder output (its memory); a seq2seq model keeps no state per source piece, so its
source side has no neighbours. The index holds the states of the first :data:`MAX_SENTENCES` pairs of the
model's training corpus (``data.train_src`` / ``train_tgt``) when its files are at hand, else of its held-out
pairs (:mod:`attnmt.decode.held_out`: the model folder's test or valid split), the decoder's read with teacher
forcing on the target; it is built once per model and kept while the model is. Nearness is cosine similarity.
"""

from __future__ import annotations

import weakref
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmt.data.batching import collate, token_batches
from attnmt.data.corpus import iter_lines
from attnmt.decode.forced import eval_mode, forced_batches
from attnmt.decode.held_out import held_out_pairs
from attnmt.errors import UserError
from attnmt.runtime.threads import threads_for

__all__ = ["MAX_NEIGHBOURS", "MAX_SENTENCES", "decoder_states", "encoder_states", "index_pairs", "nearest"]

MAX_SENTENCES = 2000  # held-out sentences in a model's index
MAX_NEIGHBOURS = 10
MAX_PIECES = 100  # a longer held-out sentence is left out of the index
ENCODER_KEYS = ("h", "memory")  # a model's encode() keys of its states per source piece (RNN h_j, Transformer memory)
_INDEXES: "weakref.WeakKeyDictionary[Any, _Index]" = weakref.WeakKeyDictionary()


class _States:
    """Unit-length states [N, D], the sentence each comes from and its position there."""

    def __init__(self, states: list[np.ndarray]) -> None:
        self.owner = np.concatenate([np.full(len(s), k) for k, s in enumerate(states)])
        self.at = np.concatenate([np.arange(len(s)) for s in states])
        self.unit = _unit(np.concatenate(states))


class _Index:
    """The index's sentences, their decoder states and (None for a model without them) their encoder states."""

    def __init__(self, origin: str, sentences: list[dict[str, Any]], decoder: _States, encoder: _States | None):
        self.origin, self.sentences, self.decoder, self.encoder = origin, sentences, decoder, encoder


def _unit(states: np.ndarray) -> np.ndarray:
    return states / np.maximum(np.linalg.norm(states, axis=1, keepdims=True), 1e-9)


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


def encoder_states(translator, src_ids: list[list[int]], batch_tokens: int = 4000) -> list[np.ndarray] | None:
    """Each source's encoder states [len(source), D] (see the module's docstring); None for a model that keeps
    none per source piece (seq2seq)."""
    model = translator.model
    found: list[np.ndarray | None] = [None] * len(src_ids)
    with eval_mode(model), torch.inference_mode():
        for index in token_batches([len(s) for s in src_ids], None, batch_tokens, shuffle=False,
                                   seed=0, epoch=0):
            batch = collate([(src_ids[k], None) for k in index], index).to(translator.device)
            enc = model.encode(batch.src, batch.src_len)
            key = next((key for key in ENCODER_KEYS if key in enc), None)
            if key is None:
                return None
            states = enc[key].float().cpu().numpy()
            for row, k in enumerate(index):
                found[k] = states[row, :len(src_ids[k])]
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
        sentences.append({"source": source, "source_pieces": src_pieces, "pieces": tgt_pieces})
        src_ids.append(translator.src.vocab.encode(src_pieces))
        tgt_ids.append(translator.tgt.vocab.encode(tgt_pieces))
        if len(sentences) == MAX_SENTENCES:
            break
    if not sentences:
        return None
    encoder = encoder_states(translator, src_ids)
    index = _Index(origin, sentences, _States(decoder_states(translator, src_ids, tgt_ids)),
                   None if encoder is None else _States(encoder))
    _INDEXES[translator] = index
    return index


def nearest(translator, source: str, src_ids: list[int], out_ids: list[int], k: int = 5) -> dict[str, Any] | None:
    """The record's ``neighbours``: for each decoder step of ``out_ids`` (translating ``source``), the ``k``
    nearest decoder states of the index's other sentences (one equal to ``source`` is left out), and for each
    source piece the ``k`` nearest encoder states (``source``: None for a model without them):
    ``sentences`` (``source``, its ``source_pieces`` and target ``pieces``, each once), per step ``steps`` and
    per source piece ``source`` ``[{"sentence", "at", "similarity"}]``, ``at`` the position of the piece that
    state predicts (len(pieces): </s>) or reads."""
    if not 1 <= k <= MAX_NEIGHBOURS:
        raise UserError(f"neighbours={k} is out of range; allowed: 1 to {MAX_NEIGHBOURS} (0: none)")
    with threads_for(translator.threads):
        index = _index(translator)
        if index is None:
            return None
        query = decoder_states(translator, [src_ids], [out_ids])[0]
        source_query = None if index.encoder is None else encoder_states(translator, [src_ids])[0]
    same = [n for n, s in enumerate(index.sentences) if s["source"] == source.strip()]
    kept: dict[int, int] = {}
    steps = _near(query, index.decoder, same, k, kept)
    source_steps = None if source_query is None else _near(source_query, index.encoder, same, k, kept)
    sentences = sorted(kept, key=kept.get)
    return {"from": index.origin, "states": int(len(index.decoder.unit)),
            "source_states": None if index.encoder is None else int(len(index.encoder.unit)),
            "sentences": [index.sentences[n] for n in sentences], "steps": steps, "source": source_steps}


def _near(query: np.ndarray, index: _States, left_out: list[int], k: int, kept: dict[int, int]) -> list[list[dict]]:
    """Per row of ``query``, the ``k`` nearest of ``index`` outside the ``left_out`` sentences; ``kept`` maps each
    sentence named to its number in the record (new ones added)."""
    similarity = _unit(query) @ index.unit.T
    similarity[:, np.isin(index.owner, left_out)] = -np.inf
    found = []
    for row in similarity:
        best = np.argsort(-row, kind="stable")[:k]
        found.append([{"sentence": kept.setdefault(int(index.owner[n]), len(kept)), "at": int(index.at[n]),
                       "similarity": round(float(row[n]), 3)} for n in best if np.isfinite(row[n])])
    return found
