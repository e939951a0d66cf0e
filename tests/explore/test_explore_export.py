"""`attnmt explore --export`: one self-contained HTML file with the explore records of every sentence and
model embedded, the page's stylesheets and scripts inlined, nothing left to fetch."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.decode.translator import load
from attnmt.explore.page import EXPORT_FORMAT, PAGE_DECIMALS, STATIC_DIR, build_export, export_page, length_examples
from tests.explore.test_explore import SENTENCE

HOSTILE = "gupo </script><script>alert(1)</script> duno"


def embedded(page: str) -> dict:
    """The data in the page: JSON, or a JSON string of the JSON gzip-compressed and base64-encoded."""
    match = re.search(r'<script type="application/json" id="attnmt-export"( data-encoding="gzip\+base64")?>(.*?)'
                      r'</script>', page, re.S)
    assert match, "no embedded data"
    value = json.loads(match.group(2))
    return json.loads(gzip.decompress(base64.b64decode(value))) if match.group(1) else value


def fake_static(directory: Path) -> Path:
    directory.mkdir()
    (directory / "index.html").write_text(
        '<!doctype html>\n<html><head><link rel="stylesheet" href="/static/a.css">\n'
        '<script src="/static/one.js" defer></script><script src="/static/two.js"></script></head>\n'
        '<body><main id="m"></main></body></html>\n', encoding="utf-8")
    (directory / "a.css").write_text("main { color: red }", encoding="utf-8")
    (directory / "one.js").write_text("var one = 1;", encoding="utf-8")
    (directory / "two.js").write_text("var two = one + 1; // </script> inside a script", encoding="utf-8")
    return directory


def test_the_page_inlines_its_assets_and_embeds_the_data(tmp_path):
    data = {"format": EXPORT_FORMAT, "sentences": [{"source": HOSTILE}]}
    page = export_page(data, fake_static(tmp_path / "static"))
    assert "/static/" not in page and "<style>\nmain { color: red }\n</style>" in page
    # scripts run after the body is parsed, in their order; a "</script>" inside them or the data ends nothing
    body = page[page.index("<body>"):]
    assert body.index("var one = 1;") < body.index("var two") < body.index("</body>")
    assert page.count("</script>") == 3 and "<\\/script>" in page
    assert embedded(page) == data
    assert page.index('id="attnmt-export"') < page.index("</head>")


def test_the_real_page_keeps_no_reference_to_the_server(tmp_path):
    page = export_page({"format": EXPORT_FORMAT, "models": [], "sentences": []})
    referenced = re.findall(r'(?:src|href)="/static/([^"]+)"', (STATIC_DIR / "index.html").read_text("utf-8"))
    assert referenced and all((STATIC_DIR / name).is_file() for name in referenced)
    assert not re.search(r'(?:src|href)="/static/', page)
    for name in referenced:  # each asset's text is in the page
        assert (STATIC_DIR / name).read_text("utf-8").strip()[:200].replace("</script", "<\\/script") in page


def test_two_models_side_by_side_with_what_ifs(tiny_model, tiny_seq2seq):
    translators = {"seq2seq": load(tiny_seq2seq), "rnnsearch": load(tiny_model)}
    data = build_export(translators, [SENTENCE, "gupo duno"], beam=2, top_k=3, alternatives=1)
    assert data["format"] == EXPORT_FORMAT and [m["name"] for m in data["models"]] == ["seq2seq", "rnnsearch"]
    assert [s["source"] for s in data["sentences"]] == [SENTENCE, "gupo duno"]
    for sentence in data["sentences"]:
        assert list(sentence["records"]) == ["seq2seq", "rnnsearch"]
        for record in sentence["records"].values():
            assert record["source"]["text"] == sentence["source"] and record["beam"]["size"] == 2
            for step, alternatives in record["alternatives"].items():
                assert len(alternatives) == 1
                assert set(alternatives[0]) == {"format", "prefix", "output", "steps", "attention"}
                assert alternatives[0]["prefix"][:int(step)] == record["output"]["pieces"][:int(step)]
    # numbers as a picture needs them: 3 decimals at most
    numbers = re.findall(r"-?\d+\.(\d+)", json.dumps(data["sentences"]))
    assert numbers and max(len(decimals) for decimals in numbers) <= PAGE_DECIMALS


def test_each_output_is_scored_against_the_sentences_reference(tiny_model, tiny_seq2seq):
    from sacrebleu import sentence_bleu, sentence_chrf

    translators = {"seq2seq": load(tiny_seq2seq), "rnnsearch": load(tiny_model)}
    reference = "zi hopa kelu rena"
    data = build_export(translators, [SENTENCE, "gupo duno"], beam=2, alternatives=0, known={SENTENCE: reference})
    first, second = data["sentences"]
    assert first["reference"] == reference and second["reference"] is None
    for record in first["records"].values():
        hypothesis = record["output"]["text"]
        assert record["reference"]["text"] == reference
        assert record["reference"]["bleu"] == pytest.approx(sentence_bleu(hypothesis, [reference]).score, abs=0.05)
        assert record["reference"]["chrf"] == pytest.approx(sentence_chrf(hypothesis, [reference]).score, abs=0.05)
    assert all(record["reference"] is None for record in second["records"].values())


@pytest.mark.parametrize("text", [HOSTILE, "gupo <!--<script> duno", "a & b <b>bold</b> \u2028 -->"])
def test_text_that_html_reads_as_markup_stays_inside_the_data(tmp_path, text):
    data = {"format": EXPORT_FORMAT, "sentences": [{"source": text}]}
    page = export_page(data, fake_static(tmp_path / "static"))
    start = page.index('id="attnmt-export">') + len('id="attnmt-export">')
    assert not re.search("[<>&]", page[start:page.index("</script>", start)])
    assert embedded(page) == data


def test_a_large_export_is_embedded_compressed(tmp_path):
    data = {"format": EXPORT_FORMAT, "sentences": [{"source": f"gupo {k} <!--<script>", "x": [0.125] * 50}
                                                   for k in range(5000)]}
    plain, packed = export_page(data, compress=False), export_page(data)
    assert 'data-encoding="gzip+base64"' in packed and 'data-encoding' not in plain
    assert len(packed) * 5 < len(plain)
    assert embedded(packed) == embedded(plain) == data


def test_examples_of_spread_lengths_shortest_first(tiny_model):
    translator = load(tiny_model)
    examples = length_examples(translator, 4)
    lengths = [len(s.split()) for s in examples]
    assert len(examples) == 4 and lengths == sorted(lengths) and lengths[0] < lengths[-1]


def test_the_command_writes_the_page_and_the_json(tiny_model, tiny_seq2seq, tmp_path, capsys):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text(f"{SENTENCE}\n\n{HOSTILE}\n", encoding="utf-8")
    page, data = tmp_path / "explore.html", tmp_path / "explore.json"
    argv = ["explore", f"s2s={tiny_seq2seq}", str(tiny_model), "--export", str(page), "--json", str(data),
            "--sentences", str(sentences), "--what-if", "0", "--beam", "2"]
    assert main(argv) == 0
    written = json.loads(data.read_text("utf-8"))
    assert embedded(page.read_text("utf-8")) == written
    assert [m["name"] for m in written["models"]] == ["s2s", "rnnsearch"]
    assert [s["source"] for s in written["sentences"]] == [SENTENCE, HOSTILE]
    assert written["sentences"][0]["records"]["rnnsearch"]["alternatives"] is None
    assert capsys.readouterr().out.split() == [str(page), str(data)]
    assert main(argv) == 2 and "exists; choose another output path or pass --overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("extra, words", [
    ([], "nothing to write; pass --export"),
    (["--export", "x.html", "--sentences", "no-such-file.txt"], "no-such-file.txt"),
    (["--export", "x.html", "--top-k", "0"], "--top-k 0 is out of range"),
    (["--export", "x.html", "--what-if", "-1"], "--what-if is 0 (none) or more"),
    (["--export", "x.html", "--sentences", "blank.txt"], "--sentences blank.txt has no sentences (its lines are "
                                                         "blank)"),
    (["--export", "x.html", "--sentences", "many.txt"], "--sentences many.txt has 51 sentences, and a page holds at "
                                                        "most 50; split the file"),
    (["--export", "x.html", "--sentences", "long.txt"], "--sentences long.txt line 3: 600 tokens, more than the 512"),
])
def test_bad_input_is_one_line(tiny_model, tmp_path, monkeypatch, capsys, extra, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    (tmp_path / "many.txt").write_text("gupo duno\n" * 51, encoding="utf-8")
    (tmp_path / "long.txt").write_text(f"gupo\n\n{' '.join(['gupo'] * 600)}\n", encoding="utf-8")
    assert main(["explore", str(tiny_model), *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err


def test_the_command_the_demo_prints_opens_its_two_models(tiny_model, tiny_seq2seq, tmp_path):
    import shlex

    from attnmt.study.demo import explorer_hint

    hint = explorer_hint({"seq2seq": tiny_seq2seq, "rnnsearch": tiny_model}, tmp_path)
    command = next(line.split() for line in hint.splitlines() if line.strip().startswith("attnmt explore"))
    argv = shlex.split(" ".join(command[1:])) + ["--what-if", "0", "--examples", "1"]
    assert main(argv) == 0
    data = embedded((tmp_path / "explore.html").read_text("utf-8"))
    assert [m["type"] for m in data["models"]] == ["seq2seq", "rnnsearch"]
    # the sentences come from the held-out data, and so do their references
    assert data["sentences"][0]["reference"] is not None
    assert all(record["reference"]["text"] == data["sentences"][0]["reference"]
               for record in data["sentences"][0]["records"].values())


@pytest.mark.parametrize("fixture", ["tiny_model", "tiny_transformer"])
def test_each_edit_attention_outcome_is_the_live_pinned_decoding(fixture, request):
    import numpy as np

    from attnmt.decode.steps import explore, pin_choices

    translator = load(request.getfixturevalue(fixture))
    record = build_export({"m": translator}, [SENTENCE], beam=2, top_k=3, alternatives=0,
                          pin_steps=2)["sentences"][0]["records"]["m"]
    assert list(record["pins"]) == [str(i) for i in range(min(2, len(record["output"]["pieces"])))]
    for step, outcomes in record["pins"].items():
        i = int(step)
        assert [o["pin"] for o in outcomes] == [{"step": i, "source": pin} for pin in pin_choices(record)]
        for outcome in outcomes:
            live = explore(translator, SENTENCE, beam=2, prefix_tokens=record["output"]["pieces"][:i],
                           pin=outcome["pin"]["source"], heads=False, tree=False)
            assert outcome["pin"] == live["pin"] and outcome["prefix"] == live["prefix"]
            assert outcome["output"]["pieces"] == live["output"]["pieces"]
            assert outcome["output"]["text"] == live["output"]["text"]
            assert outcome["output"]["score"] == pytest.approx(live["output"]["score"], abs=1e-3)
            assert [(s["output"], s["output_word"], s["forced"]) for s in outcome["steps"]] == [
                (s["output"], s["output_word"], s["forced"]) for s in live["steps"]]
            for level in ("pieces", "words"):
                assert np.allclose(outcome["attention"][level]["mean"], live["attention"][level]["mean"], atol=1e-3)


@pytest.mark.parametrize("fixture", ["tiny_model", "tiny_transformer"])
def test_the_pins_of_a_step_decode_alike_in_batches_of_any_size(fixture, request):
    """pin_outcomes decodes the pins of a step together, each copy of the source pinned to its own pieces: batches
    of one, of three (then a last batch of one) and of all of them give the same outcomes."""
    import numpy as np

    from attnmt.decode.steps import explore, pin_choices, pin_outcomes

    translator = load(request.getfixturevalue(fixture))
    record = explore(translator, SENTENCE, beam=2, heads=False, tree=False)
    assert len(pin_choices(record)) == 4  # batches of three: three, then one
    by_size = {}
    for size in (1, 3, 64):
        translator.config.decode.batch_size = size
        by_size[size] = pin_outcomes(translator, record, beam=2, max_steps=2)
    for size in (1, 3):
        assert by_size[size].keys() == by_size[64].keys()
        for step, outcomes in by_size[64].items():
            for ours, theirs in zip(by_size[size][step], outcomes, strict=True):
                assert (ours["pin"], ours["output"]["pieces"]) == (theirs["pin"], theirs["output"]["pieces"])
                assert ours["output"]["score"] == pytest.approx(theirs["output"]["score"], abs=1e-3)
                assert np.allclose(ours["attention"]["pieces"]["mean"], theirs["attention"]["pieces"]["mean"],
                                   atol=1e-3)


def test_a_model_that_cannot_be_pinned_has_no_edit_attention_outcomes(tiny_seq2seq):
    record = build_export({"s": load(tiny_seq2seq)}, [SENTENCE], beam=2, alternatives=0)["sentences"][0]["records"]["s"]
    assert record["pins"] == {}
