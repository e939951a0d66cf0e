"""A training process gives freed memory back (attnmt/runtime/memory.py): after a large block is freed, glibc
serves later large blocks from its heap, where freed ones stay resident; the process's trimming thread hands their
pages back to the system within a period."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import tiny_config

# One large block freed (which raises glibc's threshold), then 60 blocks of 1 MiB from the heap, every other one
# freed: prints how much the resident memory fell within two trimming periods of their freeing, in MiB.
PATTERN = """
import contextlib, ctypes, sys, time
from pathlib import Path
from attnmt.runtime.memory import TRIM_PERIOD_S, free_pages_given_back  # what training_process runs within
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
def rss():
    return int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS")).split()[1])
with free_pages_given_back() if sys.argv[1] == "kept" else contextlib.nullcontext():
    big = libc.malloc(16 << 20); libc.memset(big, 1, 16 << 20); libc.free(big)
    blocks = [libc.malloc(1 << 20) for _ in range(60)]
    for b in blocks:
        libc.memset(b, 1, 1 << 20)
    before = rss()
    for b in blocks[::2]:
        libc.free(b)
    time.sleep(2 * TRIM_PERIOD_S)
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


def _trimmers() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "attnmt-malloc-trim"]


def test_trimming_is_one_thread_that_stops_with_the_last_block_using_it():
    from attnmt.runtime.memory import free_pages_given_back

    with free_pages_given_back() as outer:
        assert outer is not None and outer.daemon and outer.is_alive()
        with free_pages_given_back() as inner:
            assert inner is outer and _trimmers() == [outer]
        assert outer.is_alive()  # the outer block still uses it
    assert not outer.is_alive() and _trimmers() == []


def test_training_sets_up_its_process_for_the_span_of_the_run(tiny_corpus, tmp_path, monkeypatch):
    """train() sets its process up (threads and memory) with the config's thread count while it runs; when it
    returns, the trimming thread has stopped and the caller's thread count is back."""
    import contextlib

    import torch

    import attnmt.train.trainer as trainer

    calls, real = [], trainer.training_process

    @contextlib.contextmanager
    def recorded(threads):
        with real(threads):
            calls.append((threads, torch.get_num_threads(), len(_trimmers())))
            yield

    monkeypatch.setattr(trainer, "training_process", recorded)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trainer.train(tiny_config(tiny_corpus, max_steps=1, threads=1), tmp_path / "m", quiet=True)
        assert calls == [(1, 1, 1)] and _trimmers() == []
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# bf16 products of 160 shapes, forward and backward, as the batches of a training run change shape: prints how
# much the live memory grew, in MiB (resident memory after malloc_trim, so that heap pages freed but not yet given
# back, which the trimming thread returns within its period, do not count as caches).
SHAPES = """
import ctypes, random, sys
from pathlib import Path
import torch
if sys.argv[1] == "kept":
    from attnmt.runtime.threads import training_process
    training_process(1).__enter__()  # for the rest of this script, as in a training run
else:
    torch.set_num_threads(1)
def rss():  # live memory: glibc's free heap pages given back first, so only what is held counts
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS")).split()[1])
w = torch.randn(512, 128, requires_grad=True)
random.seed(0)
for i in range(160):
    if i == 40:  # the bounded caches full
        before = rss()
    x = torch.randn(random.randint(20, 200), random.randint(5, 30), 128, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    y.float().sum().backward()
print((rss() - before) // 1024)
"""


@pytest.mark.skipif(not (sys.platform.startswith("linux") and getattr(__import__("torch").cpu,
                                                                     "_is_avx512_bf16_supported", bool)()),
                    reason="oneDNN's bf16 products (a CPU with AVX-512-BF16), read through /proc")
@pytest.mark.slow  # two processes, each compiling the bf16 kernels of 160 shapes
def test_a_training_process_holds_onednns_caches_of_compiled_products_small():
    def grown(mode: str) -> int:
        caches = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
        env = {k: v for k, v in os.environ.items() if k not in caches}
        done = subprocess.run([sys.executable, "-c", SHAPES, mode], capture_output=True, text=True, timeout=120,
                              env=env)
        assert done.returncode == 0, done.stderr[-1000:]
        return int(done.stdout)

    assert grown("default") >= 60  # every new shape's kernels kept
    assert grown("kept") < 15
