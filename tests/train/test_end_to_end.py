"""Train tiny models for seconds, then translate, reload, resume: the whole pipeline."""

import json

import pytest
import torch

import attnmt
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.events import training_summary
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def log_events(model_dir, kind):
    lines = (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == kind]


def test_training_lowers_the_loss(tiny_model):
    losses = [r["loss"] for r in log_events(tiny_model, "train")]
    assert len(losses) >= 10
    assert losses[-1] < 0.75 * losses[0], losses
    valid = log_events(tiny_model, "valid")
    assert valid and all("bleu" in r and "ppl" in r for r in valid)
    for name in ("config.yaml", "src.vocab", "tgt.vocab", "checkpoints/best.pt", "checkpoints/last.pt"):
        assert (tiny_model / name).is_file(), name


def test_training_summary_reads_the_log(tiny_model, tmp_path):
    summary = training_summary(tiny_model)
    valid = log_events(tiny_model, "valid")
    assert summary["steps"] == 120 and summary["stop_reason"] == "max_steps" and summary["epochs"] >= 1
    assert summary["precision"] == "fp32" and summary["device"] == "cpu" and summary["train_pairs"] > 500
    assert [v["step"] for v in summary["validations"]] == [r["step"] for r in valid]
    assert summary["best_valid_ppl"] == min(r["ppl"] for r in valid)
    speeds = [r["tgt_tokens_per_s"] for r in log_events(tiny_model, "train")]
    assert len(speeds) == 12  # log_every 10 of 120 steps; the first (warm-up) is left out of the median
    assert summary["tgt_tokens_per_s_median"] == pytest.approx(sorted(speeds[1:])[5], abs=0.1)
    assert training_summary(tmp_path) == {}  # a folder without a log


def test_data_filtering_is_counted(tiny_model):
    (record,) = [r for r in log_events(tiny_model, "data") if r["split"] == "train" and "total" in r]
    assert record["total"] == 600 and record["kept"] + record["empty"] + record["too_long"] == 600


def test_reloaded_model_translates_identically(tiny_model, tiny_corpus):
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:12]
    first = attnmt.load(tiny_model)
    second = attnmt.load(tiny_model)
    a = first.translate(sentences, beam=3)
    b = second.translate(sentences, beam=3)
    assert [t.text for t in a] == [t.text for t in b]
    assert all(t.attention.shape == (len(t.tgt_tokens) + 1, len(t.src_tokens)) for t in a)
    assert all(abs(t.attention.sum(1) - 1).max() < 1e-5 for t in a)


def test_beam_one_equals_greedy(tiny_model, tiny_corpus):
    translator = attnmt.load(tiny_model)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()
    greedy = translator.translate(sentences, beam=1)
    from attnmt.decode.search import beam_search, greedy_search

    with torch.inference_mode():
        ids = [translator.src.ids(s) for s in sentences[:8]]
        from attnmt.data.batching import collate

        batch = collate([(i, None) for i in ids], list(range(len(ids))))
        g = greedy_search(translator.model, batch.src, batch.src_len)
        b = beam_search(translator.model, batch.src, batch.src_len, beam_size=1)
    assert [h[0].tokens for h in g] == [h[0].tokens for h in b]
    assert [t.text for t in greedy[:8]] == [translator.tgt.detokenize(h[0].tokens) for h in g]


def test_decode_batch_size_bounds_the_sentences_decoded_together(tiny_model, tiny_corpus):
    translator = attnmt.load(tiny_model)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:20]
    sizes = []
    encode = translator.model.encode
    translator.model.encode = lambda src, src_len: sizes.append(src.size(0)) or encode(src, src_len)
    small = translator.translate(sentences, beam=2, batch_size=3)
    assert max(sizes) <= 3 and sum(sizes) == len(sentences)
    sizes.clear()
    translator.config.decode.batch_size = 7  # the default comes from the model's config
    default = translator.translate(sentences, beam=2)
    assert max(sizes) == 7 and sum(sizes) == len(sentences)
    assert [t.text for t in small] == [t.text for t in default]


def test_n_best_is_sorted_and_sized(tiny_model):
    translator = attnmt.load(tiny_model)
    (t,) = translator.translate(["tiny input sentence"], beam=4, n_best=3)
    assert len(t.n_best) == 3 and t.n_best[0] is t
    scores = [h.score for h in t.n_best]
    assert scores == sorted(scores, reverse=True)


def test_resume_continues_to_identical_weights(tiny_corpus, tmp_path):
    """A run stopped half-way and resumed ends where an uninterrupted run ends (CPU, fixed seed)."""
    whole = tmp_path / "whole"  # 30 steps of about 12 batches an epoch: stopped in the second, ended in the third
    train(tiny_config(tiny_corpus, max_steps=30, valid_every=10, valid_bleu_sample=0), whole, quiet=True)
    part = tmp_path / "part"
    train(tiny_config(tiny_corpus, max_steps=20, valid_every=10, valid_bleu_sample=0), part, quiet=True)
    train(tiny_config(tiny_corpus, max_steps=30, valid_every=10, valid_bleu_sample=0), part, resume=True,
          quiet=True)
    a = load_checkpoint(whole / "checkpoints" / "last.pt")
    b = load_checkpoint(part / "checkpoints" / "last.pt")
    assert a["train_state"]["step"] == b["train_state"]["step"] == 30
    assert 1 <= b["train_state"]["epoch"] < 30 // 2  # epochs crossed, within an epoch (not one batch an epoch)
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.parametrize("model_type", ["seq2seq", "transformer"])
def test_other_model_types_train_and_translate(model_type, tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, model_type, max_steps=30, valid_every=30, valid_bleu_sample=5)
    if model_type == "transformer":
        config.train.scheduler, config.train.warmup_steps, config.train.lr = "noam", 10, 0.003
    train(config, tmp_path / model_type, quiet=True)
    translator = attnmt.load(tmp_path / model_type)
    (t,) = translator.translate(["a b c"], beam=2)
    assert isinstance(t.text, str)
    assert (t.attention is None) == (model_type == "seq2seq")
