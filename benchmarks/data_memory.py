"""Training's memory and start-up on the one data path, against an earlier checkout, in one run.

Each config is trained for --steps updates, each run its own process (`attnmt train CONFIG --set
train.max_steps=N --set train.log_every=1`), once with this checkout and, with --before DIR, once
with the attnmt of DIR (a checkout of an earlier commit, run from DIR), alternating. Per
run: the peak resident memory of the training process (its VmHWM, read every half second; the
encoding workers of a large corpus are processes of their own), its resident memory when training
starts (the data loaded, the model built: what the data path holds), the seconds from the start of the
process to its first update (the first `train` event of its train_log.jsonl, `log_every` 1), and the
loss of every update, so that the two checkouts' runs can be compared step by step. With --demo,
`attnmt demo --quick` too: the seconds from its start to each of its models' first update.

    python -m benchmarks.data_memory --before ../before --steps 200 \\
        --config data/align_deen_configs/guided_de_en.yaml --config recipes/multi30k/de_en_rnnsearch.yaml --demo

writes benchmarks/results/data_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def watch(command: list[str], checkout: Path | None) -> tuple[float, int, list]:
    """Run a command of this checkout (or of `checkout`) to its end: its start time, its peak resident
    memory (kB) and (seconds, MB) samples of its resident memory every half second."""
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    start = time.time()
    proc = subprocess.Popen(command, env=env, cwd=checkout or ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    peak_kb, samples = 0, []
    while proc.poll() is None:
        hwm, rss = _status_kb(proc.pid, "VmHWM"), _status_kb(proc.pid, "VmRSS")
        if hwm:
            peak_kb = max(peak_kb, hwm)
            samples.append((round(time.time() - start, 1), round(rss / 1024)))
        time.sleep(0.5)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr.read()[-2000:]}")
    return start, peak_kb, samples


def run_once(config: str, steps: int, checkout: Path | None, folder: Path, threads: int) -> dict:
    """One training run in its own process; its memory, start-up and losses."""
    command = [sys.executable, "-m", "attnmt", "train", str(Path(config).resolve()), "--model-dir", str(folder),
               "--set", f"train.max_steps={steps}", "--set", "train.log_every=1", "--set", f"train.threads={threads}",
               "--set", "train.progress=false", "--set", "train.tensorboard=false"]
    start, peak_kb, samples = watch(command, checkout)
    events = [json.loads(line) for line in (folder / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    updates = [e for e in events if e["event"] == "train"]
    first = updates[0]["time"] - start
    began = next(e["time"] for e in events if e["event"] == "start") - start
    held = [mb for t, mb in samples if t <= began]
    return {"peak_rss_mb": round(peak_kb / 1024), "rss_at_start_mb": held[-1] if held else None,
            "first_update_s": round(first, 2),
            "wall_s": round(time.time() - start, 1), "rss_mb_every_30s": samples[::60],
            "train_pairs": next(e["train_pairs"] for e in events if e["event"] == "start"),
            "prepare_s": next((e["seconds"] for e in events if e.get("prepared")), None),
            "losses": [e["loss"] for e in updates]}


def run_demo(checkout: Path | None, folder: Path) -> dict:
    """`attnmt demo --quick` in its own process: the seconds from its start to each model's first update."""
    start, peak_kb, _ = watch([sys.executable, "-m", "attnmt", "demo", "--quick", "--out", str(folder)], checkout)
    first = {}
    for log in sorted(folder.glob("models/*/*/train_log.jsonl")):
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        first[log.parent.parent.name] = round(next(e["time"] for e in events if e["event"] == "train") - start, 2)
    return {"first_update_s": first, "wall_s": round(time.time() - start, 1),
            "demo_process_peak_rss_mb": round(peak_kb / 1024)}


def compare(config: str, steps: int, before: Path | None, rounds: int, threads: int) -> dict:
    out: dict = {"config": config, "steps": steps}
    names = ["after", "before"] if before is not None else ["after"]
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            with tempfile.TemporaryDirectory(prefix="attnmt-data-memory-") as tmp:
                run = run_once(config, steps, before if name == "before" else None, Path(tmp) / "m", threads)
            out.setdefault(name, []).append(run)
            print(f"{config} {name}: peak {run['peak_rss_mb']} MB, first update {run['first_update_s']} s",
                  file=sys.stderr)
    if before is not None:
        a, b = out["after"][0]["losses"], out["before"][0]["losses"]
        out["same_losses"] = a == b
        out["max_loss_difference"] = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
        out["peak_ratio_before_over_after"] = round(out["before"][0]["peak_rss_mb"] / out["after"][0]["peak_rss_mb"], 2)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", help="a training config (repeatable)")
    p.add_argument("--demo", action="store_true", help="also time `attnmt demo --quick` to each model's first update")
    p.add_argument("--steps", type=int, default=200, help="updates per run (default 200)")
    p.add_argument("--before", type=Path, help="a checkout of an earlier attnmt to compare with")
    p.add_argument("--rounds", type=int, default=1, help="runs of each checkout per config, alternating")
    p.add_argument("--threads", type=int, default=1, help="train.threads of every run (default 1)")
    p.add_argument("--out", help="result JSON (default benchmarks/results/data_memory.json)")
    args = p.parse_args()
    before = args.before.resolve() if args.before else None
    commit = None
    if before is not None:
        commit = subprocess.run(["git", "-C", str(before), "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    results = [compare(c, args.steps, before, args.rounds, args.threads) for c in args.config or []]
    demo: dict = {}
    names = ["after", "before"] if before is not None else ["after"]
    for r in range(args.rounds if args.demo else 0):
        for name in (names if r % 2 == 0 else names[::-1]):
            with tempfile.TemporaryDirectory(prefix="attnmt-data-memory-") as tmp:
                demo.setdefault(name, []).append(run_demo(before if name == "before" else None, Path(tmp) / "demo"))
            print(f"demo --quick {name}: {demo[name][-1]}", file=sys.stderr)
    path = write_result("data_memory", {"before_commit": commit, "threads": args.threads, "runs": results,
                                        "demo_quick": demo}, args.out)
    print(path)


if __name__ == "__main__":
    main()
