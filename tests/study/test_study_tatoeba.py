"""The Tatoeba (+Multi30k) study data: joined held-out test pairs, a natural test set, and what a
study measures on them (perplexity intervals over seeds, the natural set on its own, precision)."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest
import yaml

from attnmt.errors import UserError
from attnmt.study import load_study, run_study, study_from_dict
from attnmt.study.aggregate import length_ratio, repeats, seeds_interval
from attnmt.study.data import StudyData, join_to_lengths, prepare_data, tatoeba_long_splits
from attnmt.study.report import findings
from attnmt.study.spec import TatoebaLongData

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"

WORDS = ["tom", "mary", "cat", "dog", "house", "tree", "red", "big", "eats", "sees", "runs", "sleeps"]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + " ."


def write_corpus(tmp_path: Path, n: int = 400, seed: int = 0) -> tuple[Path, Path]:
    """A Tatoeba-like TSV (English TAB "French": the words upper-cased), some sentences long and
    some with two translations, and a Multi30k folder with train and test captions."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        english = f"s{k} " + sentence(rng, rng.choice([1, 2, 3, 4, 5, 6, 18]))
        rows.append(f"{english}\t{english.upper()}")
        if k % 10 == 0:
            rows.append(f"{english}\t{english.upper()} !")  # a second translation of the same sentence
    tsv = tmp_path / "fra-eng.tsv.gz"
    with gzip.open(tsv, "wt", encoding="utf-8") as f:
        f.write("".join(r + "\n" for r in rows))
    m30k = tmp_path / "multi30k"
    m30k.mkdir()
    for split, count in (("train", 50), ("test_2016_flickr", 20)):
        captions = [f"c{split}{k} " + sentence(rng, 8) for k in range(count)]
        for lang, text in (("en", captions), ("fr", [c.upper() for c in captions])):
            with gzip.open(m30k / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(c + "\n" for c in text))
    return tsv, m30k


def ids(text: str) -> set[str]:
    """The sentence ids (s12, ctrain3, ...) a source or target holds."""
    return {w.lower() for w in text.split() if w[0] in "sScC" and w[1:2].isalnum() and w.lower() not in WORDS}


# ---------------------------------------------------------------- joining to lengths


def test_join_to_lengths_takes_each_pair_once_in_order():
    pairs = [(f"a{k} b{k}", f"x{k} y{k}") for k in range(10)]  # 2 words each
    joined = join_to_lengths(pairs, [1, 4, 5, 100])
    assert [len(s.split()) for s, _ in joined] == [2, 4, 6]  # at least the target; 100 runs out and is dropped
    assert " ".join(s for s, _ in joined).split() == [w for k in range(6) for w in (f"a{k}", f"b{k}")]
    assert all(t.replace("x", "a").replace("y", "b") == s for s, t in joined)
    assert join_to_lengths([], [3]) == []


# ---------------------------------------------------------------- the splits


def test_tatoeba_long_splits_hold_out_whole_sentences(tmp_path):
    tsv, m30k = write_corpus(tmp_path)
    cfg = TatoebaLongData(tatoeba=str(tsv), multi30k=str(m30k), train_max_words=12, train_joined=30, held_out=120,
                          valid=10, test=40, test_min_words=1, test_max_words=30, natural_min_words=15, seed=3)
    splits = tatoeba_long_splits(cfg, tmp_path)
    assert set(splits) == {"train", "valid", "test", "natural"}
    train_ids = set().union(*(ids(s) for s, _ in splits["train"]))
    for split in ("valid", "test", "natural"):
        held = set().union(*(ids(s) for s, _ in splits[split]))
        assert held and not held & train_ids, split  # no held-out sentence was trained on
    assert not set().union(*(ids(s) for s, _ in splits["valid"])) & set().union(*(ids(s) for s, _ in splits["test"]))
    assert max(len(s.split()) for s, _ in splits["train"]) <= 12
    assert any(len(ids(s)) >= 2 for s, _ in splits["train"])  # joined training pairs are there
    lengths = [len(s.split()) for s, _ in splits["test"]]
    assert max(lengths) <= 30 and min(lengths) <= 8 and max(lengths) > 12  # short singles up to beyond training
    assert all(len(ids(s)) == len(ids(t)) and ids(s) == ids(t) for s, t in splits["test"])  # sides stay aligned
    natural = splits["natural"]
    assert any(s.startswith("ctest") for s, _ in natural)  # the Multi30k test captions
    assert all(len(s.split()) >= 15 for s, _ in natural if s.startswith("s"))  # long held-out Tatoeba sentences
    assert not any(len(s.split()) >= 15 and len(ids(s)) == 1 for s, _ in splits["test"])  # kept out of the joins
    assert tatoeba_long_splits(cfg, tmp_path) == splits  # deterministic

    flipped = tatoeba_long_splits(TatoebaLongData(**{**cfg.__dict__, "reverse_direction": True}), tmp_path)
    assert all(s == s.upper() and t == t.lower() for s, t in flipped["test"])  # French -> English


