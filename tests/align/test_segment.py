"""Languages written without spaces (attnmt/data/segment.py): Chinese segmented by jieba and Japanese by MeCab
in align-prepare, its gold check and user dictionary, the error when the segmenter is missing, and a model
trained on segmented Chinese, whose translate, align and explore record split raw input into the same words."""

from __future__ import annotations

import gzip
import json
import sys
import typing
from pathlib import Path

import pytest
import yaml

from attnmt.cli import main as attnmt
from attnmt.config.schema import DataConfig
from attnmt.data.pretokenize import PRETOKENIZERS, gold_changes, pretokenizer
from tests.conftest import SHARED_DATA

jieba = pytest.importorskip("jieba", reason="jieba is not installed (pip install 'attnmt[zh]')")

SUBJECTS = {"我们": "We", "他们": "They", "我": "I", "你": "You"}
PLACES = {"北京": "Beijing", "上海": "Shanghai", "东京": "Tokyo", "伦敦": "London"}
YEARS = {"2024": "2024", "2019": "2019"}
SENTENCE = "我们在2024年去了北京。"


def _pairs() -> list[tuple[str, str]]:
    """Raw Chinese (no spaces) and its English, as Tatoeba writes them (English first)."""
    return [(f"{s}在{y}年去了{p}。", f"{e} went to {q} in {x}.")
            for s, e in SUBJECTS.items() for p, q in PLACES.items() for y, x in YEARS.items()]


