"""Run a peer toolkit's script from ../shared/peers (or read its saved output) and record its numbers.

    python -m benchmarks.peers opennmt                    # runs ../shared/peers/opennmt/run_opennmt.sh (~5 min)
    python -m benchmarks.peers opennmt --log saved.log    # parses the output of an earlier run instead

The peer scripts train the "rnn-256" recipe for 240 s and decode test_2016_flickr (see
../shared/peers/README.md); benchmarks/rnn256.py runs the same recipe with attnmt. Writes
benchmarks/results/peer_<name>.json: training target tokens/s (median of the reports after the
first), updates, decoding time (the toolkit's own decoding-only figure, and the wall time with
model loading) and BLEU on the lowercased tokenized references, greedy and beam 5.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.common import write_result

PEERS = Path(__file__).resolve().parents[2] / "shared" / "peers"
SCRIPTS = {"opennmt": "opennmt/run_opennmt.sh", "fairseq": "fairseq/run_fairseq.sh",
           "joeynmt": "joeynmt/run_joeynmt.sh"}


def _floats(pattern: str, text: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, text)]


def parse(text: str) -> dict:
    """The numbers the peer scripts print (common.sh's formats)."""
    result: dict = {}
    median = re.search(r"train tok/s median: src (\d+), tgt (\d+)", text)
    if median:
        result["tgt_tokens_per_s_median"] = int(median.group(2))
    steps = re.findall(r"Step (\d+)/", text) or re.findall(r"num_updates (\d+)", text)
    if steps:
        result["updates"] = int(steps[-1])
    params = re.search(r"number of parameters: (\d+)", text)
    if params:
        result["parameters"] = int(params.group(1))
    walls = _floats(r"decode beam=\d \(1000 sents, incl\. model load\) wall_s=([\d.]+)", text)
    decode_only = _floats(r"Total translation time \(s\): ([\d.]+)", text)
    bleu = _floats(r"BLEU\(tok none\)\s+([\d.]+)", text)
    for k, beam in enumerate((1, 5)):
        entry = {}
        if k < len(walls):
            entry["wall_s_with_model_load"] = walls[k]
        if k < len(decode_only):
            entry["decode_s"] = decode_only[k]
        if k < len(bleu):
            entry["bleu_tok_none"] = bleu[k]
        if entry:
            result[f"beam{beam}"] = entry
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=sorted(SCRIPTS))
    parser.add_argument("--log", help="parse this saved output of the peer script instead of running it")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/peer_<name>.json)")
    args = parser.parse_args()
    script = PEERS / SCRIPTS[args.peer]
    if args.log:
        text = Path(args.log).read_text(encoding="utf-8", errors="replace")
        source = f"output of `bash {script}` saved in {args.log}"
    else:
        run = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=PEERS)
        text = run.stdout + run.stderr
        source = f"`bash {script}` (exit code {run.returncode})"
    numbers = parse(text)
    if "beam5" not in numbers:
        print(f"{args.peer}: no decoding results found in the output; see {args.log or script}", file=sys.stderr)
        return 2
    path = write_result(f"peer_{args.peer}", {"peer": args.peer, "source": source, **numbers}, args.out)
    print(numbers)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
