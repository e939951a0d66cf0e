"""The token store's preparation: read the training corpora once, train the tokenizers on a sample, encode
in parallel. `attnmt train` runs it when its store is missing or stale; `attnmt prepare` ahead of time.

Three phases, each with a progress bar in pairs/s:

1. reading: count each file's lines (raw bytes, no decoding), check that parallel files pair up,
   then draw data.tokenizer_sample pairs (seeded by train.seed; all of them when the corpus is not
   larger) and decode only those;
2. tokenizer training: sentencepiece (or the word tokenizer) and the vocabularies on that sample,
   with sentencepiece's own input_sentence_size / shuffle_input_sentence as the bound;
3. encoding: N worker processes encode chunks of about a megabyte of raw text each (decoding,
   cleaning and tokenizing as attnmt.data.corpus and TextProcessor do), in order; the main process
   appends their ids to the store and drops empty and over-long pairs, counted as
   attnmt.data.corpus.filter_pairs counts them.

Held-out pairs (data.valid_size / data.test_size) and the data transforms (attnmt/data/transforms.py)
need more of the text than a sample: the first reads every pair once to choose the held-out ones
(which the encoding then skips, and the store keeps as valid.* / test.*); the transforms read the
pairs they draw, and the pairs they add are encoded after the corpora, into the same store. With a
`links` transform, each stored pair's word links are written beside its ids (data/store_links.py),
checked against the pair's words. A fine-tuning run (or a resumed run whose store is gone) encodes
with a model folder's tokenizers instead of training them.

Everything is written into a temporary folder next to the store, which is renamed into place only
when complete: a killed or failed preparation leaves nothing that a later run takes for a store.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attnmt.config.schema import Config
from attnmt.data.chunks import count_lines, decode_chunk, raw_chunks, split_tsv, tsv_blank
from attnmt.data.dataset import TextProcessor, load_processors
from attnmt.data.split import split_positions, write_held_out
from attnmt.data.store import (
    FORMAT,
    SIDES,
    copy_tokenizers,
    corpora_of,
    data_fingerprint,
    file_stamps,
    replace_dir,
    staleness,
    tokenizer_hash,
)
from attnmt.data.store_links import store_corpus_links
from attnmt.data.tokenize import train_tokenizer
from attnmt.data.transforms import Origin, Pairs, apply_transforms
from attnmt.data.vocab import Vocabulary
from attnmt.errors import UserError
from attnmt.runtime.safe_write import make_folder


def _bar(total: int | None, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="pairs", unit_scale=True, dynamic_ncols=True, leave=False,
                disable=not enabled or not sys.stderr.isatty(), file=sys.stderr)


def _pair_counts(corpora: list[dict], cfg, progress: bool) -> tuple[list[int], list[np.ndarray]]:
    """Pairs per corpus (lines of its files; parallel files must have equal line counts), and the lines
    (from 0) of each with a side over MAX_LINE_BYTES (read as empty: attnmt.data.chunks)."""
    counts, longs = [], []
    with _bar(None, "reading", progress) as bar:
        for corpus in corpora:
            long: list[int] = []
            if corpus["tsv"]:
                n = count_lines(corpus["tsv"], tsv=True, progress=bar, long=long)
            else:
                n = count_lines(corpus["src"], progress=bar, long=long)
                m = count_lines(corpus["tgt"], long=long)
                if n != m:
                    raise UserError(
                        f"parallel files differ in length: {corpus['src']} has {n} lines but {corpus['tgt']} "
                        f"has {m}; line i of one must translate line i of the other, so realign them")
            counts.append(n)
            longs.append(np.unique(np.asarray(long, dtype=np.int64)))
    return counts, longs


def _count_long_lines(stats: list[dict], longs: list[np.ndarray], counts: list[int], excluded) -> None:
    """Each corpus's pairs dropped for a line over MAX_LINE_BYTES as `long_lines`; the encoding counted those
    not held out among the empty ones, and in the total: they are taken out of both."""
    first = 0
    for st, long, n in zip(stats, longs, counts):
        long = long[long < n]
        held = 0 if excluded is None else int(np.isin(long + first, excluded).sum())
        st["long_lines"] = len(long)
        st["empty"] -= len(long) - held
        st["total"] -= len(long) - held
        first += n


def _sample(pairs: Pairs, cfg, seed: int) -> tuple[list[str], list[str], bool]:
    """The tokenizer sample's source and target sentences, in order, and whether they are a sample (False:
    every pair, when the corpus is not larger than data.tokenizer_sample)."""
    total = len(pairs)
    sampled = total > cfg.tokenizer_sample
    if sampled:
        chosen = np.sort(np.random.default_rng(seed).choice(total, size=cfg.tokenizer_sample, replace=False))
    else:
        chosen = np.arange(total)
    taken = pairs.take(chosen.tolist())
    return [s for s, _ in taken], [t for _, t in taken], sampled


def _lines_of(corpus: dict, wanted: np.ndarray, cfg) -> list[tuple[str, str]]:
    """The pairs at lines `wanted` (sorted, 0-based) of one corpus."""
    if corpus["tsv"]:
        cols = (cfg.tsv_src_column, cfg.tsv_tgt_column)
        return _pick(corpus["tsv"], wanted, lambda rows, numbers, p=corpus["tsv"]: split_tsv(rows, p, numbers, cols),
                     tsv_blank(cols))
    return list(zip(_pick(corpus["src"], wanted, None), _pick(corpus["tgt"], wanted, None)))


def _corpus_pairs(corpora: list[dict], counts: list[int], cfg, excluded: np.ndarray | None) -> Pairs:
    """The corpora's pairs (less the `excluded` lines, counted over the corpora in order), read when asked for."""
    total = sum(counts)
    kept = None if excluded is None else np.delete(np.arange(total, dtype=np.int64), excluded)

    def line(i: int) -> int:
        return i if kept is None else int(kept[i])

    def take(indices) -> list[tuple[str, str]]:
        lines = np.asarray(indices, dtype=np.int64) if kept is None else kept[np.asarray(indices, dtype=np.int64)]
        out, first = [], 0
        for corpus, n in zip(corpora, counts):
            mine = lines[(lines >= first) & (lines < first + n)] - first
            if len(mine):
                out += _lines_of(corpus, mine, cfg)
            first += n
        return out

    return Pairs(total - (0 if excluded is None else len(excluded)), take, lambda i: ((line(i), 0, 0),))


