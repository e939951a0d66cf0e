"""`attnmt serve` under load: the bounded queue (503 with Retry-After), big requests split into chunks
that take turns with small ones, the dynamic batcher on its own, and the load benchmark's built-in model.

The decoder is held at a known point (a wrapped ``decode_batch`` that waits for the test) so that what
is queued when is decided by the test, not by timing; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

import attnmt.serve.app as app_module
from attnmt.decode.translator import load
from attnmt.serve import Limits, create_app
from attnmt.serve.batching import DynamicBatcher, QueueFull

SENTENCE = "gupo pelido duno gute"  # 4 words: a cost of beam x n_best x 5 under the tiny model's word tokenizer


def run(coroutine):
    """asyncio.run in a thread of its own: in one process with the browser tests, Playwright's event loop runs in
    the main thread (the session's browser fixture), where asyncio.run refuses to start."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class HeldDecoder:
    """decode_batch, recording each batch's sentences; the first batch waits until :meth:`release`."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started, self._release = threading.Event(), threading.Event()
        self.real = app_module.decode_batch

    def __call__(self, models, key, items):
        self.batches.append([item.text for item in items])
        if len(self.batches) == 1:
            self.started.set()
            self._release.wait(timeout=20)  # a test that forgets to release still ends
        return self.real(models, key, items)

    def release(self) -> None:
        self._release.set()


@pytest.fixture
def held(monkeypatch) -> HeldDecoder:
    decoder = HeldDecoder()
    monkeypatch.setattr(app_module, "decode_batch", decoder)
    return decoder


def wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def queued(client: TestClient) -> int:
    return client.get("/health").json()["queued_sentences"]


@pytest.mark.timeout(120)
def test_a_full_queue_answers_503_with_retry_after_and_admits_what_fits(tiny_model, held):
    app = create_app({"m": tiny_model}, limits=Limits(max_texts=4, max_queue_sentences=4))
    with TestClient(app) as c, ThreadPoolExecutor(2) as pool:
        first = pool.submit(c.post, "/translate", json={"texts": [SENTENCE] * 3})
        assert held.started.wait(20)
        assert queued(c) == 3  # decoding counts as queued until answered
        r = c.post("/translate", json={"texts": [SENTENCE] * 2})  # 3 + 2 > 4
        assert r.status_code == 503, r.json()
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["field"] is None
        assert "busy: 3 sentences are queued and at most 4 may be" in r.json()["error"]["message"]
        third = pool.submit(c.post, "/translate", json={"text": SENTENCE})  # 3 + 1 = 4: fits
        wait_for(lambda: queued(c) == 4, "the third request to be queued")
        held.release()
        assert first.result(timeout=60).status_code == 200 and third.result(timeout=60).status_code == 200
        assert queued(c) == 0  # answered requests leave the queue
        assert c.post("/translate", json={"texts": [SENTENCE] * 2}).status_code == 200


@pytest.mark.timeout(120)
def test_a_flood_is_shed_before_its_body_is_read(tiny_model, held):
    """The admission bound (attnmt.serve.admission): with as many requests in the server as the queue's sentence
    bound, the next translating request gets 503 + Retry-After without its body being parsed; pages stay up."""
    app = create_app({"m": tiny_model}, limits=Limits(max_texts=2, max_queue_sentences=2))
    with TestClient(app) as c, ThreadPoolExecutor(2) as pool:
        first = pool.submit(c.post, "/translate", json={"text": SENTENCE})
        assert held.started.wait(20)
        second = pool.submit(c.post, "/translate", json={"text": SENTENCE})
        wait_for(lambda: queued(c) == 2, "the second request to be queued")
        r = c.post("/translate", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 503, r.text  # not 422: the body was never read
        assert int(r.headers["Retry-After"]) >= 1
        assert "2 requests are in it and at most 2 may be" in r.json()["error"]["message"]
        assert c.get("/health").status_code == 200
        held.release()
        assert first.result(timeout=60).status_code == 200 and second.result(timeout=60).status_code == 200
        assert c.post("/translate", json={"text": SENTENCE}).status_code == 200  # the slots are given back


@pytest.mark.timeout(120)
def test_the_queue_is_bounded_by_cost(tiny_model, held):
    # default beam 3: a 4-word sentence costs 3 x 1 x (4 + 1) = 15; two of them 30, within 40
    app = create_app({"m": tiny_model}, limits=Limits(max_queue_cost=40))
    with TestClient(app) as c, ThreadPoolExecutor(2) as pool:
        first = pool.submit(c.post, "/translate", json={"texts": [SENTENCE] * 2})
        assert held.started.wait(20)
        assert c.get("/health").json()["queued_cost"] == 30
        r = c.post("/translate", json={"text": SENTENCE})  # 30 + 15 > 40
        assert r.status_code == 503 and "cost 30 is queued and at most 40" in r.json()["error"]["message"]
        assert int(r.headers["Retry-After"]) >= 1
        greedy = pool.submit(c.post, "/translate", json={"text": SENTENCE, "beam": 1})  # 30 + 5: fits
        wait_for(lambda: queued(c) == 3, "the greedy request to be queued")
        held.release()
        assert first.result(timeout=60).status_code == 200 and greedy.result(timeout=60).status_code == 200
        # a request that alone costs more than the bound could never be queued: 422, not 503
        r = c.post("/translate", json={"texts": [SENTENCE] * 3})  # 45
        assert r.status_code == 422 and r.json()["error"]["field"] == "texts"
        assert "cost is 45" in r.json()["error"]["message"] and "at most 40" in r.json()["error"]["message"]


@pytest.mark.timeout(120)
def test_a_small_request_finishes_before_a_big_one_sent_earlier(tiny_model, held):
    # The big request: 8 sentences at beam 3, n_best 3, each 3 x 3 x 5 = 45; a batch may cost 90, so
    # it is decoded in 4 chunks of 2 sentences. The small one (greedy, 2 words) comes while the first
    # chunk decodes and must be served in the next batch, not after the other three chunks.
    texts = [SENTENCE, "ra retaro mudeti dunilu", "gupo pelido", "seke bubaga katu deme"] * 2
    app = create_app({"m": tiny_model}, max_batch_cost=90)
    finished: list[str] = []

    def send(name: str, body: dict):
        r = c.post("/translate", json=body)
        finished.append(name)
        return r

    with TestClient(app) as c, ThreadPoolExecutor(2) as pool:
        big = pool.submit(send, "big", {"texts": texts, "beam": 3, "n_best": 3})
        assert held.started.wait(20)
        small = pool.submit(send, "small", {"text": "gupo pelido", "beam": 1})
        wait_for(lambda: queued(c) == 9, "the small request to be queued")
        held.release()
        big, small = big.result(timeout=60), small.result(timeout=60)
    assert finished == ["small", "big"]
    assert held.batches == [texts[0:2], ["gupo pelido"], texts[2:4], texts[4:6], texts[6:8]]
    assert big.status_code == small.status_code == 200
    # split or not, the big request's answer is the translator's, in its order
    expected = load(tiny_model).translate(texts, beam=3, n_best=3)
    answer = big.json()
    assert [t["text"] for t in answer["translations"]] == [e.text for e in expected]
    assert [[h["text"] for h in t["n_best"]] for t in answer["translations"]] == [
        [h.text for h in e.n_best] for e in expected]
    assert answer["timing"]["batches"] == 4 and small.json()["timing"]["batches"] == 1


# ------------------------------------------------------------------------------- the batcher alone


def test_batcher_takes_turns_one_chunk_per_job():
    calls: list[list[str]] = []

    def run_batch(key, items):
        calls.append(list(items))
        return items

    async def main():
        batcher = DynamicBatcher(run_batch, max_batch_size=2, max_wait_s=0.0)
        batcher.start()
        big = batcher.submit("k", ["b0", "b1", "b2", "b3", "b4", "b5"])
        small = batcher.submit("k", ["s0"])
        results = await asyncio.gather(big, small)
        await batcher.stop()
        return results

    (big, big_info), (small, _) = run(main())
    # the big job's chunks are [b0 b1] [b2 b3] [b4 b5]; after its first, the small job has its turn
    assert calls == [["b0", "b1"], ["s0"], ["b2", "b3"], ["b4", "b5"]]
    assert big == ["b0", "b1", "b2", "b3", "b4", "b5"] and small == ["s0"] and big_info.batches == 3


def test_batcher_chunks_by_cost():
    calls: list[list[int]] = []

    def run_batch(key, items):
        calls.append(list(items))
        return items

    async def main():
        batcher = DynamicBatcher(run_batch, max_batch_size=32, max_wait_s=0.0, max_batch_cost=10)
        batcher.start()
        result = await batcher.submit("k", [1, 2, 3, 4, 5, 6], costs=[4, 4, 4, 20, 1, 1])
        await batcher.stop()
        return result

    result, info = run(main())
    # 4 + 4 fit in 10, a third 4 does not; an item over the bound is a chunk of its own
    assert calls == [[1, 2], [3], [4], [5, 6]] and result == [1, 2, 3, 4, 5, 6] and info.batches == 4


def test_batcher_refuses_a_job_over_the_bound_and_says_when_to_retry():
    release = threading.Event()

    def run_batch(key, items):
        time.sleep(0.1)  # a known least run time: the measured rate is at most 10 cost / 0.1 s
        release.wait(timeout=20)
        return items

    async def main():
        batcher = DynamicBatcher(run_batch, max_batch_size=8, max_wait_s=0.0, max_queue_items=3,
                                 max_queue_cost=1000)
        batcher.start()
        assert batcher.retry_after_s() == 1  # no rate measured yet
        first = asyncio.ensure_future(batcher.submit("k", [1, 2], costs=[5, 5]))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull) as full:
            await batcher.submit("k", [3, 4])
        assert full.value.retry_after_s == 1
        release.set()
        await first
        assert (batcher.queued_items, batcher.queued_cost) == (0, 0.0)
        # at most 100 cost per second measured: 990 queued need at least 10 s
        release.clear()
        held = asyncio.ensure_future(batcher.submit("k", [5], costs=[990]))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull) as full:
            await batcher.submit("k", [6], costs=[20])
        release.set()
        await held
        await batcher.stop()
        return full.value

    full = run(main())
    assert 10 <= full.retry_after_s <= 60 and "cost 990 is queued and at most 1,000" in str(full)


def test_batcher_groups_by_key_and_splits_a_job_over_max_batch_size():
    calls: list[tuple[str, list[int]]] = []

    def run_batch(key, items):
        calls.append((key, list(items)))
        return [i * 10 for i in items]

    async def main():
        batcher = DynamicBatcher(run_batch, max_batch_size=4, max_wait_s=0.2)
        batcher.start()
        jobs = [("a", [1, 2]), ("b", [3]), ("a", [4, 5]), ("a", [6]), ("a", [7, 8, 9, 10, 11])]
        results = await asyncio.gather(*(batcher.submit(k, items) for k, items in jobs))
        await batcher.stop()
        return results

    results = run(main())
    assert [r for r, _ in results] == [[10, 20], [30], [40, 50], [60], [70, 80, 90, 100, 110]]
    # at most one chunk of a job per batch; the five-item job is two chunks, [7..10] and [11]
    assert sorted(calls) == [("a", [1, 2, 4, 5]), ("a", [6]), ("a", [7, 8, 9, 10]), ("a", [11]), ("b", [3])]
    info = results[0][1]
    assert info.batch_items == 4 and info.batch_jobs == 2 and info.batches == 1
    assert results[4][1].batches == 2


def test_batcher_keeps_the_event_loop_free_while_decoding():
    started, release = threading.Event(), threading.Event()
    decoded_in: list[str] = []

    def slow(key, items):
        started.set()
        decoded_in.append(threading.current_thread().name)
        release.wait(timeout=30)  # a decode that lasts until the event loop says so
        return items

    async def main():
        batcher = DynamicBatcher(slow, max_batch_size=8, max_wait_s=0.0)
        batcher.start()
        job = asyncio.ensure_future(batcher.submit("k", [1]))
        while not started.is_set():
            await asyncio.sleep(0.001)
        for _ in range(5):  # the loop keeps running while the decode is under way ...
            await asyncio.sleep(0)
        still_decoding = not job.done()
        release.set()  # ... and only the loop can end it
        result = await job
        await batcher.stop()
        return still_decoding, result

    still_decoding, (result, info) = run(main())
    assert still_decoding and result == [1]
    assert decoded_in and decoded_in[0] != threading.current_thread().name  # a worker thread decoded it


def test_batcher_failure_is_per_batch_and_stop_fails_waiting_jobs():
    def run_batch(key, items):
        if key == "bad":
            raise ValueError("bad batch")
        return items

    async def main():
        batcher = DynamicBatcher(run_batch, max_batch_size=8, max_wait_s=0.05)
        batcher.start()
        bad, good = await asyncio.gather(batcher.submit("bad", [1]), batcher.submit("good", [2]),
                                         return_exceptions=True)
        await batcher.stop()
        with pytest.raises(RuntimeError, match="not running"):
            await batcher.submit("good", [3])
        return bad, good

    bad, good = run(main())
    assert isinstance(bad, ValueError) and good[0] == [2]


# ----------------------------------------------------------------------------------- the benchmark


@pytest.mark.timeout(300)
def test_the_load_benchmarks_built_in_model_trains(tmp_path):
    from benchmarks.serve_load import train_demo_model

    model_dir = train_demo_model(tmp_path, seconds=1.0, pairs=200)
    translator = load(model_dir)
    assert translator.config.model.type == "rnnsearch" and translator.config.model.hidden_size == 192
