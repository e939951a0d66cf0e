"""The Python API: `translate` takes one sentence or a list of them, and refuses anything else clearly."""

from __future__ import annotations

import pytest

import attnmt
from attnmt.translator import Translation


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
