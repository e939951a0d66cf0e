"""Ensembles (attnmt.decode.ensemble): the step log probs are the members' weighted mean, attention their mean."""

from __future__ import annotations

import shutil

import pytest
import torch

import attnmt
from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.ensemble import Ensemble, load_ensemble
from attnmt.decode.sampling import Sampling
from attnmt.decode.search import beam_search, greedy_search
from attnmt.errors import UserError
from tests.cli.test_cli import assert_user_error, run
from tests.decode.test_search import LENGTHS, TableModel, TinyAttnModel, make_batch, random_table


def test_an_ensemble_of_table_models_is_the_model_of_their_weighted_mean_table():
    tables = [random_table(keys=3, steps=4, seed=s) for s in (1, 2)]
    ensemble = Ensemble([TableModel(t) for t in tables], weights=[1.0, 3.0])
    mean = TableModel(0.25 * tables[0] + 0.75 * tables[1])
    src, src_len = torch.tensor([[0, 0, 0], [1, 1, 0], [2, 2, 2]]), torch.tensor([1, 2, 3])
    for search in (lambda m: greedy_search(m, src, src_len, max_len_a=1.0, max_len_b=0),
                   lambda m: beam_search(m, src, src_len, beam_size=40, n_best=40, max_len_a=1.0, max_len_b=0)):
        got, expected = search(ensemble), search(mean)
        for g, e in zip(got, expected):
            assert [h.tokens for h in g] == [h.tokens for h in e]
            assert [h.score for h in g] == pytest.approx([h.score for h in e], abs=1e-5)


def test_the_ensemble_scores_and_attention_are_the_members_means_along_its_output():
    members = [TinyAttnModel(seed=s, eos_bias=-2.0) for s in (3, 4)]
    src, src_len = make_batch(LENGTHS, seed=5)
    results = beam_search(Ensemble(members), src, src_len, beam_size=3, n_best=3, length_penalty=0.0)
    with torch.no_grad():
        for i, hyps in enumerate(results):
            for h in hyps:
                log_prob, rows = 0.0, []
                for m in members:  # teacher-force each member along the ensemble's hypothesis
                    enc = m.encode(src[i:i + 1], src_len[i:i + 1])
                    state, prev, mine = m.init_state(enc), BOS_ID, []
                    for tok in h.tokens + [EOS_ID]:
                        lp, state, alpha = m.decode_step(torch.tensor([prev]), state, enc)
                        log_prob += 0.5 * float(lp[0, tok])
                        mine.append(alpha[0, :LENGTHS[i]])
                        prev = tok
                    rows.append(torch.stack(mine))
                assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
                torch.testing.assert_close(h.attention, (rows[0] + rows[1]) / 2, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("options", [dict(beam=1), dict(beam=3, n_best=3), dict(sampling=Sampling(seed=2), n_best=2)])
def test_an_ensemble_of_one_is_the_model(tiny_model, tiny_corpus, options):
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:12]
    alone = attnmt.load(tiny_model).translate(sentences, **options)
    ensemble = load_ensemble([tiny_model]).translate(sentences, **options)
    for a, e in zip(alone, ensemble):
        assert [(h.text, h.score) for h in a.n_best] == [(h.text, h.score) for h in e.n_best]
        assert (a.attention == e.attention).all()


def test_a_model_with_itself_translates_as_the_model_from_the_command_line(capsys, tiny_model, tiny_corpus):
    source = str(tiny_corpus / "test.src")
    code, alone, err = run(capsys, "translate", "--model", str(tiny_model), "--input", source, "--beam", "3")
    assert code == 0, err
    # the mean of two equal log probs is that log prob, bit for bit (x/2 + x/2 == x in binary floating point)
    code, twice, err = run(capsys, "translate", "--model", str(tiny_model), "--model", str(tiny_model), "--input",
                           source, "--beam", "3")
    assert code == 0 and twice == alone, err


def swapped_target_words(tiny_model, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(tiny_model, other)
    lines = (other / "tgt.vocab").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4], lines[5] = lines[5], lines[4]
    (other / "tgt.vocab").write_text("".join(lines), encoding="utf-8")
    rerecord_tokenizers(other)  # a model trained with that vocabulary, not one whose files were edited
    return other


def rerecord_tokenizers(model):
    from attnmt.data.store import tokenizer_hash
    from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint

    path = model / "checkpoints" / "best.pt"
    payload = load_checkpoint(path)
    del payload["format_version"], payload["checksum"]
    save_checkpoint({**payload, "tokenizers": tokenizer_hash(model)}, path)


def test_models_with_different_vocabularies_are_refused(capsys, tiny_model, tmp_path):
    other = swapped_target_words(tiny_model, tmp_path)
    source = tmp_path / "in.txt"
    source.write_text("a b\n", encoding="utf-8")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--model", str(other), "--input", str(source))
    assert_user_error(code, err, f"{other}'s target vocabulary differs", "id 4")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--model", str(tmp_path / "missing"),
                       "--input", str(source))
    assert_user_error(code, err, f"no such folder: {tmp_path / 'missing'}")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--model", str(tiny_model), "--input",
                       str(source), "--ensemble-weights", "1")
    assert_user_error(code, err, "1 weights for 2 models")


def test_bad_weights():
    with pytest.raises(UserError, match="positive"):
        Ensemble([TinyAttnModel(), TinyAttnModel()], weights=[1.0, 0.0])


def test_a_mix_of_model_types_decodes_with_the_members_mean_log_prob(tiny_model, tiny_corpus, tmp_path):
    from attnmt.train.trainer import train
    from tests.conftest import tiny_config

    dirs = [tiny_model]
    for kind in ("transformer", "seq2seq"):  # the same corpus and word tokenizer: the same vocabularies
        train(tiny_config(tiny_corpus, kind, max_steps=20, valid_every=20, valid_bleu_sample=0), tmp_path / kind,
              quiet=True)
        dirs.append(tmp_path / kind)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:6]
    ensemble = load_ensemble(dirs)
    members = [attnmt.load(d).model for d in dirs]
    for tr in ensemble.translate(sentences, beam=3, n_best=3, length_penalty=0.0):
        src = torch.tensor([ensemble.src.ids(tr.source)])
        for option in tr.n_best:
            tgt = ensemble.tgt.vocab.encode(option.tgt_tokens)
            total = 0.0
            with torch.no_grad():
                for m in members:  # teacher forcing: the log prob each member gives the ensemble's output
                    logits, _ = m(src, torch.tensor([src.size(1)]), torch.tensor([[BOS_ID, *tgt]]))
                    logp = torch.log_softmax(logits[0].float(), dim=-1)
                    total += sum(float(logp[i, w]) for i, w in enumerate([*tgt, EOS_ID])) / len(members)
            assert option.score == pytest.approx(total, abs=1e-3)
        assert tr.attention.shape == (len(tr.tgt_tokens) + 1, len(tr.src_tokens))  # the two attentive members'
