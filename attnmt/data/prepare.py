"""`attnmt prepare`: read the training corpora once, train the tokenizers on a sample, encode in parallel.

Three phases, each with a progress bar in pairs/s:

1. reading: count each file's lines (raw bytes, no decoding), check that parallel files pair up,
   then draw data.tokenizer_sample pairs (seeded by train.seed; all of them when the corpus is not
   larger) and decode only those;
2. tokenizer training: sentencepiece (or the word tokenizer) and the vocabularies on that sample,
   with sentencepiece's own input_sentence_size / shuffle_input_sentence as the bound;
3. encoding: N worker processes encode chunks of about a megabyte of raw text each (decoding,
   cleaning and tokenizing as attnmt.data.corpus and TextProcessor do), in order; the main process
   appends their ids to the store and drops empty and over-long pairs, counted as the in-memory
   path counts them.

Everything is written into a temporary folder next to the store, which is renamed into place only
when complete: a killed or failed preparation leaves nothing that a later run takes for a store.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attnmt.config import Config
from attnmt.data.chunks import count_lines, decode_chunk, raw_chunks, split_tsv
from attnmt.data.dataset import TextProcessor, load_processors
from attnmt.data.store import FORMAT, SIDES, corpora_of, data_fingerprint, file_stamps, replace_dir, staleness
from attnmt.data.tokenize import train_tokenizer
from attnmt.data.vocab import Vocabulary
from attnmt.errors import UserError


def _bar(total: int | None, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="pairs", unit_scale=True, dynamic_ncols=True, leave=False,
                disable=not enabled or not sys.stderr.isatty(), file=sys.stderr)


def _pair_counts(corpora: list[dict], cfg, progress: bool) -> list[int]:
    """Pairs per corpus (lines of its files); parallel files must have equal line counts."""
    counts = []
    with _bar(None, "reading", progress) as bar:
        for corpus in corpora:
            if corpus["tsv"]:
                n = count_lines(corpus["tsv"], tsv=True, progress=bar)
            else:
                n = count_lines(corpus["src"], progress=bar)
                m = count_lines(corpus["tgt"])
                if n != m:
                    raise UserError(
                        f"parallel files differ in length: {corpus['src']} has {n} lines but {corpus['tgt']} "
                        f"has {m}; line i of one must translate line i of the other, so realign them")
            counts.append(n)
    return counts


def _sample(corpora: list[dict], counts: list[int], cfg, seed: int) -> tuple[list[str], list[str]]:
    """The tokenizer sample's source and target sentences, in corpus order."""
    total = sum(counts)
    if total > cfg.tokenizer_sample:
        chosen = np.sort(np.random.default_rng(seed).choice(total, size=cfg.tokenizer_sample, replace=False))
    else:
        chosen = np.arange(total)
    src, tgt = [], []
    first = 0
    for corpus, n in zip(corpora, counts):
        mine = chosen[(chosen >= first) & (chosen < first + n)] - first
        first += n
        if not len(mine):
            continue
        if corpus["tsv"]:
            cols = (cfg.tsv_src_column, cfg.tsv_tgt_column)
            pairs = _pick(corpus["tsv"], mine,
                          lambda rows, numbers, p=corpus["tsv"], c=cols: split_tsv(rows, p, numbers, c))
            src += [s for s, _ in pairs]
            tgt += [t for _, t in pairs]
        else:
            src += _pick(corpus["src"], mine, None)
            tgt += _pick(corpus["tgt"], mine, None)
    return src, tgt


def _pick(path: str, wanted: np.ndarray, parse) -> list:
    """The items of lines `wanted` (sorted, 0-based) of a file."""
    out: list = []
    k = 0
    for line0, data, first in raw_chunks(path):
        lines = decode_chunk(data, path, line0, first, clean=parse is None)
        end = line0 + len(lines)
        if k < len(wanted) and wanted[k] < end:
            hi = int(np.searchsorted(wanted, end))
            rows = [lines[int(i) - line0] for i in wanted[k:hi]]
            out += parse(rows, [int(i) + 1 for i in wanted[k:hi]]) if parse else rows
            k = hi
        if k == len(wanted):
            break
    return out


def _train_processors(cfg, src: list[str], tgt: list[str], folder: Path) -> None:
    def make(texts: list[str], name: str) -> None:
        tokenizer = train_tokenizer(cfg.tokenizer, texts, cfg.vocab_size, folder, name, lowercase=cfg.lowercase,
                                    sample=len(texts))
        vocab = Vocabulary.build((tokenizer.encode(t) for t in texts), max_size=cfg.max_vocab, min_freq=cfg.min_freq)
        vocab.save(folder / f"{name}.vocab")

    if cfg.joint_vocab:
        make(src + tgt, "joint")
    else:
        make(src, "src")
        make(tgt, "tgt")


