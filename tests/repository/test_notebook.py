"""The chapter's notebook: notebooks/chapter.ipynb is the jupytext twin of notebooks/chapter.py, and it
runs top to bottom in a real Jupyter kernel (nbclient) with tiny models (ATTNMT_NOTEBOOK_TINY=1).

Needs the notebook extra (pip install -e '.[notebook]'; scripts/setup.sh --dev installs it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCE = NOTEBOOKS / "chapter.py"
NOTEBOOK = NOTEBOOKS / "chapter.ipynb"
REGENERATE = "regenerate it: jupytext --to ipynb --update notebooks/chapter.py"
# Lines jupytext adds to the header with its own version; they do not change the notebook.
VERSION_LINES = ("#       format_version:", "#       jupytext_version:")


@pytest.fixture(scope="module")
def jupytext():
    # Imported by the tests that use it, not at collection: nbformat's schema validation takes seconds to import,
    # and every pytest-xdist worker collects every module.
    return pytest.importorskip("jupytext", reason="jupytext is not installed (pip install -e '.[notebook]')")


@pytest.fixture(scope="module")
def nbformat():
    return pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[notebook]')")


def _without_version_lines(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(VERSION_LINES))


def test_ipynb_matches_the_percent_source(jupytext, nbformat):
    from_source = jupytext.read(SOURCE)
    committed = nbformat.read(NOTEBOOK, as_version=4)
    assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in from_source.cells], \
        f"notebooks/chapter.ipynb is not chapter.py's notebook; {REGENERATE}"
    # The round trip: the committed notebook written back as percent text is chapter.py.
    assert _without_version_lines(jupytext.writes(committed, fmt="py:percent")) == \
        _without_version_lines(SOURCE.read_text(encoding="utf-8")), f"the round trip changes chapter.py; {REGENERATE}"
    assert committed.metadata["kernelspec"]["name"] == "python3"


def test_every_text_cell_is_in_chinese_and_english(jupytext):
    cells = [c.source for c in jupytext.read(SOURCE).cells if c.cell_type == "markdown"]
    assert cells
    for source in cells:
        assert re.search("[\u4e00-\u9fff]", source) and re.search("[A-Za-z]{4,} [A-Za-z]{2,} [A-Za-z]{2,}", source), \
            f"a markdown cell is not in both languages: {source[:80]!r}"


def test_committed_notebook_has_no_outputs(nbformat):
    committed = nbformat.read(NOTEBOOK, as_version=4)
    executed = [i for i, c in enumerate(committed.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not executed, f"cells {executed} of chapter.ipynb carry outputs; {REGENERATE}"


@pytest.mark.slow  # the whole chapter notebook in a kernel: about 12 s
@pytest.mark.timeout(180)
def test_notebook_runs_top_to_bottom(tmp_path, monkeypatch, nbformat):
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[notebook]')")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[notebook]')")
    # A kernel spec of its own for this interpreter: a user's global "python3" may be another Python.
    spec_dir = tmp_path / "jupyter" / "kernels" / "attnmt-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "attnmt test", "language": "python",
    }), encoding="utf-8")
    out = tmp_path / "out"
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("ATTNMT_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("ATTNMT_NOTEBOOK_OUT", str(out))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="attnmt-test", timeout=150, startup_timeout=60,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a code cell did not run"
    text = "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "tiny=True" in text  # the notebook read ATTNMT_NOTEBOOK_TINY
    assert "largest difference from the model's own attention" in text
    images = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert images >= 8  # BLEU by length, two alignment heatmaps, the causal mask, four heads
    for name in ("bleu_by_length.png", "attention_links.png", "attention_gold.png", "causal.png", "head_0.png"):
        assert (out / name).stat().st_size > 0, name
