"""The decoding options through `attnmt translate` / `evaluate`: sampling, --min-len, --no-repeat-ngram, TER."""

from __future__ import annotations

import json

import pytest

from attnmt.decode.evaluate import corpus_ter
from tests.cli.test_cli import assert_user_error, run
from tests.decode.test_constraints import repeats

SENTENCES = "a b c\nd e\nc a\nb\ne d c b a\n"


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(SENTENCES, encoding="utf-8")
    return path


def translate(capsys, model, source, *args):
    code, out, err = run(capsys, "translate", "--model", str(model), "--input", str(source), *args)
    assert code == 0, err
    return out


def test_sampling_is_seeded_and_the_same_with_worker_processes(capsys, tiny_model, source):
    args = ("--sample", "--temperature", "2.0", "--n-best", "4")
    first = translate(capsys, tiny_model, source, *args, "--seed", "5")
    assert first == translate(capsys, tiny_model, source, *args, "--seed", "5", "--workers", "2")
    assert first != translate(capsys, tiny_model, source, *args, "--seed", "6")
    lines = first.splitlines()
    assert len(lines) == 4 * len(SENTENCES.splitlines())
    scores = [float(line.rsplit(" ||| ", 1)[1]) for line in lines[:4]]
    assert scores == sorted(scores, reverse=True)  # a sentence's samples, best first


def test_sampling_with_top_k_1_is_greedy(capsys, tiny_model, source):
    greedy = translate(capsys, tiny_model, source, "--beam", "1")
    assert translate(capsys, tiny_model, source, "--sample", "--top-k", "1", "--seed", "3") == greedy


def test_min_len_and_no_repeat_ngram(capsys, tiny_model, source):
    free = translate(capsys, tiny_model, source, "--beam", "3").splitlines()
    out = translate(capsys, tiny_model, source, "--beam", "3", "--min-len", "12", "--no-repeat-ngram", "1")
    lines = out.splitlines()
    assert len(lines) == len(free) and lines != free
    for line, src in zip(lines, SENTENCES.splitlines()):
        words = line.split()  # a word-level model: a word is a token
        longest = int(1.5 * len(src.split()) + 10)  # the model's decode.max_len_a * n + max_len_b
        assert len(words) >= min(12, longest) and not repeats(words, 1)


def test_max_len_caps_the_output(capsys, tiny_model, source):
    out = translate(capsys, tiny_model, source, "--beam", "2", "--min-len", "3", "--max-len", "3")
    assert all(len(line.split()) == 3 for line in out.splitlines())


def test_evaluate_reports_ter(capsys, tiny_model, tiny_corpus, tmp_path):
    report = tmp_path / "report.json"
    code, out, err = run(capsys, "evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"),
                         "--ref", str(tiny_corpus / "test.tgt"), "--tokenize", "none", "--beam", "1", "--json",
                         str(report))
    assert code == 0, err
    hyps = translate(capsys, tiny_model, tiny_corpus / "test.src", "--beam", "1").splitlines()
    refs = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()
    ter = json.loads(report.read_text(encoding="utf-8"))["ter"]
    assert ter == pytest.approx(corpus_ter(hyps, refs)[0])
    assert f"TER  = {ter:.2f}" in out


def test_ter_counts_edits_and_shifts_per_reference_word():
    assert corpus_ter(["a b c d"], ["a b x d"])[0] == pytest.approx(100 * 1 / 4)  # one substitution
    assert corpus_ter(["b a c"], ["a b c"])[0] == pytest.approx(100 * 1 / 3)  # one shift, not two substitutions
    assert corpus_ter(["a b", "c"], ["a b", "c d e"])[0] == pytest.approx(100 * 2 / 5)  # corpus: summed
    assert corpus_ter(["A b"], ["a b"], lowercase=True)[0] == 0.0


@pytest.mark.parametrize("args, fragment", [
    (["--sample", "--top-p", "1.5"], "top_p=1.5"),
    (["--sample", "--temperature", "0"], "temperature=0.0"),
    (["--top-k", "5"], "--top-k belongs to --sample"),
    (["--sample", "--beam", "4"], "beam=4 with sampling"),
    (["--min-len", "20", "--max-len", "10"], "min_len=20 is above the maximum output length 10"),
    (["--no-repeat-ngram", "-1"], "no_repeat_ngram=-1"),
])
def test_bad_decoding_options(capsys, tiny_model, source, args, fragment):
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(source), *args)
    assert_user_error(code, err, fragment)


def test_evaluate_with_sampling_says_so(capsys, tiny_model, tiny_corpus):
    code, out, err = run(capsys, "evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"),
                         "--ref", str(tiny_corpus / "test.tgt"), "--tokenize", "none", "--sample", "--top-k", "3")
    assert code == 0, err
    assert "sampled: Sampling(top_k=3, top_p=1.0, temperature=1.0, seed=0)" in out.splitlines()[0]
