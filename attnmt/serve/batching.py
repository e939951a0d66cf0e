"""Dynamic batching with a bounded queue: requests that arrive together are decoded together.

A decoder is much faster per sentence on a batch than on one sentence at a time (one matrix product
instead of many small ones), but HTTP requests arrive one by one. :class:`DynamicBatcher` sits
between them: each request is a *job* (a group key and a list of items, each with a cost); the
batcher's loop waits at most ``max_wait_s`` from the first waiting job's arrival for more (or until
``max_batch_size`` items are waiting), then runs batches, one call of ``run_batch(key, items)`` per
batch, in a single worker thread. While a batch decodes, new jobs queue up, so under load the next
batch is collected with no extra wait at all.

**Chunks and fair turns.** A job is cut, when it is submitted, into chunks of consecutive items of
at most ``max_batch_size`` items and ``max_batch_cost`` cost (a chunk holds at least one item). A
batch takes at most one chunk from each job, from jobs of one key, and the jobs take turns: each
batch starts with the job that has waited longest since its last chunk was decoded (a new job
counts from its arrival), then adds the next chunk of the other jobs of that key in the same order while
the batch stays within both bounds. So a request of many expensive sentences is decoded a chunk at a
time, and a two-word request that arrives meanwhile waits for one chunk, not for the whole of it.
The chunks depend only on the job and the two bounds, never on what else is queued.

**The bound.** The items and the cost of the jobs admitted and not yet answered (waiting or
decoding) are counted; :meth:`DynamicBatcher.submit` refuses a job that would take either over
``max_queue_items`` or ``max_queue_cost`` with :class:`QueueFull`, which carries how many seconds
the queue needs to drain at the recent decoding rate (the server's ``Retry-After``). Memory and
waiting time stay bounded however many requests arrive.

Why one worker thread: the event loop must stay free to accept connections and answer ``/health``
while a batch decodes, and a second decoding thread would only compete with the first for the same
CPU cores (PyTorch already parallelises inside one batch). ``max_batch_size=1`` means one sentence
at a time, with no waiting: the baseline that the benchmark compares against.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, Sequence, TypeVar

__all__ = ["BatchInfo", "DynamicBatcher", "QueueFull"]

Item = TypeVar("Item")
Result = TypeVar("Result")

log = logging.getLogger(__name__)
RETRY_AFTER_RANGE = (1, 60)  # seconds: Retry-After is at least 1 s and never asks a client to wait over a minute


class QueueFull(Exception):
    """The queue holds as many items or as much cost as it may: the job was not admitted."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class BatchInfo:
    """How one job was served: how long it queued, how long its batches ran, how big the first was."""

    queue_s: float  # from submission to the answer, less the time its batches ran
    run_s: float  # wall time of the run_batch calls that served it, summed
    batch_items: int  # items decoded together in its first batch
    batch_jobs: int  # jobs (requests) served by its first batch
    batches: int = 1  # run_batch calls that served it (its chunks)


@dataclass
class _Job(Generic[Item]):
    key: Hashable
    items: list[Item]
    chunks: list[tuple[int, int, float]]  # [start, end) of each chunk and its cost, summed once
    future: asyncio.Future
    order: int  # submission order, to break ties between turns
    arrived: float = field(default_factory=time.perf_counter)
    last_turn: float = 0.0  # when its last chunk was decoded (its arrival until then)
    next_chunk: int = 0  # the first chunk not yet taken
    chunks_done: int = 0
    collected: bool = False  # the collection window that waits for company is over for it
    results: list = field(default_factory=list)
    run_s: float = 0.0
    first_batch: tuple[int, int] | None = None

    def chunk(self, index: int) -> tuple[int, float]:
        start, end, cost = self.chunks[index]
        return end - start, cost


