"""train.accum_steps, train.optimizer (adam / adamw / sgd), train.ema_decay and train.early_stopping_metric."""

from __future__ import annotations

import json

import pytest
import torch

import attnmt
import attnmt.decode.evaluate
from attnmt.data.dataset import encode_pairs, load_processors, read_split
from attnmt.data.loading import batch_of, training_batches
from attnmt.data.store import StoreData
from attnmt.decode.evaluate import Scores
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.models import build_model
from attnmt.runtime.distributed import World
from attnmt.train.accumulate import accumulate_gradients
from attnmt.train.loss import nll_loss, validation_loss
from attnmt.train.optim import make_optimizer
from attnmt.train.trainer import train
from tests.cli.test_cli import run
from tests.conftest import tiny_config
from tests.train.test_reliability import assert_same_end, patch_training_loss, small_config

CPU = torch.device("cpu")


def data_of(config, model_dir):
    """The processors and the training store of a trained model folder."""
    src, tgt = load_processors(model_dir)
    return src, tgt, StoreData(model_dir / "store")


def initial_model(config, src, tgt):
    torch.manual_seed(config.train.seed)  # as train() does before it builds the model
    return build_model(config.model, len(src.vocab), len(tgt.vocab))


# ------------------------------------------------------------------------------------ accumulation


def test_accumulated_gradient_of_two_batches_is_that_of_one_batch_of_both(tiny_model, tiny_corpus):
    config = tiny_config(tiny_corpus)
    src, tgt, data = data_of(config, tiny_model)
    first, second = list(training_batches(data, config, epoch=0))[:2]
    model = initial_model(config, src, tgt).eval()  # no dropout: the same arithmetic both ways

    def grads(batches):
        model.zero_grad(set_to_none=True)
        def loss_fn(b):
            return nll_loss(model(b.src, b.src_len, b.tgt_in)[0], b.tgt_out), None

        step = accumulate_gradients(model, [batch_of(data, b, CPU) for b in batches], loss_fn, World())
        return step, {n: p.grad.clone() for n, p in model.named_parameters()}

    two, accumulated = grads([first, second])
    one, together = grads([first + second])
    assert two.finite and two.tokens == one.tokens
    assert two.loss_sum.item() == pytest.approx(one.loss_sum.item(), rel=1e-6)
    for name, g in together.items():
        torch.testing.assert_close(accumulated[name], g, atol=1e-7, rtol=1e-5, msg=name)


def test_training_with_accum_steps_2_is_training_on_the_pairs_of_batches(tiny_corpus, tmp_path):
    steps = 3
    config = tiny_config(tiny_corpus, max_steps=steps, valid_every=100, valid_bleu_sample=0, accum_steps=2,
                         log_every=1)
    config.model.dropout = 0.0
    train(config, tmp_path / "m", quiet=True)
    trained = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")
    logged = [json.loads(line)["loss"] for line in (tmp_path / "m" / "train_log.jsonl").open()
              if json.loads(line)["event"] == "train"]

    src, tgt, data = data_of(config, tmp_path / "m")
    batches = list(training_batches(data, config, epoch=0))
    model = initial_model(config, src, tgt)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.train.lr)  # the unfused code path
    losses = []
    for k in range(steps):
        batch = batch_of(data, batches[2 * k] + batches[2 * k + 1], CPU)
        loss = nll_loss(model(batch.src, batch.src_len, batch.tgt_in)[0], batch.tgt_out) / batch.n_tgt_tokens
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip_grad_norm)
        optimizer.step()
    assert trained["train_state"]["step"] == steps and trained["train_state"]["batch_in_epoch"] == 2 * steps
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(trained["model"][name], tensor, atol=1e-5, rtol=1e-4, msg=name)
    assert logged == pytest.approx(losses, rel=1e-5)


def test_a_crash_between_inner_batches_resumes_exactly(tiny_corpus, tmp_path, monkeypatch):
    config = small_config(tiny_corpus, accum_steps=2, save_every=3, max_steps=12)
    train(config, tmp_path / "reference", quiet=True)

    def crash(loss):
        raise RuntimeError("simulated crash")

    patch_training_loss(monkeypatch, 2 * 10, crash)  # the second inner batch of step 10
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(config, tmp_path / "m", quiet=True)
    assert load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")["train_state"]["step"] == 9
    monkeypatch.undo()
    train(config, tmp_path / "m", resume=True, quiet=True)
    assert_same_end(tmp_path / "reference", tmp_path / "m")