def _hold_out(corpora: list[dict], counts: list[int], cfg, seed: int):
    """The lines held out (sorted, over the corpora in order) and the held-out pairs (data/split.py)."""
    if not (cfg.valid_size or cfg.test_size):
        return None, {}
    pairs = [pair for corpus, n in zip(corpora, counts) for pair in _lines_of(corpus, np.arange(n), cfg)]
    where = np.asarray(split_positions(pairs, cfg.valid_size, cfg.test_size, seed))
    held = {name: [pairs[i] for i in np.flatnonzero(where == k)] for name, k in (("valid", 1), ("test", 2))}
    return np.flatnonzero(where != 0).astype(np.int64), held


def _pick(path: str, wanted: np.ndarray, parse, blank: bytes = b"") -> list:
    """The items of lines `wanted` (sorted, 0-based) of a file (a line over MAX_LINE_BYTES reads as `blank`)."""
    out: list = []
    k = 0
    for line0, data, first in raw_chunks(path, long=[], blank=blank):
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


def _train_processors(cfg, src: list[str], tgt: list[str], folder: Path, sampled: bool) -> None:
    """The tokenizers and vocabularies of the sample into `folder`; sentencepiece's own sampling bounded by
    the sample's size when it is one (else off: every sentence, in order)."""
    def make(texts: list[str], name: str) -> None:
        tokenizer = train_tokenizer(cfg.tokenizer, texts, cfg.vocab_size, folder, name, lowercase=cfg.lowercase,
                                    sample=len(texts) if sampled else 0)
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
    if multiprocessing.parent_process() is not None:  # a pool worker: a forked copy of the command's SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # handler would keep Pool.terminate waiting on it
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
        for line0, data, first in raw_chunks(corpus["tsv"], long=[], blank=tsv_blank(cols)):
            if line0 >= n:
                return
            yield "tsv", corpus["tsv"], line0, data, first, n, cols
        return
    sides = {kind: raw_chunks(corpus[kind], long=[]) for kind in SIDES}
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


