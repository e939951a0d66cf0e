"""The decoding options, defined once (attnmt.config.decoding.DecodeOptions): checked when built, refused in the same
line through Python and the command line and as a 422 naming the field through the server, and read by every place
that takes them (the config's decode section, the CLI's flags, the server's request and response) from the field
list, so that a new option cannot be forgotten in one of them."""

from __future__ import annotations

import dataclasses
import math
import typing
import warnings

import pytest

import attnmt
from attnmt.cli import build_parser, main
from attnmt.config.decoding import DecodeOptions, OptionError, config_key, option_fields
from attnmt.config.schema import DecodeConfig
from attnmt.decode.sampling import Sampling
from attnmt.errors import UserError

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
with warnings.catch_warnings():  # newer Starlette warns, on import, that its TestClient will leave httpx
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

from attnmt.serve import create_app  # noqa: E402
from attnmt.serve.schema import Hypothesis, TranslateRequest, Translation  # noqa: E402

SENTENCE = "gupo pelido duno gute"  # from the synthetic language the tiny model learned
FIELDS = {f.name: f for f in dataclasses.fields(DecodeOptions)}
# The options a request may not set: the output length, the stopping rule and how sentences are batched and
# spread over processes are the server's (its cost estimate assumes the model's length limits; it batches requests
# itself, in one process). Any other option is a request field.
NOT_IN_A_REQUEST = {"max_len_a", "max_len_b", "max_len", "stopping", "batch_size", "batch_tokens", "workers"}


def out_of_range(name: str):
    """A value below the option's range: its low bound - 1 (below rather than above, so that decoding with it, were
    it let through, would be quick to fail rather than long)."""
    return FIELDS[name].metadata["range"].low - 1


RANGED = [name for name, f in FIELDS.items() if "range" in f.metadata]


def option_type_is_float(name: str) -> bool:
    return typing.get_type_hints(DecodeOptions)[name] is float


@pytest.mark.parametrize("name", RANGED)
def test_every_range_is_checked_when_the_options_are_built(name):
    """Fails if the range check goes: each ranged option out of range, or not finite, is refused naming it."""
    bad = out_of_range(name)
    given = {"sample": True, "beam": 1} if FIELDS[name].metadata["sampling"] else {}
    with pytest.raises(OptionError) as refused:
        DecodeOptions(**given, **{name: bad})
    assert refused.value.option == name
    assert str(refused.value).startswith(f"{name}={bad!r} is out of range; allowed: ")
    assert "\n" not in str(refused.value)
    with pytest.raises(OptionError, match=f"^{name}="):  # built in any way: replace() checks too
        dataclasses.replace(DecodeOptions(**given), **{name: bad})
    if option_type_is_float(name):
        with pytest.raises(OptionError, match=f"^{name}=nan is not a finite number"):
            DecodeOptions(**given, **{name: math.nan})


def test_the_rules_between_options_and_the_types():
    for options, message in [
        (dict(beam=2, n_best=3), "n_best=3 is out of range; allowed: 1 to the beam size (2)"),
        (dict(sample=True, beam=2), "beam=2 with sampling"),
        (dict(sample=True, beam=1, coverage_penalty=0.2), "coverage_penalty with sampling"),
        (dict(top_p=0.5), "top_p=0.5 belongs to sampling"),
        (dict(min_len=5, max_len=4), "min_len=5 is above the maximum output length 4"),
        (dict(beam=2.5), "beam=2.5 is not an integer"),
        (dict(beam=True), "beam=True is not an integer"),
        (dict(length_penalty="1"), "length_penalty='1' is not a number"),
        (dict(stopping="soon"), "stopping='soon' is not one of the choices; allowed: exact, early"),
        (dict(sample="yes"), "sample='yes' is not true or false"),
    ]:
        with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
            DecodeOptions(**options)
    import numpy as np

    normalised = DecodeOptions(length_penalty=1, beam=np.int64(3))  # as the options hold them
    assert type(normalised.length_penalty) is float and type(normalised.beam) is int


# ------------------------------------------------------------------- one refusal, three places


