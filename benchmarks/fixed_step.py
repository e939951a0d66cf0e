"""BLEU and AER at a fixed number of updates: this checkout against an earlier one, beside the seed-to-seed spread.

Each --run CONFIG:STEPS is trained for STEPS updates, each run its own process on one thread
(`attnmt train CONFIG --set train.max_steps=STEPS --set train.seed=S --set train.threads=1
--set train.max_time_s=100000`), --jobs of them at a time: once per --seed with this checkout, and once per
--before-seed with the attnmt of --before DIR (a checkout of an earlier commit, run from DIR, with DIR's own copy of
CONFIG where it has one: a key added since would be refused there; its relative data paths resolve in DIR, so link
DIR/data to this checkout's data/). A model folder under --root that already holds a run finished at STEPS is reused
(delete it to train again). Every run's last checkpoint is then scored by this checkout with beam 5: BLEU (sacreBLEU
13a) on the config's test set (data.test_src / data.test_tgt, else the held-out pairs the run wrote to its folder,
which train.seed chooses) and, for a guided config with --gold, the AER of its attention read as word alignments
(attnmt align-table's forward row of the model's default method: shift for the guided row). A --before folder's
config keeps the keys this checkout no longer has in config.before.yaml, so that this checkout can load it.

    python -m benchmarks.fixed_step --before ../before --root runs/fixed_step --jobs 2 \\
        --run recipes/multi30k/de_en_rnnsearch.yaml:1000 --run recipes/alignment_chinese/guided_zh_en.yaml:800 \\
        --seed 1 --seed 2 --before-seed 1 --before-seed 2 \\
        --gold data/align_zhen/gold.zh data/align_zhen/gold.en data/zhen-nist/zhen.gold

writes benchmarks/results/fixed_step_bleu_aer.json: per config, each run's scores, the difference of this checkout
from --before at the same seed, and the spread (largest minus smallest) over each side's seeds.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import yaml

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]


class Run(NamedTuple):
    """One training run of the benchmark: a config trained by one side (checkout None: this one) at one seed."""
    config: Path
    steps: int
    side: str
    seed: int
    checkout: Path | None
    model_dir: Path


def train(config: Path, steps: int, seed: int, model_dir: Path, checkout: Path | None) -> None:
    """Train ``config`` into ``model_dir`` with this checkout or ``checkout`` (with its own copy of ``config`` where
    it has one), unless it holds a run finished at ``steps`` already."""
    from attnmt.train.events import training_summary

    if training_summary(model_dir).get("steps") == steps:
        return
    config = config.resolve()
    if checkout is not None and (checkout / config.relative_to(ROOT)).is_file():
        config = checkout / config.relative_to(ROOT)
    env = {**os.environ, "PYTHONPATH": str(checkout or ROOT)}
    command = [sys.executable, "-m", "attnmt", "train", str(config), "--model-dir", str(model_dir.resolve()),
               "--overwrite", "--set", f"train.max_steps={steps}", "--set", f"train.seed={seed}",
               "--set", "train.threads=1", "--set", "train.max_time_s=100000"]
    subprocess.run(command, env=env, cwd=checkout or ROOT, check=True, stdout=subprocess.DEVNULL)
    if training_summary(model_dir).get("steps") != steps:
        raise SystemExit(f"{model_dir}: the run did not reach {steps} steps")
    if checkout is not None:
        keep_removed_keys_aside(model_dir)


def keep_removed_keys_aside(model_dir: Path) -> None:
    """Drop the keys of ``model_dir``'s config that this checkout refuses as unknown (an earlier checkout's, such as
    data.store), one at a time as its config loader names them, so that this checkout loads the folder; the original
    is kept in config.before.yaml."""
    from attnmt.config.schema import load_config
    from attnmt.errors import UserError

    path, before = model_dir / "config.yaml", model_dir / "config.before.yaml"
    if not before.exists():
        before.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    while True:
        try:
            load_config(path)
            return
        except UserError as e:
            unknown = re.search(r"unknown key '([\w.]+)'", str(e))
            if unknown is None:
                raise
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        *sections, key = unknown.group(1).split(".")
        table = raw
        for section in sections:
            table = table[section]
        del table[key]
        path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")


def score(config_path: Path, model_dir: Path, gold: list[str] | None) -> dict:
    """BLEU (beam 5, last checkpoint) on the test set, and the AER of a guided model's attention with ``gold``."""
    from attnmt.align.extract import model_method
    from attnmt.align.table import alignment_table
    from attnmt.config.schema import is_guided, load_config
    from attnmt.decode.evaluate import evaluate_translator
    from attnmt.decode.translator import load

    config = load_config(config_path)
    if gold and is_guided(config):
        table = alignment_table(*gold, models=[f"m={model_dir}"], checkpoint="last", beam=5)
        forward = table["models"]["m"]["forward"]
        row = next(r for r in table["rows"] if r["row"] == f"m: attention {model_method(config)}")
        return {"bleu": forward["test_bleu"], "test": "the run's held-out pairs",
                "sentences": forward["test_sentences"],
                "aer": row["aer"], "precision": row["precision"], "recall": row["recall"], "aer_row": row["row"]}
    src, ref = config.data.test_src, config.data.test_tgt
    if not src:
        src, ref = model_dir / "test.src", model_dir / "test.tgt"
    report = evaluate_translator(load(model_dir, checkpoint="last"), src, ref, beam=5)
    return {"bleu": round(report.scores.bleu, 2), "test": str(src), "sentences": report.n_sentences}


