"""int8 decoding (--int8): linear layers quantized, translations and scores close to float32's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmt.cli import main
from attnmt.decode.translator import load
from attnmt.errors import UserError


def _sentences(corpus, n=40):
    return (corpus / "test.src").read_text(encoding="utf-8").splitlines()[:n]


def test_int8_replaces_the_linear_layers_and_the_recurrent_step(tiny_model):
    from attnmt.models.encoders import StackedRNN

    fp32, int8 = load(tiny_model), load(tiny_model, int8=True)
    linears = [m for m in fp32.model.modules() if isinstance(m, nn.Linear)]
    # additive attention's v (one output) stays float32: quantizing its [B,S,A] input costs more than it saves
    kept = [m for m in int8.model.modules() if type(m) is nn.Linear]
    assert kept and all(m.out_features == 1 for m in kept)
    quantized = [m for m in int8.model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    step_matrices = sum(2 * m.num_layers for m in fp32.model.modules() if isinstance(m, StackedRNN))
    assert step_matrices > 0
    assert len(quantized) == len(linears) - len(kept) + step_matrices
    assert all(m.int8_step is None for m in fp32.model.modules() if isinstance(m, StackedRNN))
    # the float32 model of another load is untouched
    assert all(p.dtype == torch.float32 for p in fp32.model.parameters())


@pytest.mark.parametrize("beam", [1, 3])
def test_int8_translates_like_float32(tiny_model, tiny_corpus, beam):
    sentences = _sentences(tiny_corpus)
    fp32 = load(tiny_model).translate(sentences, beam=beam)
    int8 = load(tiny_model, int8=True).translate(sentences, beam=beam)
    # The tiny model is barely trained, so many of its choices are near-ties that 8-bit rounding flips:
    # the share of identical texts depends on the CPU's kernels (31-35 of 40 on an AVX-512 Xeon, more on
    # an EPYC). Character F-score against the float32 output tolerates a flipped word: 89 (beam 3) and
    # 97 (greedy) measured on the Xeon; a broken int8 path (wrong scales, transposed weights) scores far lower.
    import sacrebleu

    chrf = sacrebleu.corpus_chrf([b.text for b in int8], [[a.text for a in fp32]]).score
    assert chrf >= 80, f"chrF of int8 against float32 output: {chrf:.1f}"
    for a, b in zip(fp32, int8):
        if a.text == b.text:  # the same hypothesis, scored with 8-bit weights
            assert b.score == pytest.approx(a.score, abs=0.05 * max(1.0, abs(a.score)))


def test_int8_is_for_the_cpu_only(tiny_model):
    with pytest.raises(UserError, match="int8 decoding runs on a CPU only"):
        load(tiny_model, device="cuda", int8=True)


def test_cli_int8_translate_and_evaluate(capsys, tiny_model, tiny_corpus, tmp_path):
    out = tmp_path / "out.txt"
    src = tiny_corpus / "test.src"
    assert main(["translate", "--model", str(tiny_model), "--int8", "--input", str(src), "--output", str(out)]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(src.read_text(encoding="utf-8").splitlines())
    assert main(["evaluate", "--model", str(tiny_model), "--int8", "--src", str(src),
                 "--ref", str(tiny_corpus / "test.tgt"), "--tokenize", "none"]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_served_models_can_be_int8(tiny_model):
    from attnmt.serve.engine import load_models

    (translator,) = load_models([f"tiny={tiny_model}"], int8=True).values()
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in translator.model.modules())


@pytest.mark.parametrize("trained", [
    "tiny_seq2seq", "tiny_transformer",  # the shared tiny models
    {"decoder": "luong", "score": "additive", "input_feeding": True},
    {"decoder": "luong", "score": "general", "dec_layers": 2},  # the RNN's input: the word alone
], ids=["seq2seq", "transformer", "luong-input-feeding", "luong-general-2-layers"])
def test_every_model_type_decodes_in_int8(trained, tiny_corpus, tmp_path, request):
    if isinstance(trained, str):
        model = request.getfixturevalue(trained)
    else:
        from attnmt.train.trainer import train
        from tests.conftest import tiny_config

        # 60 updates: 18-20 distinct outputs of 20 (a model that writes them apart), one validation
        config = tiny_config(tiny_corpus, "rnnsearch", max_steps=60, valid_every=60, valid_bleu_sample=0)
        for key, value in trained.items():
            setattr(config.model, key, value)
        model = train(config, tmp_path / "m", quiet=True).model_dir
    sentences = _sentences(tiny_corpus, 20)
    fp32 = load(model).translate(sentences, beam=2)
    int8 = load(model, int8=True).translate(sentences, beam=2)
    assert sum(a.text == b.text for a, b in zip(fp32, int8)) >= 0.7 * len(sentences)
