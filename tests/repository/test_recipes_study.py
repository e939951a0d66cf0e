"""The study recipes (recipes/synthetic/, recipes/bottleneck_enfr/): each one's command runs at tiny size,
and each spec builds the very data its recorded JSON was measured on (the fingerprints it records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.study import load_study
from attnmt.study.data import prepare_data
from tests.study.test_study_tatoeba import write_corpus

REPO = Path(__file__).resolve().parents[2]
SHARED_TATOEBA = REPO.parent / "shared" / "data" / "tatoeba" / "fra-eng.tsv.gz"
RESULTS = REPO / "benchmarks" / "results"

SYNTHETIC = REPO / "recipes" / "synthetic"
BOTTLENECK = REPO / "recipes" / "bottleneck_enfr" / "study.yaml"
SPECS = [SYNTHETIC / "synthetic.yaml", SYNTHETIC / "synthetic_luong.yaml", BOTTLENECK]

# What makes a run tiny; everything else (models, decoding, buckets, heatmaps, alignment) is the recipe's.
TINY_TRAINING = ["seeds=[1]", "jobs=1", "defaults.train.max_steps=3", "defaults.train.valid_every=3",
                 "defaults.model.emb_size=16", "defaults.model.hidden_size=24", "evaluation.bootstrap=10"]


def recorded(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))["results"]


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recipe_specs_are_flat_and_read_their_data_from_data(spec):
    raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    assert "base" not in raw and "models_from" not in raw  # one file a user can read
    study = load_study(spec)
    assert len(study.seeds) == 3 and study.models
    if study.data.tatoeba_long is not None:  # where `attnmt data tatoeba fra-eng data/tatoeba` writes
        assert (spec.parent / study.data.tatoeba_long.tatoeba).resolve() == REPO / "data" / "tatoeba" / "fra-eng.tsv.gz"


@pytest.mark.slow  # each recipe's data at full size
@pytest.mark.parametrize("name", ["synthetic", "synthetic_luong"])
def test_the_synthetic_recipes_build_the_data_their_json_was_measured_on(tmp_path, name):
    data = prepare_data(load_study(SYNTHETIC / f"{name}.yaml"), tmp_path)
    assert data.fingerprint == data.training_fingerprint == recorded(f"study_{name}")["data"]["fingerprint"]


@pytest.mark.slow  # the recipe's data built from the real Tatoeba file
@pytest.mark.skipif(not SHARED_TATOEBA.is_file(), reason="needs ../shared/data/tatoeba/fra-eng.tsv.gz (the Tatoeba "
                                                          "export the recipe's JSON was measured on; not in the "
                                                          "repository)")
def test_the_bottleneck_recipe_builds_the_data_its_json_was_measured_on(tmp_path):
    study = load_study(BOTTLENECK, [f"data.tatoeba_long.tatoeba={SHARED_TATOEBA}"])
    data = prepare_data(study, tmp_path)
    for name in ("study_bottleneck_enfr", "study_bottleneck_enfr_fresh"):
        result = recorded(name)
        assert data.fingerprint == result["data"]["fingerprint"] == "0645758dc4b5", name
        assert {k: v for k, v in result["data"].items() if k not in ("fingerprint", "directory")} == data.summary
    # The models were trained without the added short pairs: on the data of this fingerprint.
    assert data.training_fingerprint == "9022f8e281af"
    assert data.summary["test"]["pairs"] - 233 == 863  # 233 single sentences of 1-9 words added


def test_a_missing_data_location_is_one_line_naming_the_key(tmp_path):
    raw = yaml.safe_load(BOTTLENECK.read_text(encoding="utf-8"))
    del raw["data"]["tatoeba_long"]["tatoeba"]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(UserError, match="data.tatoeba_long.tatoeba is not set; give the path of a manythings.org"):
        load_study(tmp_path / "study.yaml")
    study = load_study(BOTTLENECK, ["data.tatoeba_long.tatoeba=nowhere/fra-eng.tsv.gz"])
    assert study.data.tatoeba_long.tatoeba == str(Path("nowhere/fra-eng.tsv.gz").resolve())  # from the current folder
    with pytest.raises(UserError, match="^data.tatoeba_long.tatoeba: file not found: .*nowhere/fra-eng.tsv.gz; set it"):
        prepare_data(study, tmp_path)


@pytest.mark.parametrize("name", ["synthetic", "synthetic_luong"])
def test_the_synthetic_recipe_command_runs_at_tiny_size(tmp_path, capsys, name):
    sizes = ["data.synthetic.train=40", "data.synthetic.short_train=20", "data.synthetic.valid=4",
             "data.synthetic.test=12", "data.synthetic.max_len=12", "data.synthetic.short_max_len=8",
             "heatmaps.lengths=[12]"]  # one heatmap of the recipe's three
    out = tmp_path / "out"
    assert main(["study", str(SYNTHETIC / f"{name}.yaml"), "--out", str(out), "--quiet",
                 *(f"--set={item}" for item in sizes + TINY_TRAINING)]) == 0
    capsys.readouterr()
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert result["data"]["test"]["pairs"] == 12 and [r["seed"] for r in result["runs"]] == [1] * len(result["runs"])
    assert [r["model"] for r in result["runs"]] == [m.name for m in load_study(SYNTHETIC / f"{name}.yaml").models]
    assert all(r["steps"] == 3 for r in result["runs"])
    assert "synthetic-test" in next(m for m in result["models"].values() if m["alignment"])["alignment"]
    assert (out / "report.html").is_file() and (out / "figures" / "bleu_by_length.png").is_file()
    assert len(result["heatmaps"]) == 1


@pytest.mark.slow  # four models, each trained and decoded with beam 5: about 25 s
def test_the_bottleneck_recipe_command_runs_at_tiny_size(tmp_path, capsys):
    """The study command on a Tatoeba-like file of 600 sentences (`attnmt data tatoeba` is tested with
    attnmt.data.download; here --set points the recipe at the tiny file instead of data/tatoeba/)."""
    tsv, _ = write_corpus(tmp_path, n=600)
    sizes = [f"data.tatoeba_long.tatoeba={tsv}", "data.tatoeba_long.train_max_words=12",
             "data.tatoeba_long.train_joined=30", "data.tatoeba_long.held_out=300", "data.tatoeba_long.valid=10",
             "data.tatoeba_long.test=20", "data.tatoeba_long.test_max_words=24", "data.tatoeba_long.natural_share=0.1",
             "evaluation.test_short=15", "defaults.data.vocab_size=120"]
    out = tmp_path / "out"
    assert main(["study", str(BOTTLENECK), "--out", str(out), "--quiet",
                 *(f"--set={item}" for item in sizes + TINY_TRAINING)]) == 0
    capsys.readouterr()
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["model"] for r in result["runs"]] == ["seq2seq", "seq2seq-noreverse", "rnnsearch", "rnnsearch-luong"]
    assert result["data"]["test"]["pairs"] <= 20 + 15 and result["data"]["test"]["min_words"] <= 9
    assert result["command"].startswith(f"attnmt study {BOTTLENECK} --set data.tatoeba_long.tatoeba=")
    assert result["evaluation"]["test_short"] == 15 and result["evaluation"]["beam"] == 5
    assert (out / "report.html").is_file()
