"""Chinese <-> English on Tatoeba: held-out splits, TSV columns, CJK heatmaps, one small training run."""

from __future__ import annotations

import gzip
import warnings
from collections import Counter
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from attnmt.cli import main
from attnmt.config.schema import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig, load_config
from attnmt.data.dataset import read_split
from attnmt.data.split import split_held_out
from attnmt.data.vocab import UNK_ID
from attnmt.errors import UserError
from attnmt.viz import heatmap

REPO = Path(__file__).resolve().parents[2]
SHARED_TATOEBA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tatoeba"
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)"

# Tatoeba's layout: English TAB Chinese TAB attribution, the translations of one English sentence
# on consecutive lines, and one Chinese sentence (你好。) translating two English ones.
TINY_EN_ZH = [
    ("Hi.", "嗨。"), ("Hi.", "你好。"), ("Hello!", "你好。"),
    ("I love you.", "我爱你。"), ("I love you.", "我爱你！"), ("I love her.", "我爱她。"), ("I love him.", "我爱他。"),
    ("I love cats.", "我爱猫。"), ("I love dogs.", "我爱狗。"), ("You love me.", "你爱我。"), ("She loves me.", "她爱我。"),
    ("He loves her.", "他爱她。"), ("We love you.", "我们爱你。"), ("They love us.", "他们爱我们。"),
    ("I like tea.", "我喜欢茶。"), ("I like you.", "我喜欢你。"), ("You like tea.", "你喜欢茶。"),
    ("She likes cats.", "她喜欢猫。"), ("He likes dogs.", "他喜欢狗。"), ("We like tea.", "我们喜欢茶。"),
    ("I see you.", "我看见你。"), ("I see her.", "我看见她。"), ("He sees me.", "他看见我。"), ("She sees him.", "她看见他。"),
    ("I am a student.", "我是学生。"), ("You are a student.", "你是学生。"), ("He is a teacher.", "他是老师。"),
    ("She is a teacher.", "她是老师。"), ("We are students.", "我们是学生。"), ("I drink tea.", "我喝茶。"),
    ("He drinks water.", "他喝水。"), ("She drinks water.", "她喝水。"), ("I eat rice.", "我吃米饭。"),
    ("You eat rice.", "你吃米饭。"), ("He eats bread.", "他吃面包。"), ("Thank you.", "谢谢你。"), ("Thank you.", "谢谢。"),
    ("Good morning.", "早上好。"), ("Good night.", "晚安。"), ("Wait!", "等等！"), ("Wait!", "等一下！"),
]


def write_tatoeba(path: Path, pairs: list[tuple[str, str]] = TINY_EN_ZH) -> Path:
    """A file laid out like manythings.org's cmn.txt, BOM included."""
    path.write_text("\ufeff" + "".join(f"{en}\t{zh}\t{ATTRIBUTION}\n" for en, zh in pairs), encoding="utf-8")
    return path


def sentences(pairs: list[tuple[str, str]], side: int) -> set[str]:
    return {p[side] for p in pairs}


def assert_no_leak(train, valid, test) -> None:
    for side in (0, 1):
        assert not sentences(test, side) & sentences(train, side)
        assert not sentences(valid, side) & sentences(train, side)
        assert not sentences(valid, side) & sentences(test, side)


# --- the held-out split -------------------------------------------------------------------------------------------

