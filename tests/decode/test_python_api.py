"""The Python API: `translate` takes one sentence or a list of them, and refuses anything else clearly; its
decoding options are checked as the command line checks them."""

from __future__ import annotations

import pytest

import attnmt
from attnmt.cli import main
from attnmt.decode.translator import Translation
from attnmt.errors import UserError


def test_a_str_is_one_sentence_and_a_list_is_several(tiny_model):
    translator = attnmt.load(tiny_model)
    one = translator.translate("a b c", beam=2)
    assert isinstance(one, Translation)  # not one translation per character
    assert one.source == "a b c" and one.src_tokens == ["a", "b", "c"]
    several = translator.translate(["a b c", "d e"], beam=2)
    assert isinstance(several, list) and [t.source for t in several] == ["a b c", "d e"]
    assert several[0].text == one.text
    assert [t.text for t in translator.translate(("a b c",), beam=2)] == [one.text]
    assert translator.translate([]) == []


@pytest.mark.parametrize("bad, message", [
    (b"a b c", r"not bytes; decode the bytes first"),
    (5, r"translate\(\) takes a sentence \(str\) or a list of sentences, not int"),
    (None, r"not NoneType"),
    ((s for s in ["a b"]), r"not generator; pass list\(...\) of it"),
    (["a b", 3], r"sentence 1 is of type int, not str"),
])
def test_anything_else_is_a_type_error_that_says_what_to_pass(tiny_model, bad, message):
    with pytest.raises(TypeError, match=message):
        attnmt.load(tiny_model).translate(bad)


@pytest.mark.parametrize("flag, value, given", [
    ("--length-penalty", "nan", float("nan")),
    ("--length-penalty", "inf", float("inf")),
    ("--length-penalty", "11", 11.0),
    ("--coverage-penalty", "nan", float("nan")),
    ("--beam", "101", 101),
    ("--n-best", "0", 0),
    ("--min-len", "1000001", 1_000_001),
    ("--no-repeat-ngram", "-1", -1),
    ("--max-len", "0", 0),
    ("--workers", "0", 0),
])
def test_a_decoding_option_from_python_is_refused_as_the_command_line_refuses_it(tiny_model, tiny_corpus, capsys,
                                                                                  flag, value, given):
    assert main(["translate", "--model", str(tiny_model), "--input", str(tiny_corpus / "test.src"), flag,
                 value]) == 2
    cli = capsys.readouterr().err.strip()
    option = flag[2:].replace("-", "_")
    with pytest.raises(UserError) as refused:
        attnmt.load(tiny_model).translate("a b c", **{option: given})
    assert cli == f"attnmt: error: translate {flag}: {refused.value}"  # the same line, less the flag
    assert str(refused.value).startswith(f"{option}=")


@pytest.mark.parametrize("options, message", [
    ({"length_penalty": "1"}, "length_penalty='1' is not a number; allowed: >= 0.0 and <= 10.0"),
    ({"beam": 2.5}, "beam=2.5 is not an integer; allowed: >= 1 and <= 100"),
    ({"batch_tokens": 0}, "batch_tokens=0 is out of range; allowed: >= 1"),
])
def test_a_decoding_option_of_the_wrong_type_is_one_line(tiny_model, options, message):
    with pytest.raises(UserError) as refused:
        attnmt.load(tiny_model).translate("a b c", **options)
    assert str(refused.value).startswith(message)