def _encode_corpus(corpus: dict, n: int, cfg, results, writers: dict, bar, first_line: int,
                   excluded: np.ndarray | None, dropped: list) -> dict:
    """Encode one corpus (results: the workers' answers in task order) into the writers; its counts.
    `first_line`: its first line counted over the corpora; `excluded`: held-out lines, skipped;
    `dropped` gets the lines not kept (held out, empty or too long)."""
    side_parts: dict[str, list] = {"src": [], "tgt": []}
    held = 0 if excluded is None else int(((excluded >= first_line) & (excluded < first_line + n)).sum())
    stats = {"total": n - held, "kept": 0, "empty": 0, "too_long": 0}
    done = [0]  # lines of this corpus flushed so far

    def flush() -> None:
        k = min(sum(len(p[1]) for p in side_parts["src"]), sum(len(p[1]) for p in side_parts["tgt"]))
        if not k:
            return
        taken = {side: _take(side_parts[side], k) for side in SIDES}
        (sf, sl), (tf, tl) = taken["src"], taken["tgt"]
        start = first_line + done[0]
        out = np.zeros(k, dtype=bool)
        if excluded is not None:
            lo, hi = np.searchsorted(excluded, [start, start + k])
            out[excluded[lo:hi] - start] = True
        empty = ~out & ((sl == 0) | (tl == 0))
        long = ~out & ~empty & ((sl > cfg.max_len) | (tl > cfg.max_len))
        mask = ~out & ~empty & ~long
        stats["empty"] += int(empty.sum())
        stats["too_long"] += int(long.sum())
        stats["kept"] += int(mask.sum())
        writers["src"].add(*_keep(sf, sl, mask))
        writers["tgt"].add(*_keep(tf, tl, mask))
        dropped.append((start + np.flatnonzero(~mask)).astype(np.int64))
        done[0] += k
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


def _encode_added(pairs: Pairs, cfg, writers: dict, bar) -> tuple[dict, dict[int, Origin]]:
    """Encode the pairs the transforms added (in this process) after the corpora; their counts, and the
    origins of those that have one (by their position among the pairs written)."""
    src_proc, tgt_proc = _WORKER["procs"]
    added = pairs.added
    stats = {"total": len(added), "kept": 0, "empty": 0, "too_long": 0}
    if not added:
        return stats, {}
    (sf, sl), (tf, tl) = _ids(src_proc, [s for s, _ in added]), _ids(tgt_proc, [t for _, t in added])
    empty = (sl == 0) | (tl == 0)
    long = ~empty & ((sl > cfg.max_len) | (tl > cfg.max_len))
    mask = ~empty & ~long
    stats.update(kept=int(mask.sum()), empty=int(empty.sum()), too_long=int(long.sum()))
    writers["src"].add(*_keep(sf, sl, mask))
    writers["tgt"].add(*_keep(tf, tl, mask))
    kept = [pairs.added_origins[i] for i in np.flatnonzero(mask)]
    parts = {k: o for k, o in enumerate(kept) if o is not None}
    bar.update(len(added))
    return stats, parts


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


def _encode_all(corpora, counts, cfg, folder: Path, workers: int, progress: bool, excluded, pairs: Pairs):
    src_proc, tgt_proc = load_processors(folder)
    vocab = max(len(src_proc.vocab), len(tgt_proc.vocab))
    ids_dtype = np.uint16 if vocab <= 1 << 16 else np.int32
    len_dtype = np.uint16 if cfg.max_len < 1 << 16 else np.int32
    writers = {side: _Writer(folder, side, ids_dtype, len_dtype) for side in SIDES}
    dropped: list[np.ndarray] = []
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = multiprocessing.get_context(method).Pool(workers, _init_worker, (str(folder),)) if workers > 1 else None
    _init_worker(str(folder))  # this process encodes the added pairs
    stats, first = [], 0
    finished = False
    try:
        with _bar(sum(counts) + len(pairs.added), "encoding", progress) as bar:
            for corpus, n in zip(corpora, counts):
                tasks = _tasks(corpus, n, cfg)
                results = pool.imap(_encode_task, tasks) if pool else map(_encode_task, tasks)
                stats.append(_encode_corpus(corpus, n, cfg, results, writers, bar, first, excluded, dropped))
                first += n
            added, parts = _encode_added(pairs, cfg, writers, bar)
        finished = True
    finally:
        if pool is not None and finished:  # the workers end on the queue's sentinels, no signal needed
            pool.close()
            pool.join()
        elif pool is not None:
            pool.terminate()
        for w in writers.values():
            w.close()
    np.save(folder / "dropped.npy", np.concatenate(dropped) if dropped else np.zeros(0, dtype=np.int64))
    meta = {"ids_dtype": np.dtype(ids_dtype).name, "len_dtype": np.dtype(len_dtype).name,
            "src_tokens": writers["src"].tokens, "tgt_tokens": writers["tgt"].tokens}
    return stats, added, parts, meta


def _entries(corpora: list[dict], stats: list[dict], added: dict) -> list[dict]:
    """meta.json's corpora: each with its first pair; the transforms' pairs last, weighted so that an
    epoch reads each once and the corpora as many pairs as without them (attnmt/data/order.py)."""
    start, entries = 0, []
    for corpus, st in zip(corpora, stats):
        entries.append({"name": corpus["name"], "start": start, "weight": corpus["weight"], **st})
        start += st["kept"]
    if added["total"]:
        weights = sum(corpus["weight"] for corpus in corpora)
        weight = added["kept"] * weights / start if start else 1.0
        entries.append({"name": "transforms", "start": start, "weight": weight or 1.0, **added})
    return entries