def synthetic_tatoeba(n_english: int, seed: int = 0) -> list[tuple[str, str]]:
    """n_english English sentences with 1-4 translations each, some translations shared between them."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n_english):
        for k in range(int(rng.integers(1, 5))):
            shared = rng.random() < 0.05
            pairs.append((f"English {i}.", f"共享 {int(rng.integers(0, 20))}" if shared else f"中文 {i}-{k}"))
    return pairs


def test_split_keeps_the_translations_of_one_sentence_together_and_leaks_nothing() -> None:
    pairs = synthetic_tatoeba(600)
    train, valid, test = split_held_out(pairs, valid_size=50, test_size=70, seed=1)
    assert (len(valid), len(test)) == (50, 70)
    assert Counter(train + valid + test) == Counter(pairs)  # a partition: nothing lost, nothing doubled
    assert_no_leak(train, valid, test)
    for split in (valid, test):  # every translation of a held-out English sentence is held out with it
        for en in sentences(split, 0):
            assert sum(p[0] == en for p in split) == sum(p[0] == en for p in pairs)
    # each split keeps the corpus order
    for split in (train, valid, test):
        positions = [pairs.index(p) for p in dict.fromkeys(split)]
        assert positions == sorted(positions)


def test_split_groups_through_a_shared_translation_and_up_to_case_and_spaces() -> None:
    # 你好。 links "Hi." and "Hello!"; "hi. " is "Hi." up to case and spaces: one group of four.
    pairs = [("Hi.", "嗨。"), ("Hi.", "你好。"), ("Hello!", "你好。"), ("hi. ", "嗨 。"), ("Run.", "跑。"),
             ("Stop!", "住手！"), ("Wait!", "等等！")]
    for seed in range(20):
        train, valid, test = split_held_out(pairs, valid_size=0, test_size=4, seed=seed)
        held = set(test)
        group = set(pairs[:4])
        assert group <= held or not group & held
        assert_no_leak(train, valid, test)


def test_split_is_deterministic_from_the_seed_and_symmetric_in_the_sides() -> None:
    pairs = synthetic_tatoeba(300, seed=2)
    first = split_held_out(pairs, 30, 30, seed=7)
    assert split_held_out(pairs, 30, 30, seed=7) == first
    assert split_held_out(pairs, 30, 30, seed=8) != first
    # zh -> en and en -> zh read the same file with the columns swapped: the same pairs are held out
    swapped = [(b, a) for a, b in pairs]
    mirrored = split_held_out(swapped, 30, 30, seed=7)
    assert [[(b, a) for a, b in split] for split in mirrored] == list(first)


def test_split_sizes_edge_cases() -> None:
    pairs = [(f"e{i}", f"z{i}") for i in range(10)]
    assert split_held_out(pairs, 0, 0, seed=1) == (pairs, [], [])
    train, valid, test = split_held_out(pairs, 9, 0, seed=1)
    assert (len(train), len(valid), len(test)) == (1, 9, 0)
    with pytest.raises(UserError, match="nothing would be left to train on"):
        split_held_out(pairs, 5, 5, seed=1)
    with pytest.raises(UserError, match=">= 0"):
        split_held_out(pairs, -1, 0, seed=1)
    # groups larger than what is asked for stay in training: at most the sizes asked for
    big = [("same", f"z{i}") for i in range(6)] + [("other", "x")]
    train, valid, test = split_held_out(big, 0, 3, seed=1)
    assert test == [("other", "x")] and train == big[:6]


# --- config and TSV columns ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, fragment", [
    ({"tsv_src_column": -1}, "data.tsv_src_column=-1"),
    ({"tsv_tgt_column": -2}, "data.tsv_tgt_column=-2"),
    ({"tsv_src_column": 1, "tsv_tgt_column": 1}, "both 1"),
    ({"valid_size": -5}, "data.valid_size=-5"),
    ({"test_size": -1}, "data.test_size=-1"),
    ({"valid_size": 10, "valid_tsv": "v.tsv"}, "use one or the other"),
    ({"test_size": 10, "test_src": "t.zh", "test_tgt": "t.en"}, "use one or the other"),
])
def test_config_checks_the_new_data_fields(fields: dict, fragment: str) -> None:
    with pytest.raises(UserError, match="config: ") as error:
        DataConfig(**fields)
    assert fragment in str(error.value)


def test_tsv_columns_choose_the_direction(tmp_path: Path) -> None:
    path = write_tatoeba(tmp_path / "cmn.txt")
    zh_en = read_split(DataConfig(train_tsv=str(path), tsv_src_column=1, tsv_tgt_column=0), "train")
    en_zh = read_split(DataConfig(train_tsv=str(path)), "train")
    assert zh_en[0] == ("嗨。", "Hi.") and en_zh[0] == ("Hi.", "嗨。")  # the BOM is gone
    assert zh_en == [(b, a) for a, b in en_zh]
    attribution = read_split(DataConfig(train_tsv=str(path), tsv_src_column=2, tsv_tgt_column=1), "train")
    assert attribution[0] == (ATTRIBUTION, "嗨。")
    with pytest.raises(UserError, match="column 3 is needed"):
        read_split(DataConfig(train_tsv=str(path), tsv_src_column=3), "train")


@pytest.mark.parametrize("name, src_col, src_lang", [("zh_en_rnnsearch", 1, "zh"), ("zh_en_luong", 1, "zh"),
                                                       ("en_zh_rnnsearch", 0, "en")])
def test_the_tatoeba_configs(name: str, src_col: int, src_lang: str) -> None:
    path = REPO / "recipes" / "chinese" / f"{name}.yaml"
    assert "shared" not in path.read_text(encoding="utf-8").split("\nname:")[1]  # no ../shared in the values
    config = load_config(path)
    d = config.data
    assert config.name == f"tatoeba_{name}"
    assert (d.tsv_src_column, d.tsv_tgt_column, d.src_lang) == (src_col, 1 - src_col, src_lang)
    assert d.train_tsv == str((REPO / "data" / "tatoeba" / "cmn-eng.tsv.gz").resolve())
    assert d.valid_size > 0 and d.test_size > 0 and not d.joint_vocab and d.tokenizer in ("unigram", "bpe")
    assert config.model.type == "rnnsearch"


# --- CJK fonts in heatmaps ----------------------------------------------------------------------------------------

@pytest.fixture
def fresh_font_caches():
    heatmap.cjk_fonts.cache_clear()
    heatmap._families.cache_clear()
    yield
    heatmap.cjk_fonts.cache_clear()
    heatmap._families.cache_clear()


def test_cjk_script_detection() -> None:
    assert heatmap.cjk_script(["▁I", "▁love", "</s>"]) is None
    assert heatmap.cjk_script(["我", "爱", "你"]) == "zh"
    assert heatmap.cjk_script(["Stop", "！"]) == "zh"  # full-width punctuation needs a CJK font too
    assert heatmap.cjk_script(["私", "は", "猫"]) == "ja"
    assert heatmap.cjk_script(["사랑해"]) == "ko"


def test_without_a_cjk_font_one_warning_and_the_plot_is_drawn(tmp_path: Path, monkeypatch, fresh_font_caches) -> None:
    monkeypatch.setattr(heatmap, "_installed_families", lambda: {"DejaVu Sans"})
    monkeypatch.setattr(heatmap, "_system_cjk_files", lambda: [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert heatmap.font_families(["我爱你"]) == ["DejaVu Sans"]
        for k in range(3):
            heatmap.plot_attention(np.full((2, 3), 1 / 3), ["▁我", "爱", "你"], ["▁I", "</s>"], tmp_path / f"{k}.png",
                                   title="我爱你", dpi=40)
    assert [str(w.message) for w in caught] == [str(caught[0].message)]
    assert "fonts-noto-cjk" in str(caught[0].message)
    assert mpimg.imread(tmp_path / "2.png").ndim == 3


def test_a_cjk_font_installed_after_matplotlib_built_its_cache_is_found(monkeypatch, fresh_font_caches) -> None:
    from matplotlib import font_manager

    if not heatmap._system_cjk_files():
        pytest.skip("no CJK font file on this system (apt-get install fonts-noto-cjk; scripts/setup.sh --dev does)")
    stale = [f for f in font_manager.fontManager.ttflist if f.name not in heatmap.FONT_FALLBACKS[1:]]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)  # as if the font came after the cache
    families = heatmap.font_families(["我爱你"])
    assert families[0] == "DejaVu Sans" and len(families) > 1
    if "Noto Sans CJK SC" in families:  # Chinese gets the simplified Chinese family first
        assert families[1] == "Noto Sans CJK SC"
        assert heatmap.font_families(["こんにちは"])[1] == "Noto Sans CJK JP"
    _assert_glyphs_found(families, "我爱你。")


def _assert_glyphs_found(families: list[str], text: str) -> None:
    """Drawing `text` with `families` warns about no missing glyph (no boxes)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"font.family": families}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = Figure()
        FigureCanvasAgg(fig)
        fig.text(0.5, 0.5, text)
        fig.canvas.draw()
    assert not [w for w in caught if "missing from" in str(w.message)], [str(w.message) for w in caught]


