"""Run `attnmt study CONFIG` and record its numbers, wall time and figures for the docs.

    python -m benchmarks.study recipes/synthetic/synthetic.yaml [--retrain] [--jobs N] [--figures DIR]
        [--study-out DIR] [--set KEY=VALUE ...]

Writes benchmarks/results/study_<name>.json: the study's own results.json (every number of the
report), the wall time of this run, and for each model folder whether this run trained it or
reused it (a reused model's training time is the one recorded in its own train_log.jsonl); under
full_run, the wall time of the last run that trained every model (kept when a rerun reuses them). The
figures are copied to docs/img/chapter_<name>_*.png, the files docs/chapter.md shows. ``--set`` changes
a value of the study file as ``attnmt study --set`` does, e.g. where its data is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from attnmt.study import run_study
from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]


def full_run(path: Path, wall: float, numbers: dict, trained: list[str]) -> dict | None:
    """The wall time of the last run that trained every model: this one, or the one recorded in
    the previous result file (a rerun that reuses the models keeps it)."""
    if len(trained) == len(numbers["runs"]):
        timing = numbers["timing"]
        return {"wall_s": round(wall, 1), "train_and_evaluate_s": round(timing["train_and_evaluate_seconds"], 1),
                "jobs": timing["jobs"], "command": numbers["command"]}
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if previous.get("full_run"):
        return previous["full_run"]
    if previous.get("trained_this_run") and not previous.get("reused"):
        results = previous.get("results", {})
        return {"wall_s": previous["wall_s"],
                "train_and_evaluate_s": round(results.get("timing", {}).get("train_and_evaluate_seconds", 0), 1),
                "jobs": results.get("timing", {}).get("jobs"), "command": results.get("command")}
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--retrain", action="store_true", help="train every model again (measures the full study)")
    parser.add_argument("--jobs", type=int, help="runs at once (default: the study's)")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/study_<name>.json)")
    parser.add_argument("--study-out", help="the study's output folder, as attnmt study --out (default "
                        "runs/study-<name>; a models_from study trains its models beside it): a new folder "
                        "measures the whole study from nothing without touching the models already trained")
    parser.add_argument("--figures", default=str(ROOT / "docs" / "img"),
                        help="where to copy the figures as chapter_<name>_*.png ('' to skip)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a study value, e.g. --set data.tatoeba_long.tatoeba=PATH (repeatable)")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run_study(args.config, out=args.study_out, retrain=args.retrain, jobs=args.jobs, quiet=False,
                       command=f"attnmt study {args.config}" + (" --retrain" if args.retrain else "")
                       + (f" --out {args.study_out}" if args.study_out else "")
                       + "".join(f" --set {item}" for item in args.set), overrides=args.set)
    wall = time.perf_counter() - started
    numbers = result.summary
    name = numbers["study"]
    if args.figures:
        figures = Path(args.figures)
        figures.mkdir(parents=True, exist_ok=True)
        for png in sorted((result.out_dir / "figures").glob("*.png")):
            shutil.copy(png, figures / f"chapter_{name}_{png.name}")
    trained = [r["label"] for r in numbers["runs"] if r["action"] == "trained"]
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"study_{name}.json"
    path = write_result(f"study_{name}", {
        "wall_s": round(wall, 1),
        "trained_this_run": trained,
        "reused": [r["label"] for r in numbers["runs"] if r["label"] not in trained],
        "full_run": full_run(out, wall, numbers, trained),
        "results": json.loads(json.dumps(numbers, default=str)),
    }, out)
    print(f"wall {wall:.0f} s ({len(trained)} of {len(numbers['runs'])} runs trained now) -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
