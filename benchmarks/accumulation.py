"""Gradient accumulation on the Multi30k Transformer recipe: 2,048 tokens x accum_steps 4 against 8,192 x 1.

    python -m benchmarks.accumulation [--updates 40] [--exact-updates 20] [--multi30k ../shared/data/multi30k]

recipes/multi30k/de_en_transformer.yaml trained from one seed (so from the same initial weights) for a
fixed number of updates, once with ``train.batch_tokens=2048 train.accum_steps=4`` and once with
``train.batch_tokens=8192 train.accum_steps=1``, each on one thread, the two runs side by side;
``train.log_every=1`` logs every update's loss (train_log.jsonl: the summed label-smoothed loss of
the update over its target tokens). Two comparisons:

* ``exact``: the recipe with dropout 0, and the 8,192-token run's update k made of exactly the sentences
  of the accumulated run's inner batches 4k .. 4k+3 (those four 2,048-token batches joined into one;
  this script swaps the trainer's batch maker for that). Both runs then compute the same gradient, in
  another order and with other padding, so the loss per update can differ only by float32 rounding.
* ``recipe``: the config as it is (dropout 0.2), each run batching as training does: a batch of 8,192
  tokens holds other sentences than four consecutive batches of 2,048, and the dropout masks differ,
  so the curves agree only as far as what the batches hold.

Writes benchmarks/results/accumulation.json: each run's loss and learning rate per update, and per
comparison the largest absolute and relative difference of the losses.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "recipes" / "multi30k" / "de_en_transformer.yaml"
SMALL, ACCUM = 2048, 4


def overrides(multi30k: Path, updates: int, batch_tokens: int, accum_steps: int, dropout: float | None) -> list[str]:
    data = {f"data.{side}": str(multi30k / f"{split}.{lang}.gz")
            for side, split, lang in (("train_src", "train", "de"), ("train_tgt", "train", "en"),
                                      ("valid_src", "val", "de"), ("valid_tgt", "val", "en"),
                                      ("test_src", "test_2016_flickr", "de"), ("test_tgt", "test_2016_flickr", "en"))}
    settings = {**data, "train.max_steps": updates, "train.log_every": 1, "train.threads": 1,
                "train.batch_tokens": batch_tokens, "train.accum_steps": accum_steps,
                "train.valid_every": 10**6, "train.valid_bleu_sample": 0, "train.save_every": 10**6,
                "train.tensorboard": False, "train.progress": False}
    if dropout is not None:
        settings["model.dropout"] = dropout
    return [f"{key}={value}" for key, value in settings.items()]


def _joined_batches(original):
    """The trainer's batch maker, making each batch from ACCUM consecutive batches of SMALL tokens."""
    import dataclasses

    def training_batches(data, config, epoch: int) -> list[list[int]]:
        small = dataclasses.replace(config, train=dataclasses.replace(config.train, batch_tokens=SMALL))
        batches = original(data, small, epoch=epoch)
        return [sum((batches[j] for j in range(k, k + ACCUM)), [])
                for k in range(0, len(batches) - ACCUM + 1, ACCUM)]

    return training_batches


def run(settings: list[str], model_dir: str, join: bool) -> dict:
    """One training run (in a process of its own); its loss and learning rate per update."""
    import attnmt.train.trainer as trainer
    from attnmt.config.schema import load_config

    if join:
        trainer.training_batches = _joined_batches(trainer.training_batches)
    started = time.perf_counter()
    trainer.train(load_config(CONFIG, settings), model_dir, overwrite=True, quiet=True)
    wall = time.perf_counter() - started
    records = [json.loads(line) for line in (Path(model_dir) / "train_log.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    return {"steps": [r["step"] for r in train], "loss": [r["loss"] for r in train],
            "lr": [r["lr"] for r in train], "wall_s": round(wall, 1)}


def differences(a: list[float], b: list[float]) -> dict:
    absolute = [abs(x - y) for x, y in zip(a, b)]
    relative = [d / abs(y) for d, y in zip(absolute, b)]
    worst = max(range(len(absolute)), key=absolute.__getitem__)
    return {"max_abs_diff": absolute[worst], "at_update": worst + 1, "max_rel_diff": max(relative),
            "mean_abs_diff": sum(absolute) / len(absolute),
            "last10_mean_loss": [sum(x[-10:]) / len(x[-10:]) for x in (a, b)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--updates", type=int, default=40, help="updates of the recipe comparison")
    parser.add_argument("--exact-updates", type=int, default=20, help="updates of the exact comparison")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/accumulation.json)")
    args = parser.parse_args()
    multi30k = Path(args.multi30k).resolve()
    plans = {  # name -> (updates, dropout override, join the big run's batches)
        "exact": (args.exact_updates, 0.0, True),
        "recipe": (args.updates, None, False),
    }
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {}
        for name, (updates, dropout, join) in plans.items():
            for label, tokens, accum, joined in ((f"{SMALL}x{ACCUM}", SMALL, ACCUM, False),
                                                 (f"{SMALL * ACCUM}x1", SMALL * ACCUM, 1, join)):
                settings = overrides(multi30k, updates, tokens, accum, dropout)
                futures[name, label] = (settings, pool.submit(run, settings, f"{tmp}/{name}_{label}", joined))
        for (name, label), (settings, future) in futures.items():
            results.setdefault(name, {"runs": {}})["runs"][label] = {"overrides": settings[6:], **future.result()}
            print(f"{name} {label}: done in {results[name]['runs'][label]['wall_s']} s", flush=True)
    for name, comparison in results.items():
        a, b = (comparison["runs"][label]["loss"] for label in (f"{SMALL}x{ACCUM}", f"{SMALL * ACCUM}x1"))
        comparison.update(updates=len(a), **differences(a, b))
        print(f"{name}: {len(a)} updates, largest |difference| {comparison['max_abs_diff']:.3g} (relative "
              f"{comparison['max_rel_diff']:.3g})", flush=True)
    payload = {"config": str(CONFIG.relative_to(ROOT)), "seed": 1, "threads_per_run": 1,
               "comparisons": {"exact": "dropout 0; each 8,192-token update holds the sentences of the accumulated "
                                        "run's 4 inner batches", "recipe": "the config as it is (dropout 0.2); "
                                        "each run batches as training does"},
               **results}
    path = write_result("accumulation", payload, args.out)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