# -------------------------------------------------------------------------------------- optimizers


def one_parameter(name, steps, **options):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    optimizer = make_optimizer([w], name, lr=0.1, **options)
    for g in steps:
        w.grad = torch.tensor(g)
        optimizer.step()
    return w.detach()


GRADS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]


def adam_by_hand(wd_l2=0.0, wd_decoupled=0.0, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    w, m, v = [1.0, -2.0, 0.5], [0.0] * 3, [0.0] * 3
    for t, g in enumerate(GRADS, start=1):
        for i in range(3):
            gi = g[i] + wd_l2 * w[i]
            w[i] -= lr * wd_decoupled * w[i]
            m[i] = b1 * m[i] + (1 - b1) * gi
            v[i] = b2 * v[i] + (1 - b2) * gi * gi
            w[i] -= lr * (m[i] / (1 - b1 ** t)) / ((v[i] / (1 - b2 ** t)) ** 0.5 + eps)
    return w


def test_optimizers_follow_their_update_rules():
    assert one_parameter("adam", GRADS).tolist() == pytest.approx(adam_by_hand(), abs=1e-6)
    assert one_parameter("adam", GRADS, weight_decay=0.3).tolist() == pytest.approx(adam_by_hand(wd_l2=0.3), abs=1e-6)
    assert one_parameter("adamw", GRADS, weight_decay=0.3).tolist() == pytest.approx(
        adam_by_hand(wd_decoupled=0.3), abs=1e-6)
    # SGD with momentum 0.9: v1 = g1, w1 = w0 - lr g1; v2 = 0.9 g1 + g2, w2 = w1 - lr v2
    expected = [w - 0.1 * a - 0.1 * (0.9 * a + b) for w, a, b in zip([1.0, -2.0, 0.5], *GRADS)]
    assert one_parameter("sgd", GRADS, momentum=0.9).tolist() == pytest.approx(expected, abs=1e-6)


def test_the_configured_optimizer_trains(tiny_corpus, tmp_path):
    train(tiny_config(tiny_corpus, max_steps=2, valid_every=100, valid_bleu_sample=0, optimizer="sgd", momentum=0.8,
                      weight_decay=0.01), tmp_path / "m", quiet=True)
    group = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")["optimizer"]["param_groups"][0]
    assert (group["momentum"], group["weight_decay"]) == (0.8, 0.01)


# -------------------------------------------------------------------------------------------- EMA


def test_ema_starts_from_the_initial_weights_and_follows_its_recurrence(tiny_corpus, tmp_path):
    d = 0.75
    config = small_config(tiny_corpus, ema_decay=d, max_steps=1, valid_every=1)
    train(config, tmp_path / "m", quiet=True)
    one = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")
    src, tgt, _ = data_of(config, tmp_path / "m")
    w0 = initial_model(config, src, tgt).state_dict()
    for name, ema in one["ema"].items():
        torch.testing.assert_close(ema, d * w0[name] + (1 - d) * one["model"][name], atol=1e-6, rtol=1e-6, msg=name)

    config.train.max_steps = 2
    train(config, tmp_path / "m", resume=True, quiet=True)
    two = load_checkpoint(tmp_path / "m" / "checkpoints" / "last.pt")
    for name, ema in two["ema"].items():
        torch.testing.assert_close(ema, d * one["ema"][name] + (1 - d) * two["model"][name], atol=1e-6, rtol=1e-6)


def test_ema_resumes_exactly(tiny_corpus, tmp_path):
    config = small_config(tiny_corpus, ema_decay=0.9, max_steps=12)
    train(config, tmp_path / "reference", quiet=True)
    config.train.max_steps = 8
    train(config, tmp_path / "m", quiet=True)
    config.train.max_steps = 12
    train(config, tmp_path / "m", resume=True, quiet=True)
    assert_same_end(tmp_path / "reference", tmp_path / "m")
    a, b = (load_checkpoint(p / "checkpoints" / "last.pt")["ema"] for p in (tmp_path / "reference", tmp_path / "m"))
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_validation_scores_the_ema_weights_that_checkpoint_ema_loads(capsys, tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=30, valid_every=10, valid_bleu_sample=0, ema_decay=0.8)
    train(config, tmp_path / "m", quiet=True)
    logged = [json.loads(line) for line in (tmp_path / "m" / "train_log.jsonl").open()]
    best = min(r["loss"] for r in logged if r["event"] == "valid")
    src, tgt = load_processors(tmp_path / "m")
    valid, _ = encode_pairs(read_split(config.data, "valid"), src, tgt, None)
    ema = attnmt.load(tmp_path / "m", checkpoint="ema").model
    raw = attnmt.load(tmp_path / "m", checkpoint="best").model
    assert validation_loss(ema, valid, config, CPU) == pytest.approx(best, rel=1e-6)
    assert abs(validation_loss(raw, valid, config, CPU) - best) > 1e-4  # not the raw weights
    source = tmp_path / "in.txt"
    source.write_text("a b c\n", encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(tmp_path / "m"), "--checkpoint", "ema", "--input",
                         str(source))
    assert code == 0 and len(out.splitlines()) == 1, err


# ------------------------------------------------------------------------------ early stopping metric


@pytest.mark.parametrize("metric, patience, stop_step, best_step", [("bleu", 2, 20, 10), ("chrf", 1, 10, 5)])
def test_early_stopping_on_bleu_or_chrf(tiny_corpus, tmp_path, monkeypatch, metric, patience, stop_step, best_step):
    bleu, chrf = iter([10.0, 20.0, 15.0, 12.0, 11.0]), iter([50.0, 40.0, 60.0, 30.0, 20.0])
    monkeypatch.setattr(attnmt.decode.evaluate, "corpus_scores",
                        lambda hyps, refs: Scores(next(bleu), next(chrf), "", ""))
    config = tiny_config(tiny_corpus, max_steps=25, valid_every=5, valid_bleu_sample=5, early_stopping_metric=metric,
                         early_stopping_patience=patience)
    result = train(config, tmp_path / "m", quiet=True)
    assert (result.state.step, result.state.stop_reason) == (stop_step, "early_stopping")
    assert load_checkpoint(tmp_path / "m" / "checkpoints" / "best.pt")["train_state"]["step"] == best_step


@pytest.mark.slow  # three training processes (torchrun's two and one alone)
def test_two_processes_accumulating_2_batches_each_equal_one_process_over_all_4(tiny_corpus, tmp_path):
    """torchrun: the inner batches are not all-reduced (no_sync), the last one is; the result is one batch of 4.
    The ranks train from one store in a shared data.store_dir, prepared once (tests/train/test_distributed.py has
    them prepare it in the model folder)."""
    import subprocess
    import sys

    import yaml

    from attnmt.config.schema import config_to_dict

    steps = 2
    config = tiny_config(tiny_corpus, max_steps=steps, valid_every=100, valid_bleu_sample=0, accum_steps=2,
                         log_every=1)
    config.model.dropout = 0.0
    config.data.store_dir = str(tmp_path / "cache")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           "29534", "-m", "attnmt", "train", str(path), "--model-dir", str(tmp_path / "ddp")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trained = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.pt")
    assert trained["train_state"]["batch_in_epoch"] == 4 * steps
    stores = list((tmp_path / "cache").iterdir())
    assert len(stores) == 1 and (stores[0] / "meta.json").is_file()  # one store, prepared once, no temporaries
    log = [json.loads(line) for line in (tmp_path / "ddp" / "train_log.jsonl").open(encoding="utf-8")]
    assert sum(1 for r in log if r.get("prepared")) == 1

    src, tgt = load_processors(tmp_path / "ddp")
    data = StoreData(stores[0])
    batches = list(training_batches(data, config, epoch=0))
    model = initial_model(config, src, tgt)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.train.lr)
    for k in range(steps):
        batch = batch_of(data, sum(batches[4 * k:4 * k + 4], []), CPU)
        loss = nll_loss(model(batch.src, batch.src_len, batch.tgt_in)[0], batch.tgt_out) / batch.n_tgt_tokens
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip_grad_norm)
        optimizer.step()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(trained["model"][name], tensor, atol=1e-5, rtol=1e-4, msg=name)
