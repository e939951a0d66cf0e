"""Benchmark: one attention call (a batch of decoder queries over S source positions) for S = 10 .. 1000.

Compared: NumPy additive attention, vectorised vs the textbook loop over keys, and the PyTorch
modules (additive, Luong general, scaled dot-product, multi-head). Every call includes its key
projection (the cost of a first decoder step; later steps can reuse ``project_keys``).

Measurements
- time: median over ``--repeats`` calls (after one warm-up call) of ``time.perf_counter``, the
  implementations' calls interleaved; PyTorch runs forward-only under ``torch.no_grad()``.
- memory, NumPy: tracemalloc peak during one call, above what was allocated before it
  (NumPy reports its array buffers to tracemalloc).
- memory, PyTorch: tracemalloc cannot see torch's allocator, so a ``TorchDispatchMode`` records
  the storage of every tensor an aten op creates during the call and frees it from the count when
  the storage is freed; the peak of that live total is reported. Inputs and parameters are not
  counted, nor kernel-internal scratch (e.g. BLAS workspaces) or the allocator's own overhead.
Time and memory come from separate calls, so the tracing never slows the timed calls.
Everything is float32 and single-threaded (BLAS and torch) unless OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS / MKL_NUM_THREADS are set: on a small shared machine multi-threaded BLAS
timings swing by an order of magnitude with the neighbours' load, and one thread is reproducible.

Usage: python -m benchmarks.attention [--quick] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
import tracemalloc
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _variable in THREAD_VARIABLES:  # must precede the numpy and torch imports, which read them once
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

from attnmt.models import reference as ref  # noqa: E402
from attnmt.models.attention import (  # noqa: E402
    AdditiveAttention,
    GeneralAttention,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from benchmarks.common import command_line  # noqa: E402

BATCH, D_MODEL, ATTN_SIZE, N_HEADS = 16, 128, 128, 8
LENGTHS, QUICK_LENGTHS = (10, 30, 100, 300, 1000), (10, 100)
DEFAULT_OUT = Path(__file__).parent / "results" / "attention.json"


def median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall time in seconds of each function, after one untimed warm-up call each.

    The calls are interleaved (round r times every function once), so a burst of load from other
    processes hits all of them alike instead of whichever happened to be running.
    """
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def numpy_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes traced by tracemalloc during ``fn()``, above the level before the call."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


class LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of tensor storages created by aten ops while active and still alive; keeps the peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen: weakref.WeakSet[torch.UntypedStorage] = weakref.WeakSet()

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        # A storage first met as an input was made outside (an input, a parameter): mark it seen
        # so that a view of it, e.g. a weight's transpose, is not counted as new memory.
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                self._seen.add(t.untyped_storage())
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                # One Python object per storage (torch preserves it), so views add nothing and the
                # finaliser runs when the last tensor using the storage is gone.
                storage = t.untyped_storage()
                if storage not in self._seen:
                    self._seen.add(storage)
                    self.live += storage.nbytes()
                    weakref.finalize(storage, self._free, storage.nbytes())
        self.peak = max(self.peak, self.live)
        return out


def torch_peak_bytes(fn: Callable[[], object]) -> int:
    with torch.no_grad(), LiveTensorBytes() as tracker:
        fn()
    return tracker.peak