# --- end to end on a tiny hand-made corpus ------------------------------------------------------------------------

def tiny_config(tsv: Path, src_col: int) -> Config:
    return Config(
        name="tiny-tatoeba",
        data=DataConfig(train_tsv=str(tsv), tsv_src_column=src_col, tsv_tgt_column=1 - src_col, valid_size=4,
                        test_size=4, tokenizer="unigram", vocab_size=120, max_len=20),
        model=ModelConfig.of(type="rnnsearch", cell="gru", emb_size=24, hidden_size=32, dropout=0.0),
        train=TrainConfig(seed=3, batch_tokens=120, lr=0.01, max_steps=40, valid_every=20, valid_bleu_sample=4,
                          log_every=10, progress=False, tensorboard=False, scheduler="none", threads=1),
        decode=DecodeConfig(beam=3),
    )


@pytest.mark.parametrize("direction", ["zh-en", "en-zh"])
def test_tiny_training_translates_and_plots_woaini(direction: str, tmp_path: Path, capsys) -> None:
    from attnmt.decode.translator import load
    from attnmt.train.trainer import train

    zh_source = direction == "zh-en"
    sentence = "我爱你" if zh_source else "I love you."
    tsv = write_tatoeba(tmp_path / "cmn.txt")
    model_dir = tmp_path / "model"
    train(tiny_config(tsv, src_col=1 if zh_source else 0), model_dir, quiet=True)

    # the held-out pairs are in the model folder, and none of them was trained on
    test_src = (model_dir / "test.src").read_text(encoding="utf-8").splitlines()
    test_tgt = (model_dir / "test.tgt").read_text(encoding="utf-8").splitlines()
    valid_src = (model_dir / "valid.src").read_text(encoding="utf-8").splitlines()
    assert len(test_src) == len(test_tgt) == 4 and len(valid_src) == 4
    pairs = [(zh, en) for en, zh in TINY_EN_ZH] if zh_source else list(TINY_EN_ZH)
    assert set(zip(test_src, test_tgt)) <= set(pairs)
    chinese = test_src if zh_source else test_tgt
    assert all(heatmap.cjk_script([s]) == "zh" for s in chinese)
    train_pairs, valid, test = split_held_out(pairs, 4, 4, seed=3)
    assert list(zip(test_src, test_tgt)) == test
    assert_no_leak(train_pairs, valid, test)

    translator = load(model_dir)
    (tr,) = translator.translate([sentence], beam=3)
    assert "".join(tr.src_tokens).replace("▁", " ").strip() == sentence
    assert UNK_ID not in translator.src.vocab.encode(tr.src_tokens)  # every character was seen in training
    assert tr.attention.shape == (len(tr.tgt_tokens) + 1, len(tr.src_tokens))
    image = tmp_path / "attention.png"
    code = main(["plot-attention", "--model", str(model_dir), sentence, "--out", str(image)])
    assert code == 0 and mpimg.imread(image)[..., :3].std() > 0.05

    code = main(["evaluate", "--model", str(model_dir), "--src", str(model_dir / "test.src"),
                 "--ref", str(model_dir / "test.tgt"), "--beam", "1", "--tokenize", "13a" if zh_source else "zh"])
    out = capsys.readouterr().out
    assert code == 0 and "BLEU" in out


