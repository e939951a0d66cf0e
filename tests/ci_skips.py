"""Under CI (CI=true), a skipped test is a failure unless it skips for want of a CUDA GPU.

The tests skip, saying why, where a dev dependency (manim, chromium, playwright, a CJK font) or the
shared data (../shared/data) is missing: right on a laptop, wrong in CI, where a broken apt-get
install would otherwise turn those tests into a green run of skips. CI machines have no GPU, so the
CUDA tests (tests/train/test_precision.py; benchmarks/gpu.sh runs them on one) are the one exception.
Loaded by tests/conftest.py; a plugin module of its own so that tests/repository/test_claims_ci.py can load it
into a separate pytest run (-p tests.ci_skips).
"""

from __future__ import annotations

import os
import re

import pytest

ALLOWED_IN_CI = re.compile(r"\bCUDA\b|\bGPU\b")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _refused_skip(report) -> str | None:
    """The skip's reason if CI must count it as a failure, else None."""
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return None if ALLOWED_IN_CI.search(reason) else reason


def _fail(report, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = (f"CI=true: this skip is a failure in CI (only CUDA/GPU skips are allowed): {reason}; "
                       "install what it names (bash scripts/setup.sh --dev) or provide ../shared/data")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    reason = _refused_skip(report)
    if reason is not None:
        _fail(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    reason = _refused_skip(report)  # a module-level importorskip skips the whole file at collection
    if reason is not None:
        _fail(report, reason)
