"""attnmt export --format ctranslate2 and the exported folder as a model (attnmt.export), on tiny Transformers.

Float32 gives attnmt's translations: greedy for every sentence with the same scores and attention; beam search
for at least 95% of the sentences (CTranslate2 ends beam search by its own rule); int8 stays close (chrF against
float32 of at least 80). Alignments equal attnmt's for the same head, including a guided head other than 0.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install -e '.[ct2]')")

from attnmt.cli import main
from attnmt.decode.translator import load
from attnmt.errors import UserError
from attnmt.export.convert import export_ctranslate2
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def transformer(tiny_corpus, tmp_path_factory):
    from attnmt.train.trainer import train

    # 300 steps: trained far enough that int8's rounding changes few outputs whichever CPU kernels trained it
    config = tiny_config(tiny_corpus, "transformer", max_steps=300, valid_every=300, valid_bleu_sample=0)
    config.model.dec_layers = 2
    return train(config, tmp_path_factory.mktemp("ct2") / "tf", quiet=True).model_dir


@pytest.fixture(scope="module")
def exported(transformer, tmp_path_factory):
    out = tmp_path_factory.mktemp("ct2") / "export"
    assert main(["export", str(transformer), "--out", str(out)]) in (0, None)
    return out


@pytest.fixture(scope="module")
def sources(tiny_corpus):
    return (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()


def test_the_folder_holds_the_engine_model_and_what_attnmt_reads(exported, transformer):
    names = {p.name for p in exported.iterdir()}
    assert {"model.bin", "config.yaml", "src.vocab", "tgt.vocab", "src.json", "attnmt_export.json"} <= names
    record = json.loads((exported / "attnmt_export.json").read_text())
    assert record["quantization"] == "float32" and record["attention_head"] is None
    assert record["parameters"] == load(transformer).parameter_count()


def test_greedy_float32_is_attnmts_decoding(exported, transformer, sources):
    ours, theirs = load(transformer).translate(sources, beam=1), load(exported).translate(sources, beam=1)
    for a, b in zip(ours, theirs):
        assert (a.text, a.tgt_tokens, a.src_tokens) == (b.text, b.tgt_tokens, b.src_tokens)
        assert b.score == pytest.approx(a.score, abs=1e-4)
        np.testing.assert_allclose(b.attention, a.attention, atol=1e-5)


@pytest.mark.parametrize("beam", [3, 5])
def test_beam_float32_is_attnmts_decoding(exported, transformer, sources, beam):
    ours, theirs = load(transformer).translate(sources, beam=beam), load(exported).translate(sources, beam=beam)
    same = [(a, b) for a, b in zip(ours, theirs) if a.tgt_tokens == b.tgt_tokens]
    assert len(same) >= 0.95 * len(sources)
    for a, b in same:
        assert b.score == pytest.approx(a.score, abs=1e-4)
        np.testing.assert_allclose(b.attention, a.attention, atol=1e-5)
    best = load(exported).translate(sources[:5], beam=4, n_best=3)
    for t in best:
        assert len(t.n_best) == 3 and [o.score for o in t.n_best] == sorted((o.score for o in t.n_best), reverse=True)


def test_int8_stays_close_to_float32(transformer, exported, sources, tmp_path):
    from sacrebleu.metrics import CHRF

    int8 = export_ctranslate2(transformer, tmp_path / "int8", quantization="int8")
    float32 = [t.text for t in load(exported).translate(sources, beam=3)]
    quantized = [t.text for t in load(int8).translate(sources, beam=3)]
    assert CHRF().corpus_score(quantized, [float32]).score >= 80
    on_load = [t.text for t in load(exported, int8=True).translate(sources, beam=3)]
    assert CHRF().corpus_score(on_load, [float32]).score >= 80


def test_length_and_repetition_options(exported, transformer, sources):
    for options in (dict(max_len=3), dict(min_len=12), dict(no_repeat_ngram=2), dict(length_penalty=0.0)):
        ours = load(transformer).translate(sources[:10], beam=1, **options)
        theirs = load(exported).translate(sources[:10], beam=1, **options)
        assert [t.tgt_tokens for t in theirs] == [t.tgt_tokens for t in ours], options


@pytest.fixture(scope="module")
def untrained(tiny_corpus, tmp_path_factory):
    """A Transformer trained one step at a negligible rate, and its export: its greedy outputs run to the cap."""
    from attnmt.train.trainer import train

    config = tiny_config(tiny_corpus, "transformer", max_steps=1, valid_every=1, valid_bleu_sample=0,
                         optimizer="sgd", lr=1e-9)
    model = train(config, tmp_path_factory.mktemp("ct2") / "untrained", quiet=True).model_dir
    return model, export_ctranslate2(model, tmp_path_factory.mktemp("ct2") / "untrained_export")


def test_each_sentence_is_capped_by_its_own_length_in_any_batch(untrained, sources):
    from attnmt.decode.search import max_output_lengths

    native, exported = (load(path) for path in untrained)
    picked = sorted({len(s.split()): s for s in sources}.values(), key=len)[:4]  # four source lengths
    decode = native.config.decode
    caps = max_output_lengths([len(s.split()) for s in picked], decode.max_len_a, decode.max_len_b)
    alone = [native.translate(s, beam=1) for s in picked]
    assert [len(t.tgt_tokens) for t in alone] == caps  # every output runs to its own cap
    beam_alone = [exported.translate(s, beam=3) for s in picked]
    assert [len(t.tgt_tokens) for t in beam_alone] == caps
    for batch in ([0, 1, 2, 3], [3, 0], [1, 3, 2], [2]):
        theirs = exported.translate([picked[i] for i in batch], beam=1)
        for i, t in zip(batch, theirs):
            assert t.tgt_tokens == alone[i].tgt_tokens, (batch, i)
            assert t.score == pytest.approx(alone[i].score, abs=1e-4)  # the forced </s> scored as attnmt scores it
            np.testing.assert_allclose(t.attention, alone[i].attention, atol=1e-5)  # and its attention row there
        beam = exported.translate([picked[i] for i in batch], beam=3)  # beam search: one cap per CTranslate2 call
        assert [t.tgt_tokens for t in beam] == [beam_alone[i].tgt_tokens for i in batch], batch


def test_sampling_is_seeded_and_a_prefix_is_kept(exported, sources):
    from attnmt.decode.sampling import Sampling

    translator = load(exported)
    one = translator.translate(sources[:4], n_best=3, sampling=Sampling(top_k=5, seed=7))
    two = translator.translate(sources[:4], n_best=3, sampling=Sampling(top_k=5, seed=7))
    assert [[o.text for o in t.n_best] for t in one] == [[o.text for o in t.n_best] for t in two]
    assert all(len(t.n_best) == 3 for t in one)
    start = translator.tgt.tokens(translator.translate(sources[0], beam=1).text)[:1]
    assert translator.translate(sources[1], prefix=start[0]).tgt_tokens[0] == start[0]


def _guided(tiny_corpus, tmp_path):
    from attnmt.train.trainer import train
    from tests.train.test_guidance import _links_file

    config = tiny_config(tiny_corpus, "transformer", max_steps=20, valid_every=20, valid_bleu_sample=0)
    config.model.dec_layers = 2
    config.train.guided_alignment.layer, config.train.guided_alignment.head = 0, 1
    config.data.transforms = [{"name": "links", "path": str(_links_file(tiny_corpus, tmp_path))}]
    return train(config, tmp_path / "guided", quiet=True).model_dir


def test_alignments_are_attnmts_for_the_same_head(transformer, exported, tiny_corpus, sources, tmp_path):
    from attnmt.align import align_translations
    from attnmt.align.extract import attention_matrices

    guided = _guided(tiny_corpus, tmp_path)
    pairs = [(transformer, exported), (guided, export_ctranslate2(guided, tmp_path / "guided-export"))]
    assert json.loads((tmp_path / "guided-export" / "attnmt_export.json").read_text())["attention_head"] == 1
    for model_dir, export_dir in pairs:
        ours, theirs = load(model_dir), load(export_dir)
        found = ours.translate(sources[:12], beam=3)
        targets = [t.text for t in found]
        for a, b in zip(attention_matrices(ours, sources[:12], targets),
                        attention_matrices(theirs, sources[:12], targets)):
            np.testing.assert_allclose(b.piece_weights, a.piece_weights, atol=1e-5)
            np.testing.assert_allclose(b.shifted, a.shifted, atol=1e-5)
        links = [t.alignment for t in align_translations(ours, found)]
        assert [t.alignment for t in align_translations(theirs, ours.translate(sources[:12], beam=3))] == links


def assert_one_line(capsys, argv, *fragments):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("attnmt: error: "), err
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])


def test_what_ctranslate2_cannot_do_is_one_line(capsys, tiny_model, transformer, exported, tiny_corpus, tmp_path):
    src = str(tiny_corpus / "test.src")
    assert_one_line(capsys, ["export", str(tiny_model), "--out", str(tmp_path / "rnn")], "runs no RNNs", "--int8")
    assert not (tmp_path / "rnn").exists()
    assert_one_line(capsys, ["export", str(transformer), "--out", str(exported)], "not empty")
    assert_one_line(capsys, ["export", str(transformer), "--out", str(transformer / "x")], "inside the model folder")
    model = ["translate", "--model", str(exported), "--input", src]
    assert_one_line(capsys, [*model, "--stopping", "early"], "CTranslate2's own rule")
    assert_one_line(capsys, [*model, "--coverage-penalty", "0.2"], "no coverage penalty")
    assert_one_line(capsys, [*model, "--workers", "2"], "--inter-threads")
    assert_one_line(capsys, [*model, "--checkpoint", "last"], "attnmt export --checkpoint")
    assert_one_line(capsys, [*model, "--alignments", "--layer", "0"], "returns one attention (layer 1, the heads")
    assert_one_line(capsys, ["translate", "--model", str(transformer), "--input", src, "--inter-threads", "2"],
                    "belongs to an exported")
    with pytest.raises(UserError, match="step-by-step"):
        load(exported).explore("a b")


def test_translate_and_evaluate_run_the_exported_folder(capsys, exported, transformer, tiny_corpus):
    src, ref = str(tiny_corpus / "test.src"), str(tiny_corpus / "test.tgt")
    outputs = []
    for model in (transformer, exported):
        assert main(["translate", "--model", str(model), "--input", src, "--beam", "1", "--alignments",
                     "--threads", "1"]) in (0, None)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert main(["translate", "--model", str(exported), "--input", src, "--threads", "2",
                 "--inter-threads", "2", "--n-best", "2", "--beam", "2"]) in (0, None)
    assert capsys.readouterr().out.count(" ||| ") == 2 * 2 * len(open(src).read().splitlines())
    assert main(["evaluate", "--model", str(exported), "--src", src, "--ref", ref, "--beam", "1"]) in (0, None)
    assert "BLEU" in capsys.readouterr().out


def test_serve_round_trip(exported, transformer, sources):
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    with warnings.catch_warnings():  # newer Starlette warns, on import, about httpx (as tests/serve/test_serve.py)
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from attnmt.serve import create_app

    with TestClient(create_app({"ct2": exported, "tf": transformer})) as client:
        models = {m["name"]: m for m in client.get("/models").json()["models"]}
        assert models["ct2"]["parameters"] == models["tf"]["parameters"]
        answers = {}
        for name in ("ct2", "tf"):
            r = client.post("/translate", json={"model": name, "text": sources[0], "beam": 1, "alignment": True,
                                                "attention": True})
            assert r.status_code == 200, r.text
            answers[name] = r.json()
        assert answers["ct2"]["translations"][0]["text"] == answers["tf"]["translations"][0]["text"]
        assert answers["ct2"]["translations"][0]["alignment"] == answers["tf"]["translations"][0]["alignment"]
        r = client.post("/explore", json={"model": "ct2", "text": sources[0]})
        assert r.status_code == 422 and "exported" in r.text
        r = client.post("/translate", json={"model": "ct2", "text": sources[0], "attention_heads": True})
        message = r.json()["error"]["message"]
        assert r.status_code == 422 and r.json()["error"]["field"] == "attention_heads"
        # what it cannot do (each head), and what it can: the attention the export chose (here the last layer's,
        # heads averaged), and the links read off it
        record = json.loads((exported / "attnmt_export.json").read_text())
        assert record["attention_layer"] == 1 and record["attention_head"] is None
        assert "exported (CTranslate2)" in message and "one attention per sentence (layer 1, the heads averaged)" \
            in message and '"alignment"' in message and "\n" not in message


@pytest.mark.slow  # the benchmark end to end, every engine and precision: about 15 s
def test_the_benchmark_runs_at_tiny_size(transformer, tiny_corpus, tmp_path):
    from benchmarks.ctranslate2 import ENGINES
    from benchmarks.ctranslate2 import main as benchmark

    out = tmp_path / "ct2.json"
    assert benchmark(["--model", str(transformer), "--src", str(tiny_corpus / "test.src"), "--ref",
                      str(tiny_corpus / "test.tgt"), "--sentences", "6", "--rounds", "2", "--batch", "4",
                      "--beam", "2", "--threads", "1", "--profile", "3", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    settings = result["settings"]
    assert list(settings) == ["batch 4, beam 2, 1 thread"]
    row = settings["batch 4, beam 2, 1 thread"]
    ratios = row.pop("ratios")
    assert set(row) == set(ENGINES)
    assert ratios["ctranslate2_int8_over_attnmt_float32"] == pytest.approx(
        row["ctranslate2 int8"]["sentences_per_s"] / row["attnmt float32"]["sentences_per_s"], abs=0.01)
    profiled = result["profile_attnmt_int8"]
    assert profiled["setting"] == "batch 4, beam 2, 1 thread" and profiled["sentences"] == 3
    assert profiled["operators"] and 0 <= profiled["share_outside_operators"] < 1
    assert row["attnmt float32"]["identical_to_attnmt_float32"] == 1.0
    for engine in ENGINES:
        assert len(row[engine]["seconds"]) == 2 and row[engine]["sentences_per_s"] > 0
        assert row[engine]["peak_rss_mb"] > 0 and 0 <= row[engine]["chrf"] <= 100


def test_both_translators_check_prefixes_and_options_alike(exported, transformer, sources):
    refusals = []
    for translator in (load(transformer), load(exported)):
        for options in ({"prefix": ["x"]}, {"prefix": [3, None]}, {"length_penalty": float("nan")},
                        {"coverage_penalty": float("inf")}, {"beam": 101}):
            with pytest.raises(UserError) as refused:
                translator.translate(sources[:2], **options)
            refusals.append(str(refused.value))
    assert refusals[:5] == refusals[5:]
    assert refusals[0] == refusals[1] == "prefix: give a str for one sentence, or a list of one str (or None) per " \
                                         "sentence"
    assert refusals[2] == "length_penalty=nan is not a finite number; allowed: >= 0.0 and <= 10.0"


def test_a_source_longer_than_the_position_table_is_refused(exported):
    from attnmt.decode.translator import SentenceTooLong

    with pytest.raises(SentenceTooLong, match="1,024 this translator accepts"):
        load(exported).translate(["a " * 1100])


def test_a_failed_export_leaves_the_previous_folder_whole(transformer, tmp_path, monkeypatch, capsys):
    import errno

    class FullDisk:
        def convert(self, folder, **options):
            (Path(folder) / "model.bin").write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("attnmt.export.convert._Converter", lambda *a, **k: FullDisk())
    out = tmp_path / "export"
    out.mkdir()
    (out / "model.bin").write_bytes(b"the previous export")
    assert main(["export", str(transformer), "--out", str(out), "--overwrite"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: cannot write {out}: No space left on device; export still holds its previous contents (the "
        "write went to a temporary folder, removed); free some space and run the command again"]
    assert (out / "model.bin").read_bytes() == b"the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