_WORKER: dict = {}


def _init_worker(folder: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _WORKER["procs"] = load_processors(Path(folder))


def _ids(proc: TextProcessor, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [proc.ids(line) for line in lines]
    lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
    flat = np.fromiter((i for e in encoded for i in e), dtype=np.int32, count=int(lengths.sum()))
    return flat, lengths


def _encode_task(task: tuple) -> tuple:
    """A worker's job: (kind, path, first line, bytes, first chunk?, limit) -> ids and lengths."""
    kind, path, line0, data, first, limit, tsv_cols = task
    src_proc, tgt_proc = _WORKER["procs"]
    if kind == "tsv":
        lines = decode_chunk(data, path, line0, first, clean=False)[: max(0, limit - line0)]
        pairs = split_tsv(lines, path, range(line0 + 1, line0 + 1 + len(lines)), tsv_cols)
        return kind, _ids(src_proc, [s for s, _ in pairs]), _ids(tgt_proc, [t for _, t in pairs])
    lines = decode_chunk(data, path, line0, first, clean=True)
    return kind, _ids(src_proc if kind == "src" else tgt_proc, lines)


def _tasks(corpus: dict, n: int, cfg):
    """The chunks of a corpus; of two files, the side that is behind goes next (bounded buffering)."""
    cols = (cfg.tsv_src_column, cfg.tsv_tgt_column)
    if corpus["tsv"]:
        for line0, data, first in raw_chunks(corpus["tsv"]):
            if line0 >= n:
                return
            yield "tsv", corpus["tsv"], line0, data, first, n, cols
        return
    sides = {kind: raw_chunks(corpus[kind]) for kind in SIDES}
    done = {kind: 0 for kind in SIDES}
    while sides:
        kind = min(sides, key=lambda k: done[k])
        chunk = next(sides[kind], None)
        if chunk is None:
            del sides[kind]
            continue
        line0, data, first = chunk
        done[kind] = line0 + data.count(b"\n") + 1
        yield kind, corpus[kind], line0, data, first, n, cols


class _Writer:
    """Appends one side's ids and lengths to the store's files."""

    def __init__(self, folder: Path, side: str, ids_dtype, len_dtype):
        self.ids = open(folder / f"{side}.ids", "wb")
        self.off = open(folder / f"{side}.off", "wb")
        self.len = open(folder / f"{side}.len", "wb")
        self.ids_dtype, self.len_dtype, self.tokens = ids_dtype, len_dtype, 0
        self.off.write(np.zeros(1, dtype=np.int64).tobytes())

    def add(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        self.ids.write(flat.astype(self.ids_dtype).tobytes())
        self.off.write((self.tokens + np.cumsum(lengths)).astype(np.int64).tobytes())
        self.len.write(lengths.astype(self.len_dtype).tobytes())
        self.tokens += int(lengths.sum())

    def close(self) -> None:
        for f in (self.ids, self.off, self.len):
            f.close()


def _keep(flat: np.ndarray, lengths: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return flat[np.repeat(mask, lengths)], lengths[mask]


def _encode_corpus(corpus: dict, n: int, cfg, results, writers: dict, bar) -> dict:
    """Encode one corpus (results: the workers' answers in task order) into the writers; its counts."""
    side_parts: dict[str, list] = {"src": [], "tgt": []}
    stats = {"total": n, "kept": 0, "empty": 0, "too_long": 0}

    def flush() -> None:
        k = min(sum(len(p[1]) for p in side_parts["src"]), sum(len(p[1]) for p in side_parts["tgt"]))
        if not k:
            return
        taken = {side: _take(side_parts[side], k) for side in SIDES}
        (sf, sl), (tf, tl) = taken["src"], taken["tgt"]
        empty = (sl == 0) | (tl == 0)
        long = ~empty & ((sl > cfg.max_len) | (tl > cfg.max_len))
        mask = ~empty & ~long
        stats["empty"] += int(empty.sum())
        stats["too_long"] += int(long.sum())
        stats["kept"] += int(mask.sum())
        writers["src"].add(*_keep(sf, sl, mask))
        writers["tgt"].add(*_keep(tf, tl, mask))
        bar.update(k)

    for kind, *answer in results:
        if kind == "tsv":
            side_parts["src"].append(answer[0])
            side_parts["tgt"].append(answer[1])
        else:
            side_parts[kind].append(answer[0])
        flush()
    flush()
    return stats


def _take(parts: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first k pairs' ids and lengths from a list of (flat, lengths) parts (consumed)."""
    flats, lens, got = [], [], 0
    while got < k:
        flat, lengths = parts.pop(0)
        need = k - got
        if len(lengths) > need:
            cut = int(lengths[:need].sum())
            parts.insert(0, (flat[cut:], lengths[need:]))
            flat, lengths = flat[:cut], lengths[:need]
        flats.append(flat)
        lens.append(lengths)
        got += len(lengths)
    return np.concatenate(flats), np.concatenate(lens)


def _encode_all(corpora, counts, cfg, folder: Path, workers: int, progress: bool) -> list[dict]:
    src_proc, tgt_proc = load_processors(folder)
    vocab = max(len(src_proc.vocab), len(tgt_proc.vocab))
    ids_dtype = np.uint16 if vocab <= 1 << 16 else np.int32
    len_dtype = np.uint16 if cfg.max_len < 1 << 16 else np.int32
    writers = {side: _Writer(folder, side, ids_dtype, len_dtype) for side in SIDES}
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(workers, _init_worker, (str(folder),)) if workers > 1 else None
    if pool is None:
        _init_worker(str(folder))
    stats = []
    try:
        with _bar(sum(counts), "encoding", progress) as bar:
            for corpus, n in zip(corpora, counts):
                tasks = _tasks(corpus, n, cfg)
                results = pool.imap(_encode_task, tasks) if pool else map(_encode_task, tasks)
                stats.append(_encode_corpus(corpus, n, cfg, results, writers, bar))
    finally:
        if pool is not None:
            pool.terminate()
        for w in writers.values():
            w.close()
    meta = {"ids_dtype": np.dtype(ids_dtype).name, "len_dtype": np.dtype(len_dtype).name,
            "src_tokens": writers["src"].tokens, "tgt_tokens": writers["tgt"].tokens}
    return stats, meta


def prepare_store(config: Config, target: Path, workers: int | None = None, progress: bool = True,
                  force: bool = False) -> dict:
    """Build the store of config's training data at `target` unless an up-to-date one is there.

    Returns {"prepared": bool, "reason": why, "meta": the store's meta.json, "seconds": per phase}.
    """
    cfg, seed = config.data, config.train.seed
    reason = staleness(target, cfg, seed)
    if reason is None and not force:
        return {"prepared": False, "reason": "up to date", "meta": _meta(target), "seconds": {}}
    corpora = corpora_of(cfg)
    stamps = file_stamps(cfg)
    workers = workers or cfg.workers or os.cpu_count() or 1
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.preparing-", dir=target.parent))
    seconds = {}
    try:
        t0 = time.perf_counter()
        counts = _pair_counts(corpora, cfg, progress)
        src, tgt = _sample(corpora, counts, cfg, seed)
        seconds["reading"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with _bar(len(src), "tokenizer training", progress) as bar:
            _train_processors(cfg, src, tgt, tmp)
            bar.update(len(src))
        del src, tgt
        seconds["tokenizer"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        stats, arrays = _encode_all(corpora, counts, cfg, tmp, workers, progress)
        seconds["encoding"] = time.perf_counter() - t0
        start, entries = 0, []
        for corpus, st in zip(corpora, stats):
            entries.append({"name": corpus["name"], "start": start, "weight": corpus["weight"], **st})
            start += st["kept"]
        meta = {"format": FORMAT, "pairs": start, "corpora": entries, "files": stamps,
                "fingerprint": data_fingerprint(cfg, seed), "sample_pairs": min(sum(counts), cfg.tokenizer_sample),
                "workers": workers, **arrays}
        if stamps != file_stamps(cfg):
            raise UserError("a training file changed while it was being prepared; prepare again once it is complete")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {"prepared": True, "reason": reason, "meta": meta, "seconds": seconds}


def _meta(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text(encoding="utf-8"))


def prepare(config: Config, model_dir: Path, workers: int | None = None, force: bool = False,
            progress: bool = True) -> dict:
    """`attnmt prepare`: the store of a config's training data, where `attnmt train` will look for it."""
    from attnmt.data.loading import _in_memory_only
    from attnmt.data.store import store_location

    blocker = _in_memory_only(config)
    if blocker:
        raise UserError(f"config: {blocker} works on the training text in memory, which a prepared store does not "
                        f"hold; remove {blocker} to prepare a store, or train without one")
    if config.data.store == "never":
        raise UserError("config: data.store is never, so training would not read a store; set data.store: auto")
    location = store_location(config.data, model_dir, config.train.seed)
    done = prepare_store(config, location, workers=workers, progress=progress, force=force)
    done["location"] = location
    return done
