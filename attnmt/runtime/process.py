"""The processes attnmt starts and owns (the `attnmt` command, a study's workers): how they end.

At exit, Python walks every object still alive in one last garbage collection: hundreds of thousands after
``import torch`` and a forward pass, and more once torch's optimizers have imported torch._dynamo (on their
first call), and the walk is most of the time such a process takes to end (benchmarks/process_exit.py).
:func:`ends_without_final_collection` freezes them (`gc.freeze`) after everything else registered for the exit
has run, and the operating system frees the process's memory with the process.

Nothing is left undone by that: objects are still freed when their last reference goes, atexit handlers and
``weakref.finalize`` callbacks run as before, and standard output is flushed by the interpreter. Only reference
cycles still alive at exit are not walked; attnmt writes its files inside ``with`` blocks
(attnmt.runtime.safe_write), so no output waits on such a cycle to be flushed. A Python program that imports
attnmt as a library is never changed this way: its interpreter is its own.
"""

from __future__ import annotations

import atexit
import gc

__all__ = ["ends_without_final_collection", "worker_started"]


def ends_without_final_collection() -> None:
    """Call at the start of a process attnmt owns: its exit skips the last walk over every live object."""
    atexit.register(gc.freeze)  # exit handlers run last-registered first: the ones registered later run before it


def _die_with_parent() -> None:
    """Linux: end a worker when the process that started it ends, however it ends (no orphans training on)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def worker_started() -> None:
    """The initializer of a pool of worker processes that attnmt spawns: each dies with its parent and ends
    without the last collection."""
    _die_with_parent()
    ends_without_final_collection()
