"""Study configs: validation; long pairs from captions; a whole tiny study, run twice."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import yaml

from attnmt.cli import main
from attnmt.config.schema import save_config
from attnmt.decode.translator import load
from attnmt.errors import UserError
from attnmt.study import (
    Multi30kLongData,
    deep_merge,
    join_consecutive,
    load_study,
    model_raw_config,
    run_study,
    seed_mean_interval,
    study_from_dict,
)
from attnmt.study.data import _multi30k_long_splits
from tests.conftest import tiny_config


def minimal(**changes) -> dict:
    raw = {"name": "t", "data": {"synthetic": {"train": 10, "valid": 2, "test": 4, "min_len": 3, "max_len": 6}},
           "models": [{"name": "a", "overrides": {"model": {"type": "rnnsearch"}}}]}
    return deep_merge(raw, changes)


# ---------------------------------------------------------------- validation


def test_minimal_study_is_valid():
    study = study_from_dict(minimal())
    assert study.seeds == [1, 2, 3] and study.models[0].name == "a"
    assert study.data.synthetic.max_len == 6 and study.data.multi30k_long is None


@pytest.mark.parametrize("change, message", [
    ({"modles": []}, "unknown key 'modles'; did you mean 'models'"),
    ({"evaluation": {"bootstrapp": 10}}, "did you mean 'evaluation.bootstrap'"),
    ({"data": {"synthetic": {"max_length": 9}}}, "did you mean 'data.synthetic.max_len'"),
    ({"models": [{"name": "a", "overides": {}}]}, "did you mean 'models[0].overrides'"),
    ({"models": [{"name": "a", "overrides": {"model": {"typ": "seq2seq"}}}]}, "did you mean 'model.type'"),
    ({"models": [{"name": "a", "overrides": {"model": {"type": "rnn"}}}]}, "models[0] (a)"),
    ({"seeds": "1,2"}, "must be a list"),
    ({"seeds": [1, "two"]}, "seeds[1]"),
    ({"seeds": [1, 1]}, "distinct"),
    ({"evaluation": {"bucket_edges": [10, 5]}}, "increasing"),
    ({"evaluation": {"beam": 0}}, "evaluation.beam"),
    ({"heatmaps": {"model": "b"}}, "no model named 'b'"),
    ({"evaluation": {"models": {"b": {"beam": 2}}}}, "evaluation.models: no model named 'b'"),
    ({"evaluation": {"models": {"a": {"bleu_tokenize": "none"}}}}, "evaluation.models.a.bleu_tokenize is not a"),
    ({"evaluation": {"models": {"a": {"length_penalty": -1}}}}, "evaluation.models.a.length_penalty"),
    ({"alignment": {"threshold": 0}}, "alignment.threshold"),
    ({"data": {"multi30k_long": {}}}, "exactly one"),
    ({"evaluation": {"test_short": 5}}, "evaluation.test_short adds held-out single sentences of data.tatoeba_long"),
    ({"evaluation": {"test_short": -1}}, "evaluation.test_short"),
])
def test_invalid_studies_name_the_key(change, message):
    raw = minimal()
    raw = {**raw, **change} if "models" in change or "seeds" in change else deep_merge(raw, change)
    with pytest.raises(UserError) as e:
        study_from_dict(raw)
    assert message in str(e.value)


def test_heatmaps_null_means_none():
    assert study_from_dict(minimal()).heatmaps.enabled
    assert not study_from_dict(minimal(heatmaps=None)).heatmaps.enabled


def test_duplicate_and_bad_model_names():
    with pytest.raises(UserError, match="unique"):
        study_from_dict({**minimal(), "models": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(UserError, match="letters, digits"):
        study_from_dict({**minimal(), "models": [{"name": "a b"}]})


def test_load_study_errors_name_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(minimal(evaluation={"bootstrapp": 1})), encoding="utf-8")
    with pytest.raises(UserError, match=r"s\.yaml: config: unknown key"):
        load_study(path)
    path.write_text("models: [", encoding="utf-8")
    with pytest.raises(UserError, match="not valid YAML"):
        load_study(path)


def test_model_config_file_then_overrides(tmp_path, tiny_corpus):
    base = tmp_path / "base.yaml"
    save_config(tiny_config(tiny_corpus, "seq2seq"), base)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**minimal(), "defaults": {"train": {"max_steps": 7, "lr": 0.1}},
                                    "models": [{"name": "s", "config": "base.yaml",
                                                "overrides": {"train": {"max_steps": 5}}}]}), encoding="utf-8")

    study = load_study(path)
    raw = model_raw_config(study, study.models[0])
    assert raw["model"]["type"] == "seq2seq"  # from the file
    assert raw["train"]["max_steps"] == 5  # the model's overrides win
    assert raw["train"]["lr"] == 0.005  # the file beats the study defaults


def test_a_study_can_build_on_a_base_study(tmp_path):
    """base: a study file's mappings merge over its base's key by key; lists (models) replace them."""
    base = minimal(name="base", seeds=[1, 2], defaults={"train": {"max_steps": 5, "lr": 0.01}})
    base["models"] = [{"name": "a", "overrides": {"model": {"type": "seq2seq"}}},
                      {"name": "b", "overrides": {"model": {"type": "rnnsearch"}}}]
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base), encoding="utf-8")
    (tmp_path / "derived.yaml").write_text(yaml.safe_dump(
        {"base": "base.yaml", "name": "derived", "defaults": {"train": {"max_steps": 7}},
         "models": [{"name": "b", "overrides": {"model": {"type": "rnnsearch"}}}]}), encoding="utf-8")
    study = load_study(tmp_path / "derived.yaml")
    assert (study.name, study.seeds, [m.name for m in study.models]) == ("derived", [1, 2], ["b"])
    assert model_raw_config(study, study.models[0])["train"] == {"max_steps": 7, "lr": 0.01}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({**base, "base": "derived.yaml"}), encoding="utf-8")
    with pytest.raises(UserError, match="remove the loop"):
        load_study(tmp_path / "derived.yaml")


def test_data_locations_have_no_default_and_a_missing_one_names_its_key():
    for source, key in (("multi30k_long", "dir"), ("tatoeba_long", "tatoeba")):
        raw = {**minimal(), "data": {source: {}}}
        with pytest.raises(UserError, match=f"^config: data.{source}.{key} is not set; give the path of"):
            study_from_dict(raw)
        assert study_from_dict({**raw, "data": {source: {key: "somewhere"}}}).data  # given: valid


# (The shipped study specs are checked, and run at tiny size, in tests/repository/test_recipes_study.py.)


# ---------------------------------------------------------------- long pairs from captions


def test_join_consecutive_keeps_order_and_drops_a_short_tail():
    pairs = [(f"s{k}", f"t{k}") for k in range(7)]
    joined = join_consecutive(pairs, 2, 3, random.Random(0))
    assert " ".join(s for s, _ in joined).split() == [f"s{k}" for k in range(sum(len(s.split()) for s, _ in joined))]
    assert all(2 <= len(s.split()) <= 3 and len(s.split()) == len(t.split()) for s, t in joined)
    assert all(t.split() == [w.replace("s", "t") for w in s.split()] for s, t in joined)
    assert join_consecutive(pairs[:1], 2, 3, random.Random(0)) == []


def test_multi30k_long_splits_from_official_file_names(tmp_path):
    for split, n in (("train", 30), ("val", 12), ("test_2016_flickr", 12)):
        for lang in ("en", "fr"):
            lines = "".join(f"{lang} {split} {k} .\n" for k in range(n))
            with gzip.open(tmp_path / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write(lines)
    cfg = Multi30kLongData(dir=str(tmp_path), min_join=2, max_join=3, valid=3)
    splits = _multi30k_long_splits(cfg, tmp_path)
    singles = [p for p in splits["train"] if p[0].count("en") == 1]
    assert len(singles) == 30 and len(splits["train"]) > 30  # singles and joined pairs, mixed
    assert len(splits["valid"]) == 3
    assert all(2 <= s.count("en") <= 3 and s.count("en") == t.count("fr") for s, t in splits["test"])
    with pytest.raises(UserError, match="folder not found"):
        _multi30k_long_splits(Multi30kLongData(dir=str(tmp_path / "none")), tmp_path)
    (tmp_path / "train.fr.gz").unlink()
    with pytest.raises(UserError, match="no train.fr.gz"):
        _multi30k_long_splits(cfg, tmp_path)


def test_target_word_labels_name_what_each_target_word_translates():
    from attnmt.data.synthetic import SyntheticLanguage
    from attnmt.study import target_word_labels

    language = SyntheticLanguage(seed=0)
    pair = language.sentence(random.Random(10), 12)  # the example of attnmt.data.synthetic's docstring
    assert target_word_labels(pair, language) == [
        "noun (article untranslated)", "noun (2nd word)", "determiner", "noun", "adjective", "adverb",
        "transitive verb", "conjunction", "noun (article untranslated)", "adjective", "intransitive verb"]


def test_seed_mean_interval_brackets_the_mean():
    refs = ["a b c d", "e f g h", "i j k l", "m n o p"]
    perfect, half = refs, ["a b x y", "e f x y", "i j k l", "m n o p"]
    low, high = seed_mean_interval([perfect, half], refs, "none", 200, 0.95)
    assert 0 <= low <= high <= 100
    assert seed_mean_interval([perfect], refs, "none", 0, 0.95) is None


# ---------------------------------------------------------------- a tiny study, twice


def write_tiny_study(tmp_path: Path, tiny_corpus: Path, tiny_model: Path, steps: int = 8) -> Path:
    base = tmp_path / "tiny_seq2seq.yaml"
    save_config(tiny_config(tiny_corpus, "seq2seq", max_steps=steps, valid_every=steps, valid_bleu_sample=0), base)
    study = {
        "name": "tiny",
        # The same splits as the tiny_corpus fixture, so that the tiny_model folder fits them.
        "data": {"synthetic": {"train": 600, "valid": 40, "test": 40, "min_len": 3, "max_len": 10, "seed": 5}},
        "seeds": [1, 2],
        "models": [
            {"name": "rnnsearch", "model_dirs": [str(tiny_model)]},
            {"name": "seq2seq", "config": base.name, "overrides": {"model": {"reverse_source": False}}},
        ],
        "evaluation": {"bleu_tokenize": "none", "bucket_edges": [3, 6, 11], "bootstrap": 50},
        "heatmaps": {"model": "rnnsearch", "lengths": [10]},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


def test_tiny_study_report_and_reuse(tmp_path, tiny_corpus, tiny_model):
    path = write_tiny_study(tmp_path, tiny_corpus, tiny_model)
    out = tmp_path / "out"
    result = run_study(path, out=out, quiet=True)
    summary = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert summary["models"].keys() == {"rnnsearch", "seq2seq"}
    rnn = summary["models"]["rnnsearch"]
    assert [b["lo"] for b in rnn["buckets"]] == [3, 6] and rnn["seeds"] == [1]
    for m in summary["models"].values():
        for b in m["buckets"]:
            assert b["ci_low"] <= b["ci_high"] and b["n"] > 0
        assert m["perplexity"]["mean"] > 1
    assert len(summary["models"]["seq2seq"]["seeds"]) == 2
    assert "synthetic-test" in rnn["alignment"] and not summary["models"]["seq2seq"]["alignment"]
    assert 0 <= rnn["alignment"]["synthetic-test"]["argmax"]["aer"]["mean"] <= 1
    assert 0 <= summary["diagonal"]["synthetic-test"]["aer"] <= 1
    assert "adjective" in rnn["alignment_by_category"]
    assert len(summary["heatmaps"]) == 1
    page = result.report.read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 3 and "src='figures" not in page  # self-contained
    assert {r["action"] for r in summary["runs"]} == {"given", "trained"}

    # Again: nothing is trained, the evaluations come from the cache.
    again = run_study(path, out=out, quiet=True)
    assert {r["action"] for r in again.summary["runs"]} == {"given", "reused"}
    assert again.summary["models"]["seq2seq"]["bleu"] == summary["models"]["seq2seq"]["bleu"]

    # heatmaps: null draws none (the same models, reused).
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**raw, "heatmaps": None}), encoding="utf-8")
    assert run_study(path, out=out, quiet=True).summary["heatmaps"] == []

    # A model decoded with its own settings is evaluated again; the others keep their cached evaluation.
    keys = {f.name: json.loads(f.read_text(encoding="utf-8"))["key"] for f in (out / "evals").glob("*.json")}
    own = deep_merge(raw, {"evaluation": {"models": {"seq2seq": {"beam": 2, "length_penalty": 1.0}}}})
    path.write_text(yaml.safe_dump(own), encoding="utf-8")
    page = run_study(path, out=out, quiet=True).report.read_text(encoding="utf-8")
    changed = {f.name for f in (out / "evals").glob("*.json")
               if json.loads(f.read_text(encoding="utf-8"))["key"] != keys[f.name]}
    assert changed == {"seq2seq-seed1.json", "seq2seq-seed2.json"}
    assert "seq2seq: beam 2, length penalty 1.0" in page

    # A changed model config is refused instead of silently reusing the old model.
    raw["models"][1]["overrides"]["model"]["hidden_size"] = 16
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(UserError, match="--retrain"):
        run_study(path, out=out, quiet=True)


def test_a_study_can_score_the_models_of_another(tmp_path, tiny_corpus, tiny_model):
    """models_from: the owner's data, models and seeds, trained (here: reused) in its own folder; only the
    scoring changes (beam 3 with a coverage penalty), and its evaluations are kept apart from the owner's."""
    path = write_tiny_study(tmp_path, tiny_corpus, tiny_model)
    owner = run_study(path, out=tmp_path / "study-tiny", quiet=True)
    scoring = tmp_path / "tiny_coverage.yaml"
    scoring.write_text(yaml.safe_dump({"models_from": "tiny.yaml", "name": "tiny_coverage",
                                       "evaluation": {"beam": 3, "coverage_penalty": 0.5}}), encoding="utf-8")
    study = load_study(scoring)
    assert study.models_from == str(path.resolve()) and study.evaluation.bucket_edges == [3, 6, 11]
    result = run_study(scoring, out=tmp_path / "study-tiny_coverage", quiet=True)
    assert {r["action"] for r in result.summary["runs"]} == {"given", "reused"}
    assert {r["model_dir"] for r in result.summary["runs"]} == {r["model_dir"] for r in owner.summary["runs"]}
    assert result.summary["models_from"] == str(path.resolve()) and owner.summary["models_from"] is None
    evals = json.loads((tmp_path / "study-tiny_coverage" / "evals" / "rnnsearch-seed1.json").read_text("utf-8"))
    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()
    translations = load(tiny_model).translate(sources, beam=3, coverage_penalty=0.5)
    assert evals["hypotheses"] == [t.text for t in translations]
    assert (tmp_path / "study-tiny" / "evals" / "rnnsearch-seed1.json").is_file()  # the owner's, untouched

    scoring.write_text(yaml.safe_dump({"models_from": "tiny.yaml", "seeds": [7]}), encoding="utf-8")
    with pytest.raises(UserError, match="models_from takes seeds from tiny.yaml; remove seeds here"):
        load_study(scoring)


