"""benchmarks/demo.py exits non-zero when the demo's claim fails, in --quick mode too.

The claim (its docstring): rnnsearch's BLEU in the longest bucket is at least 90% of its BLEU in the
shortest, seq2seq's is below half. The demo itself is replaced here by results made up for the
purpose; tests/slow/test_demo_claim.py runs the real quick demo.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from attnmt.decode.evaluate import LengthBucket

REPO = Path(__file__).resolve().parents[2]


def load_benchmark():
    return importlib.import_module("benchmarks.demo")


def made_up_result(rnnsearch: tuple[float, float], seq2seq: tuple[float, float]):
    def buckets(short, long):
        return [LengthBucket(4, 14, 10, short), LengthBucket(14, 24, 10, (short + long) / 2),
                LengthBucket(24, 31, 10, long)]

    return SimpleNamespace(buckets={"seq2seq": buckets(*seq2seq), "rnnsearch": buckets(*rnnsearch)},
                           bleu={"seq2seq": 1.0, "rnnsearch": 1.0}, phases={}, report="(report)")


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("rnnsearch, seq2seq, code", [
    ((98.8, 98.0), (26.4, 5.7), 0),  # the claim holds (benchmarks/results/demo_quick.json's numbers)
    ((26.4, 5.7), (98.8, 98.0), 1),  # reversed: seq2seq holds, rnnsearch falls
    ((98.8, 80.0), (26.4, 5.7), 1),  # rnnsearch keeps only 81%
    ((98.8, 98.0), (26.4, 14.0), 1),  # seq2seq keeps 53%
])
def test_demo_benchmark_exit_code_is_the_claim(rnnsearch, seq2seq, code, quick, tmp_path, monkeypatch, capsys):
    bench = load_benchmark()
    monkeypatch.setattr(bench, "run_demo", lambda *a, **k: made_up_result(rnnsearch, seq2seq))
    monkeypatch.setattr(sys, "argv", ["demo.py", *(["--quick"] if quick else []), "--out",
                                      str(tmp_path / "demo.json"), "--figures", ""])
    assert bench.main() == code
    capsys.readouterr()
