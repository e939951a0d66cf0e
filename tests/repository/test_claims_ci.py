"""CI=true turns a skip for a missing dependency or missing shared data into a failure (CUDA excepted).

A separate pytest run on made-up test files, with the rule of tests/ci_skips.py loaded, once with
CI=true and once without; the expected outcomes are those the rule states.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SKIPPING_TESTS = '''
import pytest

def test_runs():
    pass

@pytest.mark.skipif(True, reason="needs a CUDA GPU (run benchmarks/gpu.sh on one)")
def test_needs_cuda():
    pass

@pytest.mark.skipif(True, reason="../shared/data/tatoeba not present")
def test_needs_shared_data():
    pass

def test_needs_a_dev_dependency():
    pytest.importorskip("attnmt_no_such_module", reason="manim is not importable")
'''

SKIPPING_MODULE = '''
import pytest

pytest.importorskip("attnmt_no_such_module", reason="playwright is not installed")

def test_never_collected():
    pass
'''


def outcomes(tmp_path: Path, ci: str | None) -> tuple[int, dict[str, int]]:
    (tmp_path / "test_some.py").write_text(SKIPPING_TESTS, encoding="utf-8")
    (tmp_path / "test_module.py").write_text(SKIPPING_MODULE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the rule alone: the installed plugins take 1.5 s to load
    if ci is not None:
        env["CI"] = ci
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider", "-q",
                          "--continue-on-collection-errors", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    summary = run.stdout.strip().splitlines()[-1]
    return run.returncode, {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}


def test_without_ci_skips_stay_skips(tmp_path):
    code, counts = outcomes(tmp_path, None)
    assert code == 0 and counts == {"passed": 1, "skipped": 4}, counts


@pytest.mark.parametrize("ci", ["true", "1"])
def test_in_ci_only_the_cuda_skip_stays_a_skip(tmp_path, ci):
    code, counts = outcomes(tmp_path, ci)
    # a skip in the test's body fails it; a skip mark (decided in setup) and a module skipped at
    # import become errors: every one but the CUDA skip turns the run red
    assert code != 0 and counts == {"failed": 1, "passed": 1, "skipped": 1, "errors": 2}, counts
