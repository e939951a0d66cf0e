"""`attnmt align`'s scores equal the alignment error rate's formula on the links it wrote, and the real
Hansards gold file parses to the counts its source publishes.

The gold links are parsed here with a few lines of their own, and AER, precision and recall are
computed from Och & Ney's (2003) formula: AER = 1 - (|A & S| + |A & P|) / (|A| + |S|),
precision = |A & P| / |A|, recall = |A & S| / |S|, counted over the whole corpus.
"""

from __future__ import annotations

import json
import re

import pytest

from attnmt.cli import main
from tests.conftest import SHARED_DATA

HANSARDS = SHARED_DATA / "alignment" / "enfr-hansards"


def parse_gold_here(line: str) -> tuple[set, set]:
    """1-based 'i-j' (sure) and 'ipj' (possible) -> 0-based sure and possible sets (S within P)."""
    sure = {(int(i) - 1, int(j) - 1) for i, j in re.findall(r"(\d+)-(\d+)", line)}
    possible = {(int(i) - 1, int(j) - 1) for i, j in re.findall(r"(\d+)p(\d+)", line)}
    return sure, possible | sure


def parse_links_here(line: str) -> set:
    """0-based Pharaoh 'i-j' links, as `attnmt align --out` writes them."""
    return {(int(i), int(j)) for i, j in (item.split("-") for item in line.split())}


def formula(links: list[set], gold: list[tuple[set, set]]) -> dict:
    a = sum(len(x) for x in links)
    s = sum(len(sure) for sure, _ in gold)
    a_s = sum(len(x & sure) for x, (sure, _) in zip(links, gold))
    a_p = sum(len(x & possible) for x, (_, possible) in zip(links, gold))
    return {"aer": 1 - (a_s + a_p) / (a + s), "precision": a_p / a, "recall": a_s / s}


@pytest.fixture
def gold_with_possible_links(tiny_corpus, tmp_path):
    """The synthetic test split's sure links, plus possible links next to them, so that S != P."""
    sources = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()
    targets = (tiny_corpus / "test.tgt").read_text(encoding="utf-8").splitlines()
    lines = []
    for source, _target, sure_line in zip(sources, targets, (tiny_corpus / "test.align").read_text(
            encoding="utf-8").splitlines()):
        sure, _ = parse_gold_here(sure_line)
        n_src = len(source.split())
        extra = {(i + 1, j) for i, j in sure if i + 1 < n_src} | {(i - 1, j) for i, j in sure if i > 0}
        lines.append(" ".join([f"{i + 1}-{j + 1}" for i, j in sorted(sure)]
                              + [f"{i + 1}p{j + 1}" for i, j in sorted(extra - sure)]))
    path = tmp_path / "test.gold"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def printed_rows(out: str) -> dict[str, list[str]]:
    """The Markdown score table `attnmt align` prints: method -> its cells."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return {r[0]: r[1:] for r in rows[1:]}


@pytest.mark.parametrize("what", ["model", "diagonal"])
def test_align_scores_equal_the_formula_on_its_own_links(what, tiny_model, tiny_corpus, gold_with_possible_links,
                                                         tmp_path, capsys):
    links_path, json_path = tmp_path / "links.txt", tmp_path / "scores.json"
    source = ["--model", str(tiny_model)] if what == "model" else ["--baseline", "diagonal"]
    assert main(["align", *source, "--src", str(tiny_corpus / "test.src"), "--tgt", str(tiny_corpus / "test.tgt"),
                 "--gold", str(gold_with_possible_links), "--out", str(links_path), "--json", str(json_path)]) == 0
    printed = printed_rows(capsys.readouterr().out)
    links = [parse_links_here(line) for line in links_path.read_text(encoding="utf-8").splitlines()]
    gold = [parse_gold_here(line) for line in gold_with_possible_links.read_text(encoding="utf-8").splitlines()]
    assert len(links) == len(gold) == 40 and sum(map(len, links)) > 0
    expected = formula(links, gold)
    assert 0.05 < expected["aer"] < 0.95  # neither perfect nor empty: a wrong formula would show

    scores = json.loads(json_path.read_text(encoding="utf-8"))
    # the row of the links written to --out: the model's argmax links, or the diagonal's
    (name,) = [k for k in scores if ("argmax" in k and "reverse" not in k if what == "model" else k == "diagonal")]
    for key in ("aer", "precision", "recall"):
        assert scores[name][key] == pytest.approx(expected[key], abs=1e-12), key
    assert scores[name]["predicted"] == sum(map(len, links))
    # and the printed table says the same, to its three decimals
    aer, precision, recall = (float(x) for x in printed[name][:3])
    assert (aer, precision, recall) == pytest.approx((expected["aer"], expected["precision"], expected["recall"]),
                                                     abs=0.0005 + 1e-9)


@pytest.mark.skipif(not (HANSARDS / "enfr.gold").is_file(),
                    reason="the shared data ../shared/data/alignment/enfr-hansards is not present")
def test_the_real_hansards_gold_parses_to_its_published_counts():
    """447 pairs, 4,038 sure and 13,400 possible-only links (17,438 possible, sure ones included), as
    ../shared/data/README.md gives them for the NAACL 2003 test set."""
    from attnmt.align import read_gold

    gold = read_gold(HANSARDS / "enfr.gold")
    assert len(gold) == 447
    assert sum(len(g.sure) for g in gold) == 4038
    assert sum(len(g.possible) for g in gold) == 17438
    # the same counts from the parser of this file, and every link inside its sentence pair
    here = [parse_gold_here(line) for line in (HANSARDS / "enfr.gold").read_text(encoding="utf-8").splitlines()]
    assert [(g.sure, g.possible) for g in gold] == here
    sources = (HANSARDS / "enfr.src").read_text(encoding="utf-8").splitlines()
    targets = (HANSARDS / "enfr.tgt").read_text(encoding="utf-8").splitlines()
    assert all(i < len(s.split()) and j < len(t.split()) for (_, p), s, t in zip(here, sources, targets) for i, j in p)