@pytest.fixture(scope="module")
def client(tiny_model):
    with TestClient(create_app({"m": tiny_model}), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("name", [f.name for f in option_fields("flag") if "range" in f.metadata])
def test_an_option_out_of_range_is_one_line_in_python_on_the_command_line_and_in_the_server(
        name, tiny_model, tiny_corpus, client, capsys):
    bad = out_of_range(name)
    sampling = {"sample": True} if FIELDS[name].metadata["sampling"] else {}
    with pytest.raises(UserError) as refused:
        attnmt.load(tiny_model).translate(SENTENCE, **sampling, **{name: bad})
    line = str(refused.value)
    assert line.startswith(f"{name}={bad!r} is out of range; allowed: ") and "\n" not in line
    flag = "--" + name.replace("_", "-")
    argv = ["translate", "--model", str(tiny_model), "--input", str(tiny_corpus / "test.src"), flag, str(bad)]
    assert main(argv + ["--sample"] * bool(sampling)) == 2
    err = capsys.readouterr().err
    assert err == f"attnmt: error: translate {flag}: {line}\n"  # the same line, after the flag; no traceback
    if FIELDS[name].metadata["request"]:
        r = client.post("/translate", json={"text": SENTENCE, **sampling, name: bad})
        assert r.status_code == 422 and r.json()["error"]["field"] == name, r.json()
        assert "\n" not in r.json()["error"]["message"]


def test_a_rule_between_options_is_the_same_line_everywhere(tiny_model, tiny_corpus, client, capsys):
    with pytest.raises(UserError) as refused:
        attnmt.load(tiny_model).translate(SENTENCE, sample=True, coverage_penalty=0.2)
    line = str(refused.value)
    assert main(["translate", "--model", str(tiny_model), "--input", str(tiny_corpus / "test.src"), "--sample",
                 "--coverage-penalty", "0.2"]) == 2
    assert capsys.readouterr().err == f"attnmt: error: {line}\n"
    r = client.post("/translate", json={"text": SENTENCE, "sample": True, "coverage_penalty": 0.2})
    assert r.status_code == 422 and r.json()["error"] == {"field": "coverage_penalty", "message": line}


# ------------------------------------------------------------------------------- the field list


def test_the_command_lines_decoding_flags_are_the_options():
    assert {f.name for f in option_fields("flag")} == set(FIELDS)  # every option has its flag
    commands = build_parser()._subparsers._group_actions[0].choices
    for command in ("translate", "evaluate"):
        flags = {a.dest: a for a in commands[command]._actions}
        assert set(FIELDS) <= set(flags), set(FIELDS) - set(flags)
        for name in FIELDS:
            assert flags[name].option_strings == ["--" + name.replace("_", "-")]
            assert flags[name].default in (None, False)  # left out: the model's, or the option's default


def test_the_server_requests_decoding_fields_are_the_options():
    requested = set(FIELDS) - NOT_IN_A_REQUEST
    assert {f.name for f in option_fields("request")} == requested
    assert requested <= set(TranslateRequest.model_fields)
    assert not NOT_IN_A_REQUEST & set(TranslateRequest.model_fields)
    schema = TranslateRequest.model_json_schema()["properties"]
    for name in requested:  # the option's range, and its help, in the OpenAPI schema
        allowed = FIELDS[name].metadata.get("range")
        if allowed is not None and allowed.low is not None:
            shown = [branch for branch in schema[name]["anyOf"] if branch["type"] != "null"][0]
            assert shown.get("minimum", shown.get("exclusiveMinimum")) == allowed.low
        assert schema[name]["description"].startswith(FIELDS[name].metadata["help"])


def test_the_config_decode_section_is_the_options_with_a_config_key():
    section = {f.name: f for f in dataclasses.fields(DecodeConfig)}
    assert set(section) == {config_key(f) for f in option_fields("config")}
    assert "max_len_cap" in section and "n_best" not in section
    for f in option_fields("config"):
        assert section[config_key(f)].default == f.default
        assert section[config_key(f)].metadata.get("range") is f.metadata.get("range")
    options = DecodeConfig(beam=3, max_len_cap=7).options(n_best=2)
    assert (options.beam, options.max_len, options.n_best) == (3, 7, 2)


def test_the_responses_translation_and_hypothesis_are_the_dataclasss_fields():
    from attnmt.decode.translation import Translation as Result

    names = [f.name for f in dataclasses.fields(Result)]
    assert list(Translation.model_fields) == names + ["attention_heads"]
    assert set(Hypothesis.model_fields) == {"text", "tgt_tokens", "score"} <= set(names)


# ------------------------------------------------------------------------------- the Python API


def test_options_as_keywords_or_as_a_decode_options(tiny_model):
    translator = attnmt.load(tiny_model)
    by_keywords = translator.translate([SENTENCE, "gute duno"], beam=2, n_best=2, min_len=3)
    options = translator.decode_options(beam=2, n_best=2, min_len=3)
    assert options.length_penalty == translator.config.decode.length_penalty  # the model's, where not given
    by_options = translator.translate([SENTENCE, "gute duno"], options=options)
    assert [t.text for t in by_keywords] == [t.text for t in by_options]
    assert [len(t.n_best) for t in by_options] == [2, 2]
    assert translator.translate(SENTENCE, options=options, n_best=1).n_best[0].text == by_options[0].text
    sampled = translator.translate(SENTENCE, sample=True, top_k=3, seed=4, n_best=2)
    assert [t.text for t in sampled.n_best] == [t.text for t in translator.translate(
        SENTENCE, sampling=Sampling(top_k=3, seed=4), n_best=2).n_best]
    with pytest.raises(TypeError, match="did you mean 'beam'"):
        translator.translate(SENTENCE, beem=3)
