"""An ensemble of two Multi30k de->en models against each of them: BLEU at beam 5 on test_2016_flickr.

    python -m benchmarks.ensemble [--seconds 360] [--seeds 1 2] [--workdir runs/benchmarks/ensemble]
    python -m benchmarks.ensemble --reuse      # score the members kept in --workdir, no training

The members are the rnn-256 recipe of benchmarks/rnn256.py (word vocabularies, so both members have the
same target vocabulary; a 1-layer bidirectional LSTM encoder of 128 per direction and an LSTM decoder
with additive attention, embeddings and hidden size 256) in Luong's order with input feeding
(``--model decoder=luong --model input_feeding=true`` there), with different seeds, trained at the
same time for the same wall time, one thread each. Each member's last checkpoint and their ensemble
(``attnmt translate --model A --model B``: log probabilities averaged at every step) decode the test
set with beam 5, batches of 64, on ``--threads``; BLEU on the lowercased tokenized references
(sacreBLEU tokenize=none, as rnn256.py and the peers report), and chrF; the decoding times follow one
untimed pass. The member folders stay in --workdir (for benchmarks/sampling.py). Writes
benchmarks/results/ensemble.json.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from benchmarks.common import write_result
from benchmarks.rnn256 import prepare, recipe

ROOT = Path(__file__).resolve().parents[1]
# The rnn-256 recipe with Luong's order and input feeding: the variant that learns most in a short time.
MEMBER = {"decoder": "luong", "score": "additive", "input_feeding": True}


def train_member(data: str, model_dir: str, seed: int, seconds: float) -> dict:
    """Train one member (in a process of its own, one thread)."""
    from attnmt.config.schema import config_from_dict
    from attnmt.train.trainer import train

    raw = recipe(Path(data), seconds, threads=1, enc_hidden=128, model=dict(MEMBER))
    raw["train"]["seed"] = seed
    train(config_from_dict(raw), model_dir, overwrite=True, quiet=True)


def member_summary(model_dir: Path, seed: int) -> dict:
    from attnmt.train.events import training_summary

    summary = training_summary(model_dir)
    return {"seed": seed, "steps": summary["steps"], "wall_s": summary["wall_s"],
            "tgt_tokens_per_s_median": summary.get("tgt_tokens_per_s_median"),
            "last_valid_ppl": summary["validations"][-1]["ppl"] if summary.get("validations") else None}


def score(translator, sources: list[str], references: list[str], beam: int) -> dict:
    from attnmt.decode.evaluate import corpus_scores

    started = time.perf_counter()
    hyps = [t.text for t in translator.translate(sources, beam=beam, batch_size=64, batch_tokens=10**6)]
    seconds = time.perf_counter() - started
    scores = corpus_scores(hyps, references, tokenize="none")
    return {"bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2), "decode_s": round(seconds, 2),
            "bleu_signature": scores.bleu_signature, "chrf_signature": scores.chrf_signature}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--seconds", type=float, default=360.0, help="training wall time of each member")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workdir", default=str(ROOT / "runs" / "benchmarks" / "ensemble"),
                        help="the prepared data and the member folders (member_seed<N>)")
    parser.add_argument("--reuse", action="store_true", help="score the members in --workdir, do not train")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for decoding")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, help="score only the first N test sentences (a quick check)")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/ensemble.json)")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    prepare(Path(args.multi30k), data)
    members = [workdir / f"member_seed{seed}" for seed in args.seeds]
    if not args.reuse:
        with ProcessPoolExecutor(len(members), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(train_member, str(data), str(d), seed, args.seconds)
                       for d, seed in zip(members, args.seeds)]
            for future in futures:
                future.result()
    training = [member_summary(d, seed) for d, seed in zip(members, args.seeds)]
    print(f"members: {training}", flush=True)

    import torch

    from attnmt.decode.ensemble import load_ensemble
    from attnmt.decode.translator import load

    torch.set_num_threads(args.threads)
    sources = (data / "test_2016_flickr.de").read_text(encoding="utf-8").splitlines()[:args.limit]
    references = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()[:args.limit]
    # The process's first decoding pays for setting up its kernels for every batch shape (about 20 s
    # here): one untimed pass first, so that each timed pass is decoding only.
    load(members[0], checkpoint="last").translate(sources, beam=args.beam, batch_size=64, batch_tokens=10**6)
    results = {}
    for seed, directory in zip(args.seeds, members):
        results[f"seed{seed}"] = score(load(directory, checkpoint="last"), sources, references, args.beam)
        print(f"seed {seed}: {results[f'seed{seed}']}", flush=True)
    results["ensemble"] = score(load_ensemble(members, checkpoint="last"), sources, references, args.beam)
    print(f"ensemble: {results['ensemble']}", flush=True)
    best = max(results[f"seed{seed}"]["bleu"] for seed in args.seeds)
    payload = {
        "recipe": "rnn-256 of benchmarks/rnn256.py, one seed per member", "model": MEMBER,
        "test": f"test_2016_flickr ({len(sources)} sentences), lowercased, punctuation split off",
        "training": {"seconds_per_member": args.seconds, "threads_per_member": 1, "side_by_side": True,
                     "members": training, "reused": args.reuse},
        "decoding": {"beam": args.beam, "batch_size": 64, "threads": args.threads, "checkpoint": "last"},
        "results": results,
        "ensemble_gain_over_best_member_bleu": round(results["ensemble"]["bleu"] - best, 2),
    }
    path = write_result("ensemble", payload, args.out)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
