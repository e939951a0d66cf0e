"""train.precision (bfloat16 autocast with float32 master weights) and training on CUDA.

The CUDA tests skip on machines without a GPU; benchmarks/gpu.sh runs them on one.
"""

from __future__ import annotations

import json

import pytest
import torch

from attnmt.config.schema import save_config
from attnmt.decode.translator import load
from attnmt.train.trainer import autocast_dtype, native_bf16, train
from tests.conftest import tiny_config

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run benchmarks/gpu.sh on one)")


def _log(model_dir, event):
    lines = (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("event") == event]


def _first_losses(corpus, model_dir, model_type="rnnsearch", **train_settings):
    config = tiny_config(corpus, model_type, max_steps=4, log_every=1, valid_every=100, **train_settings)
    train(config, model_dir, quiet=True)
    return [r["loss"] for r in _log(model_dir, "train")], _log(model_dir, "start")[0]


def _pretend_native_bf16(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)


def test_bf16_autocast_changes_the_arithmetic_not_the_weights(tiny_corpus, tmp_path, monkeypatch):
    # This machine may lack bfloat16 hardware (then bf16 is refused); the tiny Transformer runs
    # emulated, and has no LSTM, for which oneDNN needs the hardware.
    _pretend_native_bf16(monkeypatch)
    fp32, start32 = _first_losses(tiny_corpus, tmp_path / "fp32", model_type="transformer")
    bf16, start16 = _first_losses(tiny_corpus, tmp_path / "bf16", model_type="transformer", precision="bf16")
    assert start32["precision"] == "fp32" and start16["precision"] == "bf16 autocast"
    # The same seed and batches: the losses agree to bfloat16's precision, but not exactly,
    # which shows that the forward pass really ran in bfloat16.
    assert fp32 != bf16
    assert bf16 == pytest.approx(fp32, rel=0.02)
    model = load(tmp_path / "bf16", checkpoint="last").model
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_auto_precision_is_bf16_only_where_the_hardware_has_it(monkeypatch):
    cpu = torch.device("cpu")
    assert autocast_dtype("fp32", cpu) is None
    assert autocast_dtype("bf16", cpu) is torch.bfloat16
    assert autocast_dtype("auto", cpu) is (torch.bfloat16 if native_bf16(cpu) else None)
    _pretend_native_bf16(monkeypatch)
    assert native_bf16(cpu) and autocast_dtype("auto", cpu) is torch.bfloat16


def test_bf16_on_a_cpu_without_it_is_one_clear_error(tiny_corpus, tmp_path, monkeypatch, capsys):
    from attnmt.cli import main

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    config = tiny_config(tiny_corpus, max_steps=1)
    config_path = tmp_path / "tiny.yaml"
    save_config(config, config_path)
    assert main(["train", str(config_path), "--model-dir", str(tmp_path / "m"), "--set", "train.precision=bf16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.precision=bf16" in err[0] and "no bfloat16 hardware" in err[0]
    assert not (tmp_path / "m").exists()  # refused before anything was written


def _cuda_config(corpus, model_type="rnnsearch", **train_settings):
    config = tiny_config(corpus, model_type, **train_settings)
    config.model.dropout = 0.0  # CUDA and the CPU draw different dropout masks from the same seed
    return config


@needs_cuda
@pytest.mark.parametrize("model_type", ["rnnsearch", "seq2seq", "transformer"])
def test_cuda_training_matches_cpu_and_its_checkpoint_loads_on_cpu(model_type, tiny_corpus, tmp_path):
    settings = dict(max_steps=3, log_every=1, valid_every=100)
    train(_cuda_config(tiny_corpus, model_type, **settings), tmp_path / "cpu", quiet=True)
    train(_cuda_config(tiny_corpus, model_type, device="cuda", **settings), tmp_path / "cuda", quiet=True)
    cpu_loss = [r["loss"] for r in _log(tmp_path / "cpu", "train")]
    cuda_loss = [r["loss"] for r in _log(tmp_path / "cuda", "train")]
    # The same initial weights (seeded on the CPU) and batches; kernels differ only in rounding.
    assert cuda_loss == pytest.approx(cpu_loss, rel=1e-3)
    on_cpu = load(tmp_path / "cuda", checkpoint="last", device="cpu")
    on_gpu = load(tmp_path / "cuda", checkpoint="last", device="cuda")
    sentences = (tiny_corpus / "valid.src").read_text(encoding="utf-8").splitlines()[:10]
    gpu_texts = [t.text for t in on_gpu.translate(sentences, beam=3)]
    assert gpu_texts == [t.text for t in on_cpu.translate(sentences, beam=3)]


@needs_cuda
def test_cuda_bf16_training_follows_fp32(tiny_corpus, tmp_path):
    for precision in ("fp32", "auto"):
        train(_cuda_config(tiny_corpus, device="cuda", precision=precision, max_steps=60), tmp_path / precision,
              quiet=True)
    assert _log(tmp_path / "auto", "start")[0]["precision"] == "bf16 autocast"
    fp32, bf16 = ([r["loss"] for r in _log(tmp_path / p, "train")] for p in ("fp32", "auto"))
    assert bf16[-1] < 0.85 * bf16[0]
    assert bf16[-1] == pytest.approx(fp32[-1], rel=0.05)
