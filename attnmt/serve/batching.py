"""Dynamic batching: requests that arrive together are decoded together.

A decoder is much faster per sentence on a batch than on one sentence at a time (one matrix product
instead of many small ones), but HTTP requests arrive one by one. :class:`DynamicBatcher` sits
between them: each request is a *job* (a group key and a list of items); the batcher's loop takes
the first waiting job, waits at most ``max_wait_s`` from that job's arrival for more (or until
``max_batch_size`` items are waiting), then runs the waiting jobs grouped by key, one call of
``run_batch(key, items)`` per group, in a single worker thread. While a batch decodes, new jobs queue
up, so under load the next batch is collected with no extra wait at all.

Why one worker thread: the event loop must stay free to accept connections and answer ``/health``
while a batch decodes, and a second decoding thread would only compete with the first for the same
CPU cores (PyTorch already parallelises inside one batch).

A job is never split across batches, so a request's items stay together; a job larger than
``max_batch_size`` runs alone. ``max_batch_size=1`` therefore means "one request at a time", with no
waiting: the baseline that the benchmark compares against.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, Sequence, TypeVar

__all__ = ["BatchInfo", "DynamicBatcher"]

Item = TypeVar("Item")
Result = TypeVar("Result")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchInfo:
    """How one job was served: how long it queued, how long its batch ran, how big the batch was."""

    queue_s: float  # from submission to the start of its batch
    run_s: float  # wall time of the run_batch call that served it
    batch_items: int  # items decoded together in that call
    batch_jobs: int  # jobs (requests) served by that call


@dataclass
class _Job(Generic[Item]):
    key: Hashable
    items: list[Item]
    future: asyncio.Future
    arrived: float = field(default_factory=time.perf_counter)


class DynamicBatcher(Generic[Item, Result]):
    """Collect concurrent jobs into batches and run them in one worker thread.

    ``run_batch(key, items) -> results`` must return one result per item, in order; it runs in the
    worker thread, never on the event loop. Use it from one event loop: :meth:`start` in the
    application's startup, :meth:`submit` from request handlers, :meth:`stop` at shutdown.
    """

    def __init__(self, run_batch: Callable[[Hashable, list[Item]], Sequence[Result]], max_batch_size: int = 32,
                 max_wait_s: float = 0.010) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Job[Item]] | None = None
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the collecting loop on the running event loop (call from async code)."""
        if self.running:
            return
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnmt-decode")
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="attnmt-batcher")

    async def stop(self) -> None:
        """Stop collecting, fail the jobs still waiting, and let a running batch finish."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._queue is not None:
            waiting = []
            while not self._queue.empty():
                waiting.append(self._queue.get_nowait())
            _fail(waiting, RuntimeError("the server is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def submit(self, key: Hashable, items: list[Item]) -> tuple[list[Result], BatchInfo]:
        """Queue a job and wait for its results (one per item, in order) and how it was served."""
        if not self.running or self._queue is None:
            raise RuntimeError("DynamicBatcher is not running; call start() first (the app does at startup)")
        job: _Job[Item] = _Job(key, list(items), asyncio.get_running_loop().create_future())
        await self._queue.put(job)
        return await job.future

    # ---------------------------------------------------------------------------------- internals

    async def _loop(self) -> None:
        assert self._queue is not None
        while True:
            jobs = [await self._queue.get()]
            try:
                await self._collect(jobs)
                for group in self._groups(jobs):
                    await self._run(group)
            finally:  # cancelled by stop() mid-batch: no collected job may wait forever
                _fail(jobs, RuntimeError("the server is shutting down"))

    async def _collect(self, jobs: list[_Job[Item]]) -> None:
        """Add waiting jobs to ``jobs`` until the batch is full or the first job has waited long enough."""
        assert self._queue is not None
        deadline = jobs[0].arrived + self.max_wait_s
        size = len(jobs[0].items)
        while size < self.max_batch_size:
            if self._queue.empty():
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
            else:  # jobs that queued during the previous batch have waited already: take them now
                job = self._queue.get_nowait()
            jobs.append(job)
            size += len(job.items)

    def _groups(self, jobs: list[_Job[Item]]) -> list[list[_Job[Item]]]:
        """Split jobs by key, then into chunks of at most max_batch_size items (a job is never split)."""
        by_key: dict[Hashable, list[_Job[Item]]] = {}
        for job in jobs:
            if not job.future.done():  # a cancelled request (client gone) needs no decoding
                by_key.setdefault(job.key, []).append(job)
        groups = []
        for key_jobs in by_key.values():
            chunk: list[_Job[Item]] = []
            size = 0
            for job in key_jobs:
                if chunk and size + len(job.items) > self.max_batch_size:
                    groups.append(chunk)
                    chunk, size = [], 0
                chunk.append(job)
                size += len(job.items)
            groups.append(chunk)
        return [g for g in groups if g]

    async def _run(self, jobs: list[_Job[Item]]) -> None:
        """Run one group in the worker thread and hand each job its slice of the results."""
        items = [item for job in jobs for item in job.items]
        started = time.perf_counter()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.run_batch, jobs[0].key, items)
            if len(results) != len(items):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(items)} items")
        except Exception as e:  # a failed batch fails its own jobs, never the loop
            log.exception("batch of %d items failed", len(items))
            _fail(jobs, e)
            return
        run_s = time.perf_counter() - started
        offset = 0
        for job in jobs:
            n = len(job.items)
            info = BatchInfo(queue_s=started - job.arrived, run_s=run_s, batch_items=len(items),
                             batch_jobs=len(jobs))
            if not job.future.done():
                job.future.set_result((list(results[offset:offset + n]), info))
            offset += n


def _fail(jobs: list[_Job], error: BaseException) -> None:
    """Give every unfinished job the error (a job already answered or cancelled is left alone)."""
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(error)
