"""`attnmt translate` reading a pipe (`cat FILE | attnmt translate`) against `--input FILE`: wall seconds.

    python -m benchmarks.piped_input --model DIR [--src data/multi30k/test_2016_flickr.de.gz] [--lines 1000]
                                     [--rounds 3] [--beam 5] [--line-by-line]

The JSON describes the model (type, sizes, parameters, training steps). Each mode runs the whole command in a fresh
process (start, model load, decoding, writing) on the same first ``--lines`` sentences of ``--src`` (decompressed
into a plain file first), with ``--threads 1``. The modes take turns within each of ``--rounds`` rounds, the file
first in odd rounds and the pipe first in even ones; a mode's seconds are the median of its rounds, and
``pipe_over_file`` is the median of each round's ratio. The pipe's output must equal the file's line for line
(``same_lines``: the share that does). ``--line-by-line`` adds the pipe read with ``--buffer 1``, each line
translated alone, for scale.
Writes benchmarks/results/piped_input.json.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]


def run_mode(mode: str, model: str, source: Path, beam: int) -> tuple[float, list[str]]:
    """Wall seconds and output lines of one `attnmt translate` run in ``mode``: file, pipe or line_by_line."""
    command = [sys.executable, "-m", "attnmt", "translate", "--model", model, "--beam", str(beam), "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    if mode == "file":
        done = subprocess.run([*command, "--input", str(source)], capture_output=True, env=env, check=False)
    else:
        with subprocess.Popen(["cat", str(source)], stdout=subprocess.PIPE) as cat:
            extra = ["--buffer", "1"] if mode == "line_by_line" else []
            done = subprocess.run([*command, *extra], stdin=cat.stdout, capture_output=True, env=env, check=False)
            cat.stdout.close()
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"piped_input: {mode} failed:\n{done.stderr.decode('utf-8', 'replace')[-2000:]}")
    return seconds, done.stdout.decode("utf-8").splitlines()


def describe(model_dir: str) -> dict:
    """What the model is: its type and sizes, parameters, and how long it trained (its train_log.jsonl)."""
    from attnmt.decode.translation import model_config
    from attnmt.train.events import training_summary

    config, summary = model_config(Path(model_dir)), training_summary(model_dir)
    return {"type": config.model.type, "emb_size": config.model.emb_size, "hidden_size": config.model.hidden_size,
            "tokenizer": config.data.tokenizer, "vocab_size": config.data.vocab_size,
            "parameters": summary.get("parameters"), "steps": summary.get("steps"),
            "training_seconds": config.train.max_time_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a trained model folder")
    parser.add_argument("--src", default=str(ROOT.parent / "shared" / "data" / "multi30k" / "test_2016_flickr.de.gz"))
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--line-by-line", action="store_true", help="also the pipe with --buffer 1")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/piped_input.json)")
    args = parser.parse_args(argv)

    opener = gzip.open if args.src.endswith(".gz") else open
    with opener(args.src, "rt", encoding="utf-8") as f:
        lines = f.read().rstrip("\n").split("\n")[: args.lines]
    modes = ["file", "pipe"] + (["line_by_line"] if args.line_by_line else [])
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    outputs: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source.txt"
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        for r in range(args.rounds):
            for mode in modes if r % 2 == 0 else [modes[1], modes[0], *modes[2:]]:
                took, outputs[mode] = run_mode(mode, args.model, source, args.beam)
                seconds[mode].append(round(took, 3))
                print(f"round {r + 1} {mode}: {took:.2f} s", flush=True)
    ratios = [p / f for p, f in zip(seconds["pipe"], seconds["file"])]
    result = {
        "model": args.model, "model_summary": describe(args.model), "source": args.src, "lines": len(lines),
        "beam": args.beam, "rounds": args.rounds,
        "seconds": seconds, "median_seconds": {mode: round(statistics.median(s), 3) for mode, s in seconds.items()},
        "pipe_over_file": round(statistics.median(ratios), 3),
        "same_lines": {mode: round(sum(a == b for a, b in zip(outputs[mode], outputs["file"])) / len(lines), 4)
                       for mode in modes[1:]},
    }
    if args.line_by_line:
        result["line_by_line_over_file"] = round(statistics.median(
            [b / f for b, f in zip(seconds["line_by_line"], seconds["file"])]), 3)
    path = write_result("piped_input", result, args.out)
    print(f"pipe / file: {result['pipe_over_file']} (median of {args.rounds} rounds) -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
