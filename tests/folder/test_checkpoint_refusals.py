"""Checkpoints that cannot be trusted are refused in one line (no checksum, weights that are not finite);
a write that fails (a full disk, a folder that cannot be written) is one line that names the file and
what is still safe; resuming a run that has finished changes nothing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def best_of(tiny_model: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the tiny model folder, and its best.pt's payload (as save_checkpoint takes it)."""
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    payload = load_checkpoint(model / "checkpoints" / "best.pt")
    del payload["format_version"], payload["checksum"]
    return model, payload


def translate_line(model: Path, tmp_path: Path, capsys) -> str:
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    assert main(["translate", "--model", str(model), "--input", str(src)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    return line


def test_a_checkpoint_without_its_checksum_is_refused(tiny_model, tmp_path, capsys):
    """The audit's file: checksum entry removed, every weight NaN; it translated 40 empty lines."""
    model, payload = best_of(tiny_model, tmp_path)
    payload["model"] = {name: torch.full_like(t, float("nan")) for name, t in payload["model"].items()}
    best = model / "checkpoints" / "best.pt"
    torch.save({"format_version": 1, **payload}, best)
    assert translate_line(model, tmp_path, capsys) == (
        f"attnmt: error: checkpoint {best} has no checksum, so damage to it could not be detected; every checkpoint "
        "attnmt writes has one: use another checkpoint (best.pt / last.pt) or retrain")


def test_weights_that_are_not_finite_are_refused(tiny_model, tmp_path, capsys):
    model, payload = best_of(tiny_model, tmp_path)
    name = sorted(payload["model"])[1]
    weight = payload["model"][name]
    weight.view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    best = model / "checkpoints" / "best.pt"
    save_checkpoint(payload, best)  # a checksum that matches: a diverged run's weights
    assert translate_line(model, tmp_path, capsys) == (
        f"attnmt: error: checkpoint {best}: {name} holds 2 NaN or infinite value(s) of {weight.numel():,}; the run "
        "that wrote it diverged: use another checkpoint (--checkpoint last, stepN) or retrain with a lower train.lr")


@contextlib.contextmanager
def full_disk(monkeypatch, after: int):
    """Checkpoint writes (binary, through attnmt.runtime.safe_write) after the first `after` go to /dev/full:
    the kernel's own ENOSPC, at flush."""
    import attnmt.runtime.safe_write as safe_write

    real, calls = os.fdopen, []

    def fdopen(fd, mode="r", *args, **kwargs):
        calls.append(mode)
        if mode == "wb" and calls.count("wb") > after:
            os.close(fd)
            return open("/dev/full", "wb")  # noqa: SIM115
        return real(fd, mode, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(safe_write.os, "fdopen", fdopen)
        yield


def test_a_full_disk_during_training_is_one_line_and_the_run_resumes(tiny_corpus, tmp_path, monkeypatch, capsys):
    config = tiny_config(tiny_corpus, max_steps=4, valid_every=2, log_every=2)
    from attnmt.config.schema import save_config

    save_config(config, tmp_path / "c.yaml")
    model = tmp_path / "m"
    with full_disk(monkeypatch, after=2):  # best.pt and last.pt at step 2, then the disk is full
        assert main(["train", str(tmp_path / "c.yaml"), "--model-dir", str(model)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"attnmt: error: cannot write checkpoint {model / 'checkpoints'}/")
    assert line.endswith(": No space left on device; no checkpoint was replaced by a partial file; "
                         "checkpoints/last.pt holds step 2: continue from it with --resume once the checkpoint can "
                         f"be written (free some space, or make {model / 'checkpoints'} writable)")
    assert sorted(p.name for p in (model / "checkpoints").iterdir()) == ["best.pt", "last.pt"]  # no temporaries
    assert load_checkpoint(model / "checkpoints" / "last.pt")["train_state"]["step"] == 2
    assert main(["train", str(tmp_path / "c.yaml"), "--model-dir", str(model), "--resume"]) == 0
    assert load_checkpoint(model / "checkpoints" / "last.pt")["train_state"]["step"] == 4


def test_a_full_disk_under_any_other_write_is_one_line(tiny_model, tiny_corpus, capsys):
    """/dev/full: every write fails with the kernel's ENOSPC."""
    assert main(["evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"), "--ref",
                 str(tiny_corpus / "test.tgt"), "--json", "/dev/full", "--overwrite"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnmt: error: cannot write /dev/full: No space left on device; free some space and run the command again"]


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "checkpoints"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    with pytest.raises(UserError) as info:
        save_checkpoint({"model": {"w": torch.ones(2)}}, blocker / "last.pt")
    assert str(info.value) == (f"cannot write checkpoint {blocker / 'last.pt'}: File exists; nothing was written in "
                               "its place (the write goes to a temporary file first); free some space or choose a "
                               "folder that can be written")


def test_resuming_a_finished_run_changes_nothing(tiny_corpus, tmp_path):
    """Three resumes of a finished run: no validation, no checkpoint written, bad_validations as it was.
    (They used to validate again each time and count one more bad validation.)"""
    config = tiny_config(tiny_corpus, max_steps=5, valid_every=2, log_every=1, valid_bleu_sample=0)
    model = tmp_path / "m"
    train(config, model, quiet=True)
    last = model / "checkpoints" / "last.pt"
    before, state = last.read_bytes(), load_checkpoint(last)["train_state"]
    events = (model / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    validations = [e for e in map(json.loads, events) if e["event"] == "valid"]
    assert [v["step"] for v in validations] == [2, 4, 5]
    for _ in range(3):
        result = train(config, model, resume=True, quiet=True)
        assert result.history == [] and result.state.step == 5
    assert last.read_bytes() == before
    later = [json.loads(e) for e in (model / "train_log.jsonl").read_text(encoding="utf-8").splitlines()[len(events):]]
    assert [e["event"] for e in later if e["event"] in ("train", "valid")] == []
    assert [e["reason"] for e in later if e["event"] == "end"] == ["max_steps"] * 3
    assert load_checkpoint(last)["train_state"]["bad_validations"] == state["bad_validations"]