def test_study_benchmark_measures_a_whole_study_in_a_folder_of_its_own(tmp_path, tiny_corpus, tiny_model,
                                                                        monkeypatch, capsys):
    """`python -m benchmarks.study CONFIG --study-out DIR`: the study trains in DIR (not runs/), and the JSON
    records that every run was trained by it, the full run's wall time and the command with its folder."""
    import importlib
    import sys

    path = write_tiny_study(tmp_path, tiny_corpus, tiny_model)
    out, record = tmp_path / "fresh" / "study-tiny", tmp_path / "study_tiny.json"
    monkeypatch.setattr(sys, "argv", ["study", str(path), "--study-out", str(out), "--figures", "", "--out",
                                      str(record)])
    assert importlib.import_module("benchmarks.study").main() == 0
    result = json.loads(record.read_text(encoding="utf-8"))
    assert result["trained_this_run"] == ["seq2seq-seed1", "seq2seq-seed2"]
    assert result["reused"] == ["rnnsearch-seed1"]  # a given folder: evaluated as it is
    assert {r["model_dir"] for r in result["results"]["runs"] if r["model"] == "seq2seq"} == \
        {str(out / "models" / "seq2seq" / f"seed{k}") for k in (1, 2)}
    assert result["results"]["command"].endswith(f"--out {out}") and (out / "results.json").is_file()
    assert "wall" in capsys.readouterr().out


def test_study_command_errors_are_one_line(tmp_path, capsys):
    assert main(["study", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnmt: error: study config not found") and err.count("\n") == 1
