"""attnmt's decoding speed against OpenNMT-py's, in alternating rounds on one machine.

    python -m benchmarks.decoding [--model models/rnn256_luong] [--rounds 5]

This machine's speed wanders by 10-40% within minutes, so the two toolkits decode in turns, round after
round, and the result is the median over rounds of each round's time ratio (OpenNMT-py's time / attnmt's).
Both decode test_2016_flickr de->en (1,000 sentences, lowercased with punctuation split off) in batches of
64 sentences, greedily and with beam 5, at most 80 output tokens (attnmt: 1.5 x source + 10), and both
count decoding time only: OpenNMT-py's own `-report_time` figure ("Total translation time", printed to
0.1 s), attnmt's clock around `Translator.translate` with the model already loaded.

Needs the OpenNMT-py checkpoint and virtual environment that `python -m benchmarks.peers opennmt` leaves in
$PEERS (default ~/peers-bench; ../shared/peers/opennmt/run_opennmt.sh), and an attnmt model of the same
architecture kept by `python -m benchmarks.rnn256 --model attention=luong_concat --model input_feeding=true
--keep-model models/rnn256_luong`. attnmt decodes in float32 and `--int8`, in one process of 2 threads
and in `--workers 2` processes of one thread, and beam 5 with both `--stopping` rules (OpenNMT-py ends a
sentence when its best candidate ends, sooner than either). Writes benchmarks/results/decoding.json.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch  # noqa: E402

from attnmt.decode.evaluate import corpus_scores  # noqa: E402
from attnmt.decode.translator import load  # noqa: E402
from benchmarks.common import write_result
from benchmarks.rnn256 import prepare

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("PEERS", Path.home() / "peers-bench"))
# (name, int8, workers): the attnmt settings measured; threads: 2 in one process, 1 per worker process
SETTINGS = [("float32", False, 1), ("int8", True, 1), ("int8 --workers 2", True, 2)]
SEARCHES = [("greedy", 1, "exact"), ("beam 5", 5, "exact"), ("beam 5 --stopping early", 5, "early")]


def opennmt_decode(checkpoint: Path, source: Path, beam: int, out: Path) -> tuple[float, list[str]]:
    """OpenNMT-py's decoding-only seconds (-report_time) and its output lines."""
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")  # its checkpoints hold an argparse.Namespace
    run = subprocess.run([str(PEERS / "venv-onmt" / "bin" / "onmt_translate"), "-model", str(checkpoint),
                          "-src", str(source), "-output", str(out), "-beam_size", str(beam), "-batch_size", "64",
                          "-batch_type", "sents", "-max_length", "80", "-gpu", "-1", "-report_time"],
                         capture_output=True, text=True, env=env)
    found = re.search(r"Total translation time \(s\): ([\d.]+)", run.stdout + run.stderr)
    if run.returncode or not found:
        raise SystemExit(f"onmt_translate failed (exit code {run.returncode}): {(run.stdout + run.stderr)[-500:]}")
    return float(found.group(1)), out.read_text(encoding="utf-8").splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "rnn256_luong"), help="attnmt model folder")
    parser.add_argument("--opennmt-checkpoint", help="default: the newest model_step_*.pt in $PEERS/models/onmt_rnn")
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/decoding.json)")
    args = parser.parse_args()
    checkpoint = Path(args.opennmt_checkpoint) if args.opennmt_checkpoint else max(
        (PEERS / "models" / "onmt_rnn").glob("model_step_*.pt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))

    torch.set_num_threads(2)
    translators = {int8: load(args.model, checkpoint="last", int8=int8) for int8 in (False, True)}
    torch.set_num_threads(2)
    times: dict[str, dict[str, list[float]]] = {s: {} for s, _, _ in SEARCHES}
    bleu: dict[str, dict[str, float]] = {s: {} for s, _, _ in SEARCHES}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        prepare(Path(args.multi30k), data)
        source = data / "test_2016_flickr.de"
        sources = source.read_text(encoding="utf-8").splitlines()
        references = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
        for round_ in range(args.rounds):
            for search, beam, stopping in SEARCHES:
                if stopping == "exact":  # OpenNMT-py has one rule of its own
                    seconds, hyps = opennmt_decode(checkpoint, source, beam, data / "onmt.hyp")
                    times[search].setdefault("OpenNMT-py", []).append(seconds)
                    bleu[search]["OpenNMT-py"] = round(corpus_scores(hyps, references, tokenize="none").bleu, 2)
                for name, int8, workers in SETTINGS:
                    started = time.perf_counter()
                    out = translators[int8].translate(sources, beam=beam, batch_size=64, batch_tokens=10**6,
                                                      workers=workers, stopping=stopping)
                    times[search].setdefault(name, []).append(round(time.perf_counter() - started, 3))
                    bleu[search][name] = round(corpus_scores([t.text for t in out], references,
                                                             tokenize="none").bleu, 2)
            print(f"round {round_ + 1}: " + "; ".join(f"{search}: " + ", ".join(
                f"{name} {values[-1]:.2f}" for name, values in per.items()) for search, per in times.items()),
                flush=True)

    results = {}
    for search, per in times.items():
        reference = per.get("OpenNMT-py") or times["beam 5"]["OpenNMT-py"]  # early stopping: against OpenNMT's beam 5
        results[search] = {name: {
            "median_s": round(statistics.median(values), 2),
            "times_s": values,
            "bleu_tok_none": bleu[search][name],
            "speedup_over_opennmt_median_of_rounds": None if name == "OpenNMT-py" else round(
                statistics.median(r / v for r, v in zip(reference, values)), 2),
        } for name, values in per.items()}
    payload = {"attnmt_model": args.model, "opennmt_checkpoint": str(checkpoint), "rounds": args.rounds,
               "sentences": 1000, "batch_size": 64, "results": results}
    path = write_result("decoding", payload, args.out)
    for search, per in results.items():
        print(search + ": " + ", ".join(f"{name} {r['median_s']} s" + (
            f" ({r['speedup_over_opennmt_median_of_rounds']}x)" if r["speedup_over_opennmt_median_of_rounds"] else "")
            for name, r in per.items()))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
