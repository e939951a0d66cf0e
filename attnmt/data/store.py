"""The token store: a prepared training corpus as memory-mapped numpy arrays, and its batches.

A store is a folder that `attnmt prepare` (attnmt/data/prepare.py) writes once::

    meta.json          format, pair count, dtypes, the corpora (name, first pair, count, weight, filter
                       counts), each source file's size and modification time, and a hash of the data
                       settings it was made with (see `data_fingerprint`)
    src.ids  tgt.ids   every kept pair's token ids, concatenated (uint16, or int32 for big vocabularies)
    src.off  tgt.off   int64 offsets into them, one per pair plus one: pair i is ids[off[i]:off[i + 1]]
    src.len  tgt.len   the lengths (uint16 / int32): the batches are built from these alone
    *.model *.vocab *.json   the tokenizers and vocabularies the ids belong to

Training opens the arrays with `np.memmap`: the operating system pages in what a batch reads, so
the memory a run needs does not grow with the corpus and every torchrun process shares one copy
through the page cache. `StoreData` is the dataset view that `attnmt.data.loading` hands to the
training loop; `store_batches` builds an epoch's length-bucketed batches from the length arrays.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnmt.config import DataConfig
from attnmt.data.batching import epoch_generator
from attnmt.errors import UserError

FORMAT = 1
SIDES = ("src", "tgt")
# The data settings that decide what a store holds; valid/test files, workers and the store
# location do not.
STORE_FIELDS = ("train_src", "train_tgt", "train_tsv", "train", "tsv_src_column", "tsv_tgt_column", "tokenizer",
                "vocab_size", "joint_vocab", "lowercase", "max_vocab", "min_freq", "max_len", "tokenizer_sample")


def corpora_of(cfg: DataConfig) -> list[dict]:
    """The training corpora of a data section: data.train, or the one corpus of train_src/tgt/tsv."""
    if cfg.train:
        return cfg.train
    if cfg.train_tsv:
        return [{"name": "train", "src": None, "tgt": None, "tsv": cfg.train_tsv, "weight": 1.0}]
    if cfg.train_src and cfg.train_tgt:
        return [{"name": "train", "src": cfg.train_src, "tgt": cfg.train_tgt, "tsv": None, "weight": 1.0}]
    raise UserError("config: no training data; set data.train_src and data.train_tgt, data.train_tsv, "
                    "or data.synthetic: true")


def data_fingerprint(cfg: DataConfig, seed: int) -> str:
    """A hash of the settings a store depends on (train.seed picks the tokenizer sample)."""
    settings = {name: getattr(cfg, name) for name in STORE_FIELDS}
    settings["seed"] = seed
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def file_stamps(cfg: DataConfig) -> list[dict]:
    """Each training file's path, size and modification time (what staleness is judged by)."""
    stamps = []
    for corpus in corpora_of(cfg):
        for key in ("src", "tgt", "tsv"):
            if corpus[key]:
                path = Path(corpus[key])
                try:
                    st = path.stat()
                except FileNotFoundError:
                    raise UserError(f"file not found: {path}; check data.train / data.train_* in the config") from None
                stamps.append({"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return stamps


def store_location(cfg: DataConfig, model_dir: Path, seed: int) -> Path:
    """MODEL_DIR/store, or a folder named by the settings' hash in data.store_dir (shared between models)."""
    if cfg.store_dir:
        return Path(cfg.store_dir).expanduser() / data_fingerprint(cfg, seed)[:16]
    return Path(model_dir) / "store"


def staleness(store_dir: Path, cfg: DataConfig, seed: int) -> str | None:
    """None when `store_dir` is a complete store of these settings and files, else why it is not."""
    meta_path = store_dir / "meta.json"
    if not meta_path.is_file():
        return "no prepared store"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        return f"its meta.json is unreadable ({e})"
    if meta.get("format") != FORMAT:
        return f"it has format {meta.get('format')}, not {FORMAT}"
    if meta.get("fingerprint") != data_fingerprint(cfg, seed):
        return "the config's data settings changed since it was prepared"
    now = {s["path"]: s for s in file_stamps(cfg)}
    before = {s["path"]: s for s in meta.get("files", [])}
    if set(now) != set(before):
        return "the training files changed"
    for path, stamp in now.items():
        if stamp != before[path]:
            return f"{path} changed since it was prepared (size or modification time)"
    return None


class _Side:
    """One side's ids, offsets and lengths, memory-mapped."""

    def __init__(self, folder: Path, side: str, meta: dict):
        n = meta["pairs"]
        self.ids = _open(folder / f"{side}.ids", meta["ids_dtype"], meta[f"{side}_tokens"])
        self.off = _open(folder / f"{side}.off", "int64", n + 1)
        self.len = _open(folder / f"{side}.len", meta["len_dtype"], n)

    def __getitem__(self, i: int) -> list[int]:
        return self.ids[self.off[i]:self.off[i + 1]].tolist()


def _open(path: Path, dtype: str, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    expected = count * np.dtype(dtype).itemsize
    if not path.is_file() or path.stat().st_size != expected:
        raise UserError(f"{path} is missing or truncated (expected {expected} bytes); prepare the store again: "
                        "attnmt prepare CONFIG")
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


@dataclass
class Mix:
    """One corpus of a store: its pairs are store positions start..start+count-1."""

    name: str
    start: int
    count: int
    weight: float


class StoreData:
    """A prepared training split, read from the store (same interface as ParallelData for training)."""

    guidance = None  # guided alignment needs the text in memory (the in-memory path)

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        try:
            self.meta = json.loads((self.folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"{self.folder}: not a prepared store ({e}); run attnmt prepare CONFIG") from None
        self.src_ids, self.tgt_ids = (_Side(self.folder, side, self.meta) for side in SIDES)
        self.corpora = [Mix(c["name"], c["start"], c["kept"], c["weight"]) for c in self.meta["corpora"]]

    def __len__(self) -> int:
        return self.meta["pairs"]

    @property
    def src_len(self) -> np.ndarray:
        return self.src_ids.len

    @property
    def tgt_len(self) -> np.ndarray:
        return self.tgt_ids.len


def epoch_counts(corpora: list[Mix]) -> list[int]:
    """Pairs each corpus gives an epoch: round(N * weight / total weight), N = all pairs."""
    total = sum(c.count for c in corpora)
    weights = sum(c.weight for c in corpora)
    return [round(total * c.weight / weights) if c.count else 0 for c in corpora]


def epoch_positions(corpora: list[Mix], seed: int, epoch: int) -> np.ndarray:
    """The store positions of an epoch, corpus by corpus: whole copies plus a seeded random rest."""
    counts = epoch_counts(corpora)
    if all(n == c.count for n, c in zip(counts, corpora)):
        return np.arange(sum(counts), dtype=np.int64)
    parts = []
    for k, (n, c) in enumerate(zip(counts, corpora)):
        digest = hashlib.sha256(f"attnmt-mix:{seed}:{epoch}:{k}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        whole, rest = divmod(n, c.count)
        parts.extend([np.arange(c.start, c.start + c.count, dtype=np.int64)] * whole)
        parts.append(c.start + np.sort(rng.choice(c.count, size=rest, replace=False)).astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _runs(keys_sorted: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The padded size and length of each run of equal (src, tgt) lengths in a sorted window."""
    if len(keys_sorted) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, keys_sorted[1:] != keys_sorted[:-1]])
    counts = np.diff(np.r_[starts, len(keys_sorted)])
    size = np.maximum(src_len[starts].astype(np.int64), tgt_len[starts].astype(np.int64) + 1)
    return size, counts


def _pack(sizes: np.ndarray, counts: np.ndarray, max_tokens: int, max_sentences: int | None) -> list[int]:
    """Batch starts (positions in the sorted window) of the greedy token-budget packing.

    The same batches as batching.token_batches' loop over the sorted examples, computed per run of
    equal lengths: a batch whose longest padded size is L holds max(1, max_tokens // L) examples.
    """
    starts: list[int] = []
    pos = in_batch = longest = 0
    cap_sent = max_sentences or 1 << 62
    for size, count in zip(sizes.tolist(), counts.tolist()):
        while count:
            grown = max(longest, size) if in_batch else size
            cap = min(max(1, max_tokens // grown), cap_sent)
            if in_batch and cap <= in_batch:
                in_batch = 0  # close the batch; the next example starts a new one
                continue
            if not in_batch:
                starts.append(pos)
            take = min(count, cap - in_batch)
            in_batch += take
            longest = grown
            pos += take
            count -= take
    return starts


class EpochBatches:
    """An epoch's batches from a store: a sequence of lists of store positions, built window by window.

    The epoch's positions are permuted with the epoch generator and cut into windows of
    data.shuffle_window pairs; each window is sorted by (source, target) length, packed and its batches
    shuffled. A corpus that fits one window gets exactly batching.token_batches' (or
    batch_by_sentences') batches. Only the batch counts are computed up front (from each window's
    lengths); a window's batches are built when first asked for.
    """

    def __init__(self, data: StoreData, max_tokens: int | None, batch_size: int | None, shuffle: bool, seed: int,
                 epoch: int, window: int):
        if (max_tokens or 0) < 1 and (batch_size or 0) < 1:
            raise UserError("train.batch_tokens or train.batch_size must be at least 1; fix the batch settings")
        self.data, self.max_tokens, self.batch_size = data, max_tokens, batch_size
        self.generator = epoch_generator(seed, epoch)
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        positions = epoch_positions(data.corpora, seed, epoch)
        if shuffle:
            positions = positions[torch.randperm(len(positions), generator=self.generator).numpy()]
        self.positions = positions
        self.window = window
        self.n_windows = max(1, -(-len(positions) // window))
        self._tgt_span = int(data.tgt_len.max()) + 2 if len(data) else 2
        self.counts = [self._count(w) for w in range(self.n_windows)]
        self.first = np.cumsum([0, *self.counts])
        self._cached: tuple[int, list[list[int]]] | None = None

    def _keys(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        pos = self.positions[w * self.window:(w + 1) * self.window]
        return pos, self.data.src_len[pos].astype(np.int64) * self._tgt_span + self.data.tgt_len[pos]

    def _count(self, w: int) -> int:
        pos, keys = self._keys(w)
        if self.batch_size:
            return -(-len(pos) // self.batch_size)
        values, counts = np.unique(keys, return_counts=True)
        src, tgt = np.divmod(values, self._tgt_span)
        return len(_pack(np.maximum(src, tgt + 1), counts, self.max_tokens, None))

    def _build(self, w: int) -> list[list[int]]:
        pos, keys = self._keys(w)
        order = np.argsort(keys, kind="stable")
        ordered = pos[order]
        if self.batch_size:
            starts = list(range(0, len(ordered), self.batch_size))
        else:
            sizes, counts = _runs(keys[order], self.data.src_len[ordered], self.data.tgt_len[ordered])
            starts = _pack(sizes, counts, self.max_tokens, None)
        bounds = [*starts, len(ordered)]
        batches = [ordered[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
        if self.shuffle:
            generator = self.generator if self.n_windows == 1 else epoch_generator(self.seed * 1000003 + w,
                                                                                   self.epoch)
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return batches

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, k: int) -> list[int]:
        if not 0 <= k < len(self):
            raise IndexError(k)
        w = int(np.searchsorted(self.first, k, side="right")) - 1
        if self._cached is None or self._cached[0] != w:
            self._cached = (w, self._build(w))
        return self._cached[1][k - int(self.first[w])]

    def __iter__(self):
        return (self[k] for k in range(len(self)))


def contributions(batches: EpochBatches) -> dict[str, int]:
    """How many pairs each corpus gives this epoch."""
    return {c.name: n for c, n in zip(batches.data.corpora, epoch_counts(batches.data.corpora))}


def replace_dir(done: Path, target: Path) -> None:
    """Move a finished folder into place; a store that was there is removed only after that."""
    old = target.with_name(target.name + f".old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    done.rename(target)
    if old.exists():
        import shutil

        shutil.rmtree(old, ignore_errors=True)
