"""What a person watching a training run reads: its log lines and its progress bar.

One line when the run starts (the model, its parameters, the vocabularies, the corpus, the device and
precision, the budget), one per report (train.log_every), one per validation and a closing summary.
They are made from the run's JSON events (attnmt/train/events.py), so the two logs always agree, and go to
standard output and to MODEL_DIR/train.log (each line there with the time of day). The progress bar
goes to standard error, only on a terminal, and counts toward the budget that ends the run first:
steps toward train.max_steps, or seconds toward train.max_time_s.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path


def clock(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _budget(train: dict) -> str:
    limits = [f"{train['max_steps']:,} steps", f"{train['max_epochs']:,} epochs"]
    if train.get("max_time_s") is not None:
        limits.append(f"{clock(train['max_time_s'])} of training time")
    return ", ".join(limits) + ", whichever ends first"


def _start(r: dict) -> str:
    config = r.get("config", {})
    vocab = (f"vocabulary {r['src_vocab']:,} (joint)" if r.get("joint_vocab")
             else f"vocabularies {r['src_vocab']:,} source, {r['tgt_vocab']:,} target") if "src_vocab" in r else ""
    valid = f", {r['valid_pairs']:,} for validation" if r.get("valid_pairs") else ", no validation set"
    if r.get("long_lines"):  # pairs with a line over attnmt.data.corpus.MAX_LINE_BYTES
        valid = f" ({r['long_lines']:,} dropped: a line over {r['line_limit']:,} bytes){valid}"
    threads = f", {r['threads']} thread{'s' if r['threads'] > 1 else ''}" if r.get("threads") else ""
    parts = [f"training {r['model']} ({r['parameters']:,} parameters) into {r.get('model_dir', '.')}",
             vocab, f"{r['train_pairs']:,} training pairs{valid}", f"{r['device']}, {r['precision']}{threads}"]
    if "train" in config:
        parts.append(f"budget {_budget(config['train'])}")
    return "; ".join(p for p in parts if p)


def _train(r: dict) -> str:
    parts = [f"step {r['step']:,}", f"epoch {r['epoch'] + 1}", f"loss {r['loss']:.4f}"]
    if "align_loss" in r:
        parts.append(f"alignment loss {r['align_loss']:.4f}")
    parts += [f"{r['tgt_tokens_per_s']:,.0f} target tokens/s", f"lr {r['lr']:.2e}"]
    if "elapsed_s" in r:
        parts.append(clock(r["elapsed_s"]))
    return " | ".join(parts)


def _best(metric: str, value: float) -> str:
    return f"loss {value:.4f}" if metric == "loss" else f"{'BLEU' if metric == 'bleu' else 'chrF'} {value:.2f}"


def _valid(r: dict) -> str:
    parts = [f"validation at step {r['step']:,}", f"loss {r['loss']:.4f}", f"perplexity {r['ppl']:.2f}"]
    if "bleu" in r:
        parts += [f"BLEU {r['bleu']:.2f}", f"chrF {r['chrf']:.2f}"]
    if "best_step" in r:
        parts.append("the best so far" if r["best_step"] == r["step"]
                     else f"best {_best(r['best_metric'], r['best_value'])} at step {r['best_step']:,}")
    if r.get("saved"):
        parts.append("saved " + " and ".join(f"{name}.pt" for name in r["saved"]))
    return " | ".join(parts)


REASONS = {"max_steps": "train.max_steps", "max_epochs": "train.max_epochs", "max_time": "train.max_time_s",
           "early_stopping": "early stopping (train.early_stopping_patience)"}


def _end(r: dict) -> str:
    """The closing summary: how far, why it stopped, the best validation, where the model is."""
    folder = r.get("model_dir", ".")
    if r["reason"] == "interrupted":
        why = f"interrupted; checkpoints/last.pt holds step {r['step']:,}: continue with --resume"
    else:
        why = f"stopped by {r['reason']}"
    parts = [f"{folder}: {r['step']:,} steps, {why}",
             f"epoch {r.get('epoch', 0) + 1}, {clock(r.get('elapsed_s', 0.0))} of training"]
    if r.get("best_step") is not None:
        value = r["best_value"]
        ppl = f" (perplexity {math.exp(min(value, 50)):.2f})" if r["best_metric"] == "loss" else ""
        parts.append(f"best validation {_best(r['best_metric'], value)}{ppl} at step {r['best_step']:,}, "
                     f"in {folder}/checkpoints/best.pt")
    elif r.get("validated") is False:
        parts.append(f"no validation set: {folder}/checkpoints/best.pt holds the last weights")
    else:
        parts.append("not validated yet")
    return "; ".join(parts)


def _resume(r: dict) -> str:
    return f"resuming from checkpoints/last.pt at step {r['step']:,} (epoch {r.get('epoch', 0) + 1})"


def _init(r: dict) -> str:
    return (f"starting from the weights of {r['init_from']} (trained {r.get('trained_steps', 0):,} steps) and its "
            "tokenizers; the optimizer, the learning-rate schedule and the best score start fresh")


def _data(r: dict) -> str | None:
    if not {"total", "kept"} <= set(r) or r["total"] == r["kept"]:
        return None
    why = [f"{r[key]:,} {what}" for key, what in (("empty", "with an empty side"), ("too_long", "too long"))
           if r.get(key)]
    return (f"{r.get('split', 'train')} data: {r['kept']:,} of {r['total']:,} pairs kept"
            + (f" ({', '.join(why)} dropped)" if why else ""))


DESCRIBE = {"start": _start, "train": _train, "valid": _valid, "end": _end, "resume": _resume, "init": _init,
            "data": _data}


def describe(record: dict) -> str | None:
    """The log line of a JSON event, or None for an event a person need not read."""
    how = DESCRIBE.get(record.get("event"))
    return how(record) if how else None


class TextLog:
    """The lines: to standard output (above the progress bar, if one is shown) and appended to train.log."""

    def __init__(self, path: Path | None, console: bool):
        self.path, self.console, self.bar = path, console, None

    def write(self, line: str) -> None:
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
        if self.console:
            if self.bar is not None:
                self.bar.bar.write(line, file=sys.stdout)  # tqdm clears the bar, prints, and draws it again
            else:
                print(line, flush=True)

    def record(self, record: dict) -> None:
        line = describe(record)
        if line:
            self.write(line)


def show_bar(progress: bool, quiet: bool) -> bool:
    """A bar only when asked for (train.progress), not quiet, and on a terminal: no carriage returns in a file."""
    return progress and not quiet and sys.stderr.isatty()


class BudgetBar:
    """A tqdm bar over the budget that binds: steps toward max_steps, or seconds toward max_time_s when, at
    the pace so far, the time runs out first (before the first step, with a time budget, seconds)."""

    TIME_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]"

    def __init__(self, max_steps: int, max_time_s: float | None, step: int, elapsed_s: float, desc: str,
                 file=None):
        from tqdm import tqdm

        self.max_steps, self.max_time_s = max_steps, max_time_s
        self.first_step, self.first_s = step, elapsed_s
        self.unit = self.binding(step, elapsed_s)
        self.bar = tqdm(desc=desc, dynamic_ncols=True, leave=False, file=file if file is not None else sys.stderr,
                        **self.shape(self.unit))
        self.update(step, elapsed_s)

    def shape(self, unit: str) -> dict:
        """The bar's total, unit and format for a budget of steps or of seconds."""
        if unit == "time":
            return {"total": self.max_time_s, "unit": "s", "bar_format": self.TIME_FORMAT}
        return {"total": self.max_steps, "unit": "step", "bar_format": None}

    def binding(self, step: int, elapsed_s: float) -> str:
        """"time" when train.max_time_s will end the run before train.max_steps at this pace, else "steps"."""
        if self.max_time_s is None:
            return "steps"
        done = step - self.first_step
        if done <= 0:
            return "time"
        pace = (elapsed_s - self.first_s) / done
        return "time" if elapsed_s + pace * (self.max_steps - step) > self.max_time_s else "steps"

    def update(self, step: int, elapsed_s: float, **postfix) -> None:
        unit = self.binding(step, elapsed_s)
        if unit != self.unit:
            self.unit, shape = unit, self.shape(unit)
            self.bar.bar_format, self.bar.unit = shape["bar_format"], shape["unit"]
            self.bar.reset(total=shape["total"])
        done = min(elapsed_s, self.max_time_s) if unit == "time" else step
        if unit == "time":
            postfix = {"step": f"{step:,}", **postfix}
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(done - self.bar.n)

    @property
    def total(self) -> float:
        return self.bar.total

    def close(self) -> None:
        self.bar.close()


RISING_REPORTS = 5  # reports in a row whose training loss rose before LossTrend warns


class LossTrend:
    """The training loss of each report (train.log_every steps) against the one before: after `n` rises in a row
    a warning line (once per such streak), since a loss that keeps rising means a learning rate that is too high."""

    def __init__(self, n: int = RISING_REPORTS):
        self.n, self.rises, self.last = n, 0, math.inf

    def update(self, loss: float, step: int) -> str | None:
        """The warning to print when this report makes `n` rises in a row, else None."""
        self.rises, self.last = (self.rises + 1 if loss > self.last else 0), loss
        if self.rises != self.n:
            return None
        return (f"the training loss has risen for {self.n} reports in a row, to {loss:.4f} at step {step:,}; "
                "if it goes on rising, stop the run and resume it with a lower train.lr")
