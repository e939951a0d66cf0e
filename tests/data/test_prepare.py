"""`attnmt prepare` from the command line and data.train lists in configs (torchrun ranks sharing one store:
tests/train/test_training_options.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from attnmt.cli import main
from attnmt.config.schema import config_from_dict, config_to_dict
from attnmt.errors import UserError
from tests.conftest import tiny_config


def write_config(tmp_path, corpus, **data):
    config = tiny_config(corpus, max_steps=3, valid_every=100, valid_bleu_sample=0)
    raw = config_to_dict(config)
    raw["data"].update(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_prepare_then_train_reuses_the_store(tiny_corpus, tmp_path, capsys):
    path = write_config(tmp_path, tiny_corpus)
    assert main(["prepare", str(path), "--model-dir", str(tmp_path / "m"), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "prepared, 600 pairs (train 600 of 600)" in out and "encoding" in out
    ids = (tmp_path / "m" / "store" / "src.ids").stat().st_mtime_ns
    assert main(["prepare", str(path), "--model-dir", str(tmp_path / "m")]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["train", str(path), "--model-dir", str(tmp_path / "m")]) == 0  # a folder with only store/ is new
    assert (tmp_path / "m" / "store" / "src.ids").stat().st_mtime_ns == ids  # not encoded again
    log = [json.loads(line) for line in (tmp_path / "m" / "train_log.jsonl").open(encoding="utf-8")]
    assert any(r.get("store") for r in log) and not any(r.get("prepared") for r in log)
    assert (tmp_path / "m" / "src.vocab").is_file()  # the model folder translates on its own


@pytest.mark.parametrize("data, message", [
    ({"train": [{"src": "a.de"}]}, "data.train[0] needs either src and tgt"),
    ({"train": [{"tsv": "a.tsv", "weight": 0}]}, "data.train[0].weight=0 must be a number above 0"),
    ({"train": [{"tsv": "a.tsv", "wieght": 2}]}, "unknown key 'data.train[0].wieght'"),
    ({"train": [{"tsv": "a.tsv", "name": "x"}, {"tsv": "b.tsv", "name": "x"}]}, "name='x' is used twice"),
    ({"train": "a.tsv"}, "data.train='a.tsv' has the wrong type"),
])
def test_bad_corpus_lists_are_one_clear_line(data, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        config_from_dict({"data": data})


def test_corpus_list_paths_are_relative_to_the_config(tmp_path):
    config = config_from_dict({"data": {"train": [{"tsv": "x/a.tsv", "weight": 2}]}}, base_dir=tmp_path)
    assert config.data.train == [{"name": "corpus0", "src": None, "tgt": None, "tsv": str(tmp_path / "x" / "a.tsv"),
                                  "weight": 2.0}]


def test_prepare_of_a_missing_file_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": [{"tsv": "missing.tsv"}]}}), encoding="utf-8")
    assert main(["prepare", str(path), "--model-dir", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.tsv" in err and "Traceback" not in err


def test_a_tsv_corpus_gives_the_pairs_of_read_tsv(tmp_path):
    from attnmt.data.corpus import read_tsv
    from attnmt.data.store import StoreData
    from attnmt.data.store_prepare import prepare

    (tmp_path / "a.tsv").write_text("\ufeffHi.\tHallo!\tx\nA b\tC\x01d\n\n \n", encoding="utf-8")
    config = config_from_dict({"data": {"train": [{"tsv": str(tmp_path / "a.tsv")}], "tokenizer": "word"}})
    store = StoreData(prepare(config, tmp_path / "m", workers=1, progress=False)["location"])
    from attnmt.data.dataset import load_processors

    src, tgt = load_processors(store.folder)
    pairs = read_tsv(tmp_path / "a.tsv")
    assert [store.src_ids[i] for i in range(len(store))] == [src.ids(s) for s, _ in pairs]
    assert [store.tgt_ids[i] for i in range(len(store))] == [tgt.ids(t) for _, t in pairs]
    (tmp_path / "b.tsv").write_text("a\tb\n\nc\td\n", encoding="utf-8")
    config.data.train = [{"name": "b", "src": None, "tgt": None, "tsv": str(tmp_path / "b.tsv"), "weight": 1.0}]
    with pytest.raises(UserError, match=r"b.tsv:2 is empty but column 1 is needed"):
        prepare(config, tmp_path / "n", workers=1, progress=False)
