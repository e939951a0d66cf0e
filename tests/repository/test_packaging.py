"""Installing attnmt prints no setuptools deprecation warnings.

`pip install -e .` builds an editable wheel with setuptools (the PEP 660 hook) and shows what the
backend warns. This test calls the same hook on this checkout in a fresh process, with setuptools'
deprecation warnings turned into errors: a deprecated pyproject.toml form (a `license` table, a
license classifier, a renamed key) fails it. That takes seconds; a pip install into a new virtual
environment would take a minute and measure pip as well.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BUILD = """
import sys, warnings
import setuptools.build_meta as backend
from setuptools.warnings import InformationOnly, SetuptoolsWarning
warnings.simplefilter("error", SetuptoolsWarning)
warnings.simplefilter("default", InformationOnly)  # "Editable installation": a notice, not a problem
print(backend.build_editable(sys.argv[1]))
"""


def test_an_editable_build_raises_no_setuptools_warning(tmp_path):
    pytest.importorskip("setuptools", minversion="77", reason="pyproject.toml's SPDX license needs setuptools 77")
    done = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    assert done.returncode == 0, f"the editable build warned or failed:\n{tail}"
    wheel = tmp_path / done.stdout.strip().splitlines()[-1]
    assert wheel.is_file() and wheel.name.startswith("attnmt-")


def _text(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


NOTEBOOK_DOCS = ("README.md", "README.zh-CN.md", "notebooks/chapter.py")


def test_the_notebook_docs_give_one_way_to_open_it_and_the_extra_installs_what_it_needs():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    extra = tomllib.loads(_text("pyproject.toml"))["project"]["optional-dependencies"]["notebook"]
    names = {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower() for requirement in extra}
    assert "jupyterlab" in names, "the notebook extra must install what `jupyter lab` needs"
    for name in NOTEBOOK_DOCS:
        text = _text(name)
        assert "jupyter lab notebooks/chapter.ipynb" in text, name
        assert "pip install -e '.[notebook]'" in text, name
        # nothing to install beside the extra (the READMEs once disagreed on nbconvert and jupyterlab)
        assert not re.search(r"pip install -e '\.\[notebook\]' +[A-Za-z]", text), name


def test_the_readmes_say_how_to_reach_attnmt_before_using_it_bare():
    """setup.sh installs into .venv; a block that runs a bare `attnmt` first activates it."""
    for name in ("README.md", "README.zh-CN.md"):
        active = False
        for block in re.findall(r"```bash\n(.*?)```", _text(name), re.DOTALL):
            for line in block.splitlines():
                active = active or line.startswith("source .venv/bin/activate")
                if re.match(r"(echo .*\| *)?attnmt ", line):
                    assert active, f"{name}: `{line[:40]}` runs before any `source .venv/bin/activate`"


WHEEL = """
import sys
import setuptools.build_meta as backend
print(backend.build_wheel(sys.argv[1]))
"""


def test_the_wheel_ships_the_alignment_template_and_the_page(tmp_path):
    """align-config's template (recipes/alignment_template/template.yaml, linked from attnmt/align/) and the
    explorer's page are in the wheel as files, so an installed attnmt writes the same configs as a checkout."""
    import zipfile

    pytest.importorskip("setuptools", minversion="77", reason="pyproject.toml's SPDX license needs setuptools 77")
    built = REPO / "build"  # setuptools builds a wheel there; a checkout that had none is left without one
    had_build = built.exists()
    try:
        done = subprocess.run([sys.executable, "-c", WHEEL, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
    finally:
        if not had_build:
            shutil.rmtree(built, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    with zipfile.ZipFile(tmp_path / done.stdout.strip().splitlines()[-1]) as wheel:
        names = set(wheel.namelist())
        template = wheel.read("attnmt/align/template.yaml").decode("utf-8")
    assert template == (REPO / "recipes" / "alignment_template" / "template.yaml").read_text(encoding="utf-8")
    assert "attnmt/serve/static/index.html" in names
