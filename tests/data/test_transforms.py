"""Data transforms (attnmt/data/transforms.py): the token store holds what they make (checked against the
transforms run over the corpus as a list), their settings are checked in one line, and guided training
reads joined pairs' links from the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmt.config.schema import DataConfig, config_from_dict
from attnmt.data.corpus import filter_pairs
from attnmt.data.dataset import load_processors, read_split
from attnmt.data.loading import load_data
from attnmt.data.split import split_positions
from attnmt.data.store_prepare import prepare
from attnmt.data.transforms import TRANSFORMS, Pairs, apply_transforms, transforms_of
from attnmt.errors import UserError
from attnmt.train.trainer import train
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


def loaded(config, model_dir: Path):
    model_dir.mkdir(parents=True)
    log = Log()
    train_data, valid, src_proc, tgt_proc = load_data(config, model_dir, False, log)
    pairs = [(train_data.src_ids[i], train_data.tgt_ids[i]) for i in range(len(train_data))]
    origins = [train_data.origins[i] for i in range(len(train_data))]
    return train_data, pairs, origins, valid, log.events, src_proc


def listed(config, model_dir: Path):
    """The reference: the corpus as a list, less its held-out pairs, the transforms run over it, each pair
    encoded with the model's tokenizers, the empty and over-long ones dropped: (ids, origin, text) per pair."""
    cfg, seed = config.data, config.train.seed
    source = [t for t in transforms_of(cfg) if t.source]
    corpus = [] if source else read_split(cfg, "train")
    where = split_positions(corpus, cfg.valid_size, cfg.test_size, seed) if cfg.valid_size else [0] * len(corpus)
    lines = [k for k, w in enumerate(where) if w == 0]
    pairs = Pairs.of_list([corpus[k] for k in lines], lines)
    apply_transforms(cfg, pairs, seed)
    src, tgt = load_processors(model_dir)
    text = pairs.all()
    ids = [(src.ids(s), tgt.ids(t)) for s, t in text]
    keep, _ = filter_pairs(ids, cfg.max_len)
    return [ids[k] for k in keep], [pairs.origin(k) for k in keep], [text[k] for k in keep]


@pytest.mark.parametrize("name", list(CASES))
def test_the_store_holds_what_each_transform_makes(name, tiny_corpus, tmp_path):
    config = case_config(name, tiny_corpus, tmp_path)
    store, pairs, origins, valid, events, _ = loaded(config, tmp_path / "m")
    ids, expected_origins, _ = listed(config, tmp_path / "m")
    assert pairs == ids and origins == expected_origins
    keys = {"joined_pairs", "alignment_test_text", "augmented_without_final_punctuation", "synthetic"}
    assert len([e for e in events if keys & set(e)]) == sum(t.name != "links" for t in transforms_of(config.data))
    assert (store.links is not None) == any(t.name == "links" for t in transforms_of(config.data))
    for held in ("valid.src", "test.src"):
        assert (tmp_path / "m" / held).is_file() == (name == "all, held out")


def test_joined_pairs_carry_their_parts_lines_and_word_offsets(tiny_corpus, tmp_path):
    config = case_config("joined_pairs", tiny_corpus, tmp_path)
    loaded(config, tmp_path / "m")
    _, origins, text = listed(config, tmp_path / "m")
    lines = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()
    joined = [(k, o) for k, o in enumerate(origins) if len(o) > 1]
    assert joined
    for k, origin in joined:  # the parts' text, one after the other, at the word offsets the origin gives
        words = text[k][0].split()
        for line, src_offset, _ in origin:
            part = lines[line].split()
            assert words[src_offset:src_offset + len(part)] == part
    plain = [(k, o[0]) for k, o in enumerate(origins) if len(o) == 1]
    assert len(plain) > 500 and all(text[k][0] == lines[line] and offsets == [0, 0]
                                    for k, (line, *offsets) in plain)


