"""Benchmark: `attnmt serve` under concurrent clients, with dynamic batching and one request at a time.

For each mode the server runs as its own process (``python -m attnmt serve``, exactly what a user
starts) on 127.0.0.1; this process is the load generator: ``--clients`` asyncio tasks, each sending
one sentence per POST /translate with httpx and sending the next as soon as the answer is in
(a closed loop), for ``--duration`` seconds. Only loopback is ever contacted.

Modes
- batched:        --max-batch-size 32 --max-wait-ms 10 (the defaults)
- one_at_a_time:  --max-batch-size 1 (every request decoded alone, no waiting)

Measured per mode, over a window of --duration seconds that opens after --warmup seconds and once
every client has had an answer (the steady state): requests/s (answers arriving in the window / its
length), latency
p50 / p90 / p99 / max (client side, time.perf_counter around each POST), errors (non-200 answers or
transport errors, warm-up included; must be 0: the script exits 1 otherwise) and the mean batch size the server
reported. ``gain`` = batched requests/s / one-at-a-time requests/s.

Overload (``--overload K``, instead of the two modes): first the server's capacity C, the requests/s
of a batched server under --clients closed-loop clients for --capacity-seconds; then a fresh server
whose queue holds about --queue-seconds of that capacity (``--max-queue-sentences`` = C x
--queue-seconds) gets an open-loop load of K x C requests/s for --duration seconds: arrivals of a
Poisson process (seeded), each sent whether or not earlier ones were answered, as independent
clients do. Measured: requests sent, served (200; per second: those answered while requests were
being sent), the share shed (503 with Retry-After), any other error (must be 0), the latency of the
served and of the shed ones (p50 / p99), the Retry-After values, whether /health still answers
afterwards, and the server's resident memory (VmRSS) after warm-up and after the load. The result
is the ``overload`` section of --out; the file's other keys are kept (and a run of the two modes
keeps an ``overload`` section).

The model: --model DIR, or else an rnnsearch of the demo's size (emb 96, hidden 192) trained here
for --train-seconds on the built-in synthetic language in a temporary folder. The sentences sent
are held-out synthetic sentences of 4 to 30 words. The server decodes on one torch thread
(--threads 1): on a small shared machine the load generator needs the other core, and one thread
is reproducible.

Usage: python -m benchmarks.serve_load [--quick] [--model DIR] [--clients 32] [--duration 30] [--out PATH]
       python -m benchmarks.serve_load --overload 4 [--capacity-seconds 10] [--queue-seconds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path(__file__).parent / "results" / "serve_load.json"
MODES = {"batched": {"max_batch_size": 32, "max_wait_ms": 10.0},
         "one_at_a_time": {"max_batch_size": 1, "max_wait_ms": 0.0}}


# ------------------------------------------------------------------------------------ the model


def train_demo_model(directory: Path, seconds: float, pairs: int = 6000) -> Path:
    """An rnnsearch of the demo's size on `pairs` pairs of the synthetic language, trained for `seconds`."""
    from attnmt.config.schema import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
    from attnmt.data.synthetic_corpus import make_splits, write_corpus
    from attnmt.train.trainer import train

    data = directory / "data"
    for name, split in make_splits(pairs, 200, 0, min_len=4, max_len=30, seed=1).items():
        write_corpus(split, data, name)
    config = Config(
        name="serve-bench",
        data=DataConfig(train_src=str(data / "train.src"), train_tgt=str(data / "train.tgt"),
                        valid_src=str(data / "valid.src"), valid_tgt=str(data / "valid.tgt"),
                        tokenizer="word", max_len=80),
        model=ModelConfig.of(type="rnnsearch", emb_size=96, hidden_size=192, dropout=0.0),
        train=TrainConfig(seed=1, batch_tokens=3000, lr=3e-3, max_time_s=seconds, valid_every=200,
                          valid_bleu_sample=0, early_stopping_patience=100, scheduler="none", progress=False,
                          tensorboard=False, threads=1),
        decode=DecodeConfig(beam=5),
    )
    model_dir = directory / "model"
    train(config, model_dir, quiet=True)
    return model_dir