# --- the real file ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not (SHARED_TATOEBA / "cmn-eng.tsv.gz").is_file(),
                    reason=f"the Tatoeba Chinese-English file is not at {SHARED_TATOEBA}/cmn-eng.tsv.gz "
                           "(copy manythings.org's cmn.txt there, gzipped, to run this test)")
def test_the_real_tatoeba_file_reads_and_splits_without_leaks(tmp_path: Path) -> None:
    from attnmt.data.tokenize import train_tokenizer

    path = SHARED_TATOEBA / "cmn-eng.tsv.gz"
    config = load_config(REPO / "recipes" / "chinese" / "zh_en_rnnsearch.yaml", [f"data.train_tsv={path}"])
    pairs = read_split(config.data, "train")
    assert len(pairs) > 29000
    assert pairs[0] == ("嗨。", "Hi.")
    assert ("我爱您。", "I love you.") in pairs  # the polite 您: 我爱你 alone is not in the file
    assert ("我也爱你。", "I love you, too.") in pairs
    with gzip.open(path, "rt", encoding="utf-8-sig") as f:  # English first in the file, Chinese read as source
        first = f.readline().split("\t")
    assert (first[1], first[0]) == pairs[0]

    d = config.data
    train, valid, test = split_held_out(pairs, d.valid_size, d.test_size, config.train.seed)
    assert (len(valid), len(test)) == (d.valid_size, d.test_size)
    assert len(train) + len(valid) + len(test) == len(pairs)
    assert_no_leak(train, valid, test)

    # Chinese needs no spaces: the config's unigram model of the training side splits 我爱你 into known pieces
    tokenizer = train_tokenizer(d.tokenizer, [zh for zh, _ in train], d.vocab_size, tmp_path, "src")
    pieces = tokenizer.encode("我爱你")
    assert pieces == ["▁我", "爱", "你"]  # one piece a character, as recipes/chinese/*.yaml say
