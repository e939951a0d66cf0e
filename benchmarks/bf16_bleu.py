"""BLEU of fp32 and bf16 CPU training at the same number of updates: the rnn-256 recipe and the Multi30k Transformer.

    python -m benchmarks.bf16_bleu [--rnn256-steps 400] [--transformer-steps 200] [--threads 1]
        # -> benchmarks/results/bf16_training_bleu.json

Each model (the configs of benchmarks/bf16_profile.py: benchmarks/rnn256.py's recipe, recipes/multi30k/
de_en_transformer.yaml) is trained from the same seed for a fixed number of updates, once with
``train.precision: fp32`` and once with ``bf16``, then decodes test_2016_flickr greedily (batches of 64) in fp32.
BLEU: the rnn-256 recipe's tokenized lowercased BLEU (sacreBLEU tokenize=none on its tokenized text); the
Transformer's sacreBLEU 13a on cased text. Also recorded: the last training loss reported and the validation loss.
A short run: it says whether bf16 follows fp32 at that many updates, not what either reaches when trained out.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.bf16_profile import MULTI30K, rnn256_config, transformer_config
from benchmarks.common import write_result


def with_train(config, **settings):
    """``config`` with these ``train`` settings changed."""
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **settings))


def train_and_score(config, model_dir: Path, sources: list[str], references: list[str], tokenize: str) -> dict:
    from attnmt.decode.evaluate import corpus_scores
    from attnmt.decode.translator import load
    from attnmt.train.trainer import train

    started = time.perf_counter()
    train(config, model_dir, quiet=True)
    seconds = time.perf_counter() - started
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text().splitlines()]
    trains = [e for e in events if e["event"] == "train"]
    valids = [e for e in events if e["event"] == "valid"]
    translator = load(model_dir, checkpoint="last")
    hyps = [t.text for t in translator.translate(sources, beam=1, batch_size=64)]
    scores = corpus_scores(hyps, references, tokenize=tokenize)
    return {"steps": trains[-1]["step"] if trains else None, "train_loss_last": round(trains[-1]["loss"], 4),
            "valid_loss": round(valids[-1]["loss"], 4) if valids else None, "training_s": round(seconds, 1),
            "precision": next(e["precision"] for e in events if e["event"] == "start"),
            "bleu_greedy": round(scores.bleu, 2), "signature": scores.bleu_signature}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", default=str(MULTI30K))
    parser.add_argument("--models", nargs="+", default=["rnn256", "transformer"], choices=["rnn256", "transformer"])
    parser.add_argument("--rnn256-steps", type=int, default=400)
    parser.add_argument("--transformer-steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="default benchmarks/results/bf16_training_bleu.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    multi30k = Path(args.multi30k)
    result: dict = {"threads": args.threads, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            work = Path(tmp) / name
            work.mkdir()
            steps = args.rnn256_steps if name == "rnn256" else args.transformer_steps
            overrides = {"max_steps": steps, "max_time_s": None, "log_every": 50, "valid_every": steps,
                         "threads": args.threads}
            if name == "rnn256":
                data = work / "data"
                data.mkdir()
                rows = {}
                for precision in ("fp32", "bf16"):
                    config = with_train(rnn256_config(data, multi30k), **overrides, precision=precision)
                    sources = (data / "test_2016_flickr.de").read_text(encoding="utf-8").splitlines()
                    references = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
                    rows[precision] = train_and_score(config, work / precision, sources, references, "none")
                    print(name, precision, json.dumps(rows[precision]), flush=True)
            else:
                with gzip.open(multi30k / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
                    sources = f.read().rstrip("\n").split("\n")
                with gzip.open(multi30k / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
                    references = f.read().rstrip("\n").split("\n")
                rows = {}
                for precision in ("fp32", "bf16"):
                    config = with_train(transformer_config(multi30k), **overrides, precision=precision)
                    rows[precision] = train_and_score(config, work / precision, sources, references, "13a")
                    print(name, precision, json.dumps(rows[precision]), flush=True)
            rows["bleu_bf16_minus_fp32"] = round(rows["bf16"]["bleu_greedy"] - rows["fp32"]["bleu_greedy"], 2)
            result["models"][name] = {"updates": steps, **rows}
    print(f"-> {write_result('bf16_training_bleu', result, args.out)}")


if __name__ == "__main__":
    main()