def held_out_sentences(n: int, seed: int = 7) -> list[str]:
    """Held-out sentences of the synthetic language (another seed than training's)."""
    from attnmt.data.synthetic_corpus import make_splits

    pairs = make_splits(n, 0, 0, min_len=4, max_len=30, seed=seed)["train"]
    return [" ".join(p.src) for p in pairs]


# ----------------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: Path, port: int, mode: dict[str, Any], threads: int,
                 extra: list[str] = ()) -> tuple[subprocess.Popen, list[str]]:
    """`attnmt serve` in its own process (its own GIL and torch threads), as a user would start it."""
    command = [sys.executable, "-m", "attnmt", "serve", "--model", f"bench={model_dir}", "--host", "127.0.0.1",
               "--port", str(port), "--max-batch-size", str(mode["max_batch_size"]),
               "--max-wait-ms", str(mode["max_wait_ms"]), "--threads", str(threads), "--log-level", "warning",
               *extra]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return process, command


async def wait_until_up(base: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited: {process.stderr.read().decode() if process.stderr else ''}")
            try:
                if (await client.get(base + "/health", timeout=2.0)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the server did not come up in time")


# ------------------------------------------------------------------------------------- the load


async def run_load(base: str, sentences: list[str], clients: int, duration: float, warmup: float,
                   beam: int) -> dict[str, Any]:
    """`clients` closed-loop clients; answers that arrive within the measured window count.

    The window opens after `warmup` seconds *and* once every client has had an answer: with one
    request at a time, the first answers come after a whole queue of others, so a fixed warm-up
    could measure the ramp-up instead of the steady state.
    """
    done: list[tuple[float, float, bool, int, str]] = []  # (finished, latency, ok, batch size, error)
    answered: set[int] = set()
    start = time.perf_counter()
    window: dict[str, float] = {}
    hard_stop = start + warmup + duration + 600  # bounded whatever happens

    def open_window_if_ready(now: float) -> None:
        if "from" not in window and len(answered) == clients and now >= start + warmup:
            window["from"], window["to"] = now, now + duration

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=300.0) as http:
        async def client(index: int) -> None:
            rng = random.Random(index)
            while time.perf_counter() < window.get("to", hard_stop):
                body = {"text": rng.choice(sentences), "beam": beam}
                t0 = time.perf_counter()
                batch, error = 0, ""
                try:
                    response = await http.post("/translate", json=body)
                    if response.status_code == 200:
                        batch = response.json()["timing"]["batch_size"]
                    else:
                        error = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as e:
                    error = f"{type(e).__name__}: {e}"
                t1 = time.perf_counter()
                done.append((t1, t1 - t0, not error, batch, error))
                answered.add(index)
                open_window_if_ready(t1)

        await asyncio.gather(*(client(i) for i in range(clients)))

    if "from" not in window:
        raise RuntimeError("the measured window never opened (the clients got no answers in time)")
    measured = [d for d in done if window["from"] < d[0] <= window["to"]]
    latencies = sorted(d[1] for d in measured if d[2])
    errors = [d[4] for d in done if not d[2]]  # any error, warm-up included, counts

    def pct(p: float) -> float | None:
        return round(latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000, 1) if latencies else None

    return {
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / duration, 2),
        "latency_ms": {"p50": pct(50), "p90": pct(90), "p99": pct(99), "max": pct(100),
                       "mean": round(statistics.fmean(latencies) * 1000, 1) if latencies else None},
        "errors": len(errors),
        "error_examples": errors[:3],
        "mean_batch_size": round(statistics.fmean(d[3] for d in measured if d[2]), 2) if latencies else None,
        "warmup_s": round(window["from"] - start, 1),
    }


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@contextlib.asynccontextmanager
async def serving(model_dir: Path, mode: dict[str, Any], threads: int, extra: list[str] = ()):
    """A server on a free port, up: yields (its base URL, its process, its command); stopped on the way out."""
    port = free_port()
    process, command = start_server(model_dir, port, mode, threads, extra)
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_until_up(base, process)
        yield base, process, command
    finally:
        stop_server(process)


