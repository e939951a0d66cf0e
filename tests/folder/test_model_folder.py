"""A model folder is written by one process at a time (attnmt/runtime/lock.py) and stays rerunnable
(attnmt/folder/model_folder.py): a second train, resume, fine-tune or average of a folder in use is one line naming
the process that holds it, and a run killed before its first checkpoint is rerun without --overwrite."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.runtime.lock import LOCK, lock_folder

ROOT = Path(__file__).resolve().parents[2]


def config_file(tmp_path: Path, corpus: Path, steps: int) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text("\n".join([
        "data:", f"  train_src: {corpus / 'train.src'}", f"  train_tgt: {corpus / 'train.tgt'}", "  tokenizer: word",
        "model:", "  emb_size: 8", "  hidden_size: 8",
        "train:", f"  max_steps: {steps}", f"  valid_every: {steps}", "  progress: false", "  tensorboard: false",
        "  threads: 1"]) + "\n", encoding="utf-8")
    return path


def start_training(config: Path, model: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(config), "--model-dir", str(model), *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the training process ended (exit {process.returncode}) before {what}: "
                        f"{process.stderr.read().decode()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {what} after {timeout:.0f} s")
        time.sleep(0.05)


def training_started(model: Path) -> bool:
    log = model / "train_log.jsonl"
    return log.is_file() and any(json.loads(line)["event"] == "start"
                                 for line in log.read_text(encoding="utf-8").splitlines() if line.endswith("}"))


def snapshot(folder: Path) -> dict[str, bytes]:
    """The folder's files, less the lock and the token store (a cache of the corpus that a run prepares
    again for its own data, attnmt/folder/model_folder.py)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != LOCK and p.relative_to(folder).parts[0] != "store"}


def test_a_folder_in_use_refuses_train_resume_average_and_prepare_in_one_line(tiny_model, tiny_corpus, tmp_path,
                                                                             capsys):
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    before = snapshot(model)
    config = config_file(tmp_path, tiny_corpus, 2)
    lock = lock_folder(model, "attnmt train")  # as another training run would: a lock of its own
    try:
        for argv in (["train", str(config), "--model-dir", str(model), "--overwrite"],
                     ["train", str(config), "--model-dir", str(model), "--resume"],
                     ["train", str(tiny_model / "config.yaml"), "--model-dir", str(model), "--overwrite",
                      "--init-from", str(tiny_model)],
                     ["average", "--model", str(model)],
                     ["prepare", str(config), "--model-dir", str(model)]):
            assert main(argv) == 2, argv
            assert capsys.readouterr().err.splitlines() == [
                f"attnmt: error: model folder {model} is in use by attnmt train (process {os.getpid()}); wait until "
                "it ends (or stop it), then run this command again"], argv
    finally:
        lock.release()
    assert snapshot(model) == before


@pytest.mark.slow  # a real training process runs beside the refused one
def test_a_second_training_is_refused_and_the_first_finishes_unharmed(tiny_corpus, tmp_path, capsys):
    config, model = config_file(tmp_path, tiny_corpus, 40), tmp_path / "m"
    first = start_training(config, model)
    wait_for(lambda: (model / LOCK).is_file() and (model / LOCK).read_text().startswith(f"{first.pid} "), first,
             "lock of the first run")
    assert main(["train", str(config), "--model-dir", str(model), "--overwrite"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: model folder {model} is in use by attnmt train (process {first.pid}); wait until it ends "
        "(or stop it), then run this command again"]
    assert first.wait(timeout=300) == 0, first.stderr.read().decode()
    assert load_checkpoint(model / "checkpoints" / "last.pt")["train_state"]["step"] == 40
    assert main(["train", str(config), "--model-dir", str(model), "--resume"]) == 0  # the lock went with the process


def test_a_run_killed_before_its_first_checkpoint_is_rerun_without_overwrite(tiny_corpus, tmp_path, capsys):
    config, model = config_file(tmp_path, tiny_corpus, 1_000_000), tmp_path / "m"
    first = start_training(config, model)
    wait_for(lambda: training_started(model), first, "start of training")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert (model / "config.yaml").is_file() and not list(model.glob("checkpoints/*.pt"))
    assert main(["train", str(config), "--model-dir", str(model), "--set", "train.max_steps=2",
                 "--set", "train.valid_every=2"]) == 0, capsys.readouterr().err
    assert load_checkpoint(model / "checkpoints" / "last.pt")["train_state"]["step"] == 2
    assert not (model / ".replaced").exists()


def test_an_overwriting_run_killed_before_its_first_checkpoint_gives_the_old_run_back(tiny_model, tiny_corpus,
                                                                                      tmp_path, capsys):
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    before = snapshot(model)
    config = config_file(tmp_path, tiny_corpus, 1_000_000)
    first = start_training(config, model, "--overwrite")
    wait_for(lambda: (model / ".replaced").is_dir() and training_started(model), first, "start of training")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert (model / ".replaced" / "checkpoints" / "best.pt").is_file()  # the old run, set aside
    assert main(["train", str(config), "--model-dir", str(model)]) == 2  # it is back, and still refuses a new run
    assert "exists and is not empty" in capsys.readouterr().err
    assert snapshot(model) == before


def test_a_folder_without_a_checkpoint_that_holds_other_files_is_still_refused(tiny_model, tiny_corpus, tmp_path,
                                                                               capsys):
    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(tiny_model / "config.yaml", model / "config.yaml")  # as a run killed early leaves it
    (model / "notes.txt").write_text("mine\n", encoding="utf-8")  # but something the user put there too
    assert main(["train", str(config_file(tmp_path, tiny_corpus, 2)), "--model-dir", str(model)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert sorted(p.name for p in model.iterdir()) == ["config.yaml", "notes.txt"]


@pytest.mark.parametrize("staging", [".replacing", ".restoring"])
def test_a_run_killed_while_moving_the_previous_run_gives_it_back_whole(tiny_model, tiny_corpus, tmp_path, capsys,
                                                                         staging):
    """Killed halfway through setting the previous run aside (--overwrite), or through putting it back (a run
    without a checkpoint ending): the next run finishes the move back before it looks at the folder."""
    model = tmp_path / "m"
    shutil.copytree(tiny_model, model)
    before = snapshot(model)
    (model / staging).mkdir()
    for name in ("checkpoints", "config.yaml"):  # moved; the rest not yet
        (model / name).rename(model / staging / name)
    assert main(["train", str(config_file(tmp_path, tiny_corpus, 2)), "--model-dir", str(model)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert snapshot(model) == before and not (model / staging).exists()
