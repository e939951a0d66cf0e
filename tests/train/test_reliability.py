"""Training loses no work: atomic checkpoints, exact resume after a stop or a crash, graceful
signals, NaN policy, and no command that overwrites files without --overwrite.

The subprocess version with SIGKILL at random moments is tests/slow/test_crash.py; these run the
same logic in-process, in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import stat

import pytest
import torch
import yaml

import attnmt.train.loss as loss_module
import attnmt.train.trainer as train_module
from attnmt.cli import main
from attnmt.config.schema import config_to_dict
from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint
from attnmt.train.events import graceful_stop
from attnmt.train.trainer import train
from tests.conftest import tiny_config

STEPS = 24


def small_config(corpus, **train_args):
    config = tiny_config(corpus, **{"max_steps": STEPS, "valid_every": 8, "valid_bleu_sample": 0,
                                    "scheduler": "plateau", "lr_patience": 0, **train_args})
    config.model.emb_size, config.model.hidden_size = 16, 16
    return config


@pytest.fixture(scope="module")
def reference(tiny_corpus, tmp_path_factory):
    """An uninterrupted run: what every stopped-and-resumed run must end with."""
    model_dir = tmp_path_factory.mktemp("reference") / "m"
    train(small_config(tiny_corpus), model_dir, quiet=True)
    return model_dir


def assert_same_end(a_dir, b_dir):
    for name in ("last", "best"):
        a = load_checkpoint(a_dir / "checkpoints" / f"{name}.pt")
        b = load_checkpoint(b_dir / "checkpoints" / f"{name}.pt")
        assert a["train_state"]["step"] == b["train_state"]["step"]
        for key in ("best_valid_loss", "bad_validations", "epoch", "batch_in_epoch"):
            assert a["train_state"][key] == b["train_state"][key], key
        for key, tensor in a["model"].items():
            assert torch.equal(tensor, b["model"][key]), key
        if name == "last":  # best.pt holds the weights only (attnmt.folder.checkpoint.for_translation)
            assert a["scheduler"] == b["scheduler"]
            assert torch.equal(a["rng"], b["rng"])


def patch_training_loss(monkeypatch, at_call: int, action):
    """Run `action()` when the training loss of the at_call-th training batch is computed."""
    original = loss_module.output_loss
    calls = {"n": 0}

    def patched(*args, **kwargs):
        loss = original(*args, **kwargs)
        if torch.is_grad_enabled():  # validation runs under no_grad
            calls["n"] += 1
            if calls["n"] == at_call:
                return action(loss)
        return loss

    monkeypatch.setattr(loss_module, "output_loss", patched)


# --- atomic checkpoints ----------------------------------------------------------------------------

def test_failed_checkpoint_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt" / "last.pt"
    save_checkpoint({"model": {"w": torch.ones(3)}, "model_type": "rnnsearch"}, path)
    before = path.read_bytes()

    def half_write(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_write)
    with pytest.raises(UserError, match=f"^cannot write checkpoint {path}: No space left on device; last.pt there "
                                        "still holds its previous contents"):
        save_checkpoint({"model": {"w": torch.zeros(3)}, "model_type": "rnnsearch"}, path)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["last.pt"]  # no temporary left behind
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(3))


def test_checkpoint_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        save_checkpoint({"model": {}}, tmp_path / "a.pt")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.pt").stat().st_mode) == 0o644  # readable by the group, as other files


# --- resume is exact ---------------------------------------------------------------------------------

def test_sigterm_stops_after_the_step_and_resume_is_exact(tiny_corpus, tmp_path, monkeypatch, reference):
    patch_training_loss(monkeypatch, 11, lambda loss: (os.kill(os.getpid(), signal.SIGTERM), loss)[1])
    result = train(small_config(tiny_corpus), tmp_path / "m", quiet=True)
    assert (result.state.step, result.state.stop_reason) == (11, "interrupted")
    # The stop writes last.pt at once, without an extra validation (which would change plateau and
    # early-stopping counters and make the resumed run differ).
    last = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")
    assert last["train_state"]["step"] == 11
    assert [r["step"] for r in map(json.loads, (tmp_path / "m" / "train_log.jsonl").open()) if r["event"] == "valid"] \
        == [8]
    monkeypatch.undo()
    result = train(small_config(tiny_corpus), tmp_path / "m", resume=True, quiet=True)
    assert (result.state.step, result.state.stop_reason) == (STEPS, "max_steps")
    assert_same_end(reference, tmp_path / "m")


def test_crash_between_checkpoints_then_resume_is_exact(tiny_corpus, tmp_path, monkeypatch, reference):
    def crash(loss):
        raise RuntimeError("simulated crash")

    patch_training_loss(monkeypatch, 18, crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(small_config(tiny_corpus, save_every=5), tmp_path / "m", quiet=True)
    assert load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")["train_state"]["step"] == 16
    monkeypatch.undo()
    train(small_config(tiny_corpus, save_every=5), tmp_path / "m", resume=True, quiet=True)
    assert_same_end(reference, tmp_path / "m")


def test_save_every_writes_last_between_validations(tiny_corpus, tmp_path, monkeypatch):
    written = []
    original = train_module.save_checkpoint

    def recording(payload, path):
        written.append((path.name, payload["train_state"]["step"]))
        original(payload, path)

    monkeypatch.setattr(train_module, "save_checkpoint", recording)
    train(small_config(tiny_corpus, max_steps=12, save_every=5), tmp_path / "m", quiet=True)
    assert [s for name, s in written if name == "last.pt"] == [5, 8, 10, 12]
    assert written[1:3] == [("best.pt", 8), ("last.pt", 8)]  # best first: a kill in between loses nothing


def test_resuming_a_finished_run_trains_no_further(tiny_corpus, tmp_path):
    train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", quiet=True)
    result = train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", resume=True, quiet=True)
    assert (result.state.step, result.state.stop_reason) == (8, "max_steps")


def test_resume_removes_temporaries_of_a_killed_write(tiny_corpus, tmp_path):
    train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", quiet=True)
    stale = tmp_path / "m" / "checkpoints" / ".last.pt.0badc0de.tmp"
    stale.write_bytes(b"PK\x03\x04 torn")
    train(small_config(tiny_corpus, max_steps=9), tmp_path / "m", resume=True, quiet=True)
    assert not stale.exists()


def test_failed_resume_leaves_config_yaml_alone(tiny_corpus, tmp_path):
    """--resume with a config whose model does not fit the checkpoint must not rewrite config.yaml,
    or the folder's config and weights would no longer match and translation would break."""
    train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", quiet=True)
    before = (tmp_path / "m" / "config.yaml").read_text(encoding="utf-8")
    other = small_config(tiny_corpus, max_steps=16)
    other.model.hidden_size = 20
    with pytest.raises(UserError, match="has shape"):
        train(other, tmp_path / "m", resume=True, quiet=True)
    assert (tmp_path / "m" / "config.yaml").read_text(encoding="utf-8") == before


