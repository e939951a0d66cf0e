"""Data transforms (attnmt/data/transforms.py): the same pairs in memory and from a token store, their
settings checked in one line, and guided training with joined pairs from a store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnmt.checkpoint import load_checkpoint
from attnmt.config import DataConfig, config_from_dict
from attnmt.data.loading import load_data, make_batches
from attnmt.data.prepare import prepare
from attnmt.data.store import StoreData
from attnmt.data.transforms import TRANSFORMS, transforms_of
from attnmt.errors import UserError
from attnmt.train import train
from tests.conftest import tiny_config


class Log:
    def __init__(self):
        self.events = []

    def event(self, kind, **fields):
        self.events.append({"event": kind, **fields})


def links_file(corpus: Path, tmp_path: Path) -> Path:
    """The synthetic corpus's gold links (1-based, some `p`ossible) as 0-based Pharaoh guidance."""
    out = tmp_path / "train.links"
    lines = (corpus / "train.align").read_text(encoding="utf-8").splitlines()
    out.write_text("".join(" ".join(f"{int(a) - 1}-{int(b) - 1}" for a, b in
                                    (item.split("-") for item in line.replace("p", "-").split())) + "\n"
                           for line in lines), encoding="utf-8")
    return out


def punctuated(corpus: Path, tmp_path: Path) -> tuple[str, str]:
    """The tiny corpus with a full stop ending every other source (for drop_final_punct)."""
    folder = tmp_path / "punct"
    folder.mkdir(exist_ok=True)
    src = (corpus / "train.src").read_text(encoding="utf-8").splitlines()
    (folder / "train.src").write_text("".join(s + (" ." if k % 2 else "") + "\n" for k, s in enumerate(src)),
                                      encoding="utf-8")
    (folder / "train.tgt").write_text((corpus / "train.tgt").read_text(encoding="utf-8"), encoding="utf-8")
    return str(folder / "train.src"), str(folder / "train.tgt")


CASES = {
    "joined_pairs": [{"name": "joined_pairs", "count": 60, "max_parts": 3}],
    "align_text": [{"name": "align_text", "src": "{corpus}/test.src", "tgt": "{corpus}/test.tgt", "copies": 2}],
    "drop_final_punct": [{"name": "drop_final_punct", "fraction": 0.5}],
    "links": [{"name": "links", "path": "{links}"}],
    "synthetic": [{"name": "synthetic", "train": 200, "valid": 10, "min_len": 3, "max_len": 8}],
    "all, held out": [{"name": "joined_pairs", "count": 40}, {"name": "align_text", "src": "{corpus}/test.src",
                                                               "tgt": "{corpus}/test.tgt"},
                      {"name": "drop_final_punct", "fraction": 0.3}, {"name": "links", "path": "{links}"}],
}


def case_config(name: str, corpus: Path, tmp_path: Path):
    config = tiny_config(corpus, max_steps=4, valid_every=4, valid_bleu_sample=0)
    config.data.max_len = 12  # some joined pairs are dropped as too long, in both pipelines
    fill = {"corpus": str(corpus), "links": str(links_file(corpus, tmp_path))}
    config.data.transforms = [{k: v.format(**fill) if isinstance(v, str) else v for k, v in t.items()}
                              for t in CASES[name]]
    if name == "drop_final_punct":
        config.data.train_src, config.data.train_tgt = punctuated(corpus, tmp_path)
    if name == "synthetic":
        config.data.train_src = config.data.train_tgt = config.data.valid_src = config.data.valid_tgt = None
    if name == "all, held out":
        config.data.valid_src = config.data.valid_tgt = None
        config.data.valid_size, config.data.test_size = 20, 10
    return config


def loaded(config, model_dir: Path, store: str):
    config.data.store = store
    model_dir.mkdir(parents=True)
    log = Log()
    train_data, valid, src_proc, tgt_proc = load_data(config, model_dir, False, log)
    pairs = [(train_data.src_ids[i], train_data.tgt_ids[i]) for i in range(len(train_data))]
    origins = [train_data.origins[i] for i in range(len(train_data))]
    return train_data, pairs, origins, valid, log.events, src_proc


