"""The token store: a prepared training corpus as memory-mapped numpy arrays, and its batches.

Every training run reads its pairs from a store: `attnmt train` prepares one (attnmt/data/store_prepare.py),
or reuses the one whose inputs are unchanged, in its model folder (MODEL_DIR/store) or, with
data.store_dir, in a shared folder named by the data settings' hash. A store is a folder::

    meta.json          format, pair count, dtypes, the corpora (name, first pair, count, weight, filter
                       counts), each source file's size and modification time, and a hash of the data
                       settings it was made with (see `data_fingerprint`)
    src.ids  tgt.ids   every kept pair's token ids, concatenated (uint16, or int32 for big vocabularies)
    src.off  tgt.off   int64 offsets into them, one per pair plus one: pair i is ids[off[i]:off[i + 1]]
    src.len  tgt.len   the lengths (uint16 / int32): the batches are built from these alone
    links.*            guided alignment's word links, one entry per pair (attnmt/data/store_links.py)
    dropped.npy        the corpus lines (counted over the corpora in order) that are not in it: held
                       out, empty or too long; the corpus pairs' lines follow from them (`_Origins`)
    added.origins      JSON: the origins of the pairs the transforms added (attnmt/data/transforms.py)
    valid.* test.*     the pairs held out by data.valid_size / data.test_size, when set
    *.model *.vocab *.json   the tokenizers and vocabularies the ids belong to

The corpora's kept pairs come first, in corpus order, then those the data transforms added (a
last "corpus" named ``transforms``, weighted so that an epoch reads each of its pairs once).

Training reads a pair's offsets and ids with `os.pread` and a window's lengths through a memory map
opened for that read alone: the operating system reads what a batch needs into the page cache,
which every torchrun process shares, and nothing of the store stays mapped into the process, so
the memory a run needs does not grow with the corpus. `StoreData` is the dataset view that
`attnmt.data.loading` hands to the training loop; `EpochBatches` builds an epoch's length-bucketed
batches window by window, in the order that `attnmt.data.order.EpochOrder` draws.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from attnmt.config.schema import DataConfig
from attnmt.data.batching import epoch_generator
from attnmt.data.order import EpochOrder, Mix, epoch_counts, seeded_rng
from attnmt.data.store_links import StoreLinks
from attnmt.data.transforms import Origin, fingerprint_settings, source_of, transform_files
from attnmt.errors import UserError

FORMAT = 3
SIDES = ("src", "tgt")
_OFFSETS = struct.Struct("=qq")  # a pair's two int64 offsets, in the byte order numpy wrote them
TOKENIZER_FILE = re.compile(r"(src|tgt|joint)\.(model|vocab|json)")
# The data settings that decide what a store holds; valid/test files, workers and the store
# location do not.
STORE_FIELDS = ("train_src", "train_tgt", "train_tsv", "train", "tsv_src_column", "tsv_tgt_column", "tokenizer",
                "vocab_size", "joint_vocab", "lowercase", "max_vocab", "min_freq", "max_len", "tokenizer_sample",
                "valid_size", "test_size")


def corpora_of(cfg: DataConfig) -> list[dict]:
    """The training corpora of a data section: data.train, or the one corpus of train_src/tgt/tsv."""
    if cfg.train:
        return cfg.train
    if source_of(cfg) is not None:  # the transform gives the pairs (the synthetic language)
        return []
    if cfg.train_tsv:
        return [{"name": "train", "src": None, "tgt": None, "tsv": cfg.train_tsv, "weight": 1.0}]
    if cfg.train_src and cfg.train_tgt:
        return [{"name": "train", "src": cfg.train_src, "tgt": cfg.train_tgt, "tsv": None, "weight": 1.0}]
    if cfg.train_src or cfg.train_tgt:
        raise UserError("config: data.train_src and data.train_tgt must be given together")
    raise UserError("config: no training data; set data.train_src and data.train_tgt, data.train_tsv, "
                    "or data.transforms: [{name: synthetic}]")


def data_fingerprint(cfg: DataConfig, seed: int) -> str:
    """A hash of the settings a store depends on (train.seed picks the tokenizer sample)."""
    settings = {name: getattr(cfg, name) for name in STORE_FIELDS}
    settings["seed"] = seed
    settings["transforms"] = fingerprint_settings(cfg)
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def file_stamps(cfg: DataConfig) -> list[dict]:
    """Each training file's path, size and modification time (what staleness is judged by)."""
    stamps = []
    files = [corpus[key] for corpus in corpora_of(cfg) for key in ("src", "tgt", "tsv") if corpus[key]]
    for name in files + transform_files(cfg):
        path = Path(name)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise UserError(f"file not found: {path}; check data.train / data.train_* / data.transforms in the "
                            "config") from None
        stamps.append({"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return stamps


def tokenizer_files(folder: Path) -> list[Path]:
    """The tokenizers and vocabularies in a folder (src / tgt / joint .model .vocab .json)."""
    return sorted(p for p in Path(folder).iterdir() if TOKENIZER_FILE.fullmatch(p.name))


def tokenizer_hash(folder: Path) -> str:
    """A hash of the tokenizers and vocabularies in a folder (which ids a store's pairs are in)."""
    digest = hashlib.sha256()
    for path in tokenizer_files(folder):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def copy_tokenizers(source: Path, target: Path) -> None:
    """The tokenizers and vocabularies of one folder into another."""
    for path in tokenizer_files(source):
        shutil.copyfile(path, Path(target) / path.name)


def store_location(cfg: DataConfig, model_dir: Path, seed: int) -> Path:
    """MODEL_DIR/store, or a folder named by the settings' hash in data.store_dir (shared between models)."""
    if cfg.store_dir:
        return Path(cfg.store_dir).expanduser() / data_fingerprint(cfg, seed)[:16]
    return Path(model_dir) / "store"


def staleness(store_dir: Path, cfg: DataConfig, seed: int, tokenizers: Path | None = None) -> str | None:
    """None when `store_dir` is a complete store of these settings and files (and, when ``tokenizers``
    names a folder, of its tokenizers), else why it is not."""
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
    if tokenizers is not None and meta.get("tokenizers") != tokenizer_hash(tokenizers):
        return f"its tokenizers are not those of {tokenizers}"
    if tokenizers is None and meta.get("tokenizers_from") is not None:
        return f"its tokenizers are copies of {meta['tokenizers_from']}'s, not trained on its corpus"
    now = {s["path"]: s for s in file_stamps(cfg)}
    before = {s["path"]: s for s in meta.get("files", [])}
    if set(now) != set(before):
        return "the training files changed"
    for path, stamp in now.items():
        if stamp != before[path]:
            return f"{path} changed since it was prepared (size or modification time)"
    return None


class _Side:
    """One side's ids, offsets and lengths.

    A pair's offsets and ids are read with os.pread, not through a memory map: the pages a run reads
    stay in the page cache (shared by every torchrun process) without being mapped into the
    process, so its resident memory does not grow with the part of the store it has touched.
    `len` maps every length for callers that want them all; training reads lengths a window at a
    time through `StoreData.lengths`.
    """

    def __init__(self, folder: Path, side: str, meta: dict):
        n = meta["pairs"]
        self.n, self.dtype = n, np.dtype(meta["ids_dtype"])
        self.len_path, self.len_dtype = folder / f"{side}.len", meta["len_dtype"]
        _check(self.len_path, self.len_dtype, n)
        _check(folder / f"{side}.off", "int64", n + 1)
        _check(folder / f"{side}.ids", self.dtype, meta[f"{side}_tokens"])
        self._off = open(folder / f"{side}.off", "rb", buffering=0) if n else None
        self._ids = open(folder / f"{side}.ids", "rb", buffering=0) if n else None
        self._code = {"uint16": "H", "int32": "i"}[self.dtype.name]  # the ids as memoryview.cast reads them

    @cached_property
    def len(self) -> np.ndarray:
        """Every length, memory-mapped (when first asked for: training does not ask)."""
        return _open(self.len_path, self.len_dtype, self.n)

    def __getitem__(self, i: int) -> list[int]:
        i = int(i)
        if not 0 <= i < self.n:
            raise IndexError(i)
        a, b = _OFFSETS.unpack(os.pread(self._off.fileno(), 16, 8 * i))
        size = self.dtype.itemsize
        return memoryview(os.pread(self._ids.fileno(), (b - a) * size, a * size)).cast(self._code).tolist()


def _check(path: Path, dtype, count: int) -> None:
    expected = count * np.dtype(dtype).itemsize
    if count and (not path.is_file() or path.stat().st_size != expected):
        raise UserError(f"{path} is missing or truncated (expected {expected} bytes); prepare the store again: "
                        "attnmt prepare CONFIG")


def _open(path: Path, dtype: str, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    _check(path, dtype, count)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


class _Origins:
    """Each pair's origin (attnmt/data/transforms.py): a corpus pair's line, from the sorted lines the
    store left out (the k-th kept pair is line k plus the left-out lines before it), or the origin
    of a pair the transforms added."""

    def __init__(self, folder: Path, meta: dict):
        self.folder, self.n, self.corpus_pairs = folder, meta["pairs"], meta.get("corpus_pairs", meta["pairs"])

    @cached_property
    def _kept_before(self) -> np.ndarray:
        """For each left-out line, how many corpus pairs the store holds before it (non-decreasing)."""
        dropped = np.load(self.folder / "dropped.npy")
        return dropped - np.arange(len(dropped), dtype=np.int64)

    @cached_property
    def parts(self) -> dict[int, Origin]:
        path = self.folder / "added.origins"
        raw = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return {int(k): tuple(tuple(part) for part in v) for k, v in raw.items()}

    def lines(self) -> np.ndarray:
        """The corpus line of every corpus pair, in store order."""
        k = np.arange(self.corpus_pairs, dtype=np.int64)
        return k + np.searchsorted(self._kept_before, k, side="right")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Origin:
        i = int(i)
        if not 0 <= i < self.n:
            raise IndexError(i)
        if i < self.corpus_pairs:
            return ((i + int(np.searchsorted(self._kept_before, i, side="right")), 0, 0),)
        return self.parts.get(i)


class StoreData:
    """A prepared training split, read from the store: each pair's ids, lengths, origin and links."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        try:
            self.meta = json.loads((self.folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"{self.folder}: not a prepared store ({e}); run attnmt prepare CONFIG") from None
        self.src_ids, self.tgt_ids = (_Side(self.folder, side, self.meta) for side in SIDES)
        self.corpora = [Mix(c["name"], c["start"], c["kept"], c["weight"]) for c in self.meta["corpora"]]
        # pairs dropped for a line over attnmt.data.corpus.MAX_LINE_BYTES (stores of older attnmt: not counted)
        self.long_lines = sum(c.get("long_lines", 0) for c in self.meta["corpora"])
        self.origins = _Origins(self.folder, self.meta)
        # guided alignment's word links of each pair (None without a links transform)
        self.links = StoreLinks(self.folder, len(self)) if self.meta.get("links") else None

    def __len__(self) -> int:
        return self.meta["pairs"]

    @property
    def src_len(self) -> np.ndarray:
        return self.src_ids.len

    @property
    def tgt_len(self) -> np.ndarray:
        return self.tgt_ids.len

    def lengths(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The source and target lengths of `positions` (copies). The length files are mapped for
        this call only, so that the pages it read leave the process when it returns."""
        out = []
        for side in (self.src_ids, self.tgt_ids):
            mapped = _open(side.len_path, side.len_dtype, side.n)
            out.append(np.asarray(mapped[positions]))
            del mapped  # the last reference: unmapped here
        return out[0], out[1]


def _runs(keys_sorted: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """The padded size and length of each run of equal (src, tgt) lengths in a sorted window."""
    if len(keys_sorted) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, keys_sorted[1:] != keys_sorted[:-1]])
    counts = np.diff(np.r_[starts, len(keys_sorted)])
    src, tgt = np.divmod(keys_sorted[starts].astype(np.int64), span)
    return np.maximum(src, tgt + 1), counts


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

    `EpochOrder` (attnmt/data/order.py) gives each window's store positions; a window is permuted,
    sorted by (source, target) length with a stable sort, packed, and its batches shuffled. An epoch
    that fits one window gets exactly batching.token_batches' (or batch_by_sentences') batches: one
    generator seeded from (seed, epoch) permutes the pairs, then the batches. Larger epochs draw
    each window's permutations from a generator seeded from (seed, epoch, window). Only the batch
    counts are computed up front, from each window's length histogram; a window's batches are built
    when first asked for, and only the last one built is kept: its positions in length order (4 bytes
    a pair of the window) and where each batch starts.
    """

    def __init__(self, data: StoreData, max_tokens: int | None, batch_size: int | None, shuffle: bool, seed: int,
                 epoch: int, window: int):
        if (max_tokens or 0) < 1 and (batch_size or 0) < 1:
            raise UserError("train.batch_tokens or train.batch_size must be at least 1; fix the batch settings")
        self.data, self.max_tokens, self.batch_size = data, max_tokens, batch_size
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        self.order = EpochOrder(data.corpora, seed, epoch, window, shuffle)
        self.n_windows = self.order.n_windows
        self.counts = [self._count(w) for w in range(self.n_windows)]
        self.first = np.cumsum([0, *self.counts])
        self._cached: tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def _keys(self, positions: np.ndarray) -> tuple[np.ndarray, int]:
        """One sortable key per pair, source length * span + target length, and the span."""
        src, tgt = self.data.lengths(positions)
        span = int(tgt.max()) + 2 if len(tgt) else 2
        keys = src.astype(np.int32 if (int(src.max(initial=0)) + 1) * span < 2 ** 31 else np.int64)
        keys *= span
        keys += tgt
        return keys, span

    def _count(self, w: int) -> int:
        """Window w's batches, from its length histogram (no sort)."""
        if self.batch_size:
            return -(-self.order.size(w) // self.batch_size)
        keys, span = self._keys(self.order.positions(w))
        if len(keys) and int(keys.max()) < max(4 * len(keys), 1 << 16):
            counts = np.bincount(keys)
            values = np.flatnonzero(counts)
            counts = counts[values]
        else:
            values, counts = np.unique(keys, return_counts=True)
        src, tgt = np.divmod(values, span)
        return len(_pack(np.maximum(src, tgt + 1), counts, self.max_tokens, None))

    def _build(self, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Window w's positions in length order, the bounds of its batches, and the batches' order."""
        positions = self.order.positions(w)
        if self.order.single:  # as token_batches: one generator permutes the pairs, then the batches
            generator = epoch_generator(self.seed, self.epoch)
            if self.shuffle:
                positions = positions[torch.randperm(len(positions), generator=generator).numpy()]

            def permutation(n):
                return torch.randperm(n, generator=generator).numpy()
        else:
            rng = seeded_rng("attnmt-window", self.seed, self.epoch, w)
            if self.shuffle:
                rng.shuffle(positions)  # in place
            permutation = rng.permutation
        keys, span = self._keys(positions)
        order = np.argsort(keys, kind="stable")  # 8 bytes a pair of the window, freed below
        ordered, positions = positions[order], None
        keys, order = keys[order], None
        if self.batch_size:
            starts = np.arange(0, len(ordered), self.batch_size)
        else:
            starts = np.asarray(_pack(*_runs(keys, span), self.max_tokens, None), dtype=np.int64)
        which = permutation(len(starts)) if self.shuffle else np.arange(len(starts))
        return ordered, np.append(starts, len(ordered)), which

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, k: int) -> list[int]:
        if not 0 <= k < len(self):
            raise IndexError(k)
        w = int(np.searchsorted(self.first, k, side="right")) - 1
        if self._cached is None or self._cached[0] != w:
            self._cached = None  # the previous window goes before the next is built
            self._cached = (w, self._build(w))
        ordered, bounds, which = self._cached[1]
        i = int(which[k - int(self.first[w])])
        return ordered[bounds[i]:bounds[i + 1]].tolist()

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
        shutil.rmtree(old, ignore_errors=True)
