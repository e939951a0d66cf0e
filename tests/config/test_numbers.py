"""Every number is checked where it is read: each numeric config key declares its range (attnmt.config.typed.ranged)
and each numeric command-line option has one (attnmt.cli.common.OPTION_RANGES); NaN, infinities and values
past a bound are one line naming the key or option, never a traceback later or a blame on another key; a
model too large for the machine's memory is refused with an estimate, naming the size to lower; word links
are ASCII digits."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest
import torch

from attnmt.align.link_sets import parse_gold
from attnmt.cli import build_parser, main
from attnmt.cli.common import OPTION_RANGES, numeric_options
from attnmt.config import model_size
from attnmt.config.schema import (
    MODEL_CONFIGS,
    DataConfig,
    DecodeConfig,
    GuidedAlignmentConfig,
    TrainConfig,
    load_config,
)
from attnmt.data.pharaoh import parse_links, read_links
from attnmt.errors import UserError
from attnmt.models import build_model, model_config

SECTIONS = {"data.": DataConfig, "train.": TrainConfig, "train.guided_alignment.": GuidedAlignmentConfig,
            "decode.": DecodeConfig, **{f"model[{name}].": cls for name, cls in MODEL_CONFIGS.items()}}


def number_type(tp) -> type | None:
    """int or float for an int / float / Optional[...] annotation, else None."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] if typing.get_origin(tp) is typing.Union else [tp]
    return args[0] if len(args) == 1 and args[0] in (int, float) else None


def numeric_keys() -> list[tuple[str, str, type, object]]:
    """(key as --set writes it, model type or "", int or float, its declared range) of every numeric config key."""
    found = {}
    for prefix, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = number_type(hints[f.name])
            if kind is None:
                continue
            model_type = prefix[6:-2] if prefix.startswith("model[") else ""
            key = f"model.{f.name}" if model_type else prefix + f.name
            found.setdefault(key, (key, model_type, kind, f.metadata.get("range")))
    return sorted(found.values(), key=lambda k: k[0])


KEYS = numeric_keys()


def test_every_numeric_config_key_declares_its_range():
    assert len(KEYS) > 50
    assert [key for key, _, _, declared in KEYS if declared is None] == []
    assert all(declared.high is not None for key, _, kind, declared in KEYS if kind is int), "ints need a ceiling"


def load_with(tmp_path: Path, model_type: str, *overrides: str):
    path = tmp_path / "c.yaml"
    path.write_text(f"model:\n  type: {model_type or 'rnnsearch'}\n", encoding="utf-8")
    return load_config(path, list(overrides))


@pytest.mark.parametrize("key, model_type", [(k, m) for k, m, kind, _ in KEYS if kind is float])
@pytest.mark.parametrize("text, shown", [(".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf")])
def test_nan_and_infinities_are_refused_naming_the_key(tmp_path, key, model_type, text, shown):
    with pytest.raises(UserError, match=rf"^--set {key}={text}: {key}={shown} is not a finite number; allowed: "):
        load_with(tmp_path, model_type, f"{key}={text}")


def past_the_bounds(declared) -> list:
    """A value just below the range and one just above it (where it has those bounds)."""
    step = 1 if isinstance(declared.low if declared.low is not None else declared.high, int) else 1e-6
    values = []
    if declared.low is not None:
        values.append(declared.low if declared.above else declared.low - step)
    if declared.high is not None:
        values.append(declared.high if declared.below else declared.high + step)
    return values


@pytest.mark.parametrize("key, model_type, declared", [(k, m, d) for k, m, _, d in KEYS])
def test_values_past_a_bound_are_refused_naming_the_key(tmp_path, key, model_type, declared):
    for value in past_the_bounds(declared):
        with pytest.raises(UserError, match=rf"^--set {key}={value}: {key}={value!r} is out of range; allowed: "
                                            rf"{declared.describe()}"):
            load_with(tmp_path, model_type, f"{key}={value}")


