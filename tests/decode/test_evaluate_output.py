"""`attnmt evaluate --output`: the hypotheses that were scored, kept in a file the JSON names."""

from __future__ import annotations

import json

from attnmt.cli import main


def evaluate(corpus, model, *extra: str) -> int:
    return main(["evaluate", "--model", str(model), "--src", str(corpus / "test.src"), "--ref",
                 str(corpus / "test.tgt"), "--tokenize", "none", *extra])


def test_output_holds_the_translations_that_were_scored(tiny_model, tiny_corpus, tmp_path, capsys):
    hyps, report = tmp_path / "hyps.txt", tmp_path / "report.json"
    assert evaluate(tiny_corpus, tiny_model, "--output", str(hyps), "--json", str(report)) == 0
    assert f"hypotheses: {hyps}" in capsys.readouterr().out
    translated = tmp_path / "translate.txt"
    assert main(["translate", "--model", str(tiny_model), "--input", str(tiny_corpus / "test.src"),
                 "--output", str(translated)]) == 0
    lines = hyps.read_text(encoding="utf-8").splitlines()
    assert lines == translated.read_text(encoding="utf-8").splitlines()  # the translate command's, line for line
    assert len(lines) == len((tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines())
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["output"] == str(hyps) and written["n_best"] == 1
    # the BLEU in the JSON is that of the file's lines
    from attnmt.decode.evaluate import corpus_scores
    references = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()
    assert written["scores"]["bleu"] == corpus_scores(lines, references, tokenize="none").bleu


def test_n_best_writes_n_hypotheses_per_sentence_best_first(tiny_model, tiny_corpus, tmp_path, capsys):
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    assert evaluate(tiny_corpus, tiny_model, "--output", str(one)) == 0
    assert evaluate(tiny_corpus, tiny_model, "--output", str(two), "--n-best", "2") == 0
    best = one.read_text(encoding="utf-8").splitlines()
    rows = [line.split(" ||| ") for line in two.read_text(encoding="utf-8").splitlines()]
    assert [int(i) for i, _, _ in rows] == [k for k in range(len(best)) for _ in range(2)]
    assert [text for i, text, _ in rows[::2]] == best  # the first of each sentence is the one scored
    assert all(float(a[2]) >= float(b[2]) for a, b in zip(rows[::2], rows[1::2]))


def test_an_existing_output_is_kept_unless_overwrite(tiny_model, tiny_corpus, tmp_path, capsys):
    hyps = tmp_path / "hyps.txt"
    hyps.write_text("keep me\n", encoding="utf-8")
    assert evaluate(tiny_corpus, tiny_model, "--output", str(hyps)) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"attnmt: error: {hyps} exists; choose another output path or pass --overwrite"]
    assert hyps.read_text(encoding="utf-8") == "keep me\n"
    assert evaluate(tiny_corpus, tiny_model, "--output", str(hyps), "--overwrite") == 0
    assert hyps.read_text(encoding="utf-8") != "keep me\n"
    assert evaluate(tiny_corpus, tiny_model, "--n-best", "2") == 2
    assert "--n-best writes N hypotheses per sentence to --output FILE" in capsys.readouterr().err
    references = (tiny_corpus / "test.tgt").read_bytes()
    assert evaluate(tiny_corpus, tiny_model, "--output", str(tiny_corpus / "test.tgt"), "--overwrite") == 2
    assert "is also the --ref file" in capsys.readouterr().err  # even --overwrite never replaces the test set
    assert (tiny_corpus / "test.tgt").read_bytes() == references
