"""The processes attnmt owns (the `attnmt` command, a study's workers) end without the interpreter's last walk over
every live object (attnmt.runtime.process), after every other exit handler has run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Exit handlers run last-registered first: `frozen(...)` prints, as the process exits, whether everything alive
# then has been frozen; the one registered first runs at the very end.
PROBE = """
import atexit, ctypes, gc, signal, sys
def frozen(label):
    atexit.register(lambda: print(label, "frozen:", gc.get_freeze_count() > 0))
def dies_with_parent():
    number = ctypes.c_int()
    ctypes.CDLL("libc.so.6").prctl(2, ctypes.byref(number))  # PR_GET_PDEATHSIG
    return number.value == signal.SIGKILL
frozen("at the end,")
{code}
"""


def _probe(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(code=code)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_command_ends_frozen():
    lines = _probe("from attnmt.cli import run\nprint('dies with its parent:', dies_with_parent())\n"
                   "sys.argv = ['attnmt', '--version']\nrun()")
    assert lines[0] == "dies with its parent: False"  # the command is the user's process, not a worker
    assert lines[1].startswith("attnmt ")  # what --version prints, then the exit handlers
    assert lines[2:] == ["at the end, frozen: True"]


def test_a_worker_of_a_study_dies_with_its_parent_and_freezes_after_the_other_exit_handlers():
    lines = _probe("from attnmt.runtime.process import worker_started\nworker_started()\n"
                   "frozen('registered after the start,')\nprint('dies with its parent:', dies_with_parent())")
    assert lines == ["dies with its parent: True", "registered after the start, frozen: False",
                     "at the end, frozen: True"]


def test_a_program_that_imports_attnmt_ends_as_python_does():
    assert _probe("import attnmt.cli, attnmt.runtime.process") == ["at the end, frozen: False"]