def test_resume_with_a_malformed_training_state_is_one_clear_error(tiny_corpus, tmp_path):
    train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", quiet=True)
    path = tmp_path / "m" / "checkpoints" / "last.pt"
    payload = load_checkpoint(path)
    payload["train_state"]["no_such_field"] = 1
    del payload["format_version"], payload["checksum"]
    save_checkpoint(payload, path)  # a well-formed, checksummed file with foreign contents
    with pytest.raises(UserError, match="cannot be resumed: its training state is malformed"):
        train(small_config(tiny_corpus, max_steps=16), tmp_path / "m", resume=True, quiet=True)


@pytest.mark.parametrize("field, value, named", [
    ("step", -5, "step=-5 is out of range; allowed: >= 0"),
    ("step", "7", "step='7' has the wrong type or value; allowed: int"),
    ("epoch", True, "epoch=True has the wrong type or value; allowed: int"),
    ("validated_step", -2, "validated_step=-2 is out of range; allowed: >= -1"),
    ("elapsed_s", float("inf"), "elapsed_s=inf is not a finite number; allowed: >= 0.0"),
    ("best_valid_loss", float("nan"), "best_valid_loss=nan is not a number"),
    ("best_step", -1, "best_step=-1 is out of range; allowed: >= 0"),
    ("stop_reason", 3, "stop_reason=3 has the wrong type or value; allowed: str"),
])
def test_every_training_state_field_is_type_and_range_checked_at_resume(tiny_corpus, tmp_path, field, value, named):
    train(small_config(tiny_corpus, max_steps=8), tmp_path / "m", quiet=True)
    path = tmp_path / "m" / "checkpoints" / "last.pt"
    payload = load_checkpoint(path)
    payload["train_state"][field] = value
    del payload["format_version"], payload["checksum"]
    save_checkpoint(payload, path)
    with pytest.raises(UserError) as refused:
        train(small_config(tiny_corpus, max_steps=16), tmp_path / "m", resume=True, quiet=True)
    assert str(refused.value) == (f"checkpoint {path} cannot be resumed: its training state is malformed ({named}); "
                                  "train again without --resume")