SMALL_PAIRS = 50_000  # a corpus this small is encoded in this process: starting workers would cost more


def _workers(cfg, pairs: int, workers: int | None) -> int:
    """Encoding processes: as asked, else data.workers, else one per core (one for a small corpus)."""
    if workers or cfg.workers:
        return workers or cfg.workers
    return 1 if pairs < SMALL_PAIRS else os.cpu_count() or 1


def prepare_store(config: Config, target: Path, workers: int | None = None, progress: bool = True,
                  force: bool = False, tokenizers: Path | None = None) -> dict:
    """Build the store of config's training data at `target` unless an up-to-date one is there.

    ``tokenizers``: a folder whose tokenizers and vocabularies encode the corpus (fine-tuning, a resumed
    run), instead of ones trained on a sample of it. Returns {"prepared": bool, "reason": why, "meta":
    the store's meta.json, "seconds": per phase}.
    """
    cfg, seed = config.data, config.train.seed
    reason = staleness(target, cfg, seed, tokenizers)
    if reason is None and not force:
        return {"prepared": False, "reason": "up to date", "meta": _meta(target), "seconds": {}}
    corpora = corpora_of(cfg)
    stamps = file_stamps(cfg)
    make_folder(target.parent, "store folder" if cfg.store_dir else "model folder")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.preparing-", dir=target.parent))
    try:
        meta = _build(config, corpora, tmp, workers, progress, tokenizers)
        meta["files"] = stamps
        if stamps != file_stamps(cfg):
            raise UserError("a training file changed while it was being prepared; prepare again once it is complete")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {"prepared": True, "reason": reason, "meta": meta, "seconds": meta["seconds"]}


def _build(config: Config, corpora: list[dict], tmp: Path, workers: int | None, progress: bool,
           tokenizers: Path | None) -> dict:
    """The three phases into `tmp`, then the links; the store's meta.json (less the files' stamps)."""
    cfg, seed = config.data, config.train.seed
    seconds = {}
    t0 = time.perf_counter()
    counts, longs = _pair_counts(corpora, cfg, progress)
    workers = _workers(cfg, sum(counts), workers)
    excluded, held = _hold_out(corpora, counts, cfg, seed)
    pairs = _corpus_pairs(corpora, counts, cfg, excluded)
    records = apply_transforms(cfg, pairs, seed)
    seconds["reading"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if tokenizers is not None:
        copy_tokenizers(tokenizers, tmp)
        sample_pairs = 0
    else:
        src, tgt, sampled = _sample(pairs, cfg, seed)
        with _bar(len(src), "tokenizer training", progress) as bar:
            _train_processors(cfg, src, tgt, tmp, sampled)
            bar.update(len(src))
        sample_pairs = len(src)
        del src, tgt
    seconds["tokenizer"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    stats, added, parts, arrays = _encode_all(corpora, counts, cfg, tmp, workers, progress, excluded, pairs)
    _count_long_lines(stats, longs, counts, excluded)
    seconds["encoding"] = time.perf_counter() - t0
    entries = _entries(corpora, stats, added)
    n_corpus = sum(st["kept"] for st in stats)
    (tmp / "added.origins").write_text(json.dumps({str(n_corpus + k): v for k, v in parts.items()}),
                                      encoding="utf-8")
    if held:
        write_held_out(tmp, held["valid"], held["test"])
    t0 = time.perf_counter()
    links = store_corpus_links(cfg, corpora, counts, tmp, [parts.get(k) for k in range(added["kept"])])
    if links is not None:
        seconds["links"] = time.perf_counter() - t0
    return {"format": FORMAT, "pairs": n_corpus + added["kept"], "corpus_pairs": n_corpus, "corpora": entries,
            "fingerprint": data_fingerprint(cfg, seed), "tokenizers": tokenizer_hash(tmp),
            "tokenizers_from": None if tokenizers is None else str(tokenizers),
            "sample_pairs": sample_pairs, "lines": sum(counts), "transforms": records, "links": links,
            "workers": workers, "seconds": seconds, **arrays}


def _meta(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text(encoding="utf-8"))


def prepare(config: Config, model_dir: Path, workers: int | None = None, force: bool = False,
            progress: bool = True) -> dict:
    """`attnmt prepare`: the store of a config's training data, where `attnmt train` will look for it."""
    from attnmt.data.store import store_location

    location = store_location(config.data, model_dir, config.train.seed)
    done = prepare_store(config, location, workers=workers, progress=progress, force=force)
    done["location"] = location
    return done
