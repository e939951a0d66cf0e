"""int8 arithmetic provably ran, for every model type.

tests/models/test_int8.py counts modules and compares translations with float32's, which a quantization
that never runs passes best. Here the same hypotheses must be scored differently, bit for bit:
8-bit products cannot give float32's rounding on every hypothesis (as in the bf16 test of
tests/train/test_precision.py), and the RNN decoders' recurrent step must change the scores by itself.
"""

from __future__ import annotations

import pytest

from attnmt.decode.translator import load
from attnmt.models.encoders import StackedRNN
from attnmt.train.trainer import train
from tests.conftest import tiny_config

MODEL_TYPES = ["seq2seq", "rnnsearch", "transformer"]


@pytest.fixture(scope="module")
def small_models(tiny_corpus, tmp_path_factory):
    """One briefly trained model of each type (the scores need not be good, only computed)."""
    base = tmp_path_factory.mktemp("int8-models")
    for model_type in MODEL_TYPES:
        train(tiny_config(tiny_corpus, model_type, max_steps=20, valid_every=20, valid_bleu_sample=0),
              base / model_type, quiet=True)
    return base


def sentences(corpus, n=20):
    return (corpus / "test.src").read_text(encoding="utf-8").splitlines()[:n]


def differing_scores(a, b) -> int:
    """How many of the hypotheses found by both decoders got a different score (exact comparison)."""
    return sum(x.score != y.score for x, y in zip(a, b) if x.tgt_tokens == y.tgt_tokens)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_int8_scores_differ_bitwise_from_float32(model_type, small_models, tiny_corpus):
    texts = sentences(tiny_corpus, 40)
    fp32 = load(small_models / model_type).translate(texts, beam=1)
    int8 = load(small_models / model_type, int8=True).translate(texts, beam=1)
    same_hypothesis = sum(x.tgt_tokens == y.tgt_tokens for x, y in zip(fp32, int8))
    # enough shared hypotheses to compare their scores; how many a 20-step model shares depends on the
    # CPU's int8 kernels (on AVX2 alone the Transformer shares fewer than half)
    assert same_hypothesis >= 10, f"only {same_hypothesis} of {len(texts)} hypotheses shared"
    assert differing_scores(fp32, int8) > 0, "int8 scored every hypothesis exactly as float32: it did not run"


@pytest.mark.parametrize("model_type", ["seq2seq", "rnnsearch"])
def test_the_decoders_recurrent_step_runs_in_int8(model_type, small_models, tiny_corpus):
    """The same int8 model with its recurrent step put back to float32 (int8_step = None: the step's
    own weights) must score hypotheses differently: the int8 step did the work."""
    texts = sentences(tiny_corpus)
    int8 = load(small_models / model_type, int8=True)
    steps = [m for m in int8.model.modules() if isinstance(m, StackedRNN) and m.int8_step is not None]
    assert steps, "no recurrent step was quantized"
    with_int8_step = int8.translate(texts, beam=1)
    for m in steps:
        m.int8_step = None
    with_float_step = int8.translate(texts, beam=1)
    assert differing_scores(with_int8_step, with_float_step) > 0
