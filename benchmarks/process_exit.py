"""How long a process takes to end once its work is done, frozen at exit as the `attnmt` command is
(attnmt.runtime.process.ends_without_final_collection) and as a plain Python program.

    python -m benchmarks.process_exit [--rounds 5]

Two kinds of process, each started fresh: ``decoded`` imports what `attnmt translate` imports (torch, the
translator) and runs an LSTM forward and backward; ``trained`` also takes one Adam step (torch's optimizers import
torch._dynamo on their first call). Each prints the time (CLOCK_MONOTONIC, shared by all processes) when its work
is done; a run's seconds are from then to the moment its parent sees it end. Within each round every kind runs
frozen and plain, which of the two goes first alternating by round; the figures are medians over the rounds.
``objects`` is what the garbage collector tracked when the work was done (gc.get_objects()).
Writes benchmarks/results/process_exit.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import gc, sys, time
if {frozen}:
    from attnmt.runtime.process import ends_without_final_collection
    ends_without_final_collection()
import torch
from attnmt.decode.translator import Translator
lstm = torch.nn.LSTM(32, 32)
lstm(torch.randn(5, 1, 32))[0].sum().backward()
if {trained}:
    torch.optim.Adam(lstm.parameters()).step()
print(len(gc.get_objects()), time.monotonic(), flush=True)
"""
KINDS = {"decoded": False, "trained": True}


def one_exit(kind: str, frozen: bool) -> tuple[float, int]:
    """Seconds from the end of the child's work to the end of the child, and the objects it tracked then."""
    code = CHILD.format(frozen=frozen, trained=KINDS[kind])
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}) as child:
        objects, done = child.stdout.readline().split()
        if child.wait() != 0:
            raise SystemExit(f"process_exit: the {kind} child failed")
    return time.monotonic() - float(done), int(objects)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/process_exit.json)")
    args = parser.parse_args(argv)

    seconds = {kind: {"frozen": [], "plain": []} for kind in KINDS}
    objects: dict[str, int] = {}
    for r in range(args.rounds):
        for kind in KINDS:
            for frozen in (True, False) if r % 2 == 0 else (False, True):
                took, objects[kind] = one_exit(kind, frozen)
                seconds[kind]["frozen" if frozen else "plain"].append(round(took, 3))
                print(f"round {r + 1} {kind} {'frozen' if frozen else 'plain'}: {took:.3f} s", flush=True)
    median = {kind: {way: round(statistics.median(s), 3) for way, s in ways.items()} for kind, ways in seconds.items()}
    result = {"rounds": args.rounds, "objects": objects, "seconds": seconds, "median_seconds": median,
              "saved_seconds": {kind: round(m["plain"] - m["frozen"], 3) for kind, m in median.items()}}
    path = write_result("process_exit", result, args.out)
    print(f"median exit seconds {median} -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