@pytest.mark.parametrize("name", list(CASES))
def test_each_transform_gives_the_same_pairs_in_memory_and_from_a_store(name, tiny_corpus, tmp_path):
    config = case_config(name, tiny_corpus, tmp_path)
    memory, m_pairs, m_origins, m_valid, m_events, m_proc = loaded(config, tmp_path / "memory", "never")
    store, s_pairs, s_origins, s_valid, s_events, s_proc = loaded(config, tmp_path / "store", "always")
    assert isinstance(store, StoreData) and not isinstance(memory, StoreData)
    assert m_proc.vocab == s_proc.vocab
    assert s_pairs == m_pairs and s_origins == m_origins
    assert s_valid.src_ids == m_valid.src_ids and s_valid.tgt_ids == m_valid.tgt_ids
    assert list(make_batches(store, config, shuffle=True, epoch=1)) == make_batches(memory, config, True, 1)
    keys = {"joined_pairs", "alignment_test_text", "augmented_without_final_punctuation", "synthetic"}
    reported = [[e for e in events if keys & set(e)] for events in (m_events, s_events)]
    assert reported[0] == reported[1] and len(reported[0]) == sum(t.changes_pairs for t in transforms_of(config.data))
    if memory.links is not None:
        assert store.links == memory.links
    for held in ("valid.src", "test.src"):
        assert (tmp_path / "memory" / held).is_file() == (name == "all, held out")
        if name == "all, held out":
            assert (tmp_path / "memory" / held).read_text() == (tmp_path / "store" / held).read_text()


def test_joined_pairs_carry_their_parts_lines_and_word_offsets(tiny_corpus, tmp_path):
    config = case_config("joined_pairs", tiny_corpus, tmp_path)
    data, _, origins, *_ = loaded(config, tmp_path / "memory", "never")
    lines = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()
    joined = [(k, o) for k, o in enumerate(origins) if len(o) > 1]
    assert joined
    for k, origin in joined:  # the parts' text, one after the other, at the word offsets the origin gives
        words = data.src_text[k].split()
        for line, src_offset, _ in origin:
            part = lines[line].split()
            assert words[src_offset:src_offset + len(part)] == part
    plain = [(k, o[0]) for k, o in enumerate(origins) if len(o) == 1]
    assert len(plain) > 500 and all(data.src_text[k] == lines[line] and offsets == [0, 0]
                                    for k, (line, *offsets) in plain)


def test_training_with_joined_pairs_and_links_runs_from_the_store_as_in_memory(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=4, valid_every=4, valid_bleu_sample=0, log_every=2)
    config.data.transforms = [{"name": "joined_pairs", "count": 50, "max_parts": 3},
                              {"name": "links", "path": str(links_file(tiny_corpus, tmp_path))}]
    config.train.guided_alignment.weight = 1.0
    config.data.store = "always"
    train(config, tmp_path / "store", quiet=True)
    config.data.store = "never"
    train(config, tmp_path / "memory", quiet=True)
    assert (tmp_path / "store" / "store" / "meta.json").is_file() and not (tmp_path / "memory" / "store").exists()
    events = [json.loads(line) for line in (tmp_path / "store" / "train_log.jsonl").read_text().splitlines()]
    guided = next(e for e in events if "guided" in e)
    assert guided["guided"] > 600 and guided["links"] > 0  # the corpus pairs and the joined pairs
    assert any("align_loss" in e for e in events)
    a = load_checkpoint(tmp_path / "store" / "checkpoints" / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "memory" / "checkpoints" / "last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_changed_transform_makes_the_store_stale(tiny_corpus, tmp_path):
    config = case_config("joined_pairs", tiny_corpus, tmp_path)
    config.data.store = "always"
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]
    assert not prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]
    config.data.transforms[0]["count"] = 61
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["reason"] == \
        "the config's data settings changed since it was prepared"
    config.data.transforms.append({"name": "links", "path": str(links_file(tiny_corpus, tmp_path))})
    assert not prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]  # links are not in it


