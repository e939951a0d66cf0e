"""A training process's resident memory held near what it uses: glibc's allocator keeps large blocks apart.

glibc's malloc serves a block of 128 KiB or more with a mapping of its own, unmapped when the block is freed,
but each time such a block is freed it raises that threshold to the block's size (its dynamic mmap threshold,
up to 32 MiB on 64-bit systems). A training step allocates and frees tensors of every size up to tens of MB;
once the threshold has risen they come from the heap, where freed space is kept and splintered, and the
process's resident memory climbs for many updates past what a step holds at once
(benchmarks/results/data_memory.json). :func:`keep_large_blocks_apart` sets the threshold to glibc's own default
(``mallopt(M_MMAP_THRESHOLD, 128 KiB)``), which turns the raising off: every large tensor is mapped on its own
and given back when freed, at the cost of a fresh mapping per large allocation.

oneDNN, which runs the CPU's bfloat16 matrix products (``precision: auto`` or ``bf16``), keeps every product's
compiled kernel, with its working memory, in two caches of 1,024 entries each: oneDNN's primitive cache and
ideep's (PyTorch's wrapper's) LRU cache. A product of a new shape adds an entry, and the shapes of a training
step change with every batch (its sentences and lengths), so the caches grow by tens of MB per update for the
first hundreds of updates. :func:`bound_kernel_caches` holds each to :data:`KERNEL_CACHE_CAPACITY` entries, more
than the products of one step, so a step's repeated shapes (the same layer type over the layers) are still
found in the cache. The libraries read the capacities (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``,
``LRU_CACHE_CAPACITY``) from the environment at their first product, so it is set before the model runs; a
capacity the user set is left as it is.

Both change the whole process, so they are called by what owns a training process (:func:`attnmt.train.trainer.train`,
beside the thread count), never on import. A threshold the user set (``MALLOC_MMAP_THRESHOLD_``) is left as it is,
and so is a C library other than glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["KERNEL_CACHE_CAPACITY", "MMAP_THRESHOLD", "bound_kernel_caches", "keep_large_blocks_apart"]

MMAP_THRESHOLD = 128 * 1024  # glibc's default: blocks this large or larger get a mapping of their own
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h
KERNEL_CACHE_CAPACITY = 64  # entries in each of oneDNN's and ideep's caches of compiled products
# (ideep crashes with a capacity of 0)
_KERNEL_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


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


def bound_kernel_caches() -> list[str]:
    """Hold oneDNN's and ideep's caches of compiled products to :data:`KERNEL_CACHE_CAPACITY` entries each, before
    their first product; the environment variables set (one the user set is left as it is)."""
    unset = [name for name in _KERNEL_CACHES if name not in os.environ]
    for name in unset:
        os.environ[name] = str(KERNEL_CACHE_CAPACITY)
    return unset
