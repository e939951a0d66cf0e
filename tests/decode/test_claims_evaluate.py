"""`attnmt evaluate` buckets sentences by their source length, in tokens of the model's source tokenizer.

The expected counts are worked out here from the tokenizer's lengths and the bucket bounds the
report states; the test set is chosen so that bucketing by the translations' lengths would
give other counts (which is checked too, so that the test cannot pass by accident).
"""

from __future__ import annotations

import json

import attnmt
from attnmt.cli import main


def test_evaluate_buckets_count_sentences_by_source_tokenizer_length(tiny_model, tiny_corpus, tmp_path, capsys):
    sources, references = [], []
    for split in ("test", "valid"):
        sources += (tiny_corpus / f"{split}.src").read_text(encoding="utf-8").splitlines()
        references += (tiny_corpus / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (tmp_path / "ref").write_text("".join(r + "\n" for r in references), encoding="utf-8")
    report = tmp_path / "report.json"
    assert main(["evaluate", "--model", str(tiny_model), "--src", str(tmp_path / "src"), "--ref",
                 str(tmp_path / "ref"), "--tokenize", "none", "--beam", "3", "--json", str(report)]) == 0
    assert "BLEU by source length" in capsys.readouterr().out
    buckets = json.loads(report.read_text(encoding="utf-8"))["buckets"]

    translator = attnmt.load(tiny_model)
    source_lengths = [len(translator.src.tokens(s)) for s in sources]

    def counts(lengths):
        return [sum(b["lo"] <= n < b["hi"] for n in lengths) for b in buckets]

    assert [b["n"] for b in buckets] == counts(source_lengths)
    assert sum(b["n"] for b in buckets) == len(sources)
    # The test means something only if the translations' lengths would fall into other buckets.
    output_lengths = [len(t.tgt_tokens) for t in translator.translate(sources, beam=3)]
    assert counts(output_lengths) != counts(source_lengths), "pick a test set whose output lengths bucket differently"


def test_evaluate_by_source_words_with_given_edges_and_intervals(tiny_model, tiny_corpus, tmp_path, capsys):
    """--length-unit words counts the whitespace words of each source line, in the --length-edges buckets,
    each with a bootstrap interval around its BLEU (the studies' measure, as one command)."""
    src, ref = tiny_corpus / "test.src", tiny_corpus / "test.tgt"
    sources = src.read_text(encoding="utf-8").splitlines()
    words = [len(s.split()) for s in sources]
    edges = [1, sorted(words)[len(words) // 2], max(words) + 1]
    report = tmp_path / "report.json"
    assert main(["evaluate", "--model", str(tiny_model), "--src", str(src), "--ref", str(ref), "--tokenize", "none",
                 "--beam", "1", "--length-unit", "words", "--length-edges", *map(str, edges), "--bootstrap", "50",
                 "--json", str(report)]) == 0
    assert "BLEU by source length (words of the source line)" in capsys.readouterr().out
    buckets = json.loads(report.read_text(encoding="utf-8"))["buckets"]
    assert [(b["lo"], b["hi"]) for b in buckets] == list(zip(edges, edges[1:]))
    assert [b["n"] for b in buckets] == [sum(lo <= n < hi for n in words) for lo, hi in zip(edges, edges[1:])]
    for b in buckets:
        assert b["ci_low"] <= b["bleu"] <= b["ci_high"]
    assert len({(b["ci_low"], b["ci_high"]) for b in buckets}) == len(buckets)  # each bucket its own interval
