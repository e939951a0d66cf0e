"""Symmetrization, the shift extraction method, links files and alignments where users translate.

Expected values are worked by hand (symmetrization), or come from the models' own behaviour
measured a second way (which attention row first changes when an input word changes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnmt.align import (
    ATTENTION_SYMMETRIZATIONS,
    METHODS,
    WordAttention,
    agreement_links,
    align_translations,
    grow_diag_final_and,
    links_from_attention,
    mutual_links,
    parse_links,
    read_links,
    symmetrize,
)
from attnmt.align.extract import shifted_rows
from attnmt.cli import ALIGN_METHODS, main
from attnmt.cli import SYMMETRIZATIONS as CLI_SYMMETRIZATIONS
from attnmt.errors import UserError
from attnmt.models import build_model, model_config


def test_cli_choices_are_the_library_ones():
    assert ALIGN_METHODS == METHODS and CLI_SYMMETRIZATIONS == ATTENTION_SYMMETRIZATIONS


# ---------------------------------------------------------------- symmetrization, worked by hand

def test_intersection_and_union():
    f, r = [{(0, 0), (1, 1), (2, 1)}], [{(0, 0), (1, 2)}]
    assert symmetrize(f, r, "intersection") == [{(0, 0)}]
    assert symmetrize(f, r, "union") == [{(0, 0), (1, 1), (2, 1), (1, 2)}]


def test_grow_diag_final_and_final_step_needs_both_words_unaligned():
    forward = {(0, 0), (1, 1), (2, 1), (4, 3)}
    reverse = {(0, 0), (1, 1), (1, 2), (3, 3)}
    # intersection {0-0, 1-1}; grow-diag adds 2-1 (source 2 unaligned) and 1-2 (target 2 unaligned), both
    # neighbours of 1-1; 4-3 and 3-3 neighbour nothing aligned. final-and, forward first: 4-3 (both words
    # free) is taken; then 3-3 is not, its target word 3 is now aligned (plain "final" would take it).
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1), (2, 1), (1, 2), (4, 3)}


def test_grow_diag_does_not_take_a_link_whose_words_are_both_aligned():
    forward = {(0, 0), (1, 1), (2, 1), (1, 2)}
    reverse = {(0, 0), (1, 1), (2, 2)}
    # 2-1 and 1-2 grow from 1-1 first (neighbour order: vertical/horizontal before diagonal); 2-2 is then a
    # neighbour whose source 2 and target 2 are both aligned, and final-and wants both free.
    assert symmetrize([forward], [reverse], "grow-diag-final-and") == [{(0, 0), (1, 1), (2, 1), (1, 2)}]
    assert (2, 2) in symmetrize([forward], [reverse], "union")[0]


def test_symmetrize_refuses_unknown_method_and_unequal_lengths():
    with pytest.raises(ValueError, match="grow-diag-final-and"):
        symmetrize([set()], [set()], "grow")
    with pytest.raises(ValueError, match="1 forward but 2 reverse"):
        symmetrize([set()], [set(), set()], "union")


# ---------------------------------------------------------------- the shift method

def _first_changed_row(model, position: int) -> int:
    """The first attention row that changes when the target input at ``position`` changes."""
    src = torch.tensor([[5, 6, 7, 8, 9, 10]])
    src_len = torch.tensor([6])
    tgt_in = torch.tensor([[2, 11, 12, 13, 14, 15, 16]])
    changed = tgt_in.clone()
    changed[0, position] = 17
    with torch.no_grad():
        a = model(src, src_len, tgt_in)[1][0]
        b = model(src, src_len, changed)[1][0]
    rows = [r for r in range(a.size(0)) if not torch.allclose(a[r], b[r], atol=0, rtol=0)]
    return rows[0]


@pytest.mark.parametrize("kw, lag", [
    (dict(type="rnnsearch", decoder="bahdanau"), 1),
    (dict(type="rnnsearch", decoder="luong", score="general", input_feeding=True), 0),
    (dict(type="rnnsearch", decoder="luong", score="dot"), 0),
    (dict(type="transformer", d_model=16, n_heads=2, ff_size=32, enc_layers=1, dec_layers=2), 0),
], ids=["bahdanau", "luong-feed", "luong-dot", "transformer"])
def test_query_lag_is_where_the_attention_first_reads_an_input(kw, lag):
    torch.manual_seed(0)
    kw = dict(kw)
    model = build_model(model_config(kw.pop("type"), emb_size=8, hidden_size=16, dropout=0.0, **kw), 20, 30).eval()
    assert model.query_lag == lag
    for position in (1, 3):
        # y_t is the input at position t + 1; its first reader is the row the shift method takes for y_t
        assert _first_changed_row(model, position) == position + lag


@pytest.mark.parametrize("lag", [0, 1])
def test_shift_reads_the_row_after_the_word_is_read(lag):
    # 3 target pieces run as <s> y0 y1 y2 </s>: rows 0..4, row r's input is the r-th of those
    alpha = np.arange(5 * 3, dtype=float).reshape(5, 3)
    # y_t is the input of row t + 1, read by the query of row t + 1 + lag
    np.testing.assert_array_equal(shifted_rows(alpha, 3, lag), alpha[[1 + lag, 2 + lag, 3 + lag]])
    with pytest.raises(ValueError, match="rows"):
        shifted_rows(alpha[:4], 3, 1)


def test_links_by_method_on_a_hand_built_matrix():
    weights = np.array([[0.6, 0.4], [0.3, 0.7]])  # rows: target words; columns: source words
    shifted = np.array([[0.1, 0.9], [0.8, 0.2]])
    m = WordAttention(["a", "b"], ["x", "y"], weights, [], [], np.zeros((2, 2)), shifted)
    assert links_from_attention(m, "argmax") == {(0, 0), (1, 1)}
    assert links_from_attention(m, "shift") == {(1, 0), (0, 1)}
    assert links_from_attention(m, "threshold", 0.65) == {(1, 1)}
    with pytest.raises(ValueError, match="WordAttention"):
        links_from_attention(weights, "shift")
    with pytest.raises(ValueError, match="WordAttention"):
        links_from_attention(weights, "shift-mutual")


def test_mutual_links_need_the_largest_of_row_and_column():
    # rows: target words, columns: source words. Both targets attend most to source 0; of the two, target 1
    # attends to it more; source 1's strongest reader is target 0, which prefers source 0: no link.
    weights = np.array([[0.6, 0.4], [0.7, 0.3]])
    assert mutual_links(weights) == {(0, 1)}
    assert mutual_links(np.zeros((0, 3))) == set()
    m = WordAttention(["a", "b"], ["x", "y"], weights, [], [], np.zeros((2, 2)), np.array([[0.2, 0.8], [0.9, 0.1]]))
    assert links_from_attention(m, "mutual") == {(0, 1)}
    assert links_from_attention(m, "shift-mutual") == {(1, 0), (0, 1)}  # the shift rows, read the same way


def _pair(weights, shifted=None) -> WordAttention:
    weights = np.asarray(weights, dtype=float)
    n_tgt, n_src = weights.shape
    return WordAttention(["w"] * n_src, ["w"] * n_tgt, weights, [], [], np.zeros((n_tgt, n_src)),
                         weights if shifted is None else np.asarray(shifted, dtype=float))


def test_agreement_keeps_a_link_one_direction_puts_second():
    # forward (rows: target words x, y over source a, b): both targets argmax to b
    forward = _pair([[0.45, 0.55], [0.4, 0.6]])
    # reverse (rows: source words a, b over target x, y): a -> x, b -> y
    reverse = _pair([[0.9, 0.1], [0.2, 0.8]])
    hard = symmetrize([links_from_attention(forward, "argmax")],
                      [{(i, j) for j, i in links_from_attention(reverse, "argmax")}], "intersection")
    assert hard == [{(1, 1)}]
    # products: a-x 0.45 * 0.9 = 0.405, b-x 0.55 * 0.1, a-y 0.4 * 0.2, b-y 0.6 * 0.8 = 0.48: both mutual maxima
    assert agreement_links(forward, reverse, "argmax") == {(0, 0), (1, 1)}


def test_agreement_reads_the_rows_of_the_method():
    predicting = [[0.9, 0.1], [0.1, 0.9]]
    crossed = [[0.1, 0.9], [0.9, 0.1]]
    forward, reverse = _pair(predicting, shifted=crossed), _pair(predicting, shifted=crossed)
    assert agreement_links(forward, reverse, "argmax") == {(0, 0), (1, 1)}
    assert agreement_links(forward, reverse, "shift") == {(1, 0), (0, 1)}
    assert agreement_links(forward, reverse, "shift-mutual") == {(1, 0), (0, 1)}
    with pytest.raises(ValueError, match="not one pair"):
        agreement_links(_pair([[1.0, 0.0]]), _pair([[1.0, 0.0]]), "argmax")


# ---------------------------------------------------------------- links files

def test_read_links_names_file_and_line(tmp_path):
    path = tmp_path / "train.links"
    pairs = [("a b", "x y"), ("c", "z")]
    path.write_text("0-0 1-1\n0-0\n", encoding="utf-8")
    assert read_links(path, pairs) == [{(0, 0), (1, 1)}, {(0, 0)}]
    path.write_text("0-0 1-1\n0:0\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"train.links:2: not a Pharaoh link"):
        read_links(path, pairs)
    path.write_text("0-0 1-2\n0-0\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"train.links:1: link 1-2 points past the sentence pair \(2 source, 2 target"):
        read_links(path, pairs)
    path.write_text("0-0\n", encoding="utf-8")
    with pytest.raises(UserError, match="1 lines but the corpus has 2"):
        read_links(path, pairs)
    assert parse_links("") == set()


def test_train_with_a_bad_links_file_is_one_line_exit_2(tiny_corpus, tmp_path, capsys):
    import yaml

    from attnmt.config.schema import config_to_dict
    from tests.conftest import tiny_config

    lines = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()
    links = tmp_path / "train.links"
    links.write_text("0-0\n" * (len(lines) - 1) + "0-99\n", encoding="utf-8")
    config = tiny_config(tiny_corpus, max_steps=2)
    config.data.transforms = [{"name": "links", "path": str(links)}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)), encoding="utf-8")
    assert main(["train", str(path), "--model-dir", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"train.links:{len(lines)}: link 0-99 points past" in err[0]


# ---------------------------------------------------------------- alignments where users translate

def _parse_output(line: str):
    text, links = line.split(" ||| ")
    return text, parse_links(links)


def test_translate_alignments_format(tiny_model, tiny_corpus, tmp_path, capsys):
    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:6]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(tiny_model), "--input", str(tmp_path / "in.txt"), "--alignments",
                 "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(sources)
    for source, line in zip(sources, lines):
        text, links = _parse_output(line)
        n_src, n_out = len(source.split()), len(text.split())
        # argmax: exactly one link per output word, each to a word of the source
        assert sorted(j for _, j in links) == list(range(n_out))
        assert all(0 <= i < n_src for i, _ in links)


def test_translate_alignments_symmetrized_is_within_each_direction(tiny_model, tiny_corpus, tmp_path, capsys):
    from attnmt.decode.translator import load

    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:4]
    translator = load(tiny_model)
    plain = align_translations(translator, translator.translate(sources, beam=1))
    both = align_translations(translator, translator.translate(sources, beam=1), reverse=translator,
                              symmetrization="intersection")
    for p, b in zip(plain, both):
        assert b.alignment <= p.alignment  # the intersection keeps only links the forward direction has
    with pytest.raises(UserError, match="reverse model"):
        align_translations(translator, translator.translate(sources[:1], beam=1), symmetrization="union")


def test_translate_alignments_agreement_is_the_product_of_both_directions(tiny_model, tiny_corpus, tmp_path,
                                                                         capsys):
    from attnmt.align import attention_matrices
    from attnmt.decode.translator import load

    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:4]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(tiny_model), "--input", str(tmp_path / "in.txt"), "--alignments",
                 "--beam", "1", "--reverse-model", str(tiny_model), "--symmetrize", "agreement",
                 "--align-method", "shift"]) == 0
    printed = [_parse_output(line) for line in capsys.readouterr().out.splitlines()]
    translator = load(tiny_model)
    outputs = [text for text, _ in printed]
    forward = attention_matrices(translator, sources, outputs)
    reverse = attention_matrices(translator, outputs, sources)
    for (_, links), f, r in zip(printed, forward, reverse):
        p = f.shifted * r.shifted.T
        want = {(i, j) for j, i in enumerate(p.argmax(axis=1)) if p[:, i].argmax() == j}
        assert links == want
        assert len({i for i, _ in links}) == len(links) == len({j for _, j in links})  # one link per word at most


def test_translate_alignments_of_an_ensemble_read_its_members_attention(tiny_model, tiny_corpus, tmp_path, capsys):
    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:4]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    common = ["--input", str(tmp_path / "in.txt"), "--alignments", "--beam", "2", "--symmetrize", "agreement",
              "--align-method", "shift"]
    assert main(["translate", "--model", str(tiny_model), "--reverse-model", str(tiny_model), *common]) == 0
    single = capsys.readouterr().out
    # An ensemble of one model twice translates as that model, and its mean attention is that model's.
    assert main(["translate", "--model", str(tiny_model), "--model", str(tiny_model), "--reverse-model",
                 str(tiny_model), "--reverse-model", str(tiny_model), *common]) == 0
    assert capsys.readouterr().out == single
    assert all(_parse_output(line)[1] for line in single.splitlines())


def test_server_alignment_field_matches_the_translator(tiny_model):
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
        from fastapi.testclient import TestClient
    from attnmt.decode.translator import load
    from attnmt.serve import create_app

    sentence = "gupo pelido duno gute"
    translator = load(tiny_model)
    expected = {m: align_translations(translator, translator.translate([sentence], beam=2), m)[0]
                for m in ("argmax", "shift", "mutual", "shift-mutual")}
    with TestClient(create_app({"rnn": tiny_model}), raise_server_exceptions=False) as client:
        for method, want in expected.items():
            body = client.post("/translate", json={"text": sentence, "beam": 2, "alignment": True,
                                                   "alignment_method": method}).json()
            tr = body["translations"][0]
            assert tr["text"] == want.text
            assert [tuple(link) for link in tr["alignment"]] == sorted(want.alignment)
        plain = client.post("/translate", json={"text": sentence}).json()["translations"][0]
        assert plain["alignment"] is None
        bad = client.post("/translate", json={"text": sentence, "alignment": True, "alignment_method": "gdfa"})
        assert bad.status_code == 422 and bad.json()["error"]["field"].startswith("alignment_method")


def test_eflomal_baseline_learns_the_synthetic_alignment(tiny_corpus, tmp_path):
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install 'attnmt[align]')")
    from attnmt.align import align_files

    train = zip((tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines(),
                (tiny_corpus / "train.tgt").read_text(encoding="utf-8").splitlines())
    corpus = tmp_path / "train.tsv"
    corpus.write_text("".join(f"{s}\t{t}\n" for s, t in train), encoding="utf-8")
    result = align_files(None, tiny_corpus / "test.src", tiny_corpus / "test.tgt", gold_path=tiny_corpus / "test.align",
                         baselines=("diagonal", "eflomal"), eflomal_corpus=corpus)
    rows = set(result.scores)
    assert {"eflomal forward", "eflomal reverse", "eflomal intersection", "eflomal union",
            "eflomal grow-diag-final-and"} <= rows
    # the symmetrizations relate as sets do, sentence by sentence
    for inter, union, f in zip(result.links["eflomal intersection"], result.links["eflomal union"],
                               result.links["eflomal forward"]):
        assert inter <= f <= union
    assert result.scores["eflomal intersection"].aer < result.scores["diagonal"].aer - 0.2


def test_shift_offset_zero_is_the_predicting_row(tiny_model, tiny_corpus):
    from attnmt.align import attention_matrices
    from attnmt.decode.translator import load

    translator = load(tiny_model)
    src = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:5]
    tgt = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()[:5]
    plain = attention_matrices(translator, src, tgt, shift_offset=0)
    shifted = attention_matrices(translator, src, tgt)  # Bahdanau's order: row t + 2
    shifted_by_two = attention_matrices(translator, src, tgt, shift_offset=2)
    for a, b, c in zip(plain, shifted, shifted_by_two):
        np.testing.assert_allclose(a.shifted, a.weights, atol=1e-6)
        np.testing.assert_array_equal(b.shifted, c.shifted)
        assert not np.allclose(b.shifted, b.weights)
