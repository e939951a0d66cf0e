"""Training data at scale: preparing the token store and training from it, at several corpus sizes.

For each --sizes N, builds a German-English corpus of N pairs under /tmp from Tatoeba (the corpus
builder of benchmarks/prepare.py: 1-3 pairs joined, seeded), then, each in its own process so that
the peak memory (getrusage maxrss) is its own:

* prepare: `prepare_store` with --workers processes into a shared store folder (data.store_dir):
  seconds per phase, peak memory;
* train (store): `attnmt.train.trainer.train` of a tiny rnnsearch for --steps steps on one thread
  (train.threads=1) from that prepared store: seconds from calling train to the end of the first
  step (the first step's train_log.jsonl timestamp), peak memory, target tokens/s (the median of
  the per-step rates after the first step).

    .venv/bin/python -m benchmarks.data_scale --sizes 1000000 10000000 40000000 --workers 2

writes benchmarks/results/data_scale.json; every corpus and store is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import run_child, write_result
from benchmarks.prepare import config as prepare_config
from benchmarks.prepare import make_corpus, peak_mb

FOLDER = Path("/tmp/attnmt-bench-data-scale")
TARGET_SIZES = (1_000_000, 10_000_000, 40_000_000)


def config(folder: Path, sample: int, steps: int):
    """benchmarks/prepare.py's data settings, a shared store folder and a tiny rnnsearch."""
    from attnmt.config.schema import ModelConfig

    cfg = prepare_config(folder, sample)
    cfg.data.store_dir = str(folder / "stores")
    cfg.model = ModelConfig.of(type="rnnsearch", emb_size=64, hidden_size=64, dropout=0.0)
    t = cfg.train
    t.max_steps, t.threads, t.log_every, t.valid_every, t.seed = steps, 1, 1, 10 ** 9, 1
    return cfg


def child(what: str, folder: Path, workers: int, sample: int, steps: int) -> dict:
    if what == "prepare":
        from attnmt.data.store import store_location
        from attnmt.data.store_prepare import prepare_store

        cfg = config(folder, sample, steps)
        t0 = time.perf_counter()
        done = prepare_store(cfg, store_location(cfg.data, folder, cfg.train.seed), workers=workers, progress=False)
        return {"seconds": round(time.perf_counter() - t0, 2),
                "phases_s": {k: round(v, 2) for k, v in done["seconds"].items()},
                "pairs": done["meta"]["pairs"], "peak_rss_mb": peak_mb()}
    from attnmt.train.trainer import train

    cfg = config(folder, sample, steps)
    model_dir = folder / f"model_{what}"
    called = time.time()
    train(cfg, model_dir, overwrite=True, quiet=True)
    ended = time.time()
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text().splitlines()]
    steps_ = [e for e in events if e["event"] == "train"]
    start = next(e for e in events if e["event"] == "start")
    rates = [e["tgt_tokens_per_s"] for e in steps_[1:]]
    return {"train_to_start_event_s": round(start["time"] - called, 2),
            "train_to_first_step_s": round(steps_[0]["time"] - called, 2),
            "first_step_s": round(steps_[0]["time"] - start["time"], 2),
            "train_call_s": round(ended - called, 2), "steps": len(steps_),
            "tgt_tokens_per_s_median": round(statistics.median(rates)),
            "tgt_tokens_per_s_mean": round(statistics.fmean(rates)),
            "prepared_inside_train": any("prepared" in e for e in events if e["event"] == "data"),
            "train_pairs": start["train_pairs"], "parameters": start["parameters"], "peak_rss_mb": peak_mb()}


def run(what: str, folder: Path, args) -> dict:
    return run_child("data_scale", ["--child", what, "--folder", str(folder), "--workers", str(args.workers),
                                    "--tokenizer-sample", str(args.tokenizer_sample), "--steps", str(args.steps)],
                     what)


def one_size(pairs: int, args) -> dict:
    shutil.rmtree(FOLDER, ignore_errors=True)
    FOLDER.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        make_corpus(FOLDER, pairs, args.seed)
        built = time.perf_counter() - t0
        size = sum((FOLDER / f).stat().st_size for f in ("train.de", "train.en"))
        out = {"pairs": pairs, "megabytes": round(size / 1e6, 1), "corpus_build_s": round(built, 1)}
        for what in ("prepare", "train_store"):
            out[what] = run(what, FOLDER, args)
            print(f"{pairs} {what}: {out[what]}", file=sys.stderr, flush=True)
        return out
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)


def not_run(pairs: int, largest: dict) -> str:
    """Why a target size (1, 10 or 40 million pairs) was not run: its preparation time at the measured rate."""
    seconds = largest["prepare"]["seconds"] * pairs / largest["pairs"]
    return (f"not measured: about {seconds / 60:.0f} minutes of preparation alone at the rate measured at "
            f"{largest['pairs']:,} pairs, beyond the time this run had")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tokenizer-sample", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child")
    ap.add_argument("--folder")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(args.folder), args.workers, args.tokenizer_sample, args.steps)))
        return
    sizes = sorted(args.sizes)
    results = [one_size(n, args) for n in sizes]
    first = results[0]["train_store"]
    for r in results:
        r["train_store"]["peak_memory_over_smallest"] = round(r["train_store"]["peak_rss_mb"] / first["peak_rss_mb"],
                                                             3)
    path = write_result("data_scale", {
        "corpus": {"source": "tatoeba deu-eng, 1-3 pairs joined", "tokenizer": "bpe 16000 joint",
                   "tokenizer_sample": args.tokenizer_sample, "workers": args.workers},
        "model": {"type": "rnnsearch", "emb_size": 64, "hidden_size": 64, "batch_tokens": 4096, "threads": 1,
                  "steps": args.steps},
        "sizes": results,
        "not_run": {str(n): not_run(n, results[-1]) for n in TARGET_SIZES if n not in sizes}}, args.out)
    print(path.read_text())


if __name__ == "__main__":
    main()
