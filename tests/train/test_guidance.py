"""Guided alignment training (attnmt/train/guidance.py): the loss, where its gradient goes, and its effect."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.config.schema import ModelConfig
from attnmt.data.vocab import BOS_ID
from attnmt.models import build_model
from attnmt.train.guidance import alignment_loss, guidance_matrix, piece_links
from tests.conftest import tiny_config


def test_alignment_loss_is_the_cross_entropy_worked_by_hand():
    alpha = torch.tensor([[[0.25, 0.5, 0.25], [0.1, 0.1, 0.8]]])
    G = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]])  # the second row has no link: it adds nothing
    expected = -(0.5 * math.log(0.25) + 0.5 * math.log(0.5))
    assert alignment_loss(alpha, G).item() == pytest.approx(expected, rel=1e-6)


def test_piece_links_and_guidance_matrix():
    # source words: [a b] [c]; target words: [x] [y z]; links a-word0->x, c->y-z word, a->y-z word
    links = {(0, 0), (1, 1), (0, 1)}
    assert piece_links(links, [0, 0, 1], [0, 1, 1]) == [[0, 1], [0, 1, 2], [0, 1, 2]]
    G = guidance_matrix([[[0, 1], [2], []]], src_len=4, tgt_len=4, device=torch.device("cpu"))
    assert G[0].tolist() == [[0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert guidance_matrix([None], 2, 2, torch.device("cpu")).sum() == 0


def _grads(model) -> dict[str, float]:
    return {n: (0.0 if p.grad is None else p.grad.abs().sum().item()) for n, p in model.named_parameters()}


SRC, SRC_LEN = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
TGT_IN = torch.tensor([[2, 9, 10, 11]])
G = guidance_matrix([[[0], [2], [1, 3]]], 4, 4, torch.device("cpu"))


def test_rnn_guidance_gradient_reaches_only_what_the_attention_depends_on():
    torch.manual_seed(0)
    model = build_model(ModelConfig.of(type="rnnsearch", emb_size=8, hidden_size=16, dropout=0.0), 20, 30)
    _, alpha = model(SRC, SRC_LEN, TGT_IN)
    alignment_loss(alpha, G).backward()
    grads = _grads(model)
    # The output layer and the readout come after the attention: no gradient; its own parameters get one.
    assert grads["output.weight"] == 0 and grads["decoder.readout.weight"] == 0
    assert all(grads[f"decoder.attention.{name}.weight"] > 0 for name in ("W_s", "W_h", "v"))


def test_transformer_guidance_supervises_one_head_of_one_layer():
    torch.manual_seed(0)
    cfg = ModelConfig.of(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=1, dec_layers=2, dropout=0.0)
    model = build_model(cfg, 20, 30)
    logits, alpha = model(SRC, SRC_LEN, TGT_IN, layer=0, head=1)
    assert torch.equal(alpha, model.forward_with_heads(SRC, SRC_LEN, TGT_IN)[1][0, 1])
    alignment_loss(alpha, G).backward()
    grads = _grads(model)
    assert all(v == 0 for n, v in grads.items() if n.startswith("decoder.1.") or n.startswith("output"))
    assert sum(v for n, v in grads.items() if n.startswith("decoder.0.cross_attn")) > 0


def _links_file(corpus: Path, tmp_path: Path) -> Path:
    """The synthetic corpus's gold links (1-based i-j) as 0-based Pharaoh guidance."""
    out = tmp_path / "train.links"
    lines = (corpus / "train.align").read_text(encoding="utf-8").splitlines()
    out.write_text("".join(" ".join(f"{int(l.split('-')[0]) - 1}-{int(l.split('-')[1]) - 1}"
                                    for l in line.replace("p", "-").split()) + "\n" for line in lines),
                   encoding="utf-8")
    return out


def _weights(model_dir: Path) -> dict:
    return torch.load(model_dir / "checkpoints" / "last.pt", weights_only=True)["model"]


