"""Config loading: types, ranges, unknown keys, overrides, relative paths."""

import re
from pathlib import Path

import pytest
import yaml

from attnmt.config.schema import Config, load_config
from attnmt.errors import UserError


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_and_overrides(tmp_path):
    path = write(tmp_path, "model:\n  type: seq2seq\ntrain:\n  lr: 0.002\n")
    config = load_config(path, ["train.batch_tokens=123", "model.cell=gru", "decode.length_penalty=0"])
    assert isinstance(config, Config)
    assert config.model.type == "seq2seq" and config.model.cell == "gru"
    assert config.train.lr == 0.002 and config.train.batch_tokens == 123
    assert config.decode.length_penalty == 0.0


def test_unknown_key_names_closest(tmp_path):
    path = write(tmp_path, "train:\n  learning_rat: 0.1\n")
    with pytest.raises(UserError, match="unknown key 'train.learning_rat'"):
        load_config(path)
    path = write(tmp_path, "model:\n  hiden_size: 3\n")
    with pytest.raises(UserError, match="did you mean 'model.hidden_size'"):
        load_config(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("model:\n  type: lstm\n", r"model.type='lstm'.*allowed: 'seq2seq' \| 'rnnsearch' \| 'transformer'"),
        ("train:\n  batch_tokens: lots\n", r"train.batch_tokens='lots'.*allowed: int"),
        ("model:\n  dropout: 1.5\n", r"model.dropout=1.5 is out of range"),
        ("decode:\n  beam: 0\n", r"decode.beam=0 is out of range"),
        ("decode:\n  batch_size: 0\n", r"decode.batch_size=0 is out of range"),
        ("model:\n  tie_embeddings: 1\n", r"model.tie_embeddings=1.*allowed: bool"),
        ("- a\n- b\n", r"must be a mapping"),
    ],
)
def test_bad_values_name_key_value_and_allowed(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        load_config(write(tmp_path, text))


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(UserError, match="not valid YAML"):
        load_config(write(tmp_path, "train: [1, 2\n"))
    with pytest.raises(UserError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_relative_paths_resolve_against_config_folder(tmp_path):
    sub = tmp_path / "cfg"
    sub.mkdir()
    path = sub / "c.yaml"
    path.write_text("data:\n  train_src: ../corpus/train.de\n  train_tgt: /abs/train.en\n", encoding="utf-8")
    config = load_config(path)
    assert config.data.train_src == str((tmp_path / "corpus" / "train.de").resolve())
    assert config.data.train_tgt == "/abs/train.en"


def test_bad_override_syntax(tmp_path):
    with pytest.raises(UserError, match="expected key=value"):
        load_config(write(tmp_path, ""), ["train.lr"])


ROOT = Path(__file__).resolve().parents[2]
# The recipes' training configs (a study spec lists `models:`; a training config has one `model:` section,
# the alignment template holds its text).
RECIPE_CONFIGS = sorted(p for p in ROOT.glob("recipes/*/*.yaml")
                        if isinstance((yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("model"), dict))


def test_the_recipes_ship_training_configs():
    assert {p.parent.name for p in RECIPE_CONFIGS} >= {"multi30k", "chinese"}


@pytest.mark.parametrize("path", RECIPE_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recipe_configs_load_name_their_languages_and_read_data_under_the_repository(path):
    from attnmt.models import build_model

    config = load_config(path)
    src, tgt = config.data.src_lang, config.data.tgt_lang
    assert config.name.endswith(path.stem) and f"{src}_{tgt}" in config.name, (config.name, src, tgt)
    for split, lang in (("train_src", src), ("train_tgt", tgt), ("test_src", src), ("test_tgt", tgt)):
        value = getattr(config.data, split)
        assert value is None or f".{lang}." in Path(value).name or value.endswith(".tsv.gz"), (split, value)
    for key in ("train_src", "train_tgt", "train_tsv", "valid_src", "valid_tgt", "test_src", "test_tgt"):
        value = getattr(config.data, key)  # where `attnmt data NAME data/NAME` or the recipe's README writes it
        assert value is None or Path(value).is_relative_to(ROOT / "data"), (key, value)
    build_model(config.model, 100, 100)


@pytest.mark.parametrize("model, message", [
    ("type: transformer\n  input_feeding: true", "model.input_feeding applies to rnnsearch, not transformer"),
    ("type: transformer\n  cell: gru", "model.cell applies to seq2seq and rnnsearch, not transformer"),
    ("type: rnnsearch\n  reverse_source: true", "model.reverse_source applies to seq2seq, not rnnsearch"),
    ("type: seq2seq\n  score: dot", "model.score applies to rnnsearch, not seq2seq"),
    ("score: dot\n  attn_size: 8", "model.attn_size applies to score additive and additive_coverage, not dot"),
    ("input_feeding: true", "model.input_feeding applies to decoder luong, not bahdanau"),
    ("score: dott", "model.score='dott' is unknown; did you mean 'dot'?"),
    ("type: rnnsearh", "model.type='rnnsearh' is unknown; did you mean 'rnnsearch'?"),
    ("attention: luong_dot\n  decoder: bahdanau\n  score: general", "means model.score: dot, but model.score is"),
])
def test_a_key_the_model_does_not_read_is_refused(tmp_path, model, message):
    path = tmp_path / "c.yaml"
    path.write_text(f"model:\n  {model}\n", encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(message)):
        load_config(path)


def test_a_model_folder_that_lists_every_model_key_at_its_default_loads(tmp_path):
    """An older config.yaml lists the keys of every model type; those left at their defaults say nothing."""
    every = {"type": "transformer", "cell": "lstm", "emb_size": 256, "hidden_size": 256, "reverse_source": False,
             "decoder": "bahdanau", "score": "additive", "attention": None, "d_model": 16, "n_heads": 2}
    config = load_config(write(tmp_path, yaml.safe_dump({"model": every})))
    assert (config.model.type, config.model.d_model, config.model.n_heads) == ("transformer", 16, 2)
    assert not hasattr(config.model, "cell")  # the model section holds the keys its type reads, no others
    with pytest.raises(UserError, match=re.escape("model.emb_size applies to seq2seq and rnnsearch, not transformer")):
        load_config(write(tmp_path, yaml.safe_dump({"model": {**every, "emb_size": 32}})))


def test_the_older_attention_key_is_read_as_decoder_and_score(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    for old, decoder, score in [("bahdanau", "bahdanau", "additive"), ("luong_dot", "luong", "dot"),
                                ("luong_general", "luong", "general"), ("luong_concat", "luong", "additive")]:
        path.write_text(f"model:\n  attention: {old}\n", encoding="utf-8")
        model = load_config(path).model
        assert (model.decoder, model.score, model.attention) == (decoder, score, None)
        note = capsys.readouterr().err
        assert (f"model.decoder: {decoder} + model.score: {score}" in note) == (old != "bahdanau")


# --- a model's name is one folder name; YAML is read within bounds --------------------------------

@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".hidden", "", "x\\y"])
def test_a_model_name_is_one_path_component(tmp_path, name):
    with pytest.raises(UserError, match=r"name=.* is not a folder name \(train writes models/NAME\)"):
        load_config(write(tmp_path, f"name: {name!r}\n"))


def lol_bomb(levels: int, width: int = 10, flow: bool = False) -> str:
    """Aliases to aliases: ``width ** levels`` values once expanded, in a few hundred bytes."""
    anchors = [f"&l0 [{', '.join(['lol'] * width)}]"]
    anchors += [f"&l{k} [{', '.join([f'*l{k - 1}'] * width)}]" for k in range(1, levels)]
    if flow:
        return "[" + ", ".join(anchors) + "]"
    return "data:\n  transforms:\n" + "".join(f"    - {{name: lol{k}, v: {a}}}\n" for k, a in enumerate(anchors))


def test_an_alias_bomb_in_the_data_transforms_is_refused_before_it_expands(tmp_path):
    with pytest.raises(UserError, match=r"c.yaml:\d+: its aliases expand to more than 100,000 values"):
        load_config(write(tmp_path, lol_bomb(6)))  # a million values


def test_an_alias_bomb_given_through_set_is_refused(tmp_path):
    path = write(tmp_path, "train:\n  lr: 0.001\n")
    with pytest.raises(UserError, match=r"^--set data.transforms: its aliases expand to more than 100,000"):
        load_config(path, [f"data.transforms={lol_bomb(9, 9, flow=True)}"])  # the billion laughs


def test_an_alias_inside_the_value_it_names_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"the alias \*a is inside the value it names"):
        load_config(write(tmp_path, "data:\n  transforms: &a [*a]\n"))


def test_a_deep_nesting_is_one_line_not_a_recursion_error(tmp_path):
    with pytest.raises(UserError, match="nests lists and mappings more than 64 levels deep"):
        load_config(write(tmp_path, "data:\n  transforms: " + "[" * 10_000 + "]" * 10_000 + "\n"))
    with pytest.raises(UserError, match="^--set data.transforms nests lists and mappings more than 64"):
        load_config(write(tmp_path, ""), ["data.transforms=" + "[" * 10_000 + "]" * 10_000])


def test_a_config_over_a_mebibyte_is_refused_unread(tmp_path):
    with pytest.raises(UserError, match=r"is over 1 MiB, far more than a config needs"):
        load_config(write(tmp_path, "# padding\n" * 110_000))
