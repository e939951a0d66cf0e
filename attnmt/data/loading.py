"""From the config's data section to encoded training and validation data, and its batches.

`load_data` reads the corpora (files, a TSV or the synthetic language), holds out validation and
test pairs when asked, builds or reloads the tokenizers and encodes every pair; `make_batches`
cuts the encoded data into length-bucketed batches (by tokens or by sentences) for one epoch.
Large corpora and data.train lists instead train from a prepared token store (attnmt/data/store.py,
prepared by attnmt/data/prepare.py when missing or stale): see `uses_store`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from attnmt.config import Config
from attnmt.data.augment import add_joined, add_unpunctuated
from attnmt.data.batching import Batch, batch_by_sentences, collate, token_batches
from attnmt.data.dataset import (
    ParallelData,
    build_processors,
    encode_pairs,
    load_processors,
    read_split,
    synthetic_splits,
)
from attnmt.data.split import split_held_out
from attnmt.data.store import EpochBatches, StoreData, corpora_of, epoch_counts, staleness, store_location
from attnmt.distributed import World
from attnmt.errors import UserError
from attnmt.guidance import load_guidance


def load_data(config: Config, model_dir: Path, resume: bool, log, world: World | None = None):
    """Read the corpora, build (or reload) the text processors and encode everything.

    `log` is the run's `RunLog` (its `event` method records what was read and dropped).
    """
    world = world or World()
    cfg = config.data
    if uses_store(config, model_dir):
        return _load_store(config, model_dir, resume, log, world)
    train_pairs, valid_pairs, corpus, joined = _read_pairs(config, model_dir, log, world)
    if resume:
        src_proc, tgt_proc = load_processors(model_dir)
    else:
        # One process trains the tokenizers; the others read what it wrote.
        if world.is_main:
            src_proc, tgt_proc = build_processors(cfg, train_pairs, model_dir)
        world.barrier()
        if not world.is_main:
            src_proc, tgt_proc = load_processors(model_dir)
    train, stats = encode_pairs(train_pairs, src_proc, tgt_proc, cfg.max_len)
    log.event("data", split="train", **stats)
    guided = config.train.guided_alignment
    if guided.links is not None:
        if cfg.synthetic:
            raise UserError("config: train.guided_alignment.links belong to a corpus file; the synthetic language "
                            "has none: remove them or train on files")
        train.guidance, gstats = load_guidance(guided.links, corpus, train.src_text, train.tgt_text, src_proc,
                                               tgt_proc, joined)
        log.event("data", split="train", guided_alignment=guided.links, **gstats)
    if len(train) == 0:
        source = cfg.train_tsv or cfg.train_src or "the synthetic corpus"
        raise UserError(f"{source}: no training pairs left ({stats['total']} read, {stats.get('empty', 0)} with an "
                        f"empty side, {stats.get('too_long', 0)} longer than data.max_len={cfg.max_len}); check the "
                        "corpus and data.max_len")
    valid = None
    if valid_pairs:
        valid, vstats = encode_pairs(valid_pairs, src_proc, tgt_proc, None)
        log.event("data", split="valid", **vstats)
    return train, valid, src_proc, tgt_proc


def _read_pairs(config: Config, model_dir: Path, log, world: World):
    """The training and validation pairs as text, the training corpus as read and the parts of each joined
    pair (both for guided alignment)."""
    cfg = config.data
    corpus, joined = None, {}
    if cfg.synthetic:
        splits = synthetic_splits(cfg, seed=config.train.seed)
        train_pairs, valid_pairs = splits["train"], splits["valid"]
    else:
        train_pairs = corpus = read_split(cfg, "train")
        if train_pairs is None:
            raise UserError("config: no training data; set data.train_src and data.train_tgt, data.train_tsv, "
                            "or data.synthetic: true")
        valid_pairs = read_split(cfg, "valid")
        if cfg.valid_size or cfg.test_size:  # held out of the training corpus, whole groups (data/split.py)
            train_pairs, valid_pairs = _hold_out(config, model_dir, train_pairs, valid_pairs, log, world)
    if cfg.joined_pairs:  # of the training pairs only: never of held-out pairs or an alignment set's text
        train_pairs, joined = add_joined(train_pairs, cfg.joined_pairs, cfg.join_max_parts, config.train.seed)
        log.event("data", split="train", joined_pairs=len(joined), join_max_parts=cfg.join_max_parts)
    if cfg.align_text_src is not None:
        from attnmt.data.corpus import read_parallel

        added = read_parallel(cfg.align_text_src, cfg.align_text_tgt)
        train_pairs = train_pairs + added * cfg.align_text_copies
        log.event("data", split="train", alignment_test_text=cfg.align_text_src, pairs=len(added),
                  copies=cfg.align_text_copies)
    if cfg.drop_final_punct:
        before = len(train_pairs)
        train_pairs = add_unpunctuated(train_pairs, cfg.drop_final_punct, config.train.seed)
        log.event("data", split="train", augmented_without_final_punctuation=len(train_pairs) - before)
    return train_pairs, valid_pairs, corpus, joined


def _hold_out(config: Config, model_dir: Path, train_pairs, valid_pairs, log, world: World):
    """Validation and test pairs held out of the training corpus; both written into the model folder."""
    cfg = config.data
    train_pairs, held_valid, test_pairs = split_held_out(train_pairs, cfg.valid_size, cfg.test_size,
                                                         config.train.seed)
    log.event("data", split="held_out", valid=len(held_valid), test=len(test_pairs), seed=config.train.seed)
    for name, held in (("valid", held_valid), ("test", test_pairs)):
        if held and world.is_main:  # for `attnmt evaluate --src MODEL/test.src --ref MODEL/test.tgt`
            for side, k in (("src", 0), ("tgt", 1)):
                (model_dir / f"{name}.{side}").write_text("".join(p[k] + "\n" for p in held), encoding="utf-8")
    return train_pairs, held_valid if cfg.valid_size else valid_pairs


AUTO_STORE_BYTES = 64 << 20  # data.store: auto uses a store for training files this large


def _in_memory_only(config: Config) -> str | None:
    """The first setting that needs the training text in memory, if any."""
    cfg = config.data
    for name, on in (("data.synthetic", cfg.synthetic), ("data.valid_size", cfg.valid_size),
                     ("data.test_size", cfg.test_size), ("data.align_text_src", cfg.align_text_src),
                     ("data.drop_final_punct", cfg.drop_final_punct), ("data.joined_pairs", cfg.joined_pairs),
                     ("train.guided_alignment.links", config.train.guided_alignment.links)):
        if on:
            return name
    return None


def uses_store(config: Config, model_dir: Path) -> bool:
    """Whether training reads a token store: data.store, a data.train list, the corpus size, a prepared store."""
    cfg = config.data
    blocker = _in_memory_only(config)
    wanted = cfg.store == "always" or cfg.train is not None
    if blocker and wanted:
        why = "data.train lists" if cfg.train is not None else "data.store: always"
        raise UserError(f"config: {blocker} works on the training text in memory, but {why} train from a "
                        f"prepared store; remove {blocker} or give one corpus with data.store: never")
    if cfg.store == "never" and cfg.train is not None:
        raise UserError("config: data.train lists train from a prepared store; remove data.store: never")
    if blocker or cfg.store == "never":
        return False
    if wanted or (store_location(cfg, model_dir, config.train.seed) / "meta.json").is_file():
        return True
    if not (cfg.train_tsv or (cfg.train_src and cfg.train_tgt)):
        return False
    files = [Path(f) for f in (cfg.train_tsv, cfg.train_src, cfg.train_tgt) if f]
    return sum(f.stat().st_size for f in files if f.is_file()) >= AUTO_STORE_BYTES


def _load_store(config: Config, model_dir: Path, resume: bool, log, world: World):
    """Training data from the store (prepared here when missing or stale); validation data in memory."""
    from attnmt.data.prepare import prepare_store

    cfg, seed = config.data, config.train.seed
    location = store_location(cfg, model_dir, seed)
    if world.is_main:
        reason = staleness(location, cfg, seed)
        if reason is not None and resume:
            raise UserError(f"{location}: {reason}; a resumed run must train on the data it started with: restore "
                            "the corpus, or train a new model without --resume")
        if reason is not None:
            done = prepare_store(config, location, progress=config.train.progress)
            log.event("data", split="train", prepared=str(location), seconds=done["seconds"])
        _copy_processors(location, model_dir, resume)
    world.barrier()  # the others read what the main process prepared
    train = StoreData(location)
    src_proc, tgt_proc = load_processors(model_dir)
    totals = {key: sum(c[key] for c in train.meta["corpora"]) for key in ("total", "kept", "empty", "too_long")}
    log.event("data", split="train", store=str(location), **totals)
    for corpus, n in zip(train.meta["corpora"], epoch_counts(train.corpora)):
        log.event("data", split="train", corpus=corpus["name"], weight=corpus["weight"], pairs_per_epoch=n,
                  **{key: corpus[key] for key in ("total", "kept", "empty", "too_long")})
    if len(train) == 0:
        source = ", ".join(c["tsv"] or c["src"] for c in corpora_of(cfg))
        raise UserError(f"{source}: no training pairs left ({totals['total']} read, {totals['empty']} with an empty "
                        f"side, {totals['too_long']} longer than data.max_len={cfg.max_len}); check the corpus and "
                        "data.max_len")
    valid = None
    valid_pairs = read_split(cfg, "valid")
    if valid_pairs:
        valid, vstats = encode_pairs(valid_pairs, src_proc, tgt_proc, None)
        log.event("data", split="valid", **vstats)
    return train, valid, src_proc, tgt_proc


def _copy_processors(store: Path, model_dir: Path, resume: bool) -> None:
    """The store's tokenizers and vocabularies into the model folder (which translation reads alone)."""
    names = sorted(p.name for p in store.iterdir()
                   if p.suffix in (".model", ".vocab", ".json") and p.name != "meta.json")
    for name in names:
        mine = model_dir / name
        if resume and (not mine.is_file() or mine.read_bytes() != (store / name).read_bytes()):
            raise UserError(f"{mine} differs from the tokenizer of the store {store} (it was prepared again); a "
                            "resumed run must keep its vocabulary: train a new model without --resume")
        if not resume:
            shutil.copyfile(store / name, mine)


def make_batches(data, config: Config, shuffle: bool, epoch: int) -> list[list[int]]:
    t = config.train
    if isinstance(data, StoreData):
        return EpochBatches(data, t.batch_tokens, t.batch_size, shuffle, t.seed, epoch, config.data.shuffle_window)
    src_len = [len(s) for s in data.src_ids]
    tgt_len = [len(t) for t in data.tgt_ids]
    if t.batch_size:
        return batch_by_sentences(src_len, tgt_len, t.batch_size, shuffle=shuffle, seed=t.seed, epoch=epoch)
    return token_batches(src_len, tgt_len, t.batch_tokens, shuffle=shuffle, seed=t.seed, epoch=epoch)


def batch_of(data: ParallelData, indices: list[int], device: torch.device) -> Batch:
    return collate([(data.src_ids[i], data.tgt_ids[i]) for i in indices], indices).to(device)