def compare(runs: dict[str, dict], seeds: list[int], before_seeds: list[int]) -> dict:
    """This checkout minus --before at each shared seed, and the spread over each side's seeds."""
    out: dict = {}
    for key in ("bleu", "aer"):
        if key not in runs[f"after_s{seeds[0]}"]:
            continue
        spread = {side: round(max(v) - min(v), 4) for side, v in
                  (("after", [runs[f"after_s{s}"][key] for s in seeds]),
                   ("before", [runs[f"before_s{s}"][key] for s in before_seeds]))}
        out[key] = {"difference_at_seed": {s: round(runs[f"after_s{s}"][key] - runs[f"before_s{s}"][key], 4)
                                           for s in before_seeds if s in seeds},
                    "seed_spread": spread["after"], "before_seed_spread": spread["before"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the earlier commit")
    parser.add_argument("--root", type=Path, required=True, help="where the model folders go")
    parser.add_argument("--run", action="append", required=True, help="CONFIG:STEPS (repeatable)")
    parser.add_argument("--seed", type=int, action="append", required=True, help="this checkout's seeds")
    parser.add_argument("--before-seed", type=int, action="append", required=True, help="--before's seeds")
    parser.add_argument("--gold", nargs=3, metavar=("SRC", "TGT", "LINKS"), help="a gold set for guided configs")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at a time (each on one thread)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    before_commit = subprocess.run(["git", "-C", str(args.before), "rev-parse", "HEAD"], capture_output=True,
                                   text=True).stdout.strip() or None
    configs = []
    for spec in args.run:
        path, _, steps = spec.rpartition(":")
        configs.append((Path(path), int(steps)))
    from attnmt.config.schema import load_config

    plan = [Run(config, steps, side, seed, checkout, args.root / f"{load_config(config).name}_{side}_s{seed}")
            for config, steps in configs
            for side, seeds, checkout in (("before", args.before_seed, args.before), ("after", args.seed, None))
            for seed in seeds]
    with ThreadPoolExecutor(args.jobs) as pool:  # each run a process of its own: threads only wait for them
        for done in [pool.submit(train, r.config, r.steps, r.seed, r.model_dir, r.checkout) for r in plan]:
            done.result()
    results = []
    for config, steps in configs:
        runs: dict[str, dict] = {}
        for r in (r for r in plan if r.config == config):
            runs[f"{r.side}_s{r.seed}"] = score(config, r.model_dir, args.gold)
            print(r.model_dir.name, runs[f"{r.side}_s{r.seed}"], flush=True)
        results.append({"config": str(config), "steps": steps, "runs": runs,
                        **compare(runs, args.seed, args.before_seed)})
    write_result("fixed_step_bleu_aer", {"before_commit": before_commit, "threads": 1, "checkpoint": "last",
                                         "beam": 5, "gold": args.gold, "configs": results}, args.out)


if __name__ == "__main__":
    main()
