"""benchmarks/rnn256.py's matrix-product peaks: each labelled native or emulated, no share of an emulated rate,
a share above 1 refused before anything is written, and --peaks-only relabelling an earlier result."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import rnn256
from benchmarks.common import machine_info


def fast_rates(monkeypatch, native_bf16: bool) -> None:
    """Stand-in rates (no 2048^3 products) and a chosen bfloat16 hardware path."""
    monkeypatch.setattr(rnn256, "matmul_rate", lambda dtype, device="cpu", seconds=2.0, n=None: 0.4 if n == 512
                        else 100.0)
    monkeypatch.setattr("attnmt.train.trainer.native_bf16", lambda device: native_bf16)


@pytest.mark.parametrize("native", [False, True])
def test_each_peak_says_its_path_and_only_native_peaks_get_a_share(monkeypatch, native):
    fast_rates(monkeypatch, native)
    peaks = rnn256.measure_peaks("cpu")
    path = "native" if native else "emulated"
    assert peaks["matmul_path"] == {"float32": "native", "bfloat16": path}
    assert peaks["matmul_size"] == {"float32": 2048, "bfloat16": 2048 if native else rnn256.EMULATED_N}
    shares = rnn256.shares_of_peak(50.0, peaks)
    assert shares == ({"share_of_float32_peak": 0.5, "share_of_bfloat16_peak": 0.5} if native
                      else {"share_of_float32_peak": 0.5})


def test_a_share_above_one_is_refused():
    peaks = {"matmul_peak_gflops": {"float32": 125.1}, "matmul_path": {"float32": "native"}}
    with pytest.raises(SystemExit, match="cannot exceed 1"):
        rnn256.shares_of_peak(130.0, peaks)
    assert rnn256.shares_of_peak(None, peaks) == {"share_of_float32_peak": None}


def test_peaks_only_drops_the_share_of_an_emulated_peak(monkeypatch, tmp_path):
    fast_rates(monkeypatch, native_bf16=False)
    out = tmp_path / "run.json"
    run = {"machine": {"cpu": machine_info()["cpu"]}, "achieved_gflops": 104.2,
           "matmul_peak_gflops": {"float32": 125.1, "bfloat16": 0.3}, "share_of_float32_peak": 0.8327,
           "share_of_bfloat16_peak": 347.2341}
    out.write_text(json.dumps(run))
    monkeypatch.setattr(sys, "argv", ["rnn256", "--peaks-only", "--threads", "1", "--out", str(out)])
    assert rnn256.main() == 0
    result = json.loads(out.read_text())
    assert "share_of_bfloat16_peak" not in result and result["share_of_float32_peak"] == 0.8327
    assert result["matmul_peak_gflops"] == run["matmul_peak_gflops"]  # the run's own, now labelled
    assert result["matmul_path"] == {"float32": "native", "bfloat16": "emulated"}
    assert result["peaks_remeasured"]["matmul_peak_gflops"] == {"float32": 100.0, "bfloat16": 0.4}
    out.write_text(json.dumps({**run, "machine": {"cpu": "another CPU"}}))
    with pytest.raises(SystemExit, match="another CPU"):
        rnn256.main()
