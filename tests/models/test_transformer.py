"""The Transformer (attnmt.models.transformer) through the model interface of docs/architecture.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnmt.config.schema import ModelConfig, load_config
from attnmt.errors import UserError
from attnmt.models import build_model
from attnmt.models.transformer import Transformer, sinusoidal_encoding

ROOT = Path(__file__).resolve().parents[2]
BOS, EOS = 2, 3

# a padded batch with three different source lengths; target padding at the end
SRC = torch.tensor([[5, 6, 7, 8, 9, 10], [10, 11, 12, 0, 0, 0], [4, 13, 9, 17, 0, 0]])
SRC_LEN = torch.tensor([6, 3, 4])
TGT_IN = torch.tensor([[2, 5, 6, 7, 8], [2, 8, 9, 0, 0], [2, 4, 4, 11, 0]])


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one intra-op thread is much faster (and not hurt by other busy processes)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make(src_vocab=20, tgt_vocab=30, seed=0, **kw) -> Transformer:
    torch.manual_seed(seed)
    options = dict(d_model=16, n_heads=2, ff_size=32, enc_layers=2, dec_layers=2, dropout=0.0)
    options.update(kw)
    return Transformer(src_vocab, tgt_vocab, **options).eval()


def test_positional_encoding_follows_section_3_5():
    pe = sinusoidal_encoding(torch.arange(50), 16)
    assert pe.shape == (50, 16)
    pos, i = 7, 3
    torch.testing.assert_close(pe[pos, 2 * i], torch.tensor(pos / 10000 ** (2 * i / 16)).sin())
    torch.testing.assert_close(pe[pos, 2 * i + 1], torch.tensor(pos / 10000 ** (2 * i / 16)).cos())
    assert sinusoidal_encoding(torch.arange(3), 7).shape == (3, 7)  # odd width works
    # any index shape: [B] positions (decoding) give the same rows as arange (teacher forcing)
    torch.testing.assert_close(sinusoidal_encoding(torch.tensor([[4], [9]]), 16)[:, 0], pe[[4, 9]])


@pytest.mark.parametrize("kw", [{}, dict(n_heads=4, enc_layers=1, dec_layers=3), dict(tie_embeddings=True)],
                         ids=["base", "4heads-1+3", "tied"])
def test_step_by_step_equals_teacher_forcing(kw):
    model = make(**kw)
    logits, alpha = model(SRC, SRC_LEN, TGT_IN)
    assert logits.shape == (3, 5, 30) and alpha.shape == (3, 5, 6)
    enc = model.encode(SRC, SRC_LEN)
    state = model.init_state(enc)
    H, dh = model.n_heads, model.d_model // model.n_heads
    assert state["k0"].shape == (3, H, 0, dh) and state["pos"].tolist() == [0, 0, 0]
    assert state["pos"].dtype == torch.long
    for i in range(TGT_IN.size(1)):
        log_probs, state, alpha_i = model.decode_step(TGT_IN[:, i], state, enc)
        assert log_probs.dtype == torch.float32 and log_probs.shape == (3, 30)
        torch.testing.assert_close(log_probs, logits[:, i].log_softmax(-1), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(alpha_i, alpha[:, i], atol=1e-6, rtol=1e-5)
        # the cache grows by one position a step: the prefix is kept, not recomputed
        assert state["k0"].shape == (3, H, i + 1, dh) and state["v1"].shape == (3, H, i + 1, dh)
        assert state["pos"].tolist() == [i + 1] * 3


def test_encode_and_state_are_batch_first():
    model = make()
    enc = model.encode(SRC, SRC_LEN)
    assert enc["memory"].shape == (3, 6, 16)
    assert enc["mask"].dtype == torch.bool
    assert enc["mask"].tolist() == [[True] * 6, [True] * 3 + [False] * 3, [True] * 4 + [False] * 2]
    for l in range(2):
        assert enc[f"ck{l}"].shape == enc[f"cv{l}"].shape == (3, 2, 6, 8)
    # reordering every enc/state tensor on dim 0 reorders the sentences' outputs
    state = model.init_state(enc)
    _, state, _ = model.decode_step(TGT_IN[:, 0], state, enc)
    perm = torch.tensor([2, 0, 1])
    enc_p = {k: v.index_select(0, perm) for k, v in enc.items()}
    state_p = {k: v.index_select(0, perm) for k, v in state.items()}
    lp_p, _, a_p = model.decode_step(TGT_IN[perm, 1], state_p, enc_p)
    lp, _, a = model.decode_step(TGT_IN[:, 1], state, enc)
    torch.testing.assert_close(lp_p, lp[perm])
    torch.testing.assert_close(a_p, a[perm])


def test_padding_does_not_change_a_sentence():
    model = make()
    logits, alpha = model(SRC, SRC_LEN, TGT_IN)
    alone, alpha_alone = model(SRC[1:2, :3], SRC_LEN[1:2], TGT_IN[1:2, :3])
    torch.testing.assert_close(logits[1, :3], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha[1, :3, :3], alpha_alone[0], atol=1e-6, rtol=1e-5)


def test_causal_a_later_target_token_does_not_change_earlier_logits():
    model = make()
    logits, _ = model(SRC, SRC_LEN, TGT_IN)
    changed = TGT_IN.clone()
    changed[:, 3] = 17
    logits2, _ = model(SRC, SRC_LEN, changed)
    torch.testing.assert_close(logits[:, :3], logits2[:, :3], atol=0, rtol=0)
    assert not torch.allclose(logits[:, 3:], logits2[:, 3:])


def test_source_padding_gets_no_attention_and_rows_sum_to_one():
    model = make()
    _, alpha = model(SRC, SRC_LEN, TGT_IN)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(3, 5))
    assert torch.all(alpha[1, :, 3:] == 0) and torch.all(alpha[2, :, 4:] == 0)
    # padding *contents* do not matter either
    other = SRC.masked_fill(SRC == 0, 19)
    logits, _ = model(SRC, SRC_LEN, TGT_IN)
    logits2, _ = model(other, SRC_LEN, TGT_IN)
    torch.testing.assert_close(logits, logits2, atol=1e-5, rtol=1e-5)


def test_cross_attention_of_every_layer_and_head():
    model = make(n_heads=4, dec_layers=3)
    _, alpha = model(SRC, SRC_LEN, TGT_IN)
    all_attn = model.forward_with_heads(SRC, SRC_LEN, TGT_IN)[1]
    assert all_attn.shape == (3, 4, 3, 5, 6)  # [L, H, B, T, S]
    torch.testing.assert_close(all_attn[-1].mean(0), alpha)
    torch.testing.assert_close(all_attn.sum(-1), torch.ones(3, 4, 3, 5))
    assert torch.all(all_attn[..., 1, :, 3:] == 0)
    logits, attention_only = model.forward_with_heads(SRC, SRC_LEN, TGT_IN, logits=False)  # what alignment reads
    assert logits is None and torch.equal(attention_only, all_attn)


def test_self_attention_of_every_layer_and_head_beside_the_same_pass():
    model = make(n_heads=2, enc_layers=3, dec_layers=2)
    logits, cross = model.forward_with_heads(SRC, SRC_LEN, TGT_IN)
    logits2, cross2, encoder, decoder = model.forward_with_self_attention(SRC, SRC_LEN, TGT_IN)
    torch.testing.assert_close(logits2, logits)
    torch.testing.assert_close(cross2, cross)
    assert encoder.shape == (3, 2, 3, 6, 6) and decoder.shape == (2, 2, 3, 5, 5)  # [L, H, B, S, S], [L, H, B, T, T]
    torch.testing.assert_close(encoder.sum(-1), torch.ones(3, 2, 3, 6))
    assert torch.all(encoder[:, :, 1, :, 3:] == 0)  # source padding is never attended
    assert torch.all(decoder.triu(diagonal=1) == 0)  # causal: nothing after a row's own position
    torch.testing.assert_close(decoder.sum(-1), torch.ones(2, 2, 3, 5))
    assert model.has_self_attention


def test_share_and_tie_embeddings():
    tied = make(20, 20, tie_embeddings=True, share_embeddings=True)
    assert tied.src_embed is tied.tgt_embed
    assert tied.output.weight is tied.tgt_embed.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    plain = make(20, 20)
    assert plain.src_embed is not plain.tgt_embed and plain.output.weight is not plain.tgt_embed.weight
    assert sum(p.numel() for p in plain.parameters()) - n_tied == 2 * 20 * 16
    # tied weights are one tensor: a step of training moves both uses together
    logits, _ = tied(SRC, SRC_LEN, TGT_IN.clamp(max=19))
    logits.sum().backward()
    assert tied.tgt_embed.weight.grad is not None
    shared_only = make(20, 20, share_embeddings=True)
    assert shared_only.output.weight is not shared_only.tgt_embed.weight
    with pytest.raises(ValueError, match="share_embeddings.*20.*30"):
        make(20, 30, share_embeddings=True)


def test_build_model_from_config():
    cfg = ModelConfig.of(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=2, dec_layers=1,
                      dropout=0.1, tie_embeddings=True, share_embeddings=True)
    model = build_model(cfg, 25, 25)
    assert isinstance(model, Transformer) and model.model_type == "transformer"
    assert len(model.encoder) == 2 and len(model.decoder) == 1
    assert model.output.weight is model.src_embed.weight
    logits, alpha = model(SRC, SRC_LEN, TGT_IN)
    assert logits.shape == (3, 5, 25) and alpha.shape == (3, 5, 6)
    with pytest.raises(UserError, match="config: model: share_embeddings"):
        build_model(cfg, 25, 26)


def test_dropout_only_in_training():
    model = make(dropout=0.3)
    a, _ = model(SRC, SRC_LEN, TGT_IN)
    b, _ = model(SRC, SRC_LEN, TGT_IN)
    torch.testing.assert_close(a, b)
    model.train()
    c, _ = model(SRC, SRC_LEN, TGT_IN)
    assert not torch.allclose(a, c)


def _copy_batch(g: torch.Generator, vocab: int, batch: int = 32):
    """Random sentences of 3..7 tokens (ids 4..vocab-1); the target is the source."""
    lens = torch.randint(3, 8, (batch,), generator=g)
    S = int(lens.max())
    src = torch.randint(4, vocab, (batch, S), generator=g).masked_fill(torch.arange(S) >= lens[:, None], 0)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), src], dim=1)
    tgt_out = torch.cat([src, torch.zeros(batch, 1, dtype=torch.long)], dim=1)
    tgt_out[torch.arange(batch), lens] = EOS
    return src, lens, tgt_in, tgt_out


def test_copy_task_loss_falls():
    vocab = 14
    model = make(vocab, vocab, d_model=32, ff_size=64, tie_embeddings=True, share_embeddings=True).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        src, src_len, tgt_in, tgt_out = _copy_batch(g, vocab)
        logits, _ = model(src, src_len, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert first > 2.0 and last < 0.3 * first, (first, last)


@pytest.mark.skipif(importlib.util.find_spec("attnmt.decode.search") is None,
                    reason="attnmt/decode/search.py is absent")
def test_beam_one_equals_greedy_and_beam_scores_match_forward():
    from attnmt.decode.search import beam_search, greedy_search

    model = make(20, 20, seed=3, share_embeddings=True, tie_embeddings=True)
    greedy = greedy_search(model, SRC, SRC_LEN, max_len_a=1.0, max_len_b=3)
    beam1 = beam_search(model, SRC, SRC_LEN, beam_size=1, max_len_a=1.0, max_len_b=3)
    for g, b in zip(greedy, beam1):
        assert g[0].tokens == b[0].tokens
        assert g[0].score == pytest.approx(b[0].score, abs=1e-5)
        torch.testing.assert_close(g[0].attention, b[0].attention)
    # beam search reorders the cache with index_select: rescoring each hypothesis by teacher forcing
    # gives its log prob and attention, so the reordered states were right
    beams = beam_search(model, SRC, SRC_LEN, beam_size=4, n_best=3, max_len_a=1.0, max_len_b=3)
    for i, hyps in enumerate(beams):
        assert len(hyps) == 3
        n = int(SRC_LEN[i])
        for h in hyps:
            tgt_in = torch.tensor([[BOS] + h.tokens])
            tgt_out = torch.tensor(h.tokens + [EOS])
            with torch.no_grad():
                logits, alpha = model(SRC[i:i + 1, :n], SRC_LEN[i:i + 1], tgt_in)
            log_prob = logits[0].float().log_softmax(-1).gather(1, tgt_out[:, None]).sum().item()
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            torch.testing.assert_close(h.attention, alpha[0], atol=1e-5, rtol=1e-4)


def test_multi30k_transformer_config_loads():
    cfg = load_config(ROOT / "recipes" / "multi30k" / "de_en_transformer.yaml")
    assert cfg.model.type == "transformer"
    assert cfg.model.share_embeddings and cfg.model.tie_embeddings and cfg.data.joint_vocab
    assert cfg.data.src_lang == "de" and cfg.data.tgt_lang == "en"
    data = ROOT / "data" / "multi30k"
    assert Path(cfg.data.train_src) == data / "train.de.gz" and Path(cfg.data.train_tgt) == data / "train.en.gz"
    assert Path(cfg.data.valid_src) == data / "val.de.gz" and Path(cfg.data.test_tgt) == data / "test_2016_flickr.en.gz"
    model = build_model(cfg.model, 100, 100)
    assert isinstance(model, Transformer)
