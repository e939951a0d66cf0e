"""The study's alignment error rates equal the formula over links read back from files.

tests/study/test_study.py checks that each AER lies in [0, 1], which no AER can violate. Here the links
come from `attnmt align` run on the test split the study wrote (out/data/test.src, .tgt), the gold
links from the study's own out/data/test.align, and AER from Och & Ney's formula
(tests/align/test_align_scores.py): a study that built its gold links the wrong way round, or scored
them otherwise, gives another number.
"""

from __future__ import annotations

import pytest
import yaml

from attnmt.cli import main
from attnmt.study import run_study
from tests.align.test_align_scores import formula, parse_gold_here, parse_links_here


def links_of(args: list[str], data, tmp_path, name: str) -> list[set]:
    out = tmp_path / f"{name}.txt"
    assert main(["align", *args, "--src", str(data / "test.src"), "--tgt", str(data / "test.tgt"),
                 "--out", str(out)]) == 0
    return [parse_links_here(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_study_aer_equals_the_formula_over_links_and_gold_read_back(tmp_path, tiny_model, capsys):
    study = {
        "name": "aer",
        # the tiny_corpus fixture's splits, which the tiny_model folder was trained on
        "data": {"synthetic": {"train": 600, "valid": 40, "test": 40, "min_len": 3, "max_len": 10, "seed": 5}},
        "seeds": [1],
        "models": [{"name": "rnnsearch", "model_dirs": [str(tiny_model)]}],
        "evaluation": {"bleu_tokenize": "none", "bucket_edges": [3, 6, 11], "bootstrap": 0},
        "alignment": {"threshold": 0.3},
        "heatmaps": {"model": "rnnsearch", "lengths": [10]},
    }
    path = tmp_path / "aer.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    out = tmp_path / "out"
    summary = run_study(path, out=out, quiet=True).summary
    data = out / "data"

    gold = [parse_gold_here(line) for line in (data / "test.align").read_text(encoding="utf-8").splitlines()]
    assert len(gold) == 40
    found = summary["models"]["rnnsearch"]["alignment"]["synthetic-test"]
    for method, args in (("argmax", ["--method", "argmax"]), ("threshold", ["--method", "threshold",
                                                                             "--threshold", "0.3"])):
        expected = formula(links_of(["--model", str(tiny_model), *args], data, tmp_path, method), gold)
        assert 0.05 < expected["aer"] < 0.95, method
        for key in ("aer", "precision", "recall"):
            assert found[method][key]["mean"] == pytest.approx(expected[key], abs=1e-9), (method, key)
    diagonal = formula(links_of(["--baseline", "diagonal"], data, tmp_path, "diagonal"), gold)
    assert summary["diagonal"]["synthetic-test"]["aer"] == pytest.approx(diagonal["aer"], abs=1e-12)
    capsys.readouterr()
