"""A training process gives large freed blocks back (attnmt/runtime/memory.py): after a large block is freed,
glibc would serve later large blocks from its heap, where freed ones stay resident; with the threshold kept,
each is a mapping of its own and freeing it lowers the resident memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import tiny_config

# One large block freed (which raises glibc's threshold), then 60 blocks of 1 MiB, every other one freed:
# prints how much the resident memory fell when they were freed, in MiB.
PATTERN = """
import ctypes, sys
from pathlib import Path
if sys.argv[1] == "kept":
    from attnmt.runtime.threads import training_process
    training_process(1)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
def rss():
    return int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS")).split()[1])
big = libc.malloc(16 << 20); libc.memset(big, 1, 16 << 20); libc.free(big)
blocks = [libc.malloc(1 << 20) for _ in range(60)]
for b in blocks:
    libc.memset(b, 1, 1 << 20)
before = rss()
for b in blocks[::2]:
    libc.free(b)
print((before - rss()) // 1024)
"""


def fallen_mib(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1000:]
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, read through /proc")
def test_a_training_process_gives_freed_large_blocks_back():
    assert fallen_mib("default") < 5  # glibc as it comes: the freed blocks stay resident
    assert fallen_mib("kept") >= 25  # 30 blocks of 1 MiB given back


def test_training_sets_up_its_process(tiny_corpus, tmp_path, monkeypatch):
    """train() sets its process up (threads and memory) with the config's thread count."""
    import attnmt.train.trainer as trainer

    calls = []
    monkeypatch.setattr(trainer, "training_process", calls.append)
    trainer.train(tiny_config(tiny_corpus, max_steps=1, threads=1), tmp_path / "m", quiet=True)
    assert calls == [1]