async def bench_mode(name: str, model_dir: Path, sentences: list[str], args: argparse.Namespace) -> dict[str, Any]:
    async with serving(model_dir, MODES[name], args.threads) as (base, _, command):
        result = await run_load(base, sentences, args.clients, args.duration, args.warmup, args.beam)
    result["server_command"] = shlex.join(["python"] + command[1:])
    return result


# -------------------------------------------------------------------------------------- overload


def server_rss_mb(pid: int) -> float | None:
    """The process's resident memory (VmRSS) in MB; None where /proc is not there."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def percentile_ms(values: list[float], p: float) -> float | None:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000, 1) if ordered else None


async def raw_post(host: str, port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request on its own connection, written and read with asyncio streams: a fraction of an
    HTTP client library's CPU per request, so that an open loop on the server's own cores offers its load."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, body
    finally:
        writer.close()


def post_request(host: str, port: int, path: str, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


async def open_loop(base: str, sentences: list[str], rate: float, duration: float, beam: int,
                    seed: int = 1) -> list[dict[str, Any]]:
    """Poisson arrivals at `rate` per second for `duration` s, each sent without waiting for the others."""
    rng = random.Random(seed)
    outcomes: list[dict[str, Any]] = []
    host, port = base.removeprefix("http://").rsplit(":", 1)
    requests = {text: post_request(host, int(port), "/translate", {"text": text, "beam": beam}) for text in sentences}

    async def send(text: str) -> None:
        t0 = time.perf_counter()
        outcome: dict[str, Any] = {"status": None, "retry_after": None, "error": ""}
        try:
            status, headers, body = await asyncio.wait_for(raw_post(host, int(port), requests[text]), 120.0)
            outcome["status"], outcome["retry_after"] = status, headers.get("retry-after")
            if status == 200:
                outcome["server_s"] = json.loads(body)["timing"]["total_ms"] / 1000
            if status not in (200, 503):
                outcome["error"] = f"HTTP {status}: {body[:200]!r}"
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
            outcome["error"] = f"{type(e).__name__}: {e}"
        outcome["latency_s"] = time.perf_counter() - t0
        outcome["answered_s"] = time.perf_counter() - start
        outcomes.append(outcome)

    tasks = []
    start = time.perf_counter()
    due = start + rng.expovariate(rate)
    while due < start + duration:
        await asyncio.sleep(max(due - time.perf_counter(), 0))
        tasks.append(asyncio.ensure_future(send(rng.choice(sentences))))
        due += rng.expovariate(rate)
    await asyncio.gather(*tasks)
    return outcomes


def overload_summary(outcomes: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    served = [o["latency_s"] for o in outcomes if o["status"] == 200]
    in_server = [o["server_s"] for o in outcomes if o["status"] == 200]
    served_in_window = sum(1 for o in outcomes if o["status"] == 200 and o["answered_s"] <= duration)
    shed = [o for o in outcomes if o["status"] == 503]
    errors = [o["error"] for o in outcomes if o["error"]]
    retry = sorted(int(o["retry_after"]) for o in shed if (o["retry_after"] or "").isdigit())
    return {
        "sent": len(outcomes), "sent_per_s": round(len(outcomes) / duration, 2),
        "served": len(served), "served_per_s": round(served_in_window / duration, 2),
        "shed": len(shed), "shed_share": round(len(shed) / max(len(outcomes), 1), 3),
        "shed_without_retry_after": sum(1 for o in shed if o["retry_after"] is None),
        "errors": len(errors), "error_examples": errors[:3],
        "served_latency_ms": {"p50": percentile_ms(served, 50), "p99": percentile_ms(served, 99),
                              "max": percentile_ms(served, 100)},
        # the same requests' time inside the server (timing.total_ms): queue and decoding, no HTTP
        "served_in_server_ms": {"p50": percentile_ms(in_server, 50), "p99": percentile_ms(in_server, 99)},
        "shed_latency_ms": {"p50": percentile_ms([o["latency_s"] for o in shed], 50),
                            "p99": percentile_ms([o["latency_s"] for o in shed], 99)},
        "retry_after_s": {"min": retry[0], "median": retry[len(retry) // 2], "max": retry[-1]} if retry else None,
    }


async def bench_overload(model_dir: Path, sentences: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The capacity under closed-loop clients, then K x that capacity offered open-loop to a bounded queue."""
    async with serving(model_dir, MODES["batched"], args.threads) as (base, _, _):
        capacity = await run_load(base, sentences, args.clients, args.capacity_seconds, args.warmup, args.beam)
    if capacity["errors"]:
        raise RuntimeError(f"the capacity run had errors: {capacity['error_examples']}")
    queue = max(1, round(capacity["requests_per_s"] * args.queue_seconds))
    extra = ["--max-queue-sentences", str(queue), "--max-texts", str(min(32, queue))]
    rate = args.overload * capacity["requests_per_s"]
    async with serving(model_dir, MODES["batched"], args.threads, extra) as (base, process, command):
        async with httpx.AsyncClient(base_url=base, timeout=120.0) as http:
            for text in sentences[:8]:  # warm-up, one at a time: the memory before is that of a working server
                (await http.post("/translate", json={"text": text, "beam": args.beam})).raise_for_status()
            rss_before = server_rss_mb(process.pid)
            outcomes = await open_loop(base, sentences, rate, args.duration, args.beam)
            rss_after = server_rss_mb(process.pid)
            health = await http.get("/health")
    return {
        "capacity": {"requests_per_s": capacity["requests_per_s"], "clients": args.clients,
                     "seconds": args.capacity_seconds, "latency_ms": capacity["latency_ms"]},
        "offered_multiple": args.overload, "offered_requests_per_s": round(rate, 2),
        "max_queue_sentences": queue, "queue_seconds": args.queue_seconds, "duration_s": args.duration,
        **overload_summary(outcomes, args.duration),
        "server_up_after": health.status_code == 200, "server_rss_mb": {"before": rss_before, "after": rss_after},
        "server_command": shlex.join(["python"] + command[1:]),
    }


