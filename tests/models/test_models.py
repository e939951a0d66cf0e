"""The recurrent models through their public interface (docs/architecture.md)."""

import dataclasses

import pytest
import torch

from attnmt.config.schema import ModelConfig
from attnmt.errors import UserError
from attnmt.models import build_model, model_config
from attnmt.models.seq2seq import reverse_padded

SRC = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
SRC_LEN = torch.tensor([5, 3])
TGT_IN = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0]])

VARIANTS = [
    dict(type="seq2seq", enc_layers=2, dec_layers=2),
    dict(type="seq2seq", cell="gru", reverse_source=False),
    dict(type="seq2seq", enc_layers=2, dec_layers=2, feed_context=True),  # Cho et al. 2014's c at every step
    dict(type="rnnsearch"),
    dict(type="rnnsearch", cell="gru", enc_layers=2, dec_layers=2, tie_embeddings=True),
    dict(type="rnnsearch", decoder="luong", score="dot"),
    dict(type="rnnsearch", decoder="luong", score="general", input_feeding=True),
    dict(type="rnnsearch", decoder="luong", score="additive", attn_size=12),
    dict(type="rnnsearch", score="additive_coverage", attn_size=12),
    dict(type="rnnsearch", decoder="luong", score="additive_coverage", input_feeding=True),
    dict(type="rnnsearch", enc_hidden_size=8),  # OpenNMT's brnn: half the decoder's size per direction
]


def make(**kw):
    torch.manual_seed(0)
    cfg = model_config(kw.pop("type", "rnnsearch"), emb_size=8, hidden_size=16, dropout=0.0, **kw)
    return build_model(cfg, 20, 30).eval()


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_step_by_step_equals_teacher_forcing(kw):
    model = make(**kw)
    logits, alpha = model(SRC, SRC_LEN, TGT_IN)
    assert logits.shape == (2, 4, 30)
    enc = model.encode(SRC, SRC_LEN)
    state = model.init_state(enc)
    for i in range(TGT_IN.size(1)):
        log_probs, state, alpha_i = model.decode_step(TGT_IN[:, i], state, enc)
        torch.testing.assert_close(log_probs, logits[:, i].log_softmax(-1), atol=1e-5, rtol=1e-5)
        if alpha is not None:
            torch.testing.assert_close(alpha_i, alpha[:, i])
    if kw["type"] == "seq2seq":
        assert alpha is None
    else:
        assert alpha.shape == (2, 4, 5)
        torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 4))
        assert torch.all(alpha[1, :, 3:] == 0), "padding must get exactly zero attention"


@pytest.mark.parametrize("kw", VARIANTS[:4], ids=["seq2seq", "seq2seq-gru", "rnnsearch", "rnnsearch-gru-2layers"])
def test_padding_does_not_change_a_sentence(kw):
    model = make(**kw)
    logits, _ = model(SRC, SRC_LEN, TGT_IN)
    # Alone the sentence has no padding, which the encoder reads without packing: both paths agree.
    alone, _ = model(SRC[1:, :3], SRC_LEN[1:], TGT_IN[1:, :3])
    torch.testing.assert_close(logits[1, :3], alone[0], atol=1e-5, rtol=1e-5)


def test_seq2seq_decoder_gets_only_the_fixed_vector():
    model = make(type="seq2seq")
    enc = model.encode(SRC, SRC_LEN)
    assert set(enc) <= {"mask", "final_h", "final_c"}, "seq2seq must not pass annotations to its decoder"


def test_feed_context_gives_every_step_the_fixed_vector():
    """With feed_context, s_i = f(s_{i-1}, y_{i-1}, c): a step from the same state moves with c;
    without it the step reads c only through the state."""
    for feed, moves in ((True, True), (False, False)):
        model = make(type="seq2seq", feed_context=feed)
        enc = model.encode(SRC, SRC_LEN)
        state = model.init_state(enc)
        other = dict(enc, final_h=enc["final_h"] + 1.0)
        y = TGT_IN[:, 1]
        same_state, _, _ = model.decode_step(y, dict(state), enc)
        other_c, _, _ = model.decode_step(y, dict(state), other)
        assert (not torch.allclose(same_state, other_c)) == moves