def tiny_tatoeba_study(tsv: Path, m30k: Path, **evaluation) -> dict:
    return {
        "name": "tinyowner",
        "data": {"tatoeba_long": {"tatoeba": str(tsv), "multi30k": str(m30k), "train_max_words": 12,
                                  "train_joined": 30, "held_out": 300, "valid": 10, "test": 20,
                                  "test_max_words": 30, "natural_min_words": 15, "seed": 3}},
        "seeds": [1],
        "defaults": {"data": {"tokenizer": "word", "max_len": 60},
                     "model": {"emb_size": 16, "hidden_size": 24, "dropout": 0.0},
                     "train": {"max_steps": 4, "batch_tokens": 300, "valid_every": 4, "valid_bleu_sample": 0,
                               "tensorboard": False, "threads": 1}},
        "models": [{"name": "s2s", "overrides": {"model": {"type": "seq2seq"}}}],
        "evaluation": {"bucket_edges": [1, 10, 20, 31], "bootstrap": 0, **evaluation},
        "heatmaps": None,
    }


def read_split(data: StudyData, split: str) -> list[tuple[str, str]]:
    return list(zip(*((data.directory / f"{split}.{side}").read_text(encoding="utf-8").splitlines()
                      for side in ("src", "tgt"))))


def test_test_short_adds_unused_held_out_singles_and_changes_nothing_else(tmp_path):
    tsv, m30k = write_corpus(tmp_path, n=600)

    def prepared(name: str, **evaluation) -> StudyData:
        return prepare_data(study_from_dict(tiny_tatoeba_study(tsv, m30k, **evaluation)), tmp_path / name)

    plain, more = prepared("plain"), prepared("more", test_short=25, test_short_max_words=5)
    for split in ("train", "valid", "natural"):
        assert read_split(more, split) == read_split(plain, split), split
    assert more.training_fingerprint == plain.training_fingerprint == plain.fingerprint != more.fingerprint
    test = read_split(more, "test")
    joined, added = test[: len(read_split(plain, "test"))], test[len(read_split(plain, "test")):]
    assert joined == read_split(plain, "test") and len(added) == 25
    assert all(len(ids(s)) == 1 and ids(s) == ids(t) and len(s.split()) <= 5 for s, t in added)  # single sentences
    held = set().union(*(ids(s) for s, _ in joined))
    assert not set().union(*(ids(s) for s, _ in added)) & held  # none the joins used
    assert not set().union(*(ids(s) for s, _ in added)) & set().union(*(ids(s) for s, _ in read_split(more, "train")))
    assert len({s for s, _ in added}) == 25
    every = prepared("every", test_short=10_000)
    assert 25 < len(every.test_src) - len(plain.test_src) < 300  # as many as the held-out sentences leave