def _folder(root: Path) -> dict[str, Path]:
    """A small English-first TSV (as `attnmt data tatoeba cmn-eng` writes it) and a two-line gold set, its Chinese
    segmented as the Penn Chinese Treebank does (2024年 one word)."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {name: root / name for name in ("cmn-eng.tsv", "gold.zh", "gold.en")}
    paths["cmn-eng.tsv"].write_text("".join(f"{en}\t{zh}\tCC-BY 2.0\n" for zh, en in _pairs()), encoding="utf-8")
    paths["gold.zh"].write_text("他们 在 2019年 去 了 东京 。\n你 去 了 伦敦 。\n", encoding="utf-8")
    paths["gold.en"].write_text("They went to Tokyo in 2019 .\nYou went to London .\n", encoding="utf-8")
    return paths


def _prepare(paths: dict[str, Path], *extra: str) -> int:
    return attnmt(["align-prepare", "--src-lang", "zh", "--tgt-lang", "en", "--tsv-swapped",
                   str(paths["cmn-eng.tsv"]), "--gold-src", str(paths["gold.zh"]), "--gold-tgt", str(paths["gold.en"]),
                   "--pretokenize", "jieba", *extra])


def _train_pairs(out: Path) -> dict[str, str]:
    with gzip.open(out / "train.tsv.gz", "rt", encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t") for line in f)


def test_align_prepare_segments_chinese_into_words_and_leaves_english_as_words_splits_it(tmp_path, capsys):
    paths = _folder(tmp_path / "corpora")
    out = tmp_path / "align_zhen"
    assert _prepare(paths, "--no-links", "--out-dir", str(out)) == 0
    pairs = _train_pairs(out)
    assert pairs["我们 在 2024 年 去 了 北京 。"] == "We went to Beijing in 2024 ."  # not one run 我们在2024年去了北京
    manifest = json.loads((out / "align.json").read_text(encoding="utf-8"))
    assert (manifest["pretokenize"], manifest["user_dict"]) == ("jieba", None)
    assert manifest["pairs"]["equal_to_gold"] == 1  # 他们在2019年去了东京。 is a gold sentence, whatever its spaces
    assert (out / "gold.zh").read_text(encoding="utf-8") == paths["gold.zh"].read_text(encoding="utf-8")
    assert attnmt(["align-config", "--data-dir", str(out), "--out-dir", str(tmp_path / "configs"), "--name", "zhen",
                   "--kind", "guided"]) == 0
    for direction in ("zh_en", "en_zh"):
        data = yaml.safe_load((tmp_path / "configs" / f"guided_{direction}.yaml").read_text(encoding="utf-8"))["data"]
        assert data["pretokenize"] == "jieba" and "pretokenize_user_dict" not in data


def test_segmentation_keeps_digit_and_latin_runs_whole_and_is_deterministic():
    split = pretokenizer("jieba", "zh")
    assert split("我用iPhone 15拍了3.5%的照片，GDP增长7.5%。") == \
        "我 用 iPhone 15 拍 了 3.5 % 的 照片 ， GDP 增长 7.5 % 。"
    assert split(SENTENCE) == pretokenizer("jieba", "cmn")(SENTENCE) == pretokenizer("jieba", "zh-CN")(SENTENCE)
    assert pretokenizer("jieba", "en")("I don't know, Tom.") == "I do n't know , Tom ."  # the other side: words
    assert pretokenizer("words", "zh")(SENTENCE) == "我们在2024年去了北京 。"  # why Chinese needs a segmenter


def test_the_check_segments_each_gold_line_as_chinese_writes_it(tmp_path, capsys):
    paths = _folder(tmp_path)
    assert _prepare(paths, "--check") == 0
    out = capsys.readouterr().out
    assert f"gold {paths['gold.zh']}: the pretokenizer changes 1 of 2 gold lines; 11 of its 13 words are among " \
           "the gold's 12" in out
    assert "他们 在 2019年 去 了 东京 。\n" in out and "-> 他们 在 2019 年 去 了 东京 。" in out
    assert f"gold {paths['gold.en']}: the pretokenizer changes 0 of 2 gold lines" in out
    assert gold_changes(["你 去 了 伦敦 。"], "jieba", "zh") == []
    assert attnmt(["align-prepare", "--src-lang", "zh", "--tgt-lang", "en", "--gold-src", str(paths["gold.zh"]),
                   "--gold-tgt", str(paths["gold.en"]), "--check"]) == 0
    assert "zh is written without spaces between words: --pretokenize jieba" in capsys.readouterr().out


ZHEN = SHARED_DATA / "alignment" / "zhen-nist"


@pytest.mark.skipif(not ZHEN.is_dir(), reason="the shared zhen-nist gold alignments are absent (../shared/data)")
def test_jieba_against_the_penn_treebank_segmentation_of_the_nist_gold_set():
    """What docs/alignment.md and the Chinese recipe say of the check: jieba (HMM off) changes 140 of the 150 gold
    lines and shares 2,916 of its words with the gold; the English side fits as it is."""
    from attnmt.align.prepare import gold_check

    lines = (ZHEN / "zhen.src").read_text(encoding="utf-8").splitlines()
    check = gold_check(lines, "jieba", "zh")
    assert (check["changed"], check["words"]) == (140, {"gold": 3913, "pretokenized": 3565, "same": 2916})
    assert gold_check((ZHEN / "zhen.tgt").read_text(encoding="utf-8").splitlines(), "jieba", "en")["changed"] == 0


@pytest.mark.skipif(not ZHEN.is_dir(), reason="the shared zhen-nist gold alignments are absent (../shared/data)")
def test_the_chinese_recipes_user_dictionary_splits_i_love_you_and_leaves_the_gold_check_as_it_was():
    """recipes/alignment_chinese/user_dict.txt removes jieba's dictionary word 我爱你, so the recipe's models (and
    the explorer's labels) read 我 / 爱 / 你 as the Penn Chinese Treebank writes it; the gold set reads the same."""
    from attnmt.align.prepare import gold_check

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "alignment_chinese" / "user_dict.txt"
    assert pretokenizer("jieba", "zh")("我爱你。") == "我爱你 。"
    assert pretokenizer("jieba", "zh", user_dict=recipe)("我爱你。") == "我 爱 你 。"
    lines = (ZHEN / "zhen.src").read_text(encoding="utf-8").splitlines()
    assert gold_check(lines, "jieba", "zh", user_dict=recipe) == gold_check(lines, "jieba", "zh")


def test_a_user_dictionary_keeps_names_whole_and_can_remove_a_word(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("麦棠源\n我爱你 0\n", encoding="utf-8")
    plain, mine = pretokenizer("jieba", "zh"), pretokenizer("jieba", "zh", user_dict=names)
    assert plain("记者麦棠源说我爱你") == "记者 麦 棠 源 说 我爱你"
    assert mine("记者麦棠源说我爱你") == "记者 麦棠源 说 我 爱 你"
    paths = _folder(tmp_path / "corpora")
    out = tmp_path / "align_zhen"
    assert _prepare(paths, "--no-links", "--user-dict", str(names), "--out-dir", str(out)) == 0
    assert (out / "user_dict.txt").read_text(encoding="utf-8") == names.read_text(encoding="utf-8")
    assert json.loads((out / "align.json").read_text(encoding="utf-8"))["user_dict"] == "user_dict.txt"
    assert attnmt(["align-config", "--data-dir", str(out), "--out-dir", str(tmp_path / "c"), "--name", "z",
                   "--kind", "unguided"]) == 0
    config = tmp_path / "c" / "unguided_en_zh.yaml"
    assert "  pretokenize_user_dict: ../align_zhen/user_dict.txt" in config.read_text(encoding="utf-8")
    assert _prepare(paths, "--check", "--user-dict", str(tmp_path / "absent.txt")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.txt: no such file" in err


def test_a_missing_segmenter_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    paths = _folder(tmp_path)
    monkeypatch.setitem(sys.modules, "jieba", None)  # as if jieba were not installed
    assert _prepare(paths, "--check") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "jieba is not installed; pip install 'attnmt[zh]'" in err
    assert attnmt(["align-prepare", "--src-lang", "de", "--tgt-lang", "en", "--gold-src", str(paths["gold.zh"]),
                   "--gold-tgt", str(paths["gold.en"]), "--pretokenize", "jieba", "--check"]) == 2
    assert "--pretokenize jieba segments Chinese (zh), and the pair is de-en" in capsys.readouterr().err


def test_every_pretokenizer_is_a_config_value_and_an_align_prepare_choice():
    from attnmt.cli.aligning import PRETOKENIZE_CHOICES

    allowed = typing.get_args(typing.get_args(typing.get_type_hints(DataConfig)["pretokenize"])[0])
    assert set(allowed) == set(PRETOKENIZERS) == {*PRETOKENIZE_CHOICES, "none"}


def test_mecab_segments_japanese_into_unidic_words(tmp_path):
    pytest.importorskip("fugashi", reason="fugashi is not installed (pip install 'attnmt[ja]')")
    split = pretokenizer("mecab", "ja")
    assert split("私たちは2024年に東京へ行きました。") == "私 たち は 2024 年 に 東京 へ 行き まし た 。"
    assert split("東京スカイツリーに3.5%") == "東京 スカイ ツリー に 3.5 %"
    names = tmp_path / "names.txt"
    names.write_text("東京スカイツリー\n", encoding="utf-8")
    assert pretokenizer("mecab", "jpn", user_dict=names)("東京スカイツリーに行った") == "東京スカイツリー に 行っ た"
    assert gold_changes(["私 たち は 東京 へ 行き まし た 。", "東京 へ"], "mecab", "ja") == []


# ------------------------------------------------------------------ a model trained on segmented Chinese

TINY = ["data.valid_size=4", "data.test_size=4", "data.tokenizer=unigram", "data.vocab_size=60",
        "data.transforms=[]", "model.d_model=16", "model.n_heads=2", "model.ff_size=32",
        "model.enc_layers=1", "model.dec_layers=1", "train.batch_tokens=200", "train.max_steps=2",
        "train.max_time_s=null", "train.warmup_steps=1", "train.valid_every=2", "train.valid_bleu_sample=0",
        "train.save_every=2", "train.log_every=1", "train.progress=false", "train.tensorboard=false",
        "train.precision=fp32", "decode.beam=2", "decode.max_len_b=4"]


@pytest.fixture(scope="module")
def zh_model(tmp_path_factory) -> Path:
    """A tiny Chinese -> English Transformer of align-config's unguided config, trained for two steps on text that
    align-prepare segmented with jieba (and a user dictionary that splits 我爱你)."""
    root = tmp_path_factory.mktemp("zh")
    paths = _folder(root / "corpora")
    with open(paths["cmn-eng.tsv"], "a", encoding="utf-8") as f:
        f.write("I love you.\t我爱你。\tCC-BY 2.0\n" * 3)
    (root / "words.txt").write_text("我爱你 0\n", encoding="utf-8")
    assert _prepare(paths, "--no-links", "--user-dict", str(root / "words.txt"), "--out-dir", str(root / "d")) == 0
    assert attnmt(["align-config", "--data-dir", str(root / "d"), "--out-dir", str(root / "c"), "--name", "z",
                   "--kind", "unguided"]) == 0
    assert attnmt(["train", str(root / "c" / "unguided_zh_en.yaml"), "--model-dir", str(root / "m"),
                   *[x for kv in TINY for x in ("--set", kv)]]) == 0
    return root / "m"


def test_translate_and_align_split_raw_chinese_as_the_training_text(zh_model, tmp_path, capsys):
    from attnmt.decode.translator import load

    translator = load(zh_model)
    assert translator.config.data.pretokenize == "jieba"
    assert translator.translate(SENTENCE).source == "我们 在 2024 年 去 了 北京 。"
    raw = tmp_path / "raw.zh"
    raw.write_text(f"{SENTENCE}\n我爱你\n", encoding="utf-8")
    capsys.readouterr()
    assert attnmt(["translate", "--model", str(zh_model), "--input", str(raw), "--alignments"]) == 0
    for line in capsys.readouterr().out.splitlines():  # links over the 8 (and 3) segmented words
        assert line.count(" ||| ") == 1
    english = tmp_path / "raw.en"
    english.write_text("We went to Beijing in 2024.\nI love you\n", encoding="utf-8")
    words = tmp_path / "words.txt"
    assert attnmt(["align", "--model", str(zh_model), "--src", str(raw), "--tgt", str(english), "--text-out",
                   str(words), "--out", str(tmp_path / "links")]) == 0
    assert words.read_text(encoding="utf-8").splitlines() == [
        "我们 在 2024 年 去 了 北京 。 ||| We went to Beijing in 2024 .", "我 爱 你 ||| I love you"]
    links = [[tuple(map(int, link.split("-"))) for link in line.split()]
             for line in (tmp_path / "links").read_text(encoding="utf-8").splitlines()]
    assert all(i < 8 and j < 7 for i, j in links[0]) and all(i < 3 and j < 3 for i, j in links[1])
    assert {j for _, j in links[1]} == {0, 1, 2}  # argmax: each English word linked to one of 我 / 爱 / 你
    assert attnmt(["align", "--model", str(zh_model), "--src", str(raw), "--tgt", str(english), "--pretokenized",
                   "--text-out", str(words), "--overwrite"]) == 0
    assert words.read_text(encoding="utf-8").splitlines()[1] == "我爱你 ||| I love you"  # read as given


def test_the_explore_record_labels_the_segmented_words(zh_model):
    from attnmt.decode.translator import load

    record = load(zh_model).explore("我爱你", beam=1)
    source = record["source"]
    assert source["text"] == "我爱你" and source["words"] == ["我", "爱", "你"]
    assert len(record["attention"]["words"]["mean"][0]) == 3  # one attention column per word
    record = load(zh_model).explore(SENTENCE, beam=1)
    assert record["source"]["words"] == ["我们", "在", "2024", "年", "去", "了", "北京", "。"]


def test_a_model_of_a_missing_segmenter_is_refused_in_one_line(zh_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)
    assert attnmt(["translate", "--model", str(zh_model), "--input", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.pretokenize jieba" in err and "pip install 'attnmt[zh]'" in err
