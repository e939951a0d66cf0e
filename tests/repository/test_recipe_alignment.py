"""The alignment recipe (recipes/alignment_hansards/README.md) runs end to end at tiny size.

Its commands, in its order: prepare the text with `attnmt align-prepare` (made-up Tatoeba and Multi30k files and
a made-up gold set of the real formats), train the unguided, self-trained and guided pairs from the recipe's own config
files (copied beside a tiny data/ folder, so their ``../../data/align_enfr/`` paths resolve there, and
shrunk to a tiny Transformer, a few steps and 10 joined pairs), write the teacher's links for self-training,
average the last checkpoints, score with the table, the length shares, the why breakdown and the figures. What each step
must have produced is checked from the files it wrote; the numbers of the recipe's table take an hour
per model and are not reproduced here.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from attnmt.cli import main as attnmt

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "alignment_hansards"

EN_FR = {"the": "le", "cat": "chat", "dog": "chien", "sees": "voit", "eats": "mange", "a": "un", "fish": "poisson",
         "bird": "oiseau", "small": "petit", "big": "grand", "and": "et", "man": "homme"}

# shrinks every recipe config to a tiny model trained for 6 steps; layer 1 (the guided layer) needs 2 decoder layers
TINY = ["data.valid_size=4", "data.test_size=4", "data.tokenizer=word", "model.d_model=16", "model.n_heads=2",
        "model.ff_size=32", "model.enc_layers=1", "model.dec_layers=2", "train.batch_tokens=150", "train.max_steps=6",
        "train.max_time_s=null", "train.warmup_steps=2", "train.valid_every=3", "train.valid_bleu_sample=0",
        "train.save_every=2", "train.log_every=1", "train.progress=false", "train.tensorboard=false",
        "train.precision=fp32", "decode.beam=2"]


def word_for_word(dictionary: dict[str, str], n: int, seed: int, longest: int) -> list[tuple[str, str]]:
    """``n`` sentences of 3 to ``longest`` words and their word-for-word translation by ``dictionary``, cased and
    punctuated as raw text."""
    import random

    rng, words = random.Random(seed), list(dictionary)
    pairs = []
    for _ in range(n):
        src = [rng.choice(words) for _ in range(rng.randint(3, longest))]
        pairs.append((" ".join(src).capitalize() + ".", " ".join(dictionary[w] for w in src).capitalize() + "."))
    return pairs


def _sentences(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` English sentences of 3-7 words and their word-for-word French."""
    return word_for_word(EN_FR, n, seed, longest=7)