def run_length(S: int, repeats: int, rng: np.random.Generator) -> dict[str, Any]:
    """All implementations at source length S: time_s and peak_bytes for each, and loop/vectorised ratios."""

    def normal(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.normal(size=shape) * scale).astype(np.float32)

    q, K = normal(BATCH, D_MODEL), normal(BATCH, S, D_MODEL)
    W_q, W_k = (normal(ATTN_SIZE, D_MODEL, scale=D_MODEL**-0.5) for _ in range(2))
    v = normal(ATTN_SIZE)
    mask = ref.padding_mask(rng.integers(S // 2, S + 1, size=BATCH), S)

    numpy_fns = {
        "numpy_additive_vectorised": lambda: ref.additive_attention(q, K, K, W_q, W_k, v, mask),
        "numpy_additive_loop": lambda: ref.additive_attention_loop(q, K, K, W_q, W_k, v, mask),
    }
    tq, tK, tmask = torch.from_numpy(q), torch.from_numpy(K), torch.from_numpy(mask)
    additive = AdditiveAttention(D_MODEL, D_MODEL, ATTN_SIZE).eval()
    general = GeneralAttention(D_MODEL, D_MODEL).eval()
    mha = MultiHeadAttention(D_MODEL, N_HEADS).eval()
    torch_fns = {
        "torch_additive": lambda: additive(tq, tK, tK, tmask),
        "torch_luong_general": lambda: general(tq, tK, tK, tmask),
        "torch_scaled_dot_product": lambda: scaled_dot_product_attention(tq[:, None], tK, tK, tmask[:, None, :]),
        "torch_multi_head": lambda: mha(tq[:, None], tK, tK, tmask),
        "torch_multi_head_fused": lambda: mha(tq[:, None], tK, tK, tmask, need_weights=False),
    }

    with torch.no_grad():
        times = median_times(numpy_fns | torch_fns, repeats)
    row: dict[str, Any] = {"source_length": S}
    for name, fn in numpy_fns.items():
        row[name] = {"time_s": times[name], "peak_bytes": numpy_peak_bytes(fn)}
    for name, fn in torch_fns.items():
        row[name] = {"time_s": times[name], "peak_bytes": torch_peak_bytes(fn)}
    loop, vectorised = row["numpy_additive_loop"], row["numpy_additive_vectorised"]
    row["ratio_loop_over_vectorised"] = {
        "time": loop["time_s"] / vectorised["time_s"],
        "memory": loop["peak_bytes"] / vectorised["peak_bytes"],
    }
    return row


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        **{variable.lower(): os.environ[variable] for variable in THREAD_VARIABLES},
    }


def print_table(results: list[dict[str, Any]], field: str, scale: float, unit: str) -> None:
    """One row per source length, one column per implementation: ``field`` times ``scale``."""
    names = [name for name, value in results[0].items() if isinstance(value, dict) and field in value]
    widths = [max(len(name), 9) + 2 for name in names]
    print(f"\n{field} [{unit}]\n{'S':>5}" + "".join(f"{name:>{w}}" for name, w in zip(names, widths, strict=True)))
    for row in results:
        cells = (f"{row[name][field] * scale:>{w}.3f}" for name, w in zip(names, widths, strict=True))
        print(f"{row['source_length']:>5}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS}, 3 repeats (a smoke test)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per measurement (default 41; --quick 3)")
    args = parser.parse_args(argv)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    repeats = args.repeats or (3 if args.quick else 41)

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    started = time.perf_counter()
    results = []
    for S in lengths:
        results.append(run_length(S, repeats, rng))
        ratio = results[-1]["ratio_loop_over_vectorised"]
        print(
            f"S={S}: NumPy loop/vectorised: time {ratio['time']:.2f}x, peak memory {ratio['memory']:.3f}x", flush=True
        )
    print_table(results, "time_s", 1e3, "ms")
    print_table(results, "peak_bytes", 2**-20, "MiB")

    report = {
        "command": command_line() if argv is None else shlex.join(["python", "-m", "benchmarks.attention", *argv]),
        "machine": machine_info(),
        "config": {
            "batch": BATCH,
            "query_key_value_size": D_MODEL,
            "attn_size": ATTN_SIZE,
            "n_heads": N_HEADS,
            "queries_per_sentence": 1,
            "dtype": "float32",
            "source_lengths": list(lengths),
            "mask": "padding; each sentence keeps between S/2 and S real positions",
            "torch_scaled_dot_product": "the function alone on raw Q=q, K=V=keys (no projections, unlike the rest)",
            "torch_multi_head_fused": "MultiHeadAttention with need_weights=False (torch's fused kernel)",
            "repeats": repeats,
            "time": "median seconds of `repeats` calls after one warm-up (time.perf_counter), the "
            "implementations' calls interleaved; torch under no_grad",
            "peak_bytes_numpy": "tracemalloc peak during one call, above the level before it",
            "peak_bytes_torch": "peak live bytes of tensor storages created by aten ops during one call "
            "(TorchDispatchMode); excludes inputs, parameters, kernel scratch and allocator overhead",
        },
        "results": results,
        "wall_s": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out} ({report['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
