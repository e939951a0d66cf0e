"""torch's thread count: set by the command that runs, or for the span of one call (a translation, a training run);
never by loading a model.

A command (``attnmt translate``, ``evaluate``, ``serve``) owns its process and sets the count once with
:func:`use_threads`. Library code that is asked for a count (``attnmt.load(DIR, threads=N)``) applies it only
while it works, with :func:`threads_for`, and puts the caller's count back afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from attnmt.runtime.memory import bound_kernel_caches, free_pages_given_back

__all__ = ["threads_for", "training_process", "use_threads"]


def use_threads(threads: int | None) -> None:
    """The command's thread count for the rest of the process (None: torch's default, left as it is)."""
    if threads is not None:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def threads_for(threads: int | None) -> Iterator[None]:
    """torch's thread count set to ``threads`` inside the block and restored after it (None: left as it is)."""
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def training_process(threads: int | None) -> Iterator[None]:
    """A training run's process, for the span of the run: ``threads`` intra-op threads (None: one per available
    core, as oversubscription slows small matrix products), then the caller's count again; oneDNN's caches of
    compiled products held small (``bound_kernel_caches``); free memory given back to the system
    (:func:`attnmt.runtime.memory.free_pages_given_back`)."""
    bound_kernel_caches()
    with threads_for(max(1, threads or len(os.sched_getaffinity(0)))), free_pages_given_back():
        yield