def test_zero_weight_trains_exactly_the_unguided_model(tiny_corpus, tmp_path):
    from attnmt.train.trainer import train

    plain = train(tiny_config(tiny_corpus, max_steps=6, valid_every=6), tmp_path / "plain", quiet=True).model_dir
    config = tiny_config(tiny_corpus, max_steps=6, valid_every=6)
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    config.train.guided_alignment.weight = 0.0
    zero = train(config, tmp_path / "zero", quiet=True).model_dir
    a, b = _weights(plain), _weights(zero)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_guided_attention_aligns_better_than_unguided(tiny_corpus, tmp_path):
    from attnmt.align import align_files
    from attnmt.train.trainer import train

    def aer(model_dir) -> float:
        result = align_files(model_dir, tiny_corpus / "test.src", tiny_corpus / "test.tgt",
                             gold_path=tiny_corpus / "test.align")
        return result.scores["attention argmax"].aer

    plain = train(tiny_config(tiny_corpus, max_steps=60, valid_every=60), tmp_path / "plain", quiet=True).model_dir
    config = tiny_config(tiny_corpus, max_steps=60, valid_every=60)
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    config.train.guided_alignment.weight = 1.0
    guided = train(config, tmp_path / "guided", quiet=True).model_dir
    log = (guided / "train_log.jsonl").read_text(encoding="utf-8")
    assert '"align_loss"' in log and '"guided": ' in log
    # measured: 0.73 unguided, 0.52 guided after 60 steps
    assert aer(guided) < aer(plain) - 0.1


