"""Training's claims, each against a value worked out in the test: the loss over real tokens only,
label smoothing's formula, a resume that runs only the remaining steps, early stopping, plateau decay,
and a loaded model that scores the validation set as the training log says.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

import attnmt
import attnmt.train.trainer
from attnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.loss import nll_loss
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def events(model_dir, kind=None):
    lines = (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if kind is None or r["event"] == kind]


def log_softmax_by_hand(row: list[float]) -> list[float]:
    top = max(row)
    log_total = top + math.log(sum(math.exp(x - top) for x in row))
    return [x - log_total for x in row]


# ---------------------------------------------------------------- the loss


def padded_batch():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5)
    # sentence 0 has 4 real tokens, sentence 1 two, then padding (which also has logits)
    tgt_out = torch.tensor([[1, 4, 2, EOS_ID], [4, EOS_ID, PAD_ID, PAD_ID]])
    return logits, tgt_out


def test_a_padded_batch_loss_is_the_sum_over_real_tokens_only():
    logits, tgt_out = padded_batch()
    expected = 0.0
    for b in range(2):
        for t in range(4):
            if tgt_out[b, t].item() != PAD_ID:
                expected -= log_softmax_by_hand(logits[b, t].tolist())[tgt_out[b, t].item()]
    assert nll_loss(logits, tgt_out).item() == pytest.approx(expected, rel=1e-6)
    # and padding's logits change nothing
    changed = logits.clone()
    changed[1, 2:] = 100.0 * torch.randn(2, 5)
    assert nll_loss(changed, tgt_out).item() == pytest.approx(expected, rel=1e-6)


def test_label_smoothing_follows_its_formula():
    """(1 - eps) * -log p(y) + eps * mean over the V words of -log p(w), summed over real tokens."""
    logits, tgt_out = padded_batch()
    eps, vocab = 0.1, logits.size(-1)
    expected = 0.0
    for b in range(2):
        for t in range(4):
            y = tgt_out[b, t].item()
            if y == PAD_ID:
                continue
            logp = log_softmax_by_hand(logits[b, t].tolist())
            expected += (1 - eps) * -logp[y] + eps * sum(-lp for lp in logp) / vocab
    assert nll_loss(logits, tgt_out, label_smoothing=eps).item() == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------- resume


def test_a_resumed_run_starts_after_the_checkpoint_and_runs_only_the_remaining_steps(tiny_corpus, tmp_path):
    settings = dict(valid_every=3, log_every=1, valid_bleu_sample=0)
    model_dir = tmp_path / "m"
    train(tiny_config(tiny_corpus, max_steps=6, **settings), model_dir, quiet=True)
    assert load_checkpoint(model_dir / "checkpoints" / "last.pt")["train_state"]["step"] == 6
    train(tiny_config(tiny_corpus, max_steps=10, **settings), model_dir, resume=True, quiet=True)
    log = events(model_dir)
    resumed_at = max(k for k, r in enumerate(log) if r["event"] == "resume")
    assert log[resumed_at]["step"] == 6
    # the resumed run's first step is step 7, and it runs steps 7-10: four steps, no more
    assert [r["step"] for r in log[resumed_at:] if r["event"] == "train"] == [7, 8, 9, 10]
    # Adam counted 6 + 4 updates in all
    last = load_checkpoint(model_dir / "checkpoints" / "last.pt")
    assert last["train_state"]["step"] == 10
    assert {float(s["step"]) for s in last["optimizer"]["state"].values()} == {10.0}


# ---------------------------------------------------------------- validation-driven rules


def rising_validation_loss(monkeypatch) -> list[float]:
    """Validation losses 1, 2, 3, ...: every validation after the first is worse than the best."""
    seen: list[float] = []

    def fake(model, data, config, device):
        seen.append(float(len(seen) + 1))
        return seen[-1]

    monkeypatch.setattr(attnmt.train.trainer, "validation_loss", fake)
    return seen


def test_early_stopping_fires_on_a_rising_validation_loss(tiny_corpus, tmp_path, monkeypatch):
    seen = rising_validation_loss(monkeypatch)
    config = tiny_config(tiny_corpus, max_steps=40, valid_every=5, valid_bleu_sample=0, early_stopping_patience=1)
    result = train(config, tmp_path / "m", quiet=True)
    # step 5: loss 1 (the best); step 10: loss 2, one validation without improvement = the patience
    assert seen == [1.0, 2.0]
    assert result.state.step == 10 and result.state.stop_reason == "early_stopping"
    assert events(tmp_path / "m", "end")[-1]["reason"] == "early_stopping"


def test_plateau_multiplies_the_lr_by_lr_decay(tiny_corpus, tmp_path, monkeypatch):
    rising_validation_loss(monkeypatch)
    config = tiny_config(tiny_corpus, max_steps=25, valid_every=5, valid_bleu_sample=0, scheduler="plateau",
                         lr=0.01, lr_decay=0.5, lr_patience=1, min_lr=1e-6, early_stopping_patience=100)
    train(config, tmp_path / "m", quiet=True)
    # torch's ReduceLROnPlateau rule: decay once more than lr_patience validations in a row did not
    # improve, then count again from zero. Losses 1..5: validations 2 and 3 are bad (decay at 3),
    # 4 and 5 bad again (decay at 5).
    assert [r["lr"] for r in events(tmp_path / "m", "valid")] == pytest.approx([0.01, 0.01, 0.005, 0.005, 0.0025])


# ---------------------------------------------------------------- load


@torch.inference_mode()
def test_load_reproduces_the_logged_best_validation_loss(tiny_model, tiny_corpus):
    """The best checkpoint, loaded, scores the validation pairs (one at a time, no padding, the
    log-probabilities summed by hand) at the loss the training log recorded as the best."""
    translator = attnmt.load(tiny_model)
    sources = (tiny_corpus / "valid.src").read_text(encoding="utf-8").splitlines()
    targets = (tiny_corpus / "valid.tgt").read_text(encoding="utf-8").splitlines()
    total, tokens = 0.0, 0
    for source, target in zip(sources, targets):
        src = translator.src.ids(source)
        tgt = translator.tgt.ids(target)
        logits, _ = translator.model(torch.tensor([src]), torch.tensor([len(src)]), torch.tensor([[BOS_ID, *tgt]]))
        logp = torch.log_softmax(logits[0].double(), dim=-1)
        for position, word in enumerate([*tgt, EOS_ID]):
            total -= logp[position, word].item()
        tokens += len(tgt) + 1
    best = min(r["loss"] for r in events(tiny_model, "valid"))
    assert total / tokens == pytest.approx(best, rel=1e-4)