# ---------------------------------------------------------------------------------------- report


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for package in ("attnmt", "torch", "fastapi", "starlette", "uvicorn", "pydantic", "httpx", "numpy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def machine_info() -> dict[str, Any]:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def model_info(model_dir: Path) -> dict[str, Any]:
    from attnmt.decode.translator import load

    translator = load(model_dir)
    m = translator.config.model
    return {"type": m.type, "parameters": sum(p.numel() for p in translator.model.parameters()),
            "emb_size": m.emb_size, "hidden_size": m.hidden_size, "folder": str(model_dir)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, help="a trained model folder (default: train a demo-size rnnsearch)")
    parser.add_argument("--quick", action="store_true", help="5 s per mode and a shorter training")
    parser.add_argument("--clients", type=int, default=32, help="closed-loop clients (default 32)")
    parser.add_argument("--duration", type=float, default=None,
                        help="measured seconds per mode, or of the overload (default 30; 5 quick)")
    parser.add_argument("--warmup", type=float, default=None, help="unmeasured seconds first (default 3; 1 quick)")
    parser.add_argument("--beam", type=int, default=5, help="the beam every request asks for (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads (default 1)")
    parser.add_argument("--train-seconds", type=float, default=None, help="default 90; 20 quick")
    parser.add_argument("--overload", type=float, default=None, metavar="K",
                        help="instead of the two modes: offer K times the measured capacity (2 to 5 is the "
                             "range that means something) open-loop to a server with a bounded queue")
    parser.add_argument("--capacity-seconds", type=float, default=None,
                        help="--overload: seconds of closed-loop load that measure the capacity (default 10; 3 quick)")
    parser.add_argument("--queue-seconds", type=float, default=1.0,
                        help="--overload: the server's --max-queue-sentences is this many seconds of the "
                             "capacity (default 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the JSON to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.overload is not None and not args.overload > 0:
        parser.error(f"--overload {args.overload}: give a multiple of the capacity above 0, e.g. 4")
    args.duration = args.duration or (5.0 if args.quick else 30.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 3.0)
    args.capacity_seconds = args.capacity_seconds or (3.0 if args.quick else 10.0)
    args.train_seconds = args.train_seconds or (20.0 if args.quick else 90.0)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="attnmt-serve-bench-") as tmp:
        model_dir = args.model
        if model_dir is None:
            print(f"training a demo-size rnnsearch for {args.train_seconds:.0f} s ...", flush=True)
            model_dir = train_demo_model(Path(tmp), args.train_seconds)
        sentences = held_out_sentences(500)
        if args.overload is not None:
            print(f"overload: capacity over {args.capacity_seconds:.0f} s, then {args.overload}x it for "
                  f"{args.duration:.0f} s ...", flush=True)
            results: dict[str, Any] = {"overload": asyncio.run(bench_overload(model_dir, sentences, args))}
        else:
            results = {}
            for name in MODES:
                print(f"{name}: {args.clients} clients for {args.duration:.0f} s ...", flush=True)
                results[name] = asyncio.run(bench_mode(name, model_dir, sentences, args))
                r = results[name]
                print(f"  {r['requests_per_s']} requests/s, p50 {r['latency_ms']['p50']} ms, "
                      f"p99 {r['latency_ms']['p99']} ms, errors {r['errors']}, mean batch {r['mean_batch_size']}")
        model = model_info(model_dir)
        if args.model is None:
            model["folder"] = f"trained for {args.train_seconds:.0f} s in a temporary folder (removed)"

    command = shlex.join(["python", "benchmarks/serve_load.py"] + (argv if argv is not None else sys.argv[1:]))
    machine = {**machine, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    config = {"clients": args.clients, "duration_s": args.duration, "warmup_s": args.warmup, "beam": args.beam,
              "server_torch_threads": args.threads, "modes": MODES, "model": model,
              "sentences": "held-out synthetic sentences of 4 to 30 words, one per request",
              "target": "127.0.0.1 only (a fresh server process per mode)"}
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if args.overload is not None:
        overload = results["overload"]
        report = {**previous, "overload": {"command": command, "machine": machine, "versions": versions(),
                                           "config": {**config, "modes": {"batched": MODES["batched"]}},
                                           **overload}}
        print(f"overload {args.overload}x: capacity {overload['capacity']['requests_per_s']} requests/s, offered "
              f"{overload['sent_per_s']}/s; served {overload['served_per_s']}/s (p50 "
              f"{overload['served_latency_ms']['p50']} ms, p99 {overload['served_latency_ms']['p99']} ms), shed "
              f"{overload['shed_share']:.0%}, errors {overload['errors']}, server memory "
              f"{overload['server_rss_mb']['before']} -> {overload['server_rss_mb']['after']} MB -> {args.out}")
        failed = overload["errors"] + (not overload["server_up_after"])
    else:
        gain = results["batched"]["requests_per_s"] / max(results["one_at_a_time"]["requests_per_s"], 1e-9)
        report = {"command": command, "machine": machine, "versions": versions(), "config": config,
                  "results": results, "gain_requests_per_s": round(gain, 2)}
        if "overload" in previous:
            report["overload"] = previous["overload"]
        print(f"dynamic batching: {gain:.2f}x the requests/s of one request at a time -> {args.out}")
        failed = sum(r["errors"] for r in results.values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if failed:
        print(f"error: {failed} requests failed (or the server went down)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
