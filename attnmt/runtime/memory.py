"""A training process's resident memory held near what it uses: glibc's free pages given back, oneDNN's caches small.

glibc's malloc serves a block of 128 KiB or more with a mapping of its own, unmapped when the block is freed,
but each time such a block is freed it raises that threshold to the block's size (its dynamic mmap threshold,
up to 32 MiB on 64-bit systems). A training step allocates and frees tensors of every size up to tens of MB;
once the threshold has risen they come from the heap, where freed space is kept and splintered, and the
process's resident memory climbs for many updates past what a step holds at once
(benchmarks/results/data_memory.json). Within :func:`free_pages_given_back` a thread calls glibc's
``malloc_trim(0)`` every :data:`TRIM_PERIOD_S` seconds, which hands every whole free page of the heap back to the
system (``MADV_DONTNEED``), while the heap keeps serving blocks without a fresh mapping (and a page fault per
page) for each large tensor.

oneDNN, which runs the CPU's bfloat16 matrix products (``precision: auto`` or ``bf16``), keeps every product's
compiled kernel, with its working memory, in two caches of 1,024 entries each: oneDNN's primitive cache and
ideep's (PyTorch's wrapper's) LRU cache. A product of a new shape adds an entry, and the shapes of a training
step change with every batch (its sentences and lengths), so the caches grow by tens of MB per update for the
first hundreds of updates. :func:`bound_kernel_caches` holds each to :data:`KERNEL_CACHE_CAPACITY` entries, more
than the products of one step, so a step's repeated shapes (the same layer type over the layers) are still
found in the cache. The libraries read the capacities (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``,
``LRU_CACHE_CAPACITY``) from the environment at their first product, so it is set before the model runs; a
capacity the user set is left as it is.

Both are used by what owns a training run (:func:`attnmt.train.trainer.train`, beside the thread count), never
on import; the trimming lasts as long as the training. A C library other than glibc is left as it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator

__all__ = ["KERNEL_CACHE_CAPACITY", "TRIM_PERIOD_S", "bound_kernel_caches", "free_pages_given_back"]

TRIM_PERIOD_S = 0.2  # seconds between two malloc_trim calls: several per update of a large model
KERNEL_CACHE_CAPACITY = 64  # entries in each of oneDNN's and ideep's caches of compiled products
# (ideep crashes with a capacity of 0)
_KERNEL_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
_TRIMMER = "attnmt-malloc-trim"  # the thread's name: one per process
_TRIMMER_LOCK = threading.Lock()  # guards starting, sharing and stopping that thread


class _Trimmer(threading.Thread):
    """The daemon thread that calls ``malloc_trim(0)`` every ``period_s`` seconds until it is stopped, and counts
    the blocks of :func:`free_pages_given_back` that use it."""

    def __init__(self, trim, period_s: float) -> None:
        super().__init__(name=_TRIMMER, daemon=True)
        self.trim, self.period_s, self.stopped, self.users = trim, period_s, threading.Event(), 0

    def run(self) -> None:
        while not self.stopped.wait(self.period_s):
            self.trim(0)


@contextlib.contextmanager
def free_pages_given_back(period_s: float = TRIM_PERIOD_S) -> Iterator[threading.Thread | None]:
    """Within it, a daemon thread gives glibc's free heap pages back every ``period_s`` seconds; it stops when the
    last block that uses it ends, so a program that trains and then goes on (a notebook, a test run) does not keep
    trimming. Blocks may nest or overlap (trainings in threads of one program): they share one thread per
    process. Yields the thread, or None where the C library is not glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: glibc's, without searching for the library
    except (OSError, AttributeError):
        yield None
        return
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    with _TRIMMER_LOCK:
        thread = next((t for t in threading.enumerate() if isinstance(t, _Trimmer) and not t.stopped.is_set()),
                      None)
        if thread is None:
            thread = _Trimmer(trim, period_s)
            thread.start()
        thread.users += 1
    try:
        yield thread
    finally:
        with _TRIMMER_LOCK:
            thread.users -= 1
            if thread.users == 0:
                thread.stopped.set()
        if thread.stopped.is_set():
            thread.join()


def bound_kernel_caches() -> list[str]:
    """Hold oneDNN's and ideep's caches of compiled products to :data:`KERNEL_CACHE_CAPACITY` entries each, before
    their first product; the environment variables set (one the user set is left as it is)."""
    unset = [name for name in _KERNEL_CACHES if name not in os.environ]
    for name in unset:
        os.environ[name] = str(KERNEL_CACHE_CAPACITY)
    return unset
