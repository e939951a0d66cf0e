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

The model: --model DIR, or else an rnnsearch of the demo's size (emb 96, hidden 192) trained here
for --train-seconds on the built-in synthetic language in a temporary folder. The sentences sent
are held-out synthetic sentences of 4 to 30 words. The server decodes on one torch thread
(--threads 1): on a small shared machine the load generator needs the other core, and one thread
is reproducible.

Usage: python -m benchmarks.serve_load [--quick] [--model DIR] [--clients 32] [--duration 30] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
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


def train_demo_model(directory: Path, seconds: float) -> Path:
    """An rnnsearch of the demo's size on the synthetic language, trained for `seconds`."""
    from attnmt.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
    from attnmt.data.synthetic_corpus import make_splits, write_corpus
    from attnmt.train import train

    data = directory / "data"
    for name, pairs in make_splits(6000, 200, 0, min_len=4, max_len=30, seed=1).items():
        write_corpus(pairs, data, name)
    config = Config(
        name="serve-bench",
        data=DataConfig(train_src=str(data / "train.src"), train_tgt=str(data / "train.tgt"),
                        valid_src=str(data / "valid.src"), valid_tgt=str(data / "valid.tgt"),
                        tokenizer="word", max_len=80),
        model=ModelConfig(type="rnnsearch", emb_size=96, hidden_size=192, dropout=0.0, reverse_source=True),
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


def start_server(model_dir: Path, port: int, mode: dict[str, Any], threads: int) -> tuple[subprocess.Popen, list[str]]:
    """`attnmt serve` in its own process (its own GIL and torch threads), as a user would start it."""
    command = [sys.executable, "-m", "attnmt", "serve", "--model", f"bench={model_dir}", "--host", "127.0.0.1",
               "--port", str(port), "--max-batch-size", str(mode["max_batch_size"]),
               "--max-wait-ms", str(mode["max_wait_ms"]), "--threads", str(threads), "--log-level", "warning"]
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


async def bench_mode(name: str, model_dir: Path, sentences: list[str], args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    process, command = start_server(model_dir, port, MODES[name], args.threads)
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_until_up(base, process)
        result = await run_load(base, sentences, args.clients, args.duration, args.warmup, args.beam)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    result["server_command"] = shlex.join(["python"] + command[1:])
    return result


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
    from attnmt.translator import load

    translator = load(model_dir)
    m = translator.config.model
    return {"type": m.type, "parameters": sum(p.numel() for p in translator.model.parameters()),
            "emb_size": m.emb_size, "hidden_size": m.hidden_size, "folder": str(model_dir)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, help="a trained model folder (default: train a demo-size rnnsearch)")
    parser.add_argument("--quick", action="store_true", help="5 s per mode and a shorter training")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=float, default=None, help="measured seconds per mode (default 30; 5 quick)")
    parser.add_argument("--warmup", type=float, default=None, help="unmeasured seconds first (default 3; 1 quick)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    parser.add_argument("--train-seconds", type=float, default=None, help="default 90; 20 quick")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.duration = args.duration or (5.0 if args.quick else 30.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 3.0)
    train_seconds = args.train_seconds or (20.0 if args.quick else 90.0)

    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="attnmt-serve-bench-") as tmp:
        model_dir = args.model
        if model_dir is None:
            print(f"training a demo-size rnnsearch for {train_seconds:.0f} s ...", flush=True)
            model_dir = train_demo_model(Path(tmp), train_seconds)
        sentences = held_out_sentences(500)
        results = {}
        for name in MODES:
            print(f"{name}: {args.clients} clients for {args.duration:.0f} s ...", flush=True)
            results[name] = asyncio.run(bench_mode(name, model_dir, sentences, args))
            r = results[name]
            print(f"  {r['requests_per_s']} requests/s, p50 {r['latency_ms']['p50']} ms, "
                  f"p99 {r['latency_ms']['p99']} ms, errors {r['errors']}, mean batch {r['mean_batch_size']}")
        model = model_info(model_dir)
        if args.model is None:
            model["folder"] = f"trained for {train_seconds:.0f} s in a temporary folder (removed)"

    gain = results["batched"]["requests_per_s"] / max(results["one_at_a_time"]["requests_per_s"], 1e-9)
    report = {
        "command": shlex.join(["python", "benchmarks/serve_load.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": {**machine, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "versions": versions(),
        "config": {"clients": args.clients, "duration_s": args.duration, "warmup_s": args.warmup, "beam": args.beam,
                   "server_torch_threads": args.threads, "modes": MODES, "model": model,
                   "sentences": "held-out synthetic sentences of 4 to 30 words, one per request",
                   "target": "127.0.0.1 only (a fresh server process per mode)"},
        "results": results,
        "gain_requests_per_s": round(gain, 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"dynamic batching: {gain:.2f}x the requests/s of one request at a time -> {args.out}")
    errors = sum(r["errors"] for r in results.values())
    if errors:
        print(f"error: {errors} requests failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