class DynamicBatcher(Generic[Item, Result]):
    """Collect concurrent jobs into batches and run them in one worker thread.

    ``run_batch(key, items) -> results`` must return one result per item, in order; it runs in the
    worker thread, never on the event loop. Use it from one event loop: :meth:`start` in the
    application's startup, :meth:`submit` from request handlers, :meth:`stop` at shutdown.
    ``max_queue_items`` / ``max_queue_cost``: None for no bound.
    """

    def __init__(self, run_batch: Callable[[Hashable, list[Item]], Sequence[Result]], max_batch_size: int = 32,
                 max_wait_s: float = 0.010, max_batch_cost: float = math.inf, max_queue_items: int | None = None,
                 max_queue_cost: float | None = None) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        if not max_batch_cost > 0:
            raise ValueError(f"max_batch_cost must be > 0, got {max_batch_cost}")
        for name, bound in (("max_queue_items", max_queue_items), ("max_queue_cost", max_queue_cost)):
            if bound is not None and not bound > 0:
                raise ValueError(f"{name} must be > 0 or None, got {bound}")
        self.run_batch = run_batch
        self.max_batch_size, self.max_wait_s, self.max_batch_cost = max_batch_size, max_wait_s, max_batch_cost
        self.max_queue_items, self.max_queue_cost = max_queue_items, max_queue_cost
        self.queued_items = 0  # admitted and not yet answered (waiting or decoding)
        self.queued_cost = 0.0
        self._rate: float | None = None  # recent decoding rate, cost per second
        self._waiting: list[_Job[Item]] = []  # jobs with chunks not yet taken
        self._new: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._order = itertools.count()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the collecting loop on the running event loop (call from async code)."""
        if self.running:
            return
        self._new = asyncio.Event()
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
        waiting, self._waiting = self._waiting, []
        _fail(waiting, RuntimeError("the server is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def retry_after_s(self) -> int:
        """Seconds the admitted work needs at the recent decoding rate, within RETRY_AFTER_RANGE."""
        low, high = RETRY_AFTER_RANGE
        if not self._rate:
            return low
        return int(min(max(math.ceil(self.queued_cost / self._rate), low), high))

    def check_room(self, items: int, cost: float) -> None:
        """Raise :class:`QueueFull` if a job of ``items`` items and ``cost`` would go over a bound."""
        full = None
        if self.max_queue_items is not None and self.queued_items + items > self.max_queue_items:
            full = f"{self.queued_items} sentences are queued and at most {self.max_queue_items} may be"
        elif self.max_queue_cost is not None and self.queued_cost + cost > self.max_queue_cost:
            full = f"work of cost {self.queued_cost:,.0f} is queued and at most {self.max_queue_cost:,.0f} may be"
        if full:
            retry = self.retry_after_s()
            raise QueueFull(f"the server is busy: {full}; retry in {retry} s", retry)

    async def submit(self, key: Hashable, items: list[Item],
                     costs: Sequence[float] | None = None) -> tuple[list[Result], BatchInfo]:
        """Queue a job and wait for its results (one per item, in order) and how it was served.

        ``costs``: one per item (default 1 each). Raises :class:`QueueFull` when the queue has no room.
        """
        if not self.running or self._new is None:
            raise RuntimeError("DynamicBatcher is not running; call start() first (the app does at startup)")
        items = list(items)
        costs = [1.0] * len(items) if costs is None else [float(c) for c in costs]
        if len(costs) != len(items) or not items:
            raise ValueError(f"a job needs items and one cost per item, got {len(items)} items, {len(costs)} costs")
        chunks = self._chunks(costs)
        total = sum(cost for _, _, cost in chunks)
        self.check_room(len(items), total)
        job: _Job[Item] = _Job(key, items, chunks, asyncio.get_running_loop().create_future(),
                               next(self._order))
        job.last_turn, job.results = job.arrived, [None] * len(items)
        self.queued_items += len(items)
        self.queued_cost += total
        self._waiting.append(job)
        self._new.set()
        return await job.future

    # ---------------------------------------------------------------------------------- internals

    def _chunks(self, costs: list[float]) -> list[tuple[int, int, float]]:
        """Consecutive items, at most max_batch_size of them and max_batch_cost in cost (at least one): each
        chunk's [start, end) and its cost."""
        chunks, start, cost = [], 0, 0.0
        for i, c in enumerate(costs):
            if i > start and (i - start >= self.max_batch_size or cost + c > self.max_batch_cost):
                chunks.append((start, i, cost))
                start, cost = i, 0.0
            cost += c
        chunks.append((start, len(costs), cost))
        return chunks

    async def _loop(self) -> None:
        assert self._new is not None
        while True:
            self._drop_answered()
            if not self._waiting:
                self._new.clear()
                await self._new.wait()
                continue
            if not any(job.collected for job in self._waiting):
                await self._collect()
            for job in self._waiting:
                job.collected = True
            batch = self._next_batch()
            if batch:
                await self._run(batch)

    async def _collect(self) -> None:
        """Wait for company until max_batch_size items wait or the first job has waited max_wait_s."""
        assert self._new is not None
        deadline = min(job.arrived for job in self._waiting) + self.max_wait_s
        while sum(len(job.items) for job in self._waiting) < self.max_batch_size:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _drop_answered(self) -> None:
        """Forget jobs already answered (failed, or cancelled: the client went away), with their queued work."""
        for job in [job for job in self._waiting if job.future.done()]:
            self._waiting.remove(job)
            for index in range(job.next_chunk, len(job.chunks)):
                self._release(*job.chunk(index))

    def _release(self, items: int, cost: float) -> None:
        self.queued_items -= items
        self.queued_cost = max(self.queued_cost - cost, 0.0)

    def _next_batch(self) -> list[tuple[_Job[Item], int]]:
        """One chunk of each job of the key whose turn it is, within max_batch_size and max_batch_cost."""
        turns = sorted(self._waiting, key=lambda job: (job.last_turn, job.order))
        key = turns[0].key
        batch: list[tuple[_Job[Item], int]] = []
        items, cost = 0, 0.0
        for job in turns:
            if job.key != key:
                continue
            n, c = job.chunk(job.next_chunk)
            if batch and (items + n > self.max_batch_size or cost + c > self.max_batch_cost):
                continue
            batch.append((job, job.next_chunk))
            items, cost = items + n, cost + c
            job.next_chunk += 1
            if job.next_chunk == len(job.chunks):
                self._waiting.remove(job)
        return batch

    async def _run(self, batch: list[tuple[_Job[Item], int]]) -> None:
        """Run one batch in the worker thread and hand each job its chunk's results."""
        spans = [(job, *job.chunks[index]) for job, index in batch]
        items = [item for job, start, end, _ in spans for item in job.items[start:end]]
        cost = sum(chunk_cost for _, _, _, chunk_cost in spans)
        started = time.perf_counter()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.run_batch, batch[0][0].key, items)
            if len(results) != len(items):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(items)} items")
        except asyncio.CancelledError:  # stop() during a batch: no job of it may wait forever
            _fail([job for job, _ in batch], RuntimeError("the server is shutting down"))
            raise
        except Exception as e:  # a failed batch fails its own jobs, never the loop
            log.exception("batch of %d items failed", len(items))
            _fail([job for job, _ in batch], e)
            return
        finally:  # cancelled by stop() mid-batch too: the chunks are no longer queued
            self._release(len(items), cost)
            for job, _ in batch:  # to the back of the line, behind the jobs that came while it decoded
                job.last_turn = time.perf_counter()
        run_s = time.perf_counter() - started
        if run_s > 0:
            self._rate = cost / run_s if self._rate is None else 0.7 * self._rate + 0.3 * cost / run_s
        offset = 0
        for job, start, end, _ in spans:
            job.results[start:end] = results[offset:offset + end - start]
            offset += end - start
            job.run_s += run_s
            job.chunks_done += 1
            job.first_batch = job.first_batch or (len(items), len(batch))
            if job.chunks_done == len(job.chunks) and not job.future.done():
                total = time.perf_counter() - job.arrived
                info = BatchInfo(queue_s=max(total - job.run_s, 0.0), run_s=job.run_s, batch_items=job.first_batch[0],
                                 batch_jobs=job.first_batch[1], batches=len(job.chunks))
                job.future.set_result((list(job.results), info))


def _fail(jobs: list[_Job], error: BaseException) -> None:
    """Give every unfinished job the error (a job already answered or cancelled is left alone)."""
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(error)