@pytest.mark.parametrize("overrides, message", [
    (["train.lr=.nan"], r"train.lr=nan is not a finite number; allowed: > 0.0 and <= 10.0"),
    (["train.clip_grad_norm=.nan"], r"train.clip_grad_norm=nan is not a finite number"),  # not "lower train.lr"
    (["train.label_smoothing=.nan"], r"train.label_smoothing=nan is not a finite number"),
    (["train.scheduler=noam", "train.warmup_steps=-1"], r"train.warmup_steps=-1 is out of range; allowed: >= 0"),
    (["train.scheduler=noam", "train.warmup_steps=0"], r"train.warmup_steps=0 is out of range for train.scheduler "
                                                       r"noam; allowed: >= 1"),
    (["train.seed=1180591620717411303424"], r"train.seed=1180591620717411303424 is out of range"),
    (["data.train=[{src: a, tgt: b, weight: .inf}]"],
     r"data.train\[0\].weight=inf must be a number above 0, not NaN or infinite"),
])
def test_the_keys_that_crashed_later_are_refused_when_read(tmp_path, overrides, message):
    with pytest.raises(UserError, match=message) as info:
        load_with(tmp_path, "", *overrides)
    assert "\n" not in str(info.value)


def test_a_schedule_without_warm_up_other_than_noam_may_have_none(tmp_path):
    assert load_with(tmp_path, "", "train.scheduler=cosine", "train.warmup_steps=0").train.warmup_steps == 0


# --- the model's size ------------------------------------------------------------------------------

def test_a_model_larger_than_any_memory_is_refused_with_an_estimate_naming_the_key(tmp_path):
    """hidden_size 10,000,000: the encoder's two LSTM directions alone have 2 x 4 H^2 = 8e14 weights."""
    with pytest.raises(UserError) as info:
        load_with(tmp_path, "", "model.hidden_size=10000000")
    found = re.fullmatch(r"--set model.hidden_size=10000000: model.hidden_size=10000000 would need about ([\d,]+) GB "
                         r"of memory for its weights \(([\d,]+) parameters\), more than this machine has; choose a "
                         r"smaller model.hidden_size", str(info.value))
    assert found, str(info.value)
    weights = int(found.group(2).replace(",", ""))
    assert weights > 8 * 10**14
    assert int(found.group(1).replace(",", "")) == round(4 * weights / 1e9)


@pytest.mark.parametrize("model_type, sizes, blamed", [
    ("rnnsearch", {"hidden_size": 2_000}, "hidden_size"),
    ("seq2seq", {"emb_size": 20_000, "hidden_size": 300}, "emb_size"),
    ("transformer", {"d_model": 64, "ff_size": 100_000}, "ff_size"),
    ("transformer", {"enc_layers": 100, "dec_layers": 2, "d_model": 64}, "enc_layers"),
])
def test_the_key_that_makes_the_model_too_large_is_the_one_named(monkeypatch, model_type, sizes, blamed):
    """On a machine of 10 MB (2.5 million weights) models of 10 to 40 million weights, each large by one key."""
    monkeypatch.setattr(model_size, "machine_memory", lambda: 10**7)
    cfg = model_config(model_type, **sizes)
    with pytest.raises(UserError, match=rf"^config: model.{blamed}={sizes[blamed]} would need about [\d,]+ MB "):
        build_model(cfg, 1000, 1000)