def test_alignment_test_text_is_added_to_training_without_links(tiny_corpus, tmp_path):
    import json

    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.data.transforms = [{"name": "align_text", "src": str(tiny_corpus / "test.src"),
                               "tgt": str(tiny_corpus / "test.tgt"), "copies": 3},
                              {"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    model_dir = train(config, tmp_path / "m", quiet=True).model_dir
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    n_train = len((tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines())
    n_test = len((tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines())
    added = next(e for e in events if "alignment_test_text" in e)
    assert (added["pairs"], added["copies"]) == (n_test, 3)
    guided = next(e for e in events if "guided" in e)
    encoded = next(e for e in events if e.get("split") == "train" and "kept" in e)
    assert encoded["total"] == n_train + 3 * n_test
    # the added pairs carry no guidance: the links file belongs to the training corpus
    assert (guided["guided"], guided["unguided"]) == (n_train, 3 * n_test)


def test_guidance_rows_move_by_the_offset_and_never_reach_padding():
    cpu = torch.device("cpu")
    G = guidance_matrix([[[0, 1], [2], [3]]], src_len=4, tgt_len=4, device=cpu, offset=2)
    # pieces 0 and 1 on rows 2 and 3; piece 2 would need row 4, past the pair's rows 0..3
    assert G[0].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1, 0]]
    # the shorter pair (one piece: rows 0..1) gets its row 1, never a padded row 2 or 3
    G = guidance_matrix([[[0]], [[1], [2], [3]]], src_len=4, tgt_len=4, device=cpu, offset=1)
    assert G[0].tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert G[1, 1:].argmax(-1).tolist() == [1, 2, 3]

    # a decoder that also read </s> has one row more: the last piece's shifted row exists
    G = guidance_matrix([[[0, 1], [2], [3]]], src_len=4, tgt_len=5, device=cpu, offset=2, extra_rows=1)
    assert G[0, 2:].argmax(-1).tolist() == [0, 2, 3]


def test_bahdanau_order_guides_the_last_piece_on_the_shift_row_without_changing_the_translation_loss():
    """In Bahdanau's order the last piece's shift row is the step after </s> is read: the guided batch
    runs one step longer, supervises that row, and keeps the NLL of the unguided batch."""
    from attnmt.config.schema import Config, TrainConfig
    from attnmt.data.batching import Batch
    from attnmt.train.loss import step_loss

    torch.manual_seed(0)
    cfg = ModelConfig.of(type="rnnsearch", dropout=0.0, emb_size=8, hidden_size=16, decoder="bahdanau")
    model = build_model(cfg, 20, 30).eval()
    config = Config(model=cfg, train=TrainConfig())
    config.train.guided_alignment.row, config.train.guided_alignment.weight = "shift", 0.0
    data = lambda indices: [[[], [], [], [2]]]  # noqa: E731 - the guidance of the one pair: its last piece only
    batch = Batch(SRC, SRC_LEN, torch.tensor([[2, 9, 10, 11, 12]]), torch.tensor([[9, 10, 11, 12, 3]]),
                  torch.tensor([5]), torch.tensor([0]))
    unguided_nll, none = step_loss(model, batch, data, config)
    config.train.guided_alignment.weight = 1.0
    nll, align = step_loss(model, batch, data, config)
    assert none is None and align.item() > 0  # the last piece is guided
    assert torch.allclose(nll, unguided_nll, rtol=0, atol=1e-5)
    # its row is the one after </s> (input position 5): it depends on the last piece y_3 ...
    changed = Batch(SRC, SRC_LEN, torch.tensor([[2, 9, 10, 11, 15]]), batch.tgt_out, batch.tgt_len, batch.index)
    assert step_loss(model, changed, data, config)[1].item() != align.item()


ATTENDING = [("rnnsearch", "bahdanau"), ("rnnsearch", "luong"), ("transformer", None)]


@pytest.mark.parametrize("model_type,decoder", ATTENDING)
def test_the_shift_row_is_the_first_whose_query_has_read_the_word(model_type, decoder):
    """Under row: shift, y_t's alignment loss must depend on y_t (its row has read it) and not on y_{t+1}
    (not a row later): fails if the offset of any decoder is off by one either way."""
    from attnmt.config.schema import Config, TrainConfig
    from attnmt.data.batching import Batch
    from attnmt.train.loss import step_loss

    torch.manual_seed(0)
    sizes = ({"emb_size": 8, "hidden_size": 16, "decoder": decoder} if decoder else
             {"d_model": 16, "n_heads": 2, "ff_size": 32, "enc_layers": 1, "dec_layers": 1})
    cfg = ModelConfig.of(type=model_type, dropout=0.0, **sizes)
    model = build_model(cfg, 20, 30).eval()
    config = Config(model=cfg, train=TrainConfig())
    config.train.guided_alignment.weight, t = 1.0, 1  # guide y_1 (tgt_in position 2) only

    def align_loss(row: str, tgt_in: torch.Tensor) -> float:
        config.train.guided_alignment.row = row
        data = lambda indices: [[[], [2], [], []]]  # noqa: E731 - the guidance of the one pair
        batch = Batch(SRC, SRC_LEN, tgt_in, torch.tensor([[9, 10, 11, 12, 3]]), torch.tensor([5]), torch.tensor([0]))
        return step_loss(model, batch, data, config)[1].item()

    base = torch.tensor([[2, 9, 10, 11, 12]])
    changed_t, changed_next = base.clone(), base.clone()
    changed_t[0, t + 1], changed_next[0, t + 2] = 15, 15
    shift = align_loss("shift", base)
    assert shift != align_loss("shift", changed_t)  # its row has read y_t ...
    assert shift == align_loss("shift", changed_next)  # ... and it is the first such row
    assert align_loss("predict", base) == align_loss("predict", changed_t)  # the predicting row has not


def test_a_model_guided_on_the_shift_row_is_read_with_shift_by_default(tiny_corpus, tmp_path):
    from attnmt.align import align_files, model_method
    from attnmt.decode.translator import load
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    config.train.guided_alignment.row = "shift"
    model_dir = train(config, tmp_path / "m", quiet=True).model_dir
    assert model_method(load(model_dir).config) == "shift"
    assert align_files(model_dir, tiny_corpus / "test.src", tiny_corpus / "test.tgt").output == "attention shift"
    assert model_method(tiny_config(tiny_corpus)) == "argmax"


def test_a_guided_transformer_is_read_from_its_supervised_head(tiny_corpus, tmp_path):
    from attnmt.align import attention_matrices
    from attnmt.decode.translator import load
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "transformer", max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.model.dec_layers = 2
    guided = config.train.guided_alignment
    guided.layer, guided.head = 0, 1
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    translator = load(train(config, tmp_path / "m", quiet=True).model_dir)
    src = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:3]
    tgt = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()[:3]

    def rows(**chosen):
        return [m.piece_weights for m in attention_matrices(translator, src, tgt, **chosen)]

    default, supervised, last = rows(), rows(layer=0, head=1), rows(layer=-1)
    assert all((a == b).all() for a, b in zip(default, supervised))
    assert not all((a == b).all() for a, b in zip(default, last))


def _tiny_transformer():
    torch.manual_seed(0)
    cfg = ModelConfig.of(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=1, dec_layers=3, dropout=0.0)
    return build_model(cfg, 20, 30).eval()


def test_the_full_context_pass_sees_later_words_and_the_logits_do_not():
    model = _tiny_transformer()
    later = TGT_IN.clone()
    later[0, 3] = 12  # the last input changes
    logits, alpha = model(SRC, SRC_LEN, TGT_IN, layer=1, head=0, full_context=True)
    logits_l, alpha_l = model(SRC, SRC_LEN, later, layer=1, head=0, full_context=True)
    assert torch.equal(logits[:, :3], logits_l[:, :3])  # the translation stays causal
    assert not torch.allclose(alpha[:, 0], alpha_l[:, 0])  # the first row has seen the last word
    causal = model(SRC, SRC_LEN, TGT_IN, layer=1, head=0)[1]
    assert torch.equal(causal[:, 0], model(SRC, SRC_LEN, later, layer=1, head=0)[1][:, 0])
    # the same attention as every head of the full-context pass, and padding is never seen
    assert torch.equal(alpha, model.forward_with_heads(SRC, SRC_LEN, TGT_IN, full_context=True)[1][1, 0])
    padded = torch.cat([TGT_IN, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    alpha_p = model(SRC, SRC_LEN, padded, layer=1, head=0, full_context=True)[1]
    assert torch.allclose(alpha_p[:, :4], alpha, atol=1e-6)


def test_the_full_context_guidance_reaches_only_the_layers_up_to_its_head():
    model = _tiny_transformer().train()
    _, alpha = model(SRC, SRC_LEN, TGT_IN, layer=1, head=0, full_context=True)
    alignment_loss(alpha, G).backward()
    grads = _grads(model)
    assert all(v == 0 for n, v in grads.items() if n.startswith("decoder.2.") or n.startswith("output"))
    assert sum(v for n, v in grads.items() if n.startswith("decoder.0.self_attn")) > 0


def test_full_context_needs_a_decoder_that_sees_the_whole_target(tiny_corpus, tmp_path):
    from attnmt.config.schema import config_from_dict, config_to_dict
    from attnmt.errors import UserError

    raw = config_to_dict(tiny_config(tiny_corpus))  # an rnnsearch
    raw["train"]["guided_alignment"]["full_context"] = True
    raw["data"]["transforms"] = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    with pytest.raises(UserError, match="full_context needs a decoder that can see the whole target"):
        config_from_dict(raw)


def test_a_full_context_model_is_trained_and_read_in_the_full_context_pass(tiny_corpus, tmp_path):
    from attnmt.align import attention_matrices
    from attnmt.decode.translator import load
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "transformer", max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.model.dec_layers = 2
    guided = config.train.guided_alignment
    guided.layer, guided.head = 0, 1
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    guided.row, guided.full_context = "shift", True
    translator = load(train(config, tmp_path / "m", quiet=True).model_dir)
    src = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:2]
    tgt = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()[:2]
    read = attention_matrices(translator, src, tgt)
    model = translator.model
    for (s, t), m in zip(zip(src, tgt), read):
        s_ids = torch.tensor([translator.src.vocab.encode(translator.src.tokens(s))])
        t_ids = translator.tgt.vocab.encode(translator.tgt.tokens(t))
        with torch.inference_mode():
            alpha = model(s_ids, torch.tensor([s_ids.size(1)]), torch.tensor([[BOS_ID] + t_ids]), layer=0, head=1,
                          full_context=True)[1][0].numpy()
        assert np.allclose(m.piece_weights, alpha[:len(t_ids)], atol=1e-5)  # <s> y, without </s>
        assert np.allclose(attention_matrices(translator, [s], [t], layer=-2, head=1)[0].piece_weights,
                           m.piece_weights)  # the supervised head, named
        causal = attention_matrices(translator, [s], [t], layer=0, head=0)[0]  # another head: the causal pass
        with torch.inference_mode():
            alpha = model(s_ids, torch.tensor([s_ids.size(1)]), torch.tensor([[BOS_ID] + t_ids]), layer=0, head=0)[1]
        assert np.allclose(causal.piece_weights, alpha[0, :len(t_ids)].numpy(), atol=1e-5)


def test_links_written_by_attnmt_align_guide_a_new_model(tiny_model, tiny_corpus, tmp_path):
    """Self-training (Zenkel et al. 2020): a model's own links of its training pairs, as `attnmt align --out`
    writes them, are read back as guidance for every training pair."""
    import json

    from attnmt.cli import main
    from attnmt.train.trainer import train

    links = tmp_path / "self.links"
    assert main(["align", "--model", str(tiny_model), "--src", str(tiny_corpus / "train.src"),
                 "--tgt", str(tiny_corpus / "train.tgt"), "--out", str(links)]) == 0
    config = tiny_config(tiny_corpus, max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.data.transforms = [{"name": "links", "path": str(links)}]
    model_dir = train(config, tmp_path / "student", quiet=True).model_dir
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    guided = next(e for e in events if "guided" in e)
    n_train = len((tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines())
    assert (guided["guided"], guided["unguided"]) == (n_train, 0)


def test_joined_pairs_carry_their_parts_guidance_shifted(tiny_corpus, tmp_path):
    """The joined_pairs transform: a joined pair's guidance is its parts' guidance, the later parts' source
    pieces shifted by the pieces before them, worked out here from the parts' text."""
    from attnmt.data.corpus import read_parallel
    from attnmt.data.loading import load_data
    from attnmt.data.pharaoh import read_links
    from attnmt.train.guidance import Guidance

    class Log:
        def event(self, *args, **kwargs):
            pass

    corpus = read_parallel(tiny_corpus / "train.src", tiny_corpus / "train.tgt")
    links_path = _links_file(tiny_corpus, tmp_path)
    config = tiny_config(tiny_corpus)
    config.data.tokenizer, config.data.vocab_size, config.data.max_len = "bpe", 200, 300  # pieces, not words
    config.data.transforms = [{"name": "joined_pairs", "count": 20, "max_parts": 3},
                              {"name": "links", "path": str(links_path)}]
    (tmp_path / "m").mkdir()
    data, _, src_proc, tgt_proc = load_data(config, tmp_path / "m", False, Log())
    guidance = Guidance(data, src_proc, tgt_proc)
    assert data.meta["links"]["guided"] == len(corpus) + 20 == len(data)
    links = read_links(links_path, corpus)
    own = [piece_links(pair_links, src_proc.tokenizer.word_ids(src_proc.tokens(pair[0])),
                       tgt_proc.tokenizer.word_ids(tgt_proc.tokens(pair[1])))
           for pair, pair_links in zip(corpus, links)]
    joined = [k for k in range(len(data)) if len(data.origins[k]) > 1]
    assert len(joined) == 20
    for k in joined:
        expected, shift = [], 0
        for line, _, _ in data.origins[k]:
            expected += [[j + shift for j in sources] for sources in own[line]]
            shift += len(src_proc.tokens(corpus[line][0]))
        assert guidance([k]) == [expected]
        assert data.src_ids[k] == src_proc.ids(" ".join(corpus[line][0] for line, _, _ in data.origins[k]))


def test_training_guides_the_joined_pairs(tiny_corpus, tmp_path):
    import json

    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, max_steps=2, valid_every=2, valid_bleu_sample=0)
    config.data.transforms = [{"name": "joined_pairs", "count": 25},
                              {"name": "align_text", "src": str(tiny_corpus / "test.src"),
                               "tgt": str(tiny_corpus / "test.tgt")},
                              {"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    model_dir = train(config, tmp_path / "m", quiet=True).model_dir
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    n_train = len((tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines())
    n_test = len((tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines())
    assert next(e for e in events if "joined_pairs" in e)["joined_pairs"] == 25
    guided = next(e for e in events if "guided" in e)
    assert (guided["guided"], guided["unguided"]) == (n_train + 25, n_test)


def test_align_prepare_gives_each_direction_its_own_guidance_file(tmp_path):
    """`attnmt align-prepare` writes one (English, French) link set for both models, and each direction's own
    set (train.directional.*); the French->English file is turned to (French, English)."""
    from attnmt.align.prepare import write_links

    forward = [{(1, 0), (0, 0)}, {(0, 1)}]  # (English, French): each French word from one English word
    reverse = [{(0, 0)}, {(0, 1), (1, 1)}]  # (English, French): each English word to one French word
    write_links(forward, tmp_path / "both", "en", "fr")
    write_links(forward, tmp_path / "own", "en", "fr", reverse=reverse)
    read = lambda name: (tmp_path / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    assert read("both.en-fr.links") == read("own.en-fr.links") == ["0-0 1-0", "0-1"]
    assert read("both.fr-en.links") == ["0-0 0-1", "1-0"]
    assert read("own.fr-en.links") == ["0-0", "1-0 1-1"]