def test_reverse_source_reverses_within_length():
    reversed_ = reverse_padded(SRC, SRC_LEN)
    assert reversed_.tolist() == [[9, 8, 7, 6, 5], [12, 11, 10, 0, 0]]


def test_rnnsearch_attention_moves_with_the_source():
    """Gradients reach the attention parameters: e_ij depends on W_s, W_h and v."""
    model = make(type="rnnsearch")
    logits, _ = model(SRC, SRC_LEN, TGT_IN)
    logits.sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if "attention" in n]
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_bad_model_configs_are_user_errors():
    with pytest.raises(UserError, match="enc_layers must equal dec_layers"):
        build_model(ModelConfig.of(type="seq2seq", enc_layers=2, dec_layers=1), 10, 10)
    with pytest.raises(UserError, match="input_feeding"):
        build_model(ModelConfig.of(type="rnnsearch", input_feeding=True), 10, 10)


def test_enc_hidden_size_sets_the_annotation_width_of_rnnsearch_only():
    model = make(type="rnnsearch", enc_hidden_size=8)
    enc = model.encode(SRC, SRC_LEN)
    assert enc["h"].shape == (2, 5, 16)  # [->h_j; <-h_j], 8 each
    with pytest.raises(UserError, match="enc_hidden_size applies to rnnsearch, not seq2seq"):
        ModelConfig.of(type="seq2seq", emb_size=8, hidden_size=16, enc_hidden_size=8)


@pytest.mark.parametrize("model_type", ["seq2seq", "rnnsearch", "transformer"])
def test_every_registered_model_keeps_the_model_protocol(model_type):
    from attnmt.models import MODELS
    from attnmt.models.protocols import AttentionModel, TranslationModel

    assert set(MODELS) >= {"seq2seq", "rnnsearch", "transformer"}
    model = build_model(model_config(model_type, emb_size=8, hidden_size=16, d_model=16, n_heads=2, ff_size=32,
                                     dropout=0.0), 20, 30)
    assert isinstance(model, TranslationModel) and model.model_type == model_type
    assert isinstance(model, AttentionModel) == model.has_attention  # seq2seq declares no query lag
    # its keys are those of its own config class, the class that ModelConfig.of(type=...) and a config file build
    config = ModelConfig.of(type=model_type)
    assert type(config) is model.config_class and model.config_keys == {f.name for f in dataclasses.fields(config)}


def test_a_model_type_brings_its_own_config_class():
    from dataclasses import dataclass

    from attnmt.config.schema import MODEL_CONFIGS, config_from_dict
    from attnmt.models import MODELS, register_model
    from attnmt.models.seq2seq import Seq2Seq, Seq2SeqConfig

    @dataclass
    class WideConfig(Seq2SeqConfig):
        type: str = "wide_seq2seq"
        width: int = 3

    try:
        @register_model("wide_seq2seq")
        class Wide(Seq2Seq):
            config_class = WideConfig

        config = config_from_dict({"model": {"type": "wide_seq2seq", "width": 5, "emb_size": 8}})
        assert type(config.model) is WideConfig and (config.model.width, config.model.emb_size) == (5, 8)
        assert Wide.config_keys == Seq2Seq.config_keys | {"width"} and not Wide.has_attention
        with pytest.raises(UserError, match="model.width applies to wide_seq2seq, not rnnsearch"):
            config_from_dict({"model": {"width": 5}})
        with pytest.raises(UserError, match="supervises attention, and a wide_seq2seq model has none"):
            links = {"transforms": [{"name": "links", "path": "a"}]}  # guided alignment (attnmt.train.guidance)
            config_from_dict({"model": {"type": "wide_seq2seq"}, "data": links})
        with pytest.raises(ValueError, match="must default to 'other'"):
            register_model("other")(type("Other", (Seq2Seq,), {"config_class": WideConfig}))
    finally:
        MODELS.pop("wide_seq2seq", None)
        MODEL_CONFIGS.pop("wide_seq2seq", None)


def test_every_registered_score_keeps_the_score_protocol():
    from attnmt.models import SCORES
    from attnmt.models.protocols import AttentionScore

    for name, cls in SCORES.items():
        assert isinstance(cls(6, 6, 4), AttentionScore), name