@pytest.mark.parametrize("model_type, sizes", [
    ("rnnsearch", {}), ("rnnsearch", {"emb_size": 8, "hidden_size": 300, "enc_layers": 2, "dec_layers": 2}),
    ("rnnsearch", {"hidden_size": 64, "enc_hidden_size": 256, "attn_size": 512}), ("seq2seq", {"feed_context": True}),
    ("seq2seq", {"emb_size": 512, "hidden_size": 8}), ("transformer", {}),
    ("transformer", {"d_model": 8, "n_heads": 1, "ff_size": 4, "enc_layers": 3, "dec_layers": 2}),
])
@pytest.mark.parametrize("vocab", [8, 5000])
def test_the_screen_bounds_and_the_count_equals_the_built_models_weights(model_type, sizes, vocab):
    """The cheap bound that lets most configs skip the count is never below the count; the count on the meta
    device is the number of weights of the model built for real."""
    cfg = model_config(model_type, **sizes)
    built = sum(p.numel() for p in build_model(cfg, vocab, vocab + 3).parameters())
    assert model_size.count_parameters(cfg, vocab, vocab + 3) == built
    assert model_size.upper_bound(cfg, vocab, vocab + 3) >= built
    assert next(build_model(cfg, vocab, vocab).parameters()).device == torch.device("cpu")


# --- the command line ------------------------------------------------------------------------------

def test_every_numeric_option_has_a_range():
    commands = build_parser()._subparsers._group_actions[0].choices
    missing = [f"{name} {action.option_strings or action.dest}" for name, command in commands.items()
               for action in numeric_options(command) if action.dest not in OPTION_RANGES]
    assert missing == []
    assert len([a for c in commands.values() for a in numeric_options(c)]) > 40


BIG = str(2**70)


@pytest.mark.parametrize("argv, message", [
    (["translate", "--model", "M", "--length-penalty", "nan"],
     "translate --length-penalty: length_penalty=nan is not a finite number; allowed: >= 0.0 and <= 10.0"),
    (["translate", "--model", "M", "--coverage-penalty", "inf"], "translate --coverage-penalty: coverage_penalty=inf"),
    (["translate", "--model", "M", "--min-len", BIG], f"translate --min-len: min_len={BIG} is out of range"),
    (["translate", "--model", "M", "--max-len", BIG], f"translate --max-len: max_len={BIG} is out of range"),
    (["translate", "--model", "M", "--ensemble-weights", "1", "nan"], "--ensemble-weights: ensemble_weights=nan"),
    (["evaluate", "--model", "M", "--src", "s", "--ref", "r", "--bootstrap", BIG], f"bootstrap={BIG} is out of range"),
    (["evaluate", "--model", "M", "--src", "s", "--ref", "r", "--length-edges", "1", BIG], f"length_edges={BIG}"),
    (["align", "--src", "s", "--tgt", "t", "--threshold", "nan"], "align --threshold: threshold=nan"),
    (["serve", "--model", "M", "--max-wait-ms", "inf"], "serve --max-wait-ms: max_wait_ms=inf is not a finite"),
    (["serve", "--model", "M", "--threads", "0"], "serve --threads: threads=0 is out of range; allowed: >= 1"),
    (["serve", "--model", "M", "--port", "70000"], "serve --port: port=70000 is out of range"),
    (["prepare", "c.yaml", "--workers", BIG], f"prepare --workers: workers={BIG} is out of range"),
])
def test_numbers_on_the_command_line_are_checked_before_any_work(capsys, argv, message):
    assert main(argv) == 2  # before any file is read: M, s, r and c.yaml do not exist
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnmt: error: ") and message in err, err


# --- word links ------------------------------------------------------------------------------------

@pytest.mark.parametrize("item", ["١-0", "0-٣", "²-1", "1-１"])  # Arabic-Indic, superscript, fullwidth digits
def test_links_are_ascii_digits(tmp_path, item):
    with pytest.raises(ValueError, match="ASCII digits"):
        parse_links(f"0-0 {item}")
    with pytest.raises(ValueError, match="ASCII digits"):
        parse_gold(f"1-1 {item.replace('0', '1')}")
    path = tmp_path / "links.txt"
    path.write_text(f"0-0\n{item}\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{path}:2: not a Pharaoh link i-j .*ASCII digits"):
        read_links(path)
    assert parse_links("0-0 12-3") == {(0, 0), (12, 3)}
