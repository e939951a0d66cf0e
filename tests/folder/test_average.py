"""Kept step checkpoints (train.keep_checkpoints) and checkpoint averaging (`attnmt average`)."""

from __future__ import annotations

import pytest
import torch

from attnmt.cli import main
from attnmt.decode.translator import load
from attnmt.folder.checkpoint import kept_checkpoints, load_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def kept_model(tiny_corpus, tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("kept") / "m"
    train(tiny_config(tiny_corpus, max_steps=30, valid_every=10, save_every=5, keep_checkpoints=3), model_dir,
          quiet=True)
    return model_dir


def test_training_keeps_the_newest_n_step_checkpoints(kept_model):
    kept = kept_checkpoints(kept_model / "checkpoints")
    assert [p.name for p in kept] == ["step20.pt", "step25.pt", "step30.pt"]
    payload = load_checkpoint(kept[-1], "rnnsearch")
    assert "optimizer" not in payload  # weights only: a third of last.pt's size
    last = load_checkpoint(kept_model / "checkpoints" / "last.pt")
    assert all(torch.equal(payload["model"][k], last["model"][k]) for k in last["model"])


def test_average_writes_the_mean_of_the_last_n_and_it_translates(kept_model, capsys):
    assert main(["average", "--model", str(kept_model), "--last", "2"]) == 0
    assert "step25, step30" in capsys.readouterr().out
    averaged = load_checkpoint(kept_model / "checkpoints" / "averaged.pt", "rnnsearch")
    a, b = (load_checkpoint(kept_model / "checkpoints" / f"step{s}.pt")["model"] for s in (25, 30))
    for name, weight in averaged["model"].items():
        torch.testing.assert_close(weight, (a[name] + b[name]) / 2)
    assert any(not torch.equal(b[name], w) for name, w in averaged["model"].items())  # steps 25 and 30 differ
    translator = load(kept_model, checkpoint="averaged")
    assert translator.translate(["a b c"], beam=2)[0].text is not None
    assert main(["translate", "--model", str(kept_model), "--checkpoint", "step20", "--input",
                 str(write(kept_model.parent / "in.txt", "a b c\n"))]) == 0


def test_average_refuses_to_overwrite_and_keeps_the_file(kept_model, capsys):
    target = kept_model / "checkpoints" / "mine.pt"
    assert main(["average", "--model", str(kept_model), "--name", "mine"]) == 0
    before = target.read_bytes()
    assert main(["average", "--model", str(kept_model), "--name", "mine", "--last", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "exists" in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert target.read_bytes() == before
    assert main(["average", "--model", str(kept_model), "--name", "mine", "--last", "2", "--overwrite"]) == 0
    assert target.read_bytes() != before


@pytest.mark.parametrize("args, message", [
    (["--last", "4"], "keeps 3 step checkpoint(s), fewer than --last 4"),
    (["--last", "0"], "--last 0 must be at least 1"),
    (["--name", "best"], "belongs to training's own checkpoints"),
])
def test_average_bad_arguments_are_one_line(kept_model, capsys, args, message):
    assert main(["average", "--model", str(kept_model), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path
