"""What every benchmark records besides its numbers: the machine, the versions, the command."""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
PUNCT = re.compile(r"([^\w\s])", re.UNICODE)


def tokenize_lowercase(line: str) -> str:
    """The peers' and Multi30k papers' text: lowercased, every symbol that is not a letter or digit split off."""
    return " ".join(PUNCT.sub(r" \1 ", line.strip().lower()).split())


def machine_info() -> dict:
    import torch

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1), "cuda": torch.version.cuda,
               "cudnn": torch.backends.cudnn.version()}
    return {
        "cpu": cpu,
        "cpu_isa": [f for f in ISA_FLAGS if f in flags],  # the hardware path: AVX2 only, AVX-512(-BF16), AMX
        "gpu": gpu,
        "cores_available": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def run_child(module: str, args: list[str], what: str) -> dict:
    """Run ``python -m benchmarks.MODULE ARGS`` from the repository root in its own process (its own peak
    memory) and return the JSON of its last output line."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    if proc.returncode:
        raise SystemExit(f"{what} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def command_line() -> str:
    """How this benchmark was started: ``python -m benchmarks.NAME ARGS`` (or the script's path)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = ["-m", spec.name] if spec is not None and spec.name else sys.argv[:1]
    return " ".join([Path(sys.executable).name, *program, *sys.argv[1:]])


def write_result(name: str, result: dict, out: str | Path | None = None) -> Path:
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "command": command_line(),
               "machine": machine_info(), **result}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
