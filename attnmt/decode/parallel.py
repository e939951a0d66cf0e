"""Independent pieces of work (decoding batches) spread over forked worker processes on a CPU.

Decoding is a long chain of small operations, which two threads share badly; two processes of one
thread, decoding different batches, ran 1.2-1.6x as fast as one process with both threads
(benchmarks/rnn256.py, benchmarks/decoding.py). The
workers are forked, so they share the parent's model and data without copying or pickling them, and
only the results travel back. Each worker runs one thread: GNU OpenMP, which PyTorch's CPU builds use,
hangs when a forked child of a process that already used it starts threads of its own.
"""

from __future__ import annotations

import multiprocessing
from typing import Callable, TypeVar

import torch

__all__ = ["map_in_processes", "can_fork"]

T = TypeVar("T")

# The function a worker process runs, set once when it starts (in the forked child only: the parent's
# value stays None). Pool tasks carry just an index, so nothing large is pickled per task.
_worker_fn: Callable[[int], object] | None = None


def can_fork() -> bool:
    """Whether this platform starts processes by forking (Linux and other Unix systems)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _start_worker(fn: Callable[[int], object]) -> None:
    global _worker_fn
    _worker_fn = fn
    torch.set_num_threads(1)


def _run(i: int) -> object:
    assert _worker_fn is not None
    return _worker_fn(i)


def map_in_processes(fn: Callable[[int], T], n: int, workers: int) -> list[T]:
    """``[fn(0), ..., fn(n - 1)]``, computed by ``workers`` forked processes of one thread each.

    Runs in this process when ``workers`` is 1, when there is at most one piece of work, or where
    processes cannot be forked. Idle workers take the next index, so uneven pieces balance out.
    """
    workers = min(workers, n)
    if workers <= 1 or not can_fork():
        return [fn(i) for i in range(n)]
    # initargs are inherited by the fork, not pickled: fn may be a closure over the model
    with multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker, initargs=(fn,)) as pool:
        return pool.map(_run, range(n), chunksize=1)
