"""Training survives being killed: SIGKILL at 10 seeded random moments, resume each time, and the
final weights equal an uninterrupted run's bit for bit; SIGTERM stops with a resumable checkpoint.

The kills are placed without any hook in attnmt: some at a random time after the run reports its
start, some the moment a checkpoint's temporary file appears (so that they land inside the write),
one during start-up (before any checkpoint exists, when the next run must start afresh).
Runs on CPU with one thread and a fixed seed; about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from attnmt.config.schema import config_to_dict
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
MAX_STEPS = 80
SAVE_EVERY = 3
VALID_EVERY = 20


def crash_config(corpus: Path):
    # noam: the scheduler's state changes every step; dropout: the random generator matters too.
    config = tiny_config(corpus, max_steps=MAX_STEPS, valid_every=VALID_EVERY, save_every=SAVE_EVERY,
                         valid_bleu_sample=0, log_every=1, scheduler="noam", warmup_steps=10, lr=0.01)
    config.model.emb_size, config.model.hidden_size = 16, 24
    return config


@pytest.fixture(scope="module")
def setup(tiny_corpus, tmp_path_factory):
    """The config file and an uninterrupted reference run of it (and its time per step)."""
    base = tmp_path_factory.mktemp("crash")
    config = crash_config(tiny_corpus)
    path = base / "config.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)), encoding="utf-8")
    started = time.perf_counter()
    train(config, base / "whole", quiet=True)
    step_s = (time.perf_counter() - started) / MAX_STEPS
    return path, base / "whole", step_s


def launch(config: Path, model_dir: Path, resume: bool, logs: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "attnmt", "train", str(config), "--model-dir", str(model_dir),
            "--resume" if resume else "--overwrite"]
    with open(logs / "stdout", "ab") as out, open(logs / "stderr", "ab") as err:
        return subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err, env={**os.environ, "OMP_NUM_THREADS": "1"})


def log_records(model_dir: Path) -> list[dict]:
    path = model_dir / "train_log.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wait_for_start(proc: subprocess.Popen, model_dir: Path, starts_before: int, timeout: float = 120) -> bool:
    """Wait until this run has logged its 'start' event (data loaded, checkpoint restored)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if sum(r["event"] == "start" for r in log_records(model_dir)) > starts_before:
                return True
        except (json.JSONDecodeError, OSError):  # a line being written right now
            pass
        time.sleep(0.01)
    return False


def kill_at_checkpoint_write(proc: subprocess.Popen, ckpt_dir: Path, nth: int, timeout: float = 120) -> bool:
    """SIGKILL the moment the nth new checkpoint temporary file appears; True if one did."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            names = {e.name for e in os.scandir(ckpt_dir) if e.name.endswith(".partial")}
        except FileNotFoundError:
            names = set()
        new = names - seen
        if new:
            seen |= new
            if len(seen) >= nth:
                proc.kill()
                return True
        time.sleep(0.0005)
    return False


def assert_checkpoints_intact(model_dir: Path) -> None:
    for name in ("last", "best"):
        path = model_dir / "checkpoints" / f"{name}.pt"
        if path.exists():
            load_checkpoint(path, "rnnsearch")  # raises on a broken file


def assert_same_training(a: dict, b: dict) -> None:
    assert a["train_state"]["step"] == b["train_state"]["step"]
    assert a.keys() == b.keys()
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), f"weights differ: {name}"
    if "optimizer" not in a:  # best.pt: weights and what translating needs, no training state
        return
    for key, state in a["optimizer"]["state"].items():
        for field, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizer"]["state"][key][field])), field
    assert a["scheduler"] == b["scheduler"]
    assert torch.equal(a["rng"], b["rng"])


def test_sigkill_at_random_moments_then_resume_is_bit_identical(setup, tmp_path):
    config, whole, step_s = setup
    model_dir, ckpt_dir = tmp_path / "killed", tmp_path / "killed" / "checkpoints"
    rng = random.Random(20240606)
    kinds = ["startup"] + rng.sample(["time"] * 5 + ["write"] * 4, 9)
    outcomes = []
    for kind in kinds:
        resume = (ckpt_dir / "last.pt").is_file()
        if not resume:  # killed before the first checkpoint: start afresh (--overwrite drops the log too)
            (model_dir / "train_log.jsonl").unlink(missing_ok=True)
        starts = sum(r["event"] == "start" for r in log_records(model_dir))
        proc = launch(config, model_dir, resume, tmp_path)
        if kind == "startup":
            time.sleep(rng.uniform(0.0, 1.5))
            proc.kill()
            outcome = "startup"
        elif kind == "time":
            assert wait_for_start(proc, model_dir, starts), (tmp_path / "stderr").read_text()
            time.sleep(rng.uniform(0.0, 10 * step_s))
            proc.kill()
            outcome = "time"
        else:
            hit = kill_at_checkpoint_write(proc, ckpt_dir, nth=rng.randint(1, 3))
            torn = any(p.name.endswith(".partial") for p in ckpt_dir.iterdir()) if hit else False
            outcome = "inside a write" if torn else "right after a write" if hit else "none (run ended)"
        proc.wait(timeout=60)
        step = load_checkpoint(ckpt_dir / "last.pt")["train_state"]["step"] if (ckpt_dir / "last.pt").exists() else None
        outcomes.append((kind, outcome, proc.returncode, step))
        assert_checkpoints_intact(model_dir)
    # Finish the run.
    proc = launch(config, model_dir, (ckpt_dir / "last.pt").is_file(), tmp_path)
    assert proc.wait(timeout=300) == 0, (tmp_path / "stderr").read_text()[-3000:]
    print("kills (kind, where, exit code, step of last.pt):", *outcomes, sep="\n  ")
    assert sum(code == -signal.SIGKILL for _, _, code, _ in outcomes) >= 8, outcomes
    assert not list(ckpt_dir.glob(".*.partial")), "a resumed run removes the temporaries of killed writes"

    for name in ("last", "best"):
        assert_same_training(load_checkpoint(whole / "checkpoints" / f"{name}.pt"),
                             load_checkpoint(ckpt_dir / f"{name}.pt"))
    assert all(isinstance(r, dict) for r in log_records(model_dir))  # every log line still parses


def test_sigterm_stops_with_a_checkpoint_that_resumes_exactly(setup, tmp_path):
    config, whole, _ = setup
    model_dir = tmp_path / "stopped"
    proc = launch(config, model_dir, False, tmp_path)
    assert wait_for_start(proc, model_dir, 0), (tmp_path / "stderr").read_text()
    # Stop between two checkpoints, so that only the graceful stop's own checkpoint keeps the steps.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        steps = [r["step"] for r in log_records(model_dir) if r["event"] == "train"]
        if steps and steps[-1] >= 7 and steps[-1] % SAVE_EVERY:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, (tmp_path / "stderr").read_text()[-3000:]  # 128 + SIGTERM: not finished
    assert "steps, interrupted; checkpoints/last.pt holds step" in (tmp_path / "stdout").read_text()
    last_logged = max(r["step"] for r in log_records(model_dir) if r["event"] == "train")
    assert load_checkpoint(model_dir / "checkpoints" / "last.pt")["train_state"]["step"] == last_logged
    assert last_logged < MAX_STEPS

    proc = launch(config, model_dir, True, tmp_path)
    assert proc.wait(timeout=300) == 0, (tmp_path / "stderr").read_text()[-3000:]
    for name in ("last", "best"):
        assert_same_training(load_checkpoint(whole / "checkpoints" / f"{name}.pt"),
                             load_checkpoint(model_dir / "checkpoints" / f"{name}.pt"))