def _write_gz(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _made_up_corpora(root: Path) -> Path:
    """Tatoeba fra-eng and Multi30k en/fr where `attnmt data` writes them, and a gold folder (returned)."""
    _write_gz(root / "data" / "tatoeba" / "fra-eng.tsv.gz", [f"{en}\t{fr}" for en, fr in _sentences(70, 1)])
    multi30k = _sentences(40, 2)
    _write_gz(root / "data" / "multi30k" / "train.en.gz", [en for en, _ in multi30k])
    _write_gz(root / "data" / "multi30k" / "train.fr.gz", [fr for _, fr in multi30k])
    gold = root / "gold"
    gold.mkdir()
    # two pairs in the gold set's format: 1-based links, i-j sure and ipj possible; the first crosses twice
    (gold / "enfr.src").write_text("the small cat sees a big dog .\nthe cat eats .\n", encoding="utf-8")
    (gold / "enfr.tgt").write_text("le chat petit voit un chien grand .\nle chat mange .\n", encoding="utf-8")
    (gold / "enfr.gold").write_text("1-1 2-3 3-2 4-4 5-5 6-7 7-6 8p8\n1-1 2-2 3-3 4p4\n", encoding="utf-8")
    return gold


def _train(root: Path, config: str, model_dir: Path, *extra: str) -> Path:
    sets = [x for kv in [*TINY, *extra] for x in ("--set", kv)]
    assert attnmt(["train", str(root / "recipes" / "alignment_hansards" / config), "--model-dir", str(model_dir),
                   *sets]) == 0
    return model_dir


def _train_pair(root: Path, kind: str, name: str, *extra: str) -> tuple[Path, Path]:
    return tuple(_train(root, f"{kind}_{d}.yaml", root / "models" / f"{name}_{d}", *extra) for d in ("en_fr", "fr_en"))


def _log(model_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # align-prepare, eflomal, two trainings and the table
@pytest.mark.timeout(600)
def test_the_alignment_recipe_runs_end_to_end_at_tiny_size(tmp_path, monkeypatch, capsys):
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install 'attnmt[align]')")
    from benchmarks import alignment

    root = tmp_path / "repo"
    shutil.copytree(RECIPE, root / "recipes" / "alignment_hansards")
    for config in (root / "recipes" / "alignment_hansards").glob("*.yaml"):  # 10 joined pairs, not 20,000
        config.write_text(config.read_text(encoding="utf-8").replace("count: 20000", "count: 10"), encoding="utf-8")
    gold = _made_up_corpora(root)
    monkeypatch.chdir(root)  # the recipe's commands run from the repository root: its data/ is prepare's default
    out = tmp_path / "results"

    # prepare: the text, the gold sentences unlabelled, eflomal's links of the training pairs
    assert attnmt(["align-prepare", "--src-lang", "en", "--tgt-lang", "fr", "--pretokenize", "hansards",
                   "--tsv", "data/tatoeba/fra-eng.tsv.gz", "--parallel", "data/multi30k/train.en.gz",
                   "data/multi30k/train.fr.gz", "--gold-src", str(gold / "enfr.src"), "--gold-tgt",
                   str(gold / "enfr.tgt"), "--out-dir", "data/align_enfr"]) == 0
    data = root / "data" / "align_enfr"
    n_train = len(gzip.open(data / "train.tsv.gz", "rt", encoding="utf-8").read().splitlines())
    assert n_train == 110
    assert (data / "gold.en").read_text(encoding="utf-8") == (gold / "enfr.src").read_text(encoding="utf-8")
    assert (data / "gold.fr").read_text(encoding="utf-8") == (gold / "enfr.tgt").read_text(encoding="utf-8")
    for links in ("train.en-fr.links", "train.fr-en.links", "train.directional.en-fr.links"):
        assert len((data / links).read_text(encoding="utf-8").splitlines()) == n_train
    # the recipe's configs are align-config's for this folder (then shrunk to 10 joined pairs, as above)
    assert attnmt(["align-config", "--data-dir", "data/align_enfr", "--out-dir", "recipes/alignment_hansards",
                   "--name", "hansards", "--overwrite"]) == 0
    for config in (root / "recipes" / "alignment_hansards").glob("*.yaml"):
        assert config.read_text(encoding="utf-8") == (RECIPE / config.name).read_text(encoding="utf-8"), config.name
        config.write_text(config.read_text(encoding="utf-8").replace("count: 20000", "count: 10"), encoding="utf-8")

    # the guided pair: eflomal's links guide training; the gold sentences are added, 20 times, without links
    guided = _train_pair(root, "guided", "guided")
    events = _log(guided[0])
    added = next(e for e in events if "alignment_test_text" in e)
    assert (added["pairs"], added["copies"]) == (2, 20)
    counts = next(e for e in events if "guided" in e)
    assert counts["unguided"] == 2 * 20 and counts["guided"] == n_train - 8 + 10  # less valid/test, plus joined

    # the unguided pair: the same recipe without guidance (to the guided pair's steps: TINY's max_steps)
    unguided = _train_pair(root, "unguided", "unguided")
    assert not any("align_loss" in e for e in _log(unguided[0]))

    # self-training: a teacher pair labels the training pairs, the self-trained pair learns from them
    teacher = _train_pair(root, "teacher", "teacher")
    assert not any("joined_pairs" in e for e in _log(teacher[0]))
    alignment.main(["self-links", "--model", str(teacher[0]), "--reverse-model", str(teacher[1]), "--layer", "1"])
    assert len((data / "train.self.en-fr.links").read_text(encoding="utf-8").splitlines()) == n_train
    selftrained = _train_pair(root, "selftrained", "selftrained")
    assert any("align_loss" in e for e in _log(selftrained[0]))
    for model_dir in selftrained:  # its last four checkpoints averaged
        assert attnmt(["average", "--model", str(model_dir), "--last", "4"]) == 0

    # the table, one JSON per pair
    capsys.readouterr()
    for name, (en_fr, fr_en), checkpoint in (("guided", guided, "best"), ("unguided", unguided, "best"),
                                             ("selftrained", selftrained, "averaged")):
        baselines = ["--baseline", "diagonal", "--baseline", "eflomal"] if name == "guided" else []
        assert attnmt(["align-table", "--src", str(gold / "enfr.src"), "--tgt", str(gold / "enfr.tgt"), "--gold",
                       str(gold / "enfr.gold"), *baselines, "--model", f"{name}={en_fr},{fr_en}", "--checkpoint",
                       checkpoint, "--out", str(out / f"{name}.json")]) == 0
    table = json.loads((out / "guided.json").read_text(encoding="utf-8"))
    rows = {r["row"]: r for r in table["rows"]}
    # the diagonal links word i to word i: 12 links, 6 of the 10 sure ones, 8 of the 12 possible ones
    assert (rows["diagonal"]["aer"], rows["diagonal"]["precision"], rows["diagonal"]["recall"]) == pytest.approx(
        (round(1 - (6 + 8) / (12 + 10), 4), round(8 / 12, 4), 6 / 10))
    assert {"eflomal intersection", "guided: attention shift agreement", "guided: attention shift-mutual"} <= set(rows)
    selftrained_table = json.loads((out / "selftrained.json").read_text(encoding="utf-8"))
    assert selftrained_table["models"]["selftrained"]["forward"]["checkpoint"] == "averaged"
    assert table["models"]["guided"]["reverse"]["test_sentences"] == 4
    assert table["eflomal_text"] == "the first model's training corpus plus the gold sentences"
    assert not any(r["row"] == "diagonal" for r in selftrained_table["rows"])  # only the baselines asked for

    # the unguided pair's attention per decoder layer, as the recipe reads it
    assert attnmt(["align", "--model", str(unguided[0]), "--reverse-model", str(unguided[1]), "--symmetrize",
                   "agreement", "--layer", "1", "--src", str(gold / "enfr.src"), "--tgt", str(gold / "enfr.tgt"),
                   "--gold", str(gold / "enfr.gold"), "--json", str(out / "unguided_layer1.json")]) == 0
    assert "attention argmax agreement" in json.loads((out / "unguided_layer1.json").read_text(encoding="utf-8"))

    # how long the training sources are, with 10 joined pairs, and the gold's (8 and 4 words)
    alignment.main(["lengths", "--gold-dir", str(gold), "--joined", "10", "--out", str(out / "lengths.json")])
    lengths = json.loads((out / "lengths.json").read_text(encoding="utf-8"))
    assert lengths["training_text"]["sentences"] == n_train
    assert lengths["training_text_with_joined"]["sentences"] == n_train + 10
    assert (lengths["gold"]["sentences"], lengths["gold"]["mean_words"]) == (2, 6.0)

    # where the guided pair misaligns, and its heatmaps
    alignment.main(["why", "--gold-dir", str(gold), "--model", str(guided[0]), "--reverse-model", str(guided[1]),
                    "--method", "shift", "--out", str(out / "why.json")])
    why = json.loads((out / "why.json").read_text(encoding="utf-8"))
    assert why["symmetrization"] == "agreement"
    assert set(why["methods"]["shift"]["against_eflomal_intersection"]) == {"hansards", "held_out"}
    pytest.importorskip("matplotlib", reason="matplotlib draws the recipe's figures")
    alignment.main(["figures", "--gold-dir", str(gold), "--model", str(guided[0]), "--name", "tiny", "--method",
                    "shift", "--n", "1", "--out-dir", str(out)])
    assert [p.name for p in out.glob("align_hansards_tiny_*.png")] == ["align_hansards_tiny_1.png"]


def test_prepare_names_a_missing_gold_set_in_one_line(tmp_path, capsys):
    assert attnmt(["align-prepare", "--src-lang", "en", "--tgt-lang", "fr", "--tsv", str(tmp_path / "x.tsv"),
                   "--gold-src", str(tmp_path / "nowhere" / "enfr.src"), "--gold-tgt", str(tmp_path / "enfr.tgt"),
                   "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere/enfr.src" in err


def test_the_recipe_configs_read_only_what_prepare_writes():
    """No default of the recipe points outside the repository: its data paths are all under data/align_enfr/."""
    from attnmt.config.schema import load_config

    configs = sorted(RECIPE.glob("*.yaml"))
    assert [p.name for p in configs] == [f"{k}_{d}.yaml" for k in ("guided", "selftrained", "teacher", "unguided")
                                         for d in ("en_fr", "fr_en")]
    for path in configs:
        config = load_config(path)
        files = [config.data.train_tsv] + [e[key] for e in config.data.transforms for key in ("src", "tgt", "path")
                                           if key in e]
        assert len(files) >= 3, path.name  # the corpus and the gold sentences at least
        for value in files:
            assert Path(value).parent == ROOT / "data" / "align_enfr", (path.name, value)


def test_the_readme_runs_every_config_of_the_recipe_and_the_steps_tested_here():
    """The README's commands name each config of the folder, and only attnmt align-* and benchmarks.alignment steps
    that the end-to-end test above runs (so a step added to the README without a test here fails)."""
    import re

    readme = (RECIPE / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\$R/(\w+)\.yaml", readme))  # and $R/NAME_$d.yaml in a loop over both directions
    named |= {f"{stem}_{d}" for stem in re.findall(r"\$R/(\w+)_\$d\.yaml", readme) for d in ("en_fr", "fr_en")}
    assert named == {p.stem for p in RECIPE.glob("*.yaml")}
    steps = set(re.findall(r"python -m benchmarks\.alignment ([\w-]+)", readme))
    assert steps == {"self-links", "why", "lengths", "figures"}
    assert set(re.findall(r"attnmt (align-\w+)", readme)) == {"align-prepare", "align-config", "align-table"}