@pytest.mark.parametrize("transforms, message", [
    ([{"name": "joined_pair", "count": 3}], "data.transforms[0].name='joined_pair' is unknown; did you mean "
                                            "'joined_pairs'?"),
    ([{"name": "joined_pairs", "cuont": 3}], "unknown key 'data.transforms[0].cuont'; did you mean "
                                             "'data.transforms[0].count'?"),
    ([{"name": "joined_pairs", "count": 0}], "data.transforms[0].count=0 is out of range"),
    ([{"name": "joined_pairs", "count": 5, "max_parts": 1}], "data.transforms[0].max_parts=1 is out of range"),
    ([{"name": "drop_final_punct", "fraction": 1.5}], "data.transforms[0].fraction=1.5 is out of range"),
    # the counts are bounded: what a transform adds is held in memory
    ([{"name": "joined_pairs", "count": 10**12}], "config: data.transforms[0].count=1000000000000 is out of range "
                                                   "for joined_pairs; allowed: 1 to 10,000,000"),
    ([{"name": "joined_pairs", "count": 5, "max_parts": 10**6}], "data.transforms[0].max_parts=1000000 is out of "
                                                                  "range for joined_pairs; allowed: 2 to 100"),
    ([{"name": "align_text", "src": "a", "tgt": "b", "copies": 10**6}],
     "data.transforms[0].copies=1000000 is out of range for align_text; allowed: 1 to 1,000"),
    ([{"name": "synthetic", "train": 10**9}], "data.transforms[0].train=1000000000 is out of range for synthetic; "
                                              "allowed: 1 to 10,000,000"),
    ([{"name": "synthetic", "max_len": 10**6}], "data.transforms[0].max_len=1000000 is out of range for synthetic; "
                                                "allowed: 4 to 1,000"),
    ([{"name": "align_text", "src": "a"}], "data.transforms[0] needs src and tgt"),
    ([{"name": "links"}], "data.transforms[0] needs path"),
    ([{"name": "links", "path": "a"}, {"name": "links", "path": "b"}], "data.transforms[1] repeats links"),
    ([{"name": "drop_final_punct", "fraction": 0.1}, {"name": "synthetic"}], "gives the training pairs: list it "
                                                                             "first"),
    ([{"name": "synthetic"}], "corpus files are given too"),
    ([{"name": "synthetic", "valid": 5}], "data.valid_size / data.test_size hold out pairs of a corpus file"),
    (["drop_final_punct"], "must be a list of mappings with a name"),
])
def test_transform_settings_are_checked_in_one_line(transforms, message, tiny_corpus):
    data = vars(tiny_config(tiny_corpus).data)
    if "valid" in transforms[0]:  # the synthetic language, with a corpus split asked for
        data.update(train_src=None, train_tgt=None, test_size=5)
    with pytest.raises(UserError) as e:
        transforms_of(DataConfig(**{**data, "transforms": transforms}))
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("section, value, entries", [
    ({"data": {"joined_pairs": 100}}, "data.joined_pairs", [{"name": "joined_pairs", "count": 100, "max_parts": 3}]),
    ({"data": {"drop_final_punct": 0.3, "join_max_parts": 5}}, "data.drop_final_punct",
     [{"name": "drop_final_punct", "fraction": 0.3}]),  # join_max_parts without joined_pairs did nothing
    ({"data": {"align_text_src": "/a.en", "align_text_tgt": "/a.fr", "align_text_copies": 2}}, "data.align_text_src",
     [{"name": "align_text", "src": "/a.en", "tgt": "/a.fr", "copies": 2}]),
    ({"data": {"synthetic": True, "synthetic_train": 50}}, "data.synthetic",
     [{"name": "synthetic", "train": 50, "valid": 500, "min_len": 4, "max_len": 60}]),
    ({"train": {"guided_alignment": {"links": "/t.links", "weight": 0.5}}}, "train.guided_alignment.links",
     [{"name": "links", "path": "/t.links"}]),
])
def test_a_former_key_is_read_as_the_transform_it_became_with_a_note(section, value, entries, capsys):
    config = config_from_dict(section)
    assert config.data.transforms == entries
    note = capsys.readouterr().err.strip()
    assert len(note.splitlines()) == 1 and note.startswith("note: ") and "data.transforms: [{name: " in note
    assert value in note.split(" is written ")[0]