def test_joined_pairs_store_their_parts_links_shifted(tiny_corpus, tmp_path):
    """Each stored pair's links: a corpus pair's line's links, a joined pair's parts' links shifted by the
    words before each part, none for added text."""
    from attnmt.data.pharaoh import read_links

    config = case_config("all, held out", tiny_corpus, tmp_path)
    store, _, origins, *_ = loaded(config, tmp_path / "m")
    corpus = read_split(config.data, "train")
    table = read_links(links_file(tiny_corpus, tmp_path), corpus)
    kinds = set()
    for k, origin in enumerate(origins):
        if origin is None:
            expected = None
        else:
            expected = {(i + s, j + t) for line, s, t in origin for i, j in table[line]}
        kinds.add("added" if origin is None else "joined" if len(origin) > 1 else "corpus")
        assert store.links[k] == expected, k
    assert kinds == {"added", "joined", "corpus"}
    assert store.meta["links"]["guided"] == sum(o is not None for o in origins)


def test_training_with_joined_pairs_and_links_guides_from_the_store(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=4, valid_every=4, valid_bleu_sample=0, log_every=2)
    config.data.transforms = [{"name": "joined_pairs", "count": 50, "max_parts": 3},
                              {"name": "links", "path": str(links_file(tiny_corpus, tmp_path))}]
    config.train.guided_alignment.weight = 1.0
    train(config, tmp_path / "m", quiet=True)
    assert (tmp_path / "m" / "store" / "links.off").is_file()
    events = [json.loads(line) for line in (tmp_path / "m" / "train_log.jsonl").read_text().splitlines()]
    guided = next(e for e in events if "guided" in e)
    assert guided["guided"] > 600 and guided["links"] > 0  # the corpus pairs and the joined pairs
    assert any("align_loss" in e for e in events)


def test_a_changed_transform_makes_the_store_stale(tiny_corpus, tmp_path):
    config = case_config("joined_pairs", tiny_corpus, tmp_path)
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]
    assert not prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]
    config.data.transforms[0]["count"] = 61
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["reason"] == \
        "the config's data settings changed since it was prepared"
    config.data.transforms.append({"name": "links", "path": str(links_file(tiny_corpus, tmp_path))})
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]  # the links are in it
    links = Path(config.data.transforms[-1]["path"])
    links.write_text(links.read_text(encoding="utf-8").replace("0-0", "0-1", 1), encoding="utf-8")
    assert "changed since it was prepared" in prepare(config, tmp_path / "m", workers=1, progress=False)["reason"]


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
    from attnmt.decode.held_out import example_sources
    from attnmt.decode.translator import load

    config = case_config("synthetic", tiny_corpus, tmp_path)
    train(config, tmp_path / "m", quiet=True)
    valid = [s for s, _ in Synthetic(train=200, valid=10, min_len=3, max_len=8).valid_pairs(config.train.seed)]
    sources = example_sources(load(tmp_path / "m"))
    assert len(sources) == 5 and set(sources) <= set(valid)


def test_a_new_transform_registers_and_reaches_the_store(tiny_corpus, tmp_path):
    """docs/extending.md, "Add a data transform", step by step: a transform that adds reversed copies."""
    from dataclasses import dataclass

    from attnmt.config.typed import check_range
    from attnmt.data.transforms import Transform, register_transform

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
        store, pairs, origins, *_ = loaded(config, tmp_path / "m")
        ids, _, text = listed(config, tmp_path / "m")
        first = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()[0]
        assert pairs == ids and origins == [((k, 0, 0),) for k in range(600)] + [None] * 7
        assert [c["name"] for c in store.meta["corpora"]] == ["train", "transforms"]
        assert store.meta["transforms"] == [{"reversed_copies": 7}]
        assert text[600][0] == " ".join(first.split()[::-1])
        config.data.transforms[0]["count"] = 0
        with pytest.raises(UserError, match=r"data.transforms\[0\].count=0 is out of range"):
            transforms_of(config.data)
    finally:
        del TRANSFORMS["reversed_copies"]
