"""From the config's data section to encoded training and validation data, and its batches.

`load_data` reads the corpora (files or a TSV), holds out validation and test pairs when asked, runs
the data transforms (attnmt/data/transforms.py: the synthetic language, joined pairs, ...), builds or
reloads the tokenizers and encodes every pair, each with its origin (the corpus lines it comes from,
which guided alignment reads its links by); `make_batches`
cuts the encoded data into length-bucketed batches (by tokens or by sentences) for one epoch.
Large corpora and data.train lists instead train from a prepared token store (attnmt/data/store.py,
prepared by attnmt/data/prepare.py when missing or stale, with the same transforms): see `uses_store`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from attnmt.config import Config
from attnmt.data.batching import Batch, batch_by_sentences, collate, token_batches
from attnmt.data.corpus import read_parallel
from attnmt.data.dataset import ParallelData, build_processors, encode_pairs, load_processors, read_split
from attnmt.data.split import split_positions, write_held_out
from attnmt.data.store import EpochBatches, StoreData, corpora_of, epoch_counts, staleness, store_location
from attnmt.data.transforms import Pairs, apply_transforms, guidance_table, links_transform, source_of
from attnmt.distributed import World
from attnmt.errors import UserError


def load_data(config: Config, model_dir: Path, resume: bool, log, world: World | None = None):
    """Read the corpora, build (or reload) the text processors and encode everything.

    `log` is the run's `RunLog` (its `event` method records what was read and dropped).
    """
    world = world or World()
    cfg = config.data
    if uses_store(config, model_dir):
        return _load_store(config, model_dir, resume, log, world)
    pairs, valid_pairs, corpus, long_lines = _read_pairs(config, model_dir, log, world)
    train_pairs = pairs.all()
    if resume:
        src_proc, tgt_proc = load_processors(model_dir)
    else:
        # One process trains the tokenizers; the others read what it wrote.
        if world.is_main:
            src_proc, tgt_proc = build_processors(cfg, train_pairs, model_dir)
        world.barrier()
        if not world.is_main:
            src_proc, tgt_proc = load_processors(model_dir)
    train, stats = encode_pairs(train_pairs, src_proc, tgt_proc, cfg.max_len, pairs.origins())
    train.long_lines = long_lines
    log.event("data", split="train", **stats)
    if links_transform(cfg) is not None:
        train.links = guidance_table(cfg, corpus, len(corpus), log)
    if len(train) == 0:
        source = cfg.train_tsv or cfg.train_src or "the synthetic corpus"
        raise UserError(f"{source}: no training pairs left ({stats['total']} read, {stats.get('empty', 0)} with an "
                        f"empty side, {stats.get('too_long', 0)} longer than data.max_len={cfg.max_len}); check the "
                        "corpus and data.max_len")
    return train, _encode_valid(valid_pairs, src_proc, tgt_proc, log), src_proc, tgt_proc


def _encode_valid(valid_pairs, src_proc, tgt_proc, log) -> ParallelData | None:
    if not valid_pairs:
        return None
    valid, vstats = encode_pairs(valid_pairs, src_proc, tgt_proc, None)
    log.event("data", split="valid", **vstats)
    return valid


def _read_pairs(config: Config, model_dir: Path, log, world: World):
    """The training pairs as text, after the transforms (a `Pairs`), the validation pairs, the
    training corpus as read (None for the synthetic language) and how many of its pairs were dropped
    for a line over MAX_LINE_BYTES."""
    cfg, seed = config.data, config.train.seed
    source = source_of(cfg)
    corpus, long_lines = None, 0
    if source is not None:
        pairs, valid_pairs = Pairs.of_list([]), source.valid_pairs(seed)
    else:
        dropped: list[int] = []  # pairs with a line over MAX_LINE_BYTES, read as ("", ""): never trained on
        corpus = read_split(cfg, "train", dropped)
        if corpus is None:
            raise UserError("config: no training data; set data.train_src and data.train_tgt, data.train_tsv, "
                            "or data.transforms: [{name: synthetic}]")
        valid_pairs = read_split(cfg, "valid")
        lines = range(len(corpus))
        if cfg.valid_size or cfg.test_size:  # held out of the training corpus, whole groups (data/split.py)
            where = split_positions(corpus, cfg.valid_size, cfg.test_size, seed)
            held = {k: [p for p, w in zip(corpus, where) if w == k] for k in (1, 2)}
            log.event("data", split="held_out", valid=len(held[1]), test=len(held[2]), seed=seed)
            if world.is_main:
                write_held_out(model_dir, held[1], held[2])
            if cfg.valid_size:
                valid_pairs = held[1]
            lines = [line for line, w in enumerate(where) if w == 0]
        if dropped:
            skip = set(dropped)
            lines = [line for line in lines if line not in skip]
        # Transforms draw from the training pairs only: never from held-out pairs.
        pairs = Pairs.of_list([corpus[line] for line in lines], lines)
        long_lines = len(dropped)
    apply_transforms(cfg, pairs, seed, log)
    return pairs, valid_pairs, corpus, long_lines


AUTO_STORE_BYTES = 64 << 20  # data.store: auto uses a store for training files this large


def uses_store(config: Config, model_dir: Path) -> bool:
    """Whether training reads a token store: data.store, a data.train list, the corpus size, a prepared store."""
    cfg = config.data
    if cfg.store == "never" and cfg.train is not None:
        raise UserError("config: data.train lists train from a prepared store; remove data.store: never")
    if cfg.store == "never":
        return False
    if cfg.store == "always" or cfg.train is not None:
        return True
    if (store_location(cfg, model_dir, config.train.seed) / "meta.json").is_file():
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
    held = {name: _read_held(location, name) or [] for name in ("valid", "test")}
    if held["valid"] or held["test"]:
        log.event("data", split="held_out", valid=len(held["valid"]), test=len(held["test"]), seed=seed)
        if world.is_main:
            write_held_out(model_dir, held["valid"], held["test"])
    src_proc, tgt_proc = load_processors(model_dir)
    for record in train.meta.get("transforms", []):
        log.event("data", split="train", **record)
    totals = {key: sum(c[key] for c in train.meta["corpora"]) for key in ("total", "kept", "empty", "too_long")}
    log.event("data", split="train", store=str(location), **totals)
    for corpus, n in zip(train.meta["corpora"], epoch_counts(train.corpora)):
        log.event("data", split="train", corpus=corpus["name"], weight=corpus["weight"], pairs_per_epoch=n,
                  **{key: corpus[key] for key in ("total", "kept", "empty", "too_long")})
    if links_transform(cfg) is not None:
        train.links = guidance_table(cfg, None, train.meta["lines"], log)
    if len(train) == 0:
        source = ", ".join(c["tsv"] or c["src"] for c in corpora_of(cfg)) or "the synthetic corpus"
        raise UserError(f"{source}: no training pairs left ({totals['total']} read, {totals['empty']} with an empty "
                        f"side, {totals['too_long']} longer than data.max_len={cfg.max_len}); check the corpus and "
                        "data.max_len")
    source = source_of(cfg)
    valid_pairs = (held["valid"] if cfg.valid_size else source.valid_pairs(seed) if source is not None
                   else read_split(cfg, "valid"))
    return train, _encode_valid(valid_pairs, src_proc, tgt_proc, log), src_proc, tgt_proc


def _read_held(store: Path, name: str) -> list | None:
    """The pairs a store held out as ``name`` (valid, test), if any."""
    if not (store / f"{name}.src").is_file():
        return None
    return read_parallel(store / f"{name}.src", store / f"{name}.tgt")


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
