"""The demo's claim, measured: the quick demo (python -m benchmarks.demo --quick, about 75 s on two cores)
trains seq2seq and rnnsearch and must show attention's point.

Thresholds, from benchmarks/results/demo_quick.json (BLEU, shortest bucket 4-13 -> longest 24-30):
rnnsearch 98.84 -> 97.99 (keeps 0.99 of it), seq2seq 26.38 -> 5.66 (keeps 0.21). The test asks for
what the README says, with room for another machine's rounding: rnnsearch keeps at least 0.9 of its
short-sentence BLEU, seq2seq less than 0.5, and rnnsearch beats seq2seq in every bucket.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
RNNSEARCH_KEEPS_AT_LEAST = 0.9
SEQ2SEQ_KEEPS_LESS_THAN = 0.5


def test_quick_demo_shows_attention_holding_and_the_fixed_vector_falling(tmp_path):
    out = tmp_path / "demo_quick.json"
    run = subprocess.run([sys.executable, "-m", "benchmarks.demo", "--quick", "--out", str(out),
                          "--figures", ""], capture_output=True, text=True, cwd=REPO)
    result = json.loads(out.read_text(encoding="utf-8"))
    bleu = {m: [b["bleu"] for b in bs] for m, bs in result["buckets"].items()}
    assert [b["lengths"] for b in result["buckets"]["rnnsearch"]] == ["4-13", "14-23", "24-30"]
    assert bleu["rnnsearch"][-1] >= RNNSEARCH_KEEPS_AT_LEAST * bleu["rnnsearch"][0], bleu
    assert bleu["seq2seq"][-1] < SEQ2SEQ_KEEPS_LESS_THAN * bleu["seq2seq"][0], bleu
    assert all(r > s for r, s in zip(bleu["rnnsearch"], bleu["seq2seq"])), bleu
    assert run.returncode == 0, run.stderr[-2000:]  # the benchmark's own verdict agrees
