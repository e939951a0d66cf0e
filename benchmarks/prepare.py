"""Preparing a large corpus: the token store (attnmt prepare) per phase, against sentencepiece's own rate.

Builds a German-English corpus of --pairs pairs under /tmp by joining 1-3 Tatoeba pairs at a time
(../shared/data/tatoeba/deu-eng.tsv.gz, seeded), then measures, each in its own process so that the
peak memory (getrusage maxrss, the process and its workers) is its own:

* store: `prepare_store` with --workers processes, seconds per phase;
* spm: sentencepiece's own encoding of the same sentences with the same model, --workers processes
  (the rate the store's encoding phase is compared with);
* first batch: opening the prepared store, building epoch 0's batches and collating the first one.

    .venv/bin/python -m benchmarks.prepare --pairs 1000000 --workers 2

writes benchmarks/results/prepare.json; the corpus is deleted afterwards.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import shutil
import time
from pathlib import Path

from benchmarks.common import run_child, write_result

TATOEBA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tatoeba" / "deu-eng.tsv.gz"


def make_corpus(folder: Path, pairs: int, seed: int) -> None:
    rows = [line.split("\t")[:2] for line in gzip.open(TATOEBA, "rt", encoding="utf-8").read().splitlines()]
    rng = random.Random(seed)
    with open(folder / "train.de", "w", encoding="utf-8") as de, open(folder / "train.en", "w", encoding="utf-8") as en:
        for _ in range(pairs):
            picked = [rows[rng.randrange(len(rows))] for _ in range(rng.randint(1, 3))]
            de.write(" ".join(p[1] for p in picked) + "\n")
            en.write(" ".join(p[0] for p in picked) + "\n")


def config(folder: Path, sample: int):
    from attnmt.config.schema import Config, DataConfig, TrainConfig

    return Config(name="bench", data=DataConfig(train_src=str(folder / "train.de"), train_tgt=str(folder / "train.en"),
                                                tokenizer="bpe", vocab_size=16000, joint_vocab=True, max_len=100,
                                                tokenizer_sample=sample),
                  train=TrainConfig(progress=False, batch_tokens=4096))


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


def child(what: str, folder: Path, workers: int, sample: int) -> dict:
    t0 = time.perf_counter()
    if what == "store":
        from attnmt.data.store_prepare import prepare_store

        done = prepare_store(config(folder, sample), folder / "store", workers=workers, progress=False)
        return {"seconds": time.perf_counter() - t0, "phases_s": done["seconds"], "pairs": done["meta"]["pairs"],
                "peak_rss_mb": peak_mb()}
    if what == "spm":
        return spm_rate(folder, workers)
    import torch

    from attnmt.data.loading import batch_of, training_batches
    from attnmt.data.store import StoreData

    data = StoreData(folder / "store")
    batches = training_batches(data, config(folder, sample), epoch=0)
    batch_of(data, batches[0], torch.device("cpu"))
    return {"seconds": time.perf_counter() - t0, "batches": len(batches), "peak_rss_mb": peak_mb()}


def _spm_encode(args):
    import sentencepiece as spm

    model, lines = args
    sp = spm.SentencePieceProcessor(model_file=model)
    return sum(len(x) for x in sp.encode(lines))


def spm_rate(folder: Path, workers: int) -> dict:
    """sentencepiece alone, on the store's model, both sides, in `workers` processes."""
    import multiprocessing

    model = str(folder / "store" / "joint.model")
    lines = (folder / "train.de").read_text(encoding="utf-8").splitlines()
    lines += (folder / "train.en").read_text(encoding="utf-8").splitlines()
    chunks = [(model, lines[k:k + 20000]) for k in range(0, len(lines), 20000)]
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        tokens = sum(pool.map(_spm_encode, chunks))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "pairs_per_s": len(lines) / 2 / seconds, "tokens": tokens}


def run(what: str, folder: Path, workers: int, sample: int) -> dict:
    return run_child("prepare", ["--child", what, "--folder", str(folder), "--workers", str(workers),
                                 "--tokenizer-sample", str(sample)], what)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tokenizer-sample", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child")
    ap.add_argument("--folder")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(args.folder), args.workers, args.tokenizer_sample)))
        return
    folder = Path("/tmp/attnmt-bench-prepare")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        make_corpus(folder, args.pairs, args.seed)
        size = sum((folder / f).stat().st_size for f in ("train.de", "train.en"))
        results = {name: run(name, folder, args.workers, args.tokenizer_sample)
                   for name in ("store", "spm", "first_batch")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    n = args.pairs
    store = results["store"]
    phases = {k: {"seconds": round(v, 2), "pairs_per_s": round(n / v)} for k, v in store["phases_s"].items()}
    summary = {
        "store_encoding_over_spm_rate": round(phases["encoding"]["pairs_per_s"] / results["spm"]["pairs_per_s"], 2),
    }
    path = write_result("prepare", {
        "corpus": {"pairs": n, "megabytes": round(size / 1e6, 1), "source": "tatoeba deu-eng, 1-3 pairs joined",
                   "tokenizer": "bpe 16000 joint", "tokenizer_sample": args.tokenizer_sample,
                   "workers": args.workers},
        "store_prepare": {**store, "phases": phases}, "spm_encoding": results["spm"],
        "store_first_batch": results["first_batch"], "ratios": summary}, args.out)
    print(path.read_text())


if __name__ == "__main__":
    main()
