"""Training-data augmentation: the drop_final_punct transform (pairs added again without the source's
final punctuation) and the joined_pairs transform (pairs that join several training pairs)."""

import json

import numpy as np
import pytest

from attnmt.data.augment import add_joined, add_unpunctuated, join_run, strip_final_punctuation
from attnmt.data.store_links import LineLinks, StoreLinks, write_store_links
from attnmt.data.transforms import joined_origin
from attnmt.train.trainer import train
from tests.conftest import tiny_config

PAIRS = [("我爱你。", "I love you."), ("你好", "Hi."), ("他是谁？", "Who is he?"), ("Hi, Tom!", "嗨，汤姆！"),
         ("。", "."), ("好吧…", "OK...")]


@pytest.mark.parametrize("text, stripped", [("我爱你。", "我爱你"), ("真的吗？！", "真的吗"), ("Hi, Tom!", "Hi, Tom"),
                                            ("Wait ...", "Wait"), ("你好", "你好"), ("他说：“好。”", "他说：“好。”")])
def test_only_the_final_punctuation_goes(text, stripped):
    assert strip_final_punctuation(text) == stripped


def test_copies_keep_their_target_and_skip_what_would_not_change():
    augmented = add_unpunctuated(PAIRS, 1.0, seed=1)
    assert augmented[: len(PAIRS)] == PAIRS
    assert augmented[len(PAIRS):] == [("我爱你", "I love you."), ("他是谁", "Who is he?"), ("Hi, Tom", "嗨，汤姆！"),
                                      ("好吧", "OK...")]


def test_the_fraction_and_the_seed_choose_the_copies():
    pairs = [(f"句子{i}。", f"sentence {i}.") for i in range(100)]
    first = add_unpunctuated(pairs, 0.3, seed=1)
    assert len(first) == 130 and first == add_unpunctuated(pairs, 0.3, seed=1)
    assert first[100:] != add_unpunctuated(pairs, 0.3, seed=2)[100:]
    assert add_unpunctuated(pairs, 0.0, seed=1) == pairs


def test_training_adds_and_logs_the_copies(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=2, valid_every=100, valid_bleu_sample=0)
    config.data.transforms = [{"name": "drop_final_punct", "fraction": 0.5}]
    lines = (tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines()
    (tmp_path / "data").mkdir()
    for side in ("src", "tgt"):  # a corpus whose sources all end in a full stop
        text = (tiny_corpus / f"train.{side}").read_text(encoding="utf-8").splitlines()
        text = [line + " ." for line in text] if side == "src" else text
        (tmp_path / "data" / f"train.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")
    config.data.train_src = str(tmp_path / "data" / "train.src")
    config.data.train_tgt = str(tmp_path / "data" / "train.tgt")
    train(config, tmp_path / "model", quiet=True)
    records = [json.loads(line) for line in (tmp_path / "model" / "train_log.jsonl").read_text().splitlines()]
    added = [r["augmented_without_final_punctuation"] for r in records if "augmented_without_final_punctuation" in r]
    assert added == [round(0.5 * len(lines))]
    kept = [r for r in records if r.get("event") == "data" and r.get("split") == "train" and "kept" in r]
    assert kept[0]["total"] == len(lines) + added[0]


def test_joined_links_are_shifted_by_the_words_before_each_part(tmp_path):
    parts = [("a b", "x"), ("c", "y z w"), ("d e f", "v")]
    links = [{(0, 0), (1, 0)}, {(0, 2)}, {(2, 0), (0, 0)}]  # of corpus lines 0, 1, 2
    # worked by hand: part 2 starts at source word 2 and target word 1, part 3 at 3 and 4
    origin = joined_origin([(part, ((line, 0, 0),)) for line, part in enumerate(parts)])
    assert origin == ((0, 0, 0), (1, 2, 1), (2, 3, 4))
    flat = [sorted(line) for line in links]
    table = LineLinks(np.cumsum([0] + [len(line) for line in flat]), np.array(sum(flat, []), dtype=np.int32),
                      np.ones(3, dtype=np.uint8))
    write_store_links(tmp_path, table, np.arange(3), [origin, None])
    stored = StoreLinks(tmp_path, 5)
    assert stored[3] == {(0, 0), (1, 0), (2, 3), (5, 4), (3, 4)}
    assert [stored[k] for k in range(3)] == links and stored[4] is None
    assert joined_origin([(parts[0], ((0, 0, 0),)), (parts[1], None)]) is None  # a part without a line: no links
    assert join_run(parts) == ("a b c d e f", "x y z w v")


def test_joined_pairs_are_drawn_with_the_seed_from_the_training_pairs():
    pairs = [(f"s{i} .", f"t{i} .") for i in range(50)]
    augmented, parts_of = add_joined(pairs, 30, 4, seed=1)
    assert augmented[:50] == pairs and augmented[50:] == list(parts_of) and len(parts_of) == 30
    assert all(2 <= len(parts) <= 4 and set(parts) <= set(pairs) and join_run(parts) == joined
               for joined, parts in parts_of.items())
    assert {len(parts) for parts in parts_of.values()} == {2, 3, 4}
    assert add_joined(pairs, 30, 4, seed=1) == (augmented, parts_of)
    assert add_joined(pairs, 30, 4, seed=2)[0] != augmented