# --- signals -----------------------------------------------------------------------------------------

def test_first_sigint_asks_to_stop_second_stops_at_once():
    before = signal.getsignal(signal.SIGINT)
    with graceful_stop() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # a repeated SIGTERM still waits for the checkpoint
        assert stop["stop"]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_twice_is_one_line_exit_130(capsys, tiny_corpus, tmp_path, monkeypatch):
    def interrupt(loss):
        raise KeyboardInterrupt  # what the second SIGINT's handler raises

    patch_training_loss(monkeypatch, 3, interrupt)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(small_config(tiny_corpus))), encoding="utf-8")
    assert main(["train", str(config), "--model-dir", str(tmp_path / "m")]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["attnmt: interrupted"]


# --- NaN / infinite loss -----------------------------------------------------------------------------

def test_nan_loss_stops_with_a_message_and_keeps_the_last_good_checkpoint(tiny_corpus, tmp_path, monkeypatch):
    patch_training_loss(monkeypatch, 10, lambda loss: loss * float("nan"))
    with pytest.raises(UserError) as info:
        train(small_config(tiny_corpus), tmp_path / "m", quiet=True)
    last = tmp_path / "m" / "checkpoints" / "last.pt"
    assert str(info.value) == (f"the training loss became nan at step 10; the last good checkpoint stays in {last}; "
                               "lower train.lr or set train.nan_policy=skip")
    payload = load_checkpoint(last)
    assert payload["train_state"]["step"] == 8
    assert all(torch.isfinite(t).all() for t in payload["model"].values())


def test_nan_loss_before_any_checkpoint_says_so(tiny_corpus, tmp_path, monkeypatch):
    patch_training_loss(monkeypatch, 2, lambda loss: loss + float("inf"))
    with pytest.raises(UserError, match="became inf at step 2; no checkpoint was written yet"):
        train(small_config(tiny_corpus), tmp_path / "m", quiet=True)


def test_nan_policy_skip_skips_the_batch_and_warns(tiny_corpus, tmp_path, monkeypatch, capsys):
    patch_training_loss(monkeypatch, 5, lambda loss: loss * float("nan"))
    result = train(small_config(tiny_corpus, max_steps=10, nan_policy="skip"), tmp_path / "m")
    assert result.state.step == 10
    assert capsys.readouterr().err.strip().splitlines() == [
        "attnmt: warning: the training loss became nan at step 5; skipped that batch (train.nan_policy=skip)"]
    events = [json.loads(line) for line in (tmp_path / "m" / "train_log.jsonl").open(encoding="utf-8")]
    assert [(e["step"], e["policy"]) for e in events if e["event"] == "nonfinite_loss"] == [(4, "skip")]
    payload = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")
    assert all(torch.isfinite(t).all() for t in payload["model"].values())


# --- files are not overwritten ---------------------------------------------------------------------

def test_failed_translate_creates_no_output_file(capsys, tiny_model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(tiny_model), "--input", str(src), "--output", str(out),
                 "--beam", "0"]) == 2
    assert not out.exists()  # so the next attempt does not need --overwrite


def test_evaluate_refuses_existing_report_before_the_work(capsys, tiny_model, tiny_corpus, tmp_path, monkeypatch):
    report = tmp_path / "report.json"
    report.write_text("precious", encoding="utf-8")
    monkeypatch.setattr("attnmt.decode.translator.load", lambda *a, **k: pytest.fail("evaluated before refusing"))
    assert main(["evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"), "--ref",
                 str(tiny_corpus / "test.tgt"), "--json", str(report)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert report.read_text(encoding="utf-8") == "precious"


def test_overwrite_flag_replaces_the_output(capsys, tiny_model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\nc\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    out.write_text("old\n", encoding="utf-8")
    assert main(["translate", "--model", str(tiny_model), "--input", str(src), "--output", str(out),
                 "--overwrite", "--beam", "1"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