def test_a_models_from_study_may_add_short_test_pairs_only(tmp_path):
    tsv, m30k = write_corpus(tmp_path, n=600)
    (tmp_path / "tinyowner.yaml").write_text(yaml.safe_dump(tiny_tatoeba_study(tsv, m30k)), encoding="utf-8")
    first = run_study(tmp_path / "tinyowner.yaml", out=tmp_path / "runs" / "study-tinyowner", quiet=True).summary
    short = tmp_path / "tinyshort.yaml"
    short.write_text(yaml.safe_dump({"models_from": "tinyowner.yaml", "name": "tinyshort",
                                     "evaluation": {"test_short": 40}}), encoding="utf-8")
    second = run_study(short, out=tmp_path / "runs" / "study-tinyshort", quiet=True).summary
    assert [r["action"] for r in second["runs"]] == ["reused"]  # the owner's model, not trained again
    assert second["data"]["train"] == first["data"]["train"]
    assert second["data"]["test"]["pairs"] == first["data"]["test"]["pairs"] + 40
    shortest = [m["buckets"][0]["n"] for m in (first["models"]["s2s"], second["models"]["s2s"])]
    assert shortest[1] == shortest[0] + 40 and second["models"]["s2s"]["buckets"][1:] == \
        first["models"]["s2s"]["buckets"][1:]  # the other buckets: the same pairs, the same translations

    for data in ({"tatoeba_long": {"test": 50}}, {"synthetic": {}}, "x"):
        short.write_text(yaml.safe_dump({"models_from": "tinyowner.yaml", "data": data}), encoding="utf-8")
        with pytest.raises(UserError, match="models_from takes data from tinyowner.yaml; remove data here"):
            load_study(short)
    synthetic = {**tiny_tatoeba_study(tsv, m30k), "data": {"synthetic": {"train": 50, "valid": 5, "test": 5}}}
    (tmp_path / "tinysynthetic.yaml").write_text(yaml.safe_dump(synthetic), encoding="utf-8")
    short.write_text(yaml.safe_dump({"models_from": "tinysynthetic.yaml", "evaluation": {"test_short": 5}}),
                     encoding="utf-8")
    with pytest.raises(UserError, match="evaluation.test_short adds held-out single sentences of data.tatoeba_long; "
                                        "this study has no data.tatoeba_long"):
        load_study(short)


def test_tatoeba_long_errors(tmp_path):
    tsv, _ = write_corpus(tmp_path, n=60)
    with pytest.raises(UserError, match="file not found"):
        tatoeba_long_splits(TatoebaLongData(tatoeba=str(tmp_path / "none.tsv"), multi30k=None), tmp_path)
    with pytest.raises(UserError, match="no train.en.gz"):
        tatoeba_long_splits(TatoebaLongData(tatoeba=str(tsv), multi30k=str(tmp_path), held_out=20, valid=3,
                                            test=5), tmp_path)
    with pytest.raises(UserError, match="exactly one"):
        study_from_dict({"data": {"tatoeba_long": {}, "synthetic": {}},
                         "models": [{"name": "a", "overrides": {"model": {"type": "seq2seq"}}}]})
    with pytest.raises(UserError, match="test_max_words"):
        study_from_dict({"data": {"tatoeba_long": {"test_min_words": 9, "test_max_words": 3}},
                         "models": [{"name": "a", "overrides": {"model": {"type": "seq2seq"}}}]})


# ---------------------------------------------------------------- aggregation and findings


def test_seeds_interval_is_a_student_t_interval():
    low, high = seeds_interval([4.0, 5.0, 6.0], 0.95)
    assert (low + high) / 2 == pytest.approx(5.0)
    assert high - 5.0 == pytest.approx(4.303 * 1.0 / 3 ** 0.5, rel=1e-3)  # t(0.975, 2) * sd / sqrt(n)
    assert seeds_interval([5.0], 0.95) is None


def test_repeats_finds_a_decoder_loop():
    assert repeats("je suis là . je suis là . je suis là . je suis là .")
    assert not repeats("je suis là . tu es ici . il est parti . je suis là .")  # twice is not a loop
    assert not repeats("") and not repeats("a b c")


def _model(kind: str, reverse: bool, last: tuple[float, float]) -> dict:
    bucket = {"lo": 1, "hi": 10, "n": 5, "mean": 30.0, "ci_low": 28.0, "ci_high": 32.0, "values": [30.0]}
    longest = {**bucket, "lo": 60, "hi": 70, "mean": sum(last) / 2, "ci_low": last[0], "ci_high": last[1]}
    return {"model_type": kind, "reverse_source": reverse, "buckets": [bucket, longest], "alignment": {},
            "perplexity": {"mean": 5.0}, "bleu": {"mean": 20.0}}


def test_findings_say_whether_the_longest_buckets_overlap():
    apart = findings({"s": _model("seq2seq", True, (5.0, 8.0)), "r": _model("rnnsearch", False, (20.0, 25.0))}, {})
    assert any("60-69 words" in line and "do not overlap" in line for line in apart)
    close = findings({"s": _model("seq2seq", True, (5.0, 21.0)), "r": _model("rnnsearch", False, (20.0, 25.0))}, {})
    assert any("60-69 words" in line and "intervals overlap" in line for line in close)


