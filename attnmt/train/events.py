"""What a training run records and how it is stopped: the JSON-lines log, TensorBoard, signals.

`RunLog` appends one JSON object per event to MODEL_DIR/train_log.jsonl (scalars to TensorBoard, and the
lines a person reads to the terminal and MODEL_DIR/train.log: attnmt/train/progress.py); `training_summary`
reads a folder's log back; `graceful_stop` turns the first
SIGINT / SIGTERM into a request to stop after the current step, with a checkpoint.
"""

from __future__ import annotations

import json
import math
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class RunLog:
    """The machine-readable log (JSON lines), TensorBoard scalars, the readable lines, and nothing global.

    console: print the readable lines too (they always go to train.log)."""

    def __init__(self, model_dir: Path, tensorboard: bool, enabled: bool = True, console: bool = False):
        from attnmt.train.progress import TextLog

        self.path = model_dir / "train_log.jsonl"
        self.enabled = enabled
        self.text = TextLog(model_dir / "train.log", console) if enabled else None
        self.writer = None
        if tensorboard and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(model_dir / "tensorboard"))
            except ImportError:  # tensorboard is optional
                self.writer = None

    def event(self, kind: str, step: int | None = None, **values) -> dict:
        record = {"event": kind, "time": round(time.time(), 3), **({"step": step} if step is not None else {}),
                  **values}
        if not self.enabled:
            return record
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.writer is not None and step is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self.writer.add_scalar(f"{kind}/{key}", value, step)
        self.text.record(record)
        return record

    def say(self, line: str) -> None:
        """A line for the person watching (terminal and train.log), not an event of the JSON log."""
        if self.text is not None:
            self.text.write(line)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@contextmanager
def graceful_stop(notice: bool = False) -> Iterator[dict]:
    """First SIGINT/SIGTERM asks the loop to stop after the current step (with a checkpoint); the flag's
    "signal" is the first one's number (the command's exit code is 128 + it). A second SIGINT stops at once.
    notice: say so on stderr at the first Ctrl-C."""
    flag: dict = {"stop": False, "signal": None}
    previous = {}

    def handler(signum, frame):
        if flag["stop"] and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag["stop"], flag["signal"] = True, flag["signal"] or signum
        if notice and signum == signal.SIGINT:
            print("\nattnmt: stopping after this step, with a checkpoint to --resume from; Ctrl-C again stops at once",
                  file=sys.stderr, flush=True)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no signal handling
        pass
    try:
        yield flag
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)


def training_summary(model_dir: str | Path) -> dict:
    """What a model folder's train_log.jsonl says of its last training run (resumed parts included).

    Keys, where logged: parameters, train_pairs, device, precision, validations (step, ppl, lr, bleu),
    best_valid_ppl, tgt_tokens_per_s_median (of the log_every reports, the first one, warm-up, left out),
    epochs, steps, stop_reason, wall_s. Empty if the folder has no log.
    """
    log = Path(model_dir) / "train_log.jsonl"
    if not log.is_file():
        return {}
    summary: dict = {"validations": []}
    speeds: list[float] = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        event = record.get("event")
        if event == "start" and not record.get("step"):  # a fresh run (a resumed one starts at its step)
            summary = {"validations": [], **{k: record[k] for k in ("parameters", "train_pairs", "device",
                                                                        "precision") if k in record}}
            speeds = []
        elif event == "train":
            speeds.append(record["tgt_tokens_per_s"])
        elif event == "valid":
            summary["validations"].append({k: record[k] for k in ("step", "ppl", "lr", "bleu") if k in record})
        elif event == "end":
            summary.update(steps=record["step"], stop_reason=record["reason"], wall_s=round(record["elapsed_s"], 1))
            if "epoch" in record:
                summary["epochs"] = record["epoch"]
    if summary["validations"]:
        summary["best_valid_ppl"] = min(v["ppl"] for v in summary["validations"])
    if speeds[1:]:
        summary["tgt_tokens_per_s_median"] = round(statistics.median(speeds[1:]), 1)
    return summary
