"""A training process's resident memory held near what it uses: glibc's allocator keeps large blocks apart.

glibc's malloc serves a block of 128 KiB or more with a mapping of its own, unmapped when the block is freed,
but each time such a block is freed it raises that threshold to the block's size (its dynamic mmap threshold,
up to 32 MiB on 64-bit systems). A training step allocates and frees tensors of every size up to tens of MB;
once the threshold has risen they come from the heap, where freed space is kept and splintered, and the
process's resident memory climbs for many updates past what a step holds at once
(benchmarks/results/data_memory.json). :func:`keep_large_blocks_apart` sets the threshold to glibc's own default
(``mallopt(M_MMAP_THRESHOLD, 128 KiB)``), which turns the raising off: every large tensor is mapped on its own
and given back when freed, at the cost of a fresh mapping per large allocation.

It changes the whole process, so it is called by what owns a training process (:func:`attnmt.train.trainer.train`,
beside the thread count), never on import. A threshold the user set (``MALLOC_MMAP_THRESHOLD_``) is left as it is,
and so is a C library other than glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["MMAP_THRESHOLD", "keep_large_blocks_apart"]

MMAP_THRESHOLD = 128 * 1024  # glibc's default: blocks this large or larger get a mapping of their own
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h


def keep_large_blocks_apart() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` for this process; whether it was set (False: not
    glibc, or the user's ``MALLOC_MMAP_THRESHOLD_`` is in force)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