# ---------------------------------------------------------------- a whole tiny study


def test_tiny_tatoeba_study_measures_the_natural_set_and_precision(tmp_path):
    tsv, m30k = write_corpus(tmp_path)
    study = {
        "name": "tinytato",
        "data": {"tatoeba_long": {"tatoeba": str(tsv), "multi30k": str(m30k), "train_max_words": 12,
                                  "train_joined": 30, "held_out": 120, "valid": 10, "test": 30,
                                  "test_max_words": 30, "natural_min_words": 15}},
        "seeds": [1, 2],
        "defaults": {"data": {"tokenizer": "word", "max_len": 60},
                     "model": {"emb_size": 16, "hidden_size": 24, "dropout": 0.0},
                     "train": {"max_steps": 6, "batch_tokens": 300, "valid_every": 6, "valid_bleu_sample": 0,
                               "tensorboard": False, "precision": "auto", "threads": 1}},
        "models": [{"name": "s2s", "overrides": {"model": {"type": "seq2seq", "reverse_source": True}}}],
        "evaluation": {"bucket_edges": [1, 10, 20, 31], "bootstrap": 20},
    }
    path = tmp_path / "tinytato.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    result = run_study(path, out=tmp_path / "out", quiet=True)
    summary = json.loads(result.results.read_text(encoding="utf-8"))
    m = summary["models"]["s2s"]
    natural = m["extra_tests"]["natural"]
    assert natural["n"] == summary["data"]["natural"]["pairs"] > 20
    assert natural["perplexity"]["mean"] > 1 and natural["buckets"]
    assert sum(b["n"] for b in natural["buckets"]) == natural["n"]
    assert all(0 <= b["repeating"]["mean"] <= 1 for b in m["buckets"])
    assert all(b["length_ratio"]["mean"] > 0 and len(b["length_ratio"]["values"]) == 2 for b in m["buckets"])
    low, high = m["perplexity"]["seeds_interval"]
    assert low <= m["perplexity"]["mean"] <= high
    assert all(r["precision"] in ("fp32", "bf16 autocast") for r in summary["runs"])
    assert m["precision"] == sorted({r["precision"] for r in summary["runs"]})
    page = result.report.read_text(encoding="utf-8")
    assert "Test set natural" in page and "precision" in page and "4-gram" in page
    assert "Output length over reference length" in page


def test_length_ratio_counts_sacrebleu_tokens():
    assert length_ratio(["a b", "c"], ["a b c d", "e f"], "13a") == pytest.approx(3 / 6)
    assert length_ratio(["le chat ."], ["le chat"], "13a") == pytest.approx(3 / 2)  # 13a splits the period off
    assert length_ratio(["x"], [""], "13a") == 0.0


# ---------------------------------------------------------------- the shipped study on the real data


@pytest.mark.skipif(not (SHARED / "tatoeba" / "fra-eng.tsv.gz").is_file(),
                    reason="needs ../shared/data/tatoeba/fra-eng.tsv.gz (real data, not in the repository)")
@pytest.mark.slow  # the recipe's data built from the real Tatoeba file
def test_the_bottleneck_recipe_data(tmp_path):
    study = load_study(REPO / "recipes" / "bottleneck_enfr" / "study.yaml",
                       [f"data.tatoeba_long.tatoeba={SHARED / 'tatoeba' / 'fra-eng.tsv.gz'}"])
    assert len(study.seeds) == 3 and len(study.models) == 4
    cfg = study.data.tatoeba_long
    data = prepare_data(study, tmp_path)
    train = {s for s, _ in read_split(data, "train")}
    assert not any(s in train for s, _ in read_split(data, "natural"))
    assert not any(s in train for s in data.test_src)  # no test sentence, joined or added, was trained on
    edges = study.evaluation.bucket_edges
    for lo, hi in itertools.pairwise(edges):
        assert sum(lo <= n < hi for n in data.test_lengths) >= 100, (lo, hi)  # every bucket has enough pairs
    assert max(len(s.split()) for s in train) <= cfg.train_max_words < edges[-2]  # the last bucket is beyond training
