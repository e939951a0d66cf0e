"""Sampling throughput against greedy search: sentences/s on one model and the Multi30k test set.

    python -m benchmarks.sampling [--model runs/benchmarks/ensemble/member_seed1] [--rounds 3] [--threads 1]

The model is a folder of the rnn-256 recipe (benchmarks/ensemble.py keeps two; benchmarks/rnn256.py
--keep-model another). test_2016_flickr (1,000 sentences, lowercased, punctuation split off as the
recipe trains) is decoded with the same batches (64 sentences, no token cap), one hypothesis per
sentence, by greedy search, by beam 5 for scale, and by sampling (``attnmt translate --sample``) from the
whole distribution, with ``--top-k 10`` and with ``--top-p 0.9``, seed 1. The modes take turns within each
of ``--rounds`` rounds; a mode's sentences/s is the median of its rounds. Each mode's mean output length
(tokens, without </s>) and BLEU (first round) come with it: a decoder's time grows with what it writes.
Writes benchmarks/results/sampling.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_result
from benchmarks.rnn256 import prepare

ROOT = Path(__file__).resolve().parents[1]


def modes():
    from attnmt.decode.sampling import Sampling

    return {
        "greedy": dict(beam=1),
        "beam5": dict(beam=5),
        "sample": dict(sampling=Sampling(seed=1)),
        "sample_top_k10": dict(sampling=Sampling(top_k=10, seed=1)),
        "sample_top_p0.9": dict(sampling=Sampling(top_p=0.9, seed=1)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "runs" / "benchmarks" / "ensemble" / "member_seed1"))
    parser.add_argument("--checkpoint", default="last")
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for decoding")
    parser.add_argument("--limit", type=int, help="only the first N test sentences (a quick check)")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/sampling.json)")
    args = parser.parse_args()

    import torch

    from attnmt.decode.evaluate import corpus_scores
    from attnmt.decode.translator import load

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prepare(Path(args.multi30k), Path(tmp))
        sources = (Path(tmp) / "test_2016_flickr.de").read_text(encoding="utf-8").splitlines()[:args.limit]
        references = (Path(tmp) / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()[:args.limit]
    translator = load(args.model, checkpoint=args.checkpoint)
    settings = modes()
    seconds: dict[str, list[float]] = {name: [] for name in settings}
    quality: dict[str, dict] = {}
    translator.translate(sources[:64], beam=1, batch_size=64)  # warm-up
    for round_ in range(args.rounds):
        for name, options in settings.items():
            started = time.perf_counter()
            out = translator.translate(sources, batch_size=64, batch_tokens=10**6, **options)
            seconds[name].append(time.perf_counter() - started)
            if round_ == 0:
                scores = corpus_scores([t.text for t in out], references, tokenize="none")
                quality[name] = {"bleu": round(scores.bleu, 2), "bleu_signature": scores.bleu_signature,
                                 "mean_output_tokens": round(statistics.mean(len(t.tgt_tokens) for t in out), 2)}
            print(f"round {round_ + 1} {name}: {seconds[name][-1]:.2f} s", flush=True)
    greedy = len(sources) / statistics.median(seconds["greedy"])
    results = {}
    for name in settings:
        rate = len(sources) / statistics.median(seconds[name])
        results[name] = {"sentences_per_s": round(rate, 1), "relative_to_greedy": round(rate / greedy, 3),
                         "seconds": [round(s, 3) for s in seconds[name]], **quality[name]}
    payload = {
        "model": args.model, "checkpoint": args.checkpoint,
        "test": f"test_2016_flickr ({len(sources)} sentences), lowercased, punctuation split off",
        "decoding": {"batch_size": 64, "n_best": 1, "threads": args.threads, "rounds": args.rounds, "seed": 1},
        "results": results,
    }
    path = write_result("sampling", payload, args.out)
    for name, r in results.items():
        print(f"{name}: {r['sentences_per_s']} sentences/s ({r['relative_to_greedy']}x greedy), BLEU {r['bleu']}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
