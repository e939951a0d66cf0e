"""Stopping works in every phase: an interrupted training run exits 130 (SIGINT) or 143 (SIGTERM) after saying
how to resume, SIGTERM ends translation at once with nothing half-written, and a resume refuses an optimizer or
scheduler state that does not fit the model in one line, before it is used (and within seconds under SIGTERM)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from attnmt.cli import main
from attnmt.config.schema import config_to_dict
from attnmt.decode.translator import Translator
from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint
from attnmt.train.events import RunLog
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_training_run_exits_with_the_signals_code(signum, code, tiny_corpus, tmp_path, capsys,
                                                                  monkeypatch):
    event = RunLog.event

    def signal_at_step_3(self, kind, step=None, **values):
        if kind == "train" and step == 3:
            os.kill(os.getpid(), signum)
        return event(self, kind, step, **values)

    monkeypatch.setattr(RunLog, "event", signal_at_step_3)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(tiny_config(tiny_corpus, max_steps=50, log_every=1))),
                      encoding="utf-8")
    assert main(["train", str(config), "--model-dir", str(tmp_path / "m")]) == code
    last = capsys.readouterr().out.splitlines()[-1]
    assert "3 steps, interrupted; checkpoints/last.pt holds step 3: continue with --resume" in last
    assert load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")["train_state"]["step"] == 3


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_sigterm_ends_translation_and_evaluation_at_once_and_writes_no_output(command, tiny_model, tmp_path, capsys,
                                                                              monkeypatch):
    def terminated(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not end the command")

    monkeypatch.setattr(Translator, "translate", terminated)
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("a b\n", encoding="utf-8")
    extra = ["--input", str(src)] if command == "translate" else ["--src", str(src), "--ref", str(src)]
    assert main([command, "--model", str(tiny_model), *extra, "--output", str(out)]) == 143
    assert capsys.readouterr().err.splitlines() == ["attnmt: terminated"]
    assert not out.exists() and os.listdir(tmp_path) == ["in.txt"]


def broken(model: Path, change) -> Path:
    """The model folder with its last.pt's optimizer or scheduler state changed (checksum intact)."""
    path = model / "checkpoints" / "last.pt"
    payload = load_checkpoint(path)
    del payload["format_version"], payload["checksum"]
    change(payload)
    save_checkpoint(payload, path)
    return path


def first_moment(payload: dict) -> dict:
    return payload["optimizer"]["state"][0]


BROKEN = {
    "shape": (lambda p: first_moment(p).update(exp_avg=torch.zeros(7, 3)),
              "optimizer state exp_avg of parameter 0 has shape (7, 3), the parameter ("),
    "dtype": (lambda p: first_moment(p).update(exp_avg_sq=first_moment(p)["exp_avg_sq"].double()),
              "optimizer state exp_avg_sq of parameter 0 is torch.float64, the parameter torch.float32"),
    "nan": (lambda p: first_moment(p)["exp_avg"].view(-1).__setitem__(0, float("nan")),
            "optimizer state exp_avg of parameter 0 holds NaN or infinite values"),
    "groups": (lambda p: p["optimizer"]["param_groups"][0]["params"].pop(),
               "optimizer state's parameter group 0 does not hold the model's"),
    "lr": (lambda p: p["optimizer"]["param_groups"][0].update(lr=float("inf")),
           "optimizer's lr in parameter group 0 is not finite (inf)"),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_a_resume_refuses_an_optimizer_state_that_does_not_fit(what, tiny_model, tmp_path, capsys):
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    change, expected = BROKEN[what]
    path = broken(model, change)
    assert main(["train", str(model / "config.yaml"), "--model-dir", str(model), "--resume"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"attnmt: error: checkpoint {path} cannot be resumed: its {expected}")
    assert line.endswith("train again without --resume (or resume from a copy of the folder whose last.pt is intact)")


def test_a_resume_refuses_a_scheduler_state_that_does_not_fit(tiny_corpus, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(tiny_config(tiny_corpus, max_steps=4, valid_every=4,
                                                                 scheduler="noam", warmup_steps=2))), encoding="utf-8")
    model = tmp_path / "m"
    assert main(["train", str(config), "--model-dir", str(model)]) == 0
    path = broken(model, lambda p: p["scheduler"].update(base_lrs=[]))
    capsys.readouterr()
    assert main(["train", str(config), "--model-dir", str(model), "--resume", "--set", "train.max_steps=8"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"attnmt: error: checkpoint {path} cannot be resumed: its scheduler's base_lrs does not "
                           "hold one value per parameter group (1)")


def test_a_resume_with_a_broken_optimizer_state_ends_at_once_on_sigterm(tiny_model, tmp_path):
    """Sent SIGTERM while it resumes, it ends at once (143) or has refused already (2), in one line. (Left alone,
    it refuses in one line: test_a_resume_refuses_an_optimizer_state_that_does_not_fit; without that check such
    a resume reached the fused Adam kernel with the wrong shapes, a crash.)"""
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    broken(model, BROKEN["shape"][0])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(model / "config.yaml"), "--model-dir",
                                str(model), "--resume", "--set", "train.max_steps=100000"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while process.poll() is None and "reading the corpus" not in (model / "train.log").read_text(encoding="utf-8") \
                .splitlines()[-1] and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code = process.wait(timeout=30)
        assert time.monotonic() - sent < 10
    finally:
        process.kill()
    err = process.stderr.read().decode()
    assert code in (2, 143) and len(err.splitlines()) == 1, (code, err)


def test_a_training_loss_that_keeps_rising_is_warned_of_once(tiny_corpus, tmp_path, monkeypatch, capsys):
    from attnmt.train import loss as loss_module
    from attnmt.train.trainer import train

    original, calls = loss_module.output_loss, {"n": 0}

    def rising(*args, **kwargs):  # the training loss times 2 ** n: it rises at every report
        loss = original(*args, **kwargs)
        if torch.is_grad_enabled():
            calls["n"] += 1
            return loss * 2.0 ** calls["n"]
        return loss

    monkeypatch.setattr(loss_module, "output_loss", rising)
    train(tiny_config(tiny_corpus, max_steps=9, valid_every=100, log_every=1), tmp_path / "m")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "risen" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "attnmt: warning: the training loss has risen for 5 reports in a row, to ")
    assert warnings[0].endswith(" at step 6; if it goes on rising, stop the run and resume it with a lower train.lr")
