"""From the config's data section to training and validation data, and their batches.

One path: every run trains from a token store (attnmt/data/store.py). `load_data` prepares it
(attnmt/data/store_prepare.py: the corpora read once, the held-out pairs chosen, the data transforms run,
the tokenizers trained on a sample, every pair encoded, the links of guided alignment stored with
the pairs) or reuses the one whose inputs are unchanged, copies its tokenizers into the model
folder, and encodes the validation pairs in memory. `training_batches` cuts an epoch of the store
into length-bucketed batches; `batch_of` reads one batch's pairs from it.

The store lives in the model folder (MODEL_DIR/store) unless data.store_dir names a shared folder:
a model folder then holds everything its run read, a rerun or a resume finds the store it made, and
deleting the folder deletes it. data.store_dir keys stores by the data settings' hash, so runs on
the same data share one.
"""

from __future__ import annotations

from pathlib import Path

import torch

from attnmt.config.schema import Config, DataConfig
from attnmt.data.batching import Batch, batch_by_sentences, collate, token_batches
from attnmt.data.corpus import read_parallel
from attnmt.data.dataset import ParallelData, encode_pairs, load_processors, read_split
from attnmt.data.split import write_held_out
from attnmt.data.store import (
    EpochBatches,
    StoreData,
    copy_tokenizers,
    corpora_of,
    epoch_counts,
    staleness,
    store_location,
)
from attnmt.data.store_prepare import prepare_store
from attnmt.data.transforms import source_of
from attnmt.errors import UserError
from attnmt.runtime.distributed import World


def load_data(config: Config, model_dir: Path, resume: bool, log, world: World | None = None,
              tokenizers: Path | None = None):
    """The training store (prepared when missing or stale), the validation data and the text processors.

    `log` is the run's `RunLog` (its `event` method records what was read and dropped). ``resume``: the
    store must hold what the run started with (else a one-line refusal). ``tokenizers``: a folder whose
    tokenizers encode the corpus (fine-tuning: the trained model's), instead of ones trained on it.
    """
    world = world or World()
    cfg, seed = config.data, config.train.seed
    source = source_of(cfg)
    # validation files are read first: a bad one is refused before any preparation
    valid_pairs = None if cfg.valid_size else source.valid_pairs(seed) if source is not None else read_split(
        cfg, "valid")
    location = store_location(cfg, model_dir, seed)
    if world.is_main:
        _prepare(config, location, model_dir, resume, tokenizers, log)
    world.barrier()  # the others read what the main process prepared
    train = StoreData(location)
    held = {name: _read_held(location, name) or [] for name in ("valid", "test")}
    if held["valid"] or held["test"]:
        log.event("data", split="held_out", valid=len(held["valid"]), test=len(held["test"]), seed=seed)
        if world.is_main:
            write_held_out(model_dir, held["valid"], held["test"])
    src_proc, tgt_proc = load_processors(model_dir)
    _log_counts(train, log, cfg)
    if cfg.valid_size:
        valid_pairs = held["valid"]
    return train, _encode_valid(valid_pairs, src_proc, tgt_proc, log), src_proc, tgt_proc


def _prepare(config: Config, location: Path, model_dir: Path, resume: bool, tokenizers: Path | None, log) -> None:
    """Prepare the store unless it is up to date, and put its tokenizers into the model folder."""
    cfg, seed = config.data, config.train.seed
    if resume:  # the store of the run, or one made again with the run's own tokenizers
        tokenizers = model_dir
    reason = staleness(location, cfg, seed, tokenizers)
    if reason is not None and resume and reason != "no prepared store":
        raise UserError(f"{location}: {reason}; a resumed run must train on the data it started with: restore "
                        "the corpus, or train a new model without --resume")
    if reason is not None:
        done = prepare_store(config, location, progress=config.train.progress, tokenizers=tokenizers)
        log.event("data", split="train", prepared=str(location), seconds=done["seconds"])
    if tokenizers is None:
        copy_tokenizers(location, model_dir)


def _log_counts(train: StoreData, log, cfg: DataConfig) -> None:
    """What the store read, dropped and mixed, as the run's data events; refuses a store with no pair."""
    for record in train.meta.get("transforms", []):
        log.event("data", split="train", **record)
    totals = {key: sum(c[key] for c in train.meta["corpora"]) for key in ("total", "kept", "empty", "too_long")}
    log.event("data", split="train", store=str(train.folder), **totals)
    mixed = zip(train.meta["corpora"], epoch_counts(train.corpora)) if len(train.corpora) > 1 else ()
    for corpus, n in mixed:  # one corpus: the totals above are its counts
        log.event("data", split="train", corpus=corpus["name"], weight=corpus["weight"], pairs_per_epoch=n,
                  **{key: corpus[key] for key in ("total", "kept", "empty", "too_long")})
    links = train.meta.get("links")
    if links:
        log.event("data", split="train", unguided_equal_to_align_text=links["unguided_equal_to_align_text"])
    if len(train) == 0:
        source = ", ".join(c["tsv"] or c["src"] for c in corpora_of(cfg)) or "the synthetic corpus"
        raise UserError(f"{source}: no training pairs left ({totals['total']} read, {totals['empty']} with an empty "
                        f"side, {totals['too_long']} longer than data.max_len={cfg.max_len}); check the "
                        "corpus and data.max_len")


def _encode_valid(valid_pairs, src_proc, tgt_proc, log) -> ParallelData | None:
    if not valid_pairs:
        return None
    valid, vstats = encode_pairs(valid_pairs, src_proc, tgt_proc, None)
    log.event("data", split="valid", **vstats)
    return valid


def _read_held(store: Path, name: str) -> list | None:
    """The pairs a store held out as ``name`` (valid, test), if any."""
    if not (store / f"{name}.src").is_file():
        return None
    return read_parallel(store / f"{name}.src", store / f"{name}.tgt")


def training_batches(data: StoreData, config: Config, epoch: int) -> EpochBatches:
    """An epoch's shuffled, length-bucketed training batches (lists of store positions)."""
    t = config.train
    return EpochBatches(data, t.batch_tokens, t.batch_size, True, t.seed, epoch, config.data.shuffle_window)


def validation_batches(data: ParallelData, config: Config) -> list[list[int]]:
    """The validation pairs' batches, length-bucketed in a fixed order."""
    t = config.train
    src_len, tgt_len = [len(s) for s in data.src_ids], [len(s) for s in data.tgt_ids]
    if t.batch_size:
        return batch_by_sentences(src_len, tgt_len, t.batch_size, shuffle=False, seed=t.seed, epoch=0)
    return token_batches(src_len, tgt_len, t.batch_tokens, shuffle=False, seed=t.seed, epoch=0)


def batch_of(data: StoreData | ParallelData, indices: list[int], device: torch.device) -> Batch:
    """The batch of the pairs at ``indices``."""
    return collate([(data.src_ids[i], data.tgt_ids[i]) for i in indices], indices).to(device)

