"""The alignment workflow for any language pair (attnmt align-prepare, align-config, align-table), on a
German-Romanian pair of made-up corpora and a handmade gold set: pretokenization that fits the gold, the
gold's text never guided, the configs of the template, and the table of any gold set."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnmt.cli import main as attnmt
from attnmt.data.pretokenize import gold_changes, pretokenizer, words
from attnmt.errors import UserError
from tests.repository.test_recipe_alignment import word_for_word

ROOT = Path(__file__).resolve().parents[2]
DE_RO = {"der": "cel", "hund": "câine", "sieht": "vede", "die": "cea", "katze": "pisică", "und": "și",
         "ein": "un", "kleiner": "mic", "isst": "mănâncă", "fisch": "pește", "bzw.": "sau", "EU-Bürger": "UE-cetățean"}
# Two gold pairs, tokenized as the gold is (case kept, bzw. and EU-Bürger whole), 1-based links, i-j sure, ipj possible
GOLD_DE = ["Der Hund sieht bzw. isst ein Fisch .", "die Katze und der EU-Bürger ."]
GOLD_RO = ["cel câine mănâncă sau vede un pește .", "cea pisică și cel UE-cetățean ."]
GOLD_LINKS = ["1-1 2-2 3-5 4-4 5-3 6-6 7-7 8p8", "1-1 2-2 3p3 4-4 5-5 6-6"]
TINY = ["data.valid_size=4", "data.test_size=4", "data.tokenizer=word", "model.d_model=16", "model.n_heads=2",
        "model.ff_size=32", "model.enc_layers=1", "model.dec_layers=2", "train.batch_tokens=150", "train.max_steps=4",
        "train.max_time_s=null", "train.warmup_steps=2", "train.valid_every=2", "train.valid_bleu_sample=0",
        "train.save_every=2", "train.log_every=1", "train.progress=false", "train.tensorboard=false",
        "train.precision=fp32", "decode.beam=2"]


@pytest.mark.parametrize("text, lang, expected", [
    ("Die EU-Bürger, d.h. die Bürger (bzw. z.B. H-0252) sind 3,5% froh.", "de",
     "Die EU-Bürger , d.h. die Bürger ( bzw. z.B. H-0252 ) sind 3,5 % froh ."),
    ("Ende... usw.", "de", "Ende ... usw."),
    ("I don't know the minister's \"plan\", Mr. Smith.", "en",
     "I do n't know the minister 's \" plan \" , Mr. Smith ."),
    ("C'est l'heure, aujourd'hui !", "fr", "C' est l' heure , aujourd' hui !"),
    ("Cross-border a/b «citat»: l'om", "ro", "Cross-border a / b « citat » : l'om"),
])
def test_words_splits_punctuation_off_word_edges_and_keeps_what_the_language_keeps(text, lang, expected):
    assert words(text, lang) == expected
    assert words(expected, lang) == expected  # tokenized text stays as it is


def test_the_check_lists_the_gold_lines_a_pretokenizer_would_change():
    gold = ["die EU-Bürger , bzw. die Bürger .", "Ende.", "it 's H-0252 ."]
    assert gold_changes(gold[:2], "words", "de") == [(2, "Ende.", "Ende .")]
    assert gold_changes(gold[2:], "words", "de") == [(1, "it 's H-0252 .", "it ' s H-0252 .")]
    assert gold_changes(gold[2:], "words", "en") == []
    assert gold_changes(["C'est la fin ."], "hansards", "fr") == [(1, "C'est la fin .", "ce est la fin .")]
    assert gold_changes(["a  b"], "none", "de") == []
    with pytest.raises(UserError, match="knows en and fr only, not 'de'.*--pretokenize words"):
        pretokenizer("hansards", "de")


def _sentences(n: int, seed: int) -> list[tuple[str, str]]:
    """German and its word-for-word Romanian, cased and punctuated as raw text."""
    return word_for_word(DE_RO, n, seed, longest=6)


def _corpora(root: Path) -> dict[str, Path]:
    """A Romanian-first TSV, two line-aligned gzip files, and the gold set; the TSV holds the gold's second
    source sentence and the files its first target sentence, raw."""
    root.mkdir(parents=True, exist_ok=True)
    tsv = _sentences(50, 1) + [("Die Katze und der EU-Bürger.", "Cea pisică și un câine.")]
    files = _sentences(30, 2) + [("Ein Hund isst.", "Cel câine mănâncă sau vede un pește.")]
    paths = {"tsv": root / "ro-de.tsv", "de": root / "train.de.gz", "ro": root / "train.ro.gz"}
    paths["tsv"].write_text("".join(f"{ro}\t{de}\n" for de, ro in tsv), encoding="utf-8")
    for lang, k in (("de", 0), ("ro", 1)):
        with gzip.open(paths[lang], "wt", encoding="utf-8") as f:
            f.writelines(p[k] + "\n" for p in files)
    for name, lines in (("gold.de", GOLD_DE), ("gold.ro", GOLD_RO), ("gold.links", GOLD_LINKS)):
        paths[name] = root / name
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def _prepare(paths: dict[str, Path], out: Path, *extra: str) -> int:
    return attnmt(["align-prepare", "--src-lang", "de", "--tgt-lang", "ro", "--tsv-swapped", str(paths["tsv"]),
                   "--parallel", str(paths["de"]), str(paths["ro"]), "--gold-src", str(paths["gold.de"]),
                   "--gold-tgt", str(paths["gold.ro"]), "--out-dir", str(out), *extra])


def test_align_prepare_check_reports_and_writes_nothing(tmp_path, capsys):
    paths = _corpora(tmp_path / "corpora")
    assert _prepare(paths, tmp_path / "out", "--check") == 0
    out = capsys.readouterr().out
    assert "changes 0 of 2 gold lines" in out and not (tmp_path / "out").exists()
    assert attnmt(["align-prepare", "--src-lang", "de", "--tgt-lang", "ro", "--gold-src", str(paths["gold.de"]),
                   "--gold-tgt", str(paths["gold.ro"]), "--pretokenize", "hansards", "--check"]) == 2
    assert "knows en and fr only" in capsys.readouterr().err


def test_align_prepare_pretokenized_keeps_the_text_as_it_is(tmp_path):
    """--pretokenized: the corpora's words are the gold's already; only runs of spaces are collapsed (and the
    gold's sentences still leave the training text)."""
    paths = _corpora(tmp_path / "corpora")
    data = tmp_path / "out"
    assert _prepare(paths, data, "--pretokenized", "--no-links") == 0
    pairs = gzip.open(data / "train.tsv.gz", "rt", encoding="utf-8").read().splitlines()
    raw = [line.split("\t") for line in paths["tsv"].read_text(encoding="utf-8").splitlines()]
    assert pairs[0] == f"{raw[0][1]}\t{raw[0][0]}" and pairs[0].endswith(".")  # Romanian-first TSV, swapped
    assert not pairs[0].endswith(" .")
    manifest = json.loads((data / "align.json").read_text(encoding="utf-8"))
    # the gold sentences leave by their letters and digits, though the raw lines keep their punctuation attached
    assert (manifest["pretokenize"], manifest["links"], manifest["pairs"]["equal_to_gold"]) == ("none", None, 2)
    assert not list(data.glob("*.links"))


def test_a_new_pair_from_corpus_files_to_the_table(tmp_path, capsys):
    """German-Romanian end to end at tiny size: prepare (the gold's sentences dropped from the training text, a
    test set written), the configs of the template, a guided pair trained from them, the table with only the
    baselines asked for and BLEU on the test set."""
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install 'attnmt[align]')")
    paths = _corpora(tmp_path / "corpora")
    data = tmp_path / "data" / "align_dero"
    assert _prepare(paths, data, "--test", str(paths["de"]), str(paths["ro"]), "--test-lines", "5") == 0
    pairs = gzip.open(data / "train.tsv.gz", "rt", encoding="utf-8").read().splitlines()
    manifest = json.loads((data / "align.json").read_text(encoding="utf-8"))
    assert manifest["pairs"] == {"read": 82, "empty": 0, "equal_to_gold": 2, "kept": 80}
    assert len(pairs) == 80
    assert not any(p.split("\t")[0].lower() == GOLD_DE[1].lower() for p in pairs)
    assert "eu-bürger" in " ".join(pairs).lower() and " bzw. " in " ".join(pairs)  # kept whole, as the gold has them
    for name in ("train.de-ro.links", "train.ro-de.links", "train.directional.de-ro.links"):
        assert len((data / name).read_text(encoding="utf-8").splitlines()) == 80
    assert (data / "gold.de").read_text(encoding="utf-8") == paths["gold.de"].read_text(encoding="utf-8")

    configs = tmp_path / "configs"
    assert attnmt(["align-config", "--data-dir", str(data), "--out-dir", str(configs), "--name", "dero",
                   "--kind", "guided"]) == 0
    assert sorted(p.name for p in configs.iterdir()) == ["guided_de_ro.yaml", "guided_ro_de.yaml"]
    models = []
    for direction in ("de_ro", "ro_de"):
        config = configs / f"guided_{direction}.yaml"
        config.write_text(config.read_text(encoding="utf-8").replace("count: 20000", "count: 5"), encoding="utf-8")
        models.append(tmp_path / "models" / direction)
        assert attnmt(["train", str(config), "--model-dir", str(models[-1]),
                       *[x for kv in TINY for x in ("--set", kv)]]) == 0
    events = [json.loads(line) for line in (models[0] / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    counts = next(e for e in events if "guided" in e)
    assert (counts["guided"], counts["unguided"]) == (80 - 8 + 5, 2 * 20)  # the gold's copies never guided

    # the test set's references: the forward model's own beam-5 output, upper-cased (BLEU 100 when lowercased)
    test_de = data / "test.de"
    assert len(test_de.read_text(encoding="utf-8").splitlines()) == 5
    assert attnmt(["translate", "--model", str(models[0]), "--beam", "5", "--input", str(test_de), "--output",
                   str(tmp_path / "hyp.ro")]) == 0
    own = (tmp_path / "hyp.ro").read_text(encoding="utf-8")
    assert len(own.split()) >= 4 * 5, own  # enough 4-grams for a BLEU of 100
    (tmp_path / "ref.ro").write_text(own.upper(), encoding="utf-8")

    capsys.readouterr()
    out = tmp_path / "table.json"
    assert attnmt(["align-table", "--src", str(paths["gold.de"]), "--tgt", str(paths["gold.ro"]), "--gold",
                   str(paths["gold.links"]), "--model", f"dero={models[0]},{models[1]}", "--baseline", "diagonal",
                   "--test-src", str(test_de), "--test-tgt", str(tmp_path / "ref.ro"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    table = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["row"]: r for r in table["rows"]}
    # diagonal: word j to word j in both pairs (equal lengths): 14 links; sure hits 5 + 5 of 7 + 5 sure links,
    # possible hits 6 + 6 of 8 + 6 possible links: AER = 1 - (10 + 12) / (14 + 12)
    assert (rows["diagonal"]["aer"], rows["diagonal"]["precision"], rows["diagonal"]["recall"]) == pytest.approx(
        (round(1 - 22 / 26, 4), round(12 / 14, 4), round(10 / 12, 4)))
    assert not any(r.startswith("eflomal") for r in rows)  # only the baselines asked for
    assert {"dero: attention shift agreement", "dero: attention shift-mutual"} <= set(rows)
    assert table["models"]["dero"]["reverse"]["test_sentences"] == 4
    forward, reverse = (table["models"]["dero"][k]["test_files"] for k in ("forward", "reverse"))
    assert (forward["bleu"], forward["sentences"]) == (100.0, 5)
    assert {"case:lc", "tok:13a"} <= set(forward["bleu_signature"].split("|"))
    assert (reverse["src"], reverse["ref"]) == (str(tmp_path / "ref.ro"), str(test_de))  # the pair swapped
    assert "| dero forward | 4 |" in printed and "| 100.00 (5) |" in printed


def test_align_table_names_a_bad_model_spec_in_one_line(tmp_path, capsys):
    paths = _corpora(tmp_path / "corpora")
    assert attnmt(["align-table", "--src", str(paths["gold.de"]), "--tgt", str(paths["gold.ro"]), "--gold",
                   str(paths["gold.links"]), "--model", str(tmp_path)]) == 2
    assert "give NAME=DIR" in capsys.readouterr().err


def test_a_corpus_pair_equal_to_a_gold_sentence_is_never_guided(tmp_path):
    """The trap: a gold pair's text also stands on a line of the training corpus, whose links file gives it
    links. Training must not guide it there either, and says how many."""
    corpus = [(words(de, "de"), words(ro, "ro")) for de, ro in _sentences(40, 3)] + [(GOLD_DE[1], GOLD_RO[1])]
    root = tmp_path / "d"
    root.mkdir()
    (root / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in corpus), encoding="utf-8")
    (root / "train.links").write_text("".join(" ".join(f"{k}-{k}" for k in range(min(len(s.split()),
                                      len(t.split())))) + "\n" for s, t in corpus), encoding="utf-8")
    for name, lines in (("gold.de", GOLD_DE), ("gold.ro", GOLD_RO)):
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("""name: trap
data: {train_tsv: d/train.tsv, tokenizer: word, lowercase: true, max_len: 40,
        transforms: [{name: align_text, src: d/gold.de, tgt: d/gold.ro, copies: 3},
                     {name: links, path: d/train.links}]}
model: {type: transformer, d_model: 16, n_heads: 2, ff_size: 32, enc_layers: 1, dec_layers: 2}
train: {max_steps: 1, batch_tokens: 200, progress: false, tensorboard: false, valid_bleu_sample: 0,
         guided_alignment: {weight: 1.0, layer: 1, head: 0}}
""", encoding="utf-8")
    assert attnmt(["train", str(config), "--model-dir", str(tmp_path / "m")]) == 0
    log = (tmp_path / "m" / "train_log.jsonl").read_text(encoding="utf-8")
    events = [json.loads(line) for line in log.splitlines()]
    assert next(e for e in events if "unguided_equal_to_align_text" in e)["unguided_equal_to_align_text"] == 1
    counts = next(e for e in events if "guided" in e)
    assert (counts["guided"], counts["unguided"]) == (40, 1 + 2 * 3)


@pytest.mark.parametrize("recipe, name, src, tgt, pretokenize, user_dict", [
    ("alignment_hansards", "hansards", "en", "fr", "hansards", None),
    ("alignment_chinese", "zhen", "zh", "en", "jieba", "user_dict.txt")])
def test_the_recipe_configs_are_the_template_for_their_pair(recipe, name, src, tgt, pretokenize, user_dict):
    """recipes/alignment_hansards/ is align-config's output for en-fr read from data/align_enfr/ (pretokenized the
    Hansards way), recipes/alignment_chinese/ for zh-en from data/align_zhen/ (segmented by jieba with the recipe's
    user dictionary, which align-prepare copied there)."""
    from attnmt.align.template import KINDS, config_text

    folder = ROOT / "recipes" / recipe
    for kind in KINDS:
        for a, b in ((src, tgt), (tgt, src)):
            expected = config_text(kind, a, b, f"../../data/align_{src}{tgt}", f"{name}_{kind}_{a}_{b}",
                                   reverse=a == tgt, pretokenize=pretokenize, user_dict=user_dict)
            assert (folder / f"{kind}_{a}_{b}.yaml").read_text(encoding="utf-8") == expected, f"{kind}_{a}_{b}"


def test_align_config_fills_in_the_yaml_template(tmp_path):
    """The recipe's design is the YAML file: a value changed there is what align-config writes."""
    import yaml

    from attnmt.align.template import TEMPLATE, config_text, read_template

    assert TEMPLATE.resolve() == (ROOT / "recipes" / "alignment_template" / "template.yaml").resolve()
    template = read_template()
    template["model"] = template["model"].replace("d_model: 256", "d_model: 128")
    text = config_text("guided", "de", "en", "../data", "x", reverse=False, template=template)
    config = yaml.safe_load(text)
    assert config["model"]["d_model"] == 128 and config["train"]["guided_alignment"]["row"] == "shift"
    assert config["data"]["transforms"][-1] == {"name": "links", "path": "../data/train.de-en.links"}
    assert "German -> English" in text.splitlines()[0] and config["data"]["pretokenize"] == "words"
    unguided = yaml.safe_load(config_text("unguided", "en", "de", "../data", "x", reverse=True))
    assert "guided_alignment" not in unguided["train"] and unguided["data"]["tsv_src_column"] == 1