def test_a_model_folder_config_from_before_the_transforms_still_loads(tiny_corpus, tmp_path, capsys):
    """Every key of the former data section is in an old config.yaml, at its default when unused."""
    from attnmt.config import MOVED_KEYS, config_to_dict

    raw = config_to_dict(tiny_config(tiny_corpus))
    del raw["data"]["transforms"]
    for key, default in MOVED_KEYS.items():
        section, name = key.rsplit(".", 1)
        (raw["data"] if section == "data" else raw["train"]["guided_alignment"])[name] = default
    raw["data"]["drop_final_punct"] = 0.25
    config = config_from_dict(raw)
    assert config.data.transforms == [{"name": "drop_final_punct", "fraction": 0.25}]
    assert capsys.readouterr().err.count("\n") == 1
    raw["data"]["transforms"] = [{"name": "joined_pairs", "count": 5}]
    with pytest.raises(UserError, match="data.drop_final_punct and data.transforms are both given"):
        config_from_dict(raw)


def test_transform_paths_are_relative_to_the_config_file(tmp_path):
    config = config_from_dict({"data": {"train_tsv": "t.tsv", "transforms": [
        {"name": "align_text", "src": "a.en", "tgt": "/abs/a.fr"}, {"name": "links", "path": "x/t.links"}]}},
        base_dir=tmp_path)
    align, links = config.data.transforms
    assert (align["src"], align["tgt"], links["path"]) == (str(tmp_path / "a.en"), "/abs/a.fr",
                                                           str(tmp_path / "x" / "t.links"))


def test_the_registry_holds_the_builtin_transforms():
    assert set(TRANSFORMS) == {"synthetic", "joined_pairs", "align_text", "drop_final_punct", "links"}


def test_a_model_of_the_synthetic_language_serves_examples_of_its_validation_pairs(tiny_corpus, tmp_path):
    from attnmt.data.transforms import Synthetic
    from attnmt.serve.engine import example_sources
    from attnmt.translator import load

    config = case_config("synthetic", tiny_corpus, tmp_path)
    train(config, tmp_path / "m", quiet=True)
    valid = [s for s, _ in Synthetic(train=200, valid=10, min_len=3, max_len=8).valid_pairs(config.train.seed)]
    sources = example_sources(load(tmp_path / "m"))
    assert len(sources) == 5 and set(sources) <= set(valid)


def test_a_new_transform_registers_and_runs_on_both_pipelines(tiny_corpus, tmp_path):
    """docs/extending.md, "Add a data transform", step by step: a transform that adds reversed copies."""
    from dataclasses import dataclass

    from attnmt.data.transforms import Transform, register_transform
    from attnmt.typed import check_range

    @register_transform("reversed_copies")
    @dataclass
    class ReversedCopies(Transform):
        count: int = 1

        def check(self, where):
            check_range(f"{where}.count", self.count, 1, None)

        def apply(self, pairs, seed):
            taken = pairs.take(range(self.count))
            pairs.add([(" ".join(s.split()[::-1]), t) for s, t in taken])
            return {"reversed_copies": len(taken)}

    try:
        config = tiny_config(tiny_corpus)
        config.data.transforms = [{"name": "reversed_copies", "count": 7}]
        _, m_pairs, m_origins, *_ = loaded(config, tmp_path / "memory", "never")
        store, s_pairs, s_origins, *_ = loaded(config, tmp_path / "store", "always")
        first = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()[0]
        assert s_pairs == m_pairs and s_origins == m_origins == [((k, 0, 0),) for k in range(600)] + [None] * 7
        assert [c["name"] for c in store.meta["corpora"]] == ["train", "transforms"]
        assert store.meta["transforms"] == [{"reversed_copies": 7}]
        memory, *_ = loaded(config, tmp_path / "again", "never")
        assert memory.src_text[600] == " ".join(first.split()[::-1])
        config.data.transforms[0]["count"] = 0
        with pytest.raises(UserError, match=r"data.transforms\[0\].count=0 is out of range"):
            transforms_of(config.data)
    finally:
        del TRANSFORMS["reversed_copies"]
