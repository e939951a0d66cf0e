"""Run `attnmt demo` and record its wall time, peak memory and BLEU per length bucket.

    python -m benchmarks.demo [--quick] [--out PATH] [--figures DIR]

Checks the chapter's claim on the demo's own numbers: rnnsearch's BLEU in the longest bucket is at
least 90% of its BLEU in the shortest, seq2seq's longest is below half of its shortest. Exits 1 when
the claim fails, in --quick mode too (CI runs it there: tests/slow/test_demo_claim.py).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from attnmt.study.demo import run_demo  # noqa: E402
from benchmarks.common import write_result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/demo[_quick].json)")
    parser.add_argument("--figures", default=str(Path(__file__).resolve().parents[1] / "docs" / "img" / "demo"),
                        help="where to keep the demo's figures and report (default docs/img/demo; '' to drop them)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = run_demo(Path(tmp) / "demo", quick=args.quick, quiet=True)
        wall = time.perf_counter() - started
        if args.figures and not args.quick:
            figures = Path(args.figures)
            figures.mkdir(parents=True, exist_ok=True)
            for name in ("bleu_by_length.png", "attention_short.png", "attention_medium.png", "attention_long.png",
                         "report.md"):
                shutil.copy(Path(tmp) / "demo" / name, figures / name)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ratios = {m: bs[-1].bleu / max(bs[0].bleu, 1e-9) for m, bs in result.buckets.items()}
    claims = {
        "rnnsearch_longest_over_shortest": round(ratios["rnnsearch"], 3),
        "seq2seq_longest_over_shortest": round(ratios["seq2seq"], 3),
        "rnnsearch_holds (>= 0.9)": ratios["rnnsearch"] >= 0.9,
        "seq2seq_collapses (< 0.5)": ratios["seq2seq"] < 0.5,
    }
    path = write_result("demo_quick" if args.quick else "demo", {
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(peak_mib, 1),
        "phases_s": result.phases,
        "bleu": result.bleu,
        "buckets": {m: [{"lengths": b.label, "n": b.n, "bleu": round(b.bleu, 2)} for b in bs]
                    for m, bs in result.buckets.items()},
        "claims": claims,
    }, args.out)
    print(result.report)
    print(f"wall {wall:.0f} s, peak RSS {peak_mib:.0f} MiB, claims {claims} -> {path}")
    if not (claims["rnnsearch_holds (>= 0.9)"] and claims["seq2seq_collapses (< 0.5)"]):
        print("demo: the claim failed (rnnsearch's BLEU must hold with length, seq2seq's fall)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
