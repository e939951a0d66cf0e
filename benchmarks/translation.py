"""Train a config for a bounded time (or take a trained model folder) and record its test scores.

    python -m benchmarks.translation recipes/multi30k/de_en_rnnsearch.yaml --max-time 1800 --threads 1
    python -m benchmarks.translation recipes/multi30k/de_en_rnnsearch.yaml --model-dir models/m30k --reuse
    python -m benchmarks.translation CONFIG --model-dir DIR --reuse --average-last 5 --out results/NAME_avg5.json

Writes benchmarks/results/<config name>.json: how the model was trained (steps, epochs, wall time,
stop reason, best validation perplexity, from the model folder's train_log.jsonl), then, for greedy
and each beam size, sacreBLEU BLEU (13a on cased detokenized text; lowercased; and on lowercased text with
punctuation split off, tokenize=none: the convention of Multi30k papers and of the peers), chrF, the
decoding time and BLEU by source length on the config's test set. With --align-src/--align-tgt/
--align-gold it also scores the model's attention as word alignments (AER) next to the diagonal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from attnmt.config.schema import load_config  # noqa: E402
from attnmt.data.corpus import read_parallel  # noqa: E402
from attnmt.decode.evaluate import bleu_by_length, corpus_scores  # noqa: E402
from attnmt.train.events import training_summary  # noqa: E402
from benchmarks.common import tokenize_lowercase, write_result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--model-dir", help="default models/<config name>")
    parser.add_argument("--reuse", action="store_true", help="score the trained model in --model-dir, do not train")
    parser.add_argument("--max-time", type=float, help="training wall-time limit in seconds (train.max_time_s)")
    parser.add_argument("--threads", type=int, help="torch threads for training (train.threads)")
    parser.add_argument("--device", default="cpu", help="train and decode here (cpu or cuda)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more config overrides")
    parser.add_argument("--checkpoint", default="best",
                        help="the checkpoint to score: best, last, averaged (attnmt average), stepN")
    parser.add_argument("--average-last", type=int, metavar="N",
                        help="first average the newest N kept checkpoints into checkpoints/averaged.pt "
                             "(as `attnmt average --last N --overwrite`), then score that")
    parser.add_argument("--beams", default="1,5", help="comma-separated beam sizes to evaluate (1 = greedy)")
    parser.add_argument("--align-src"), parser.add_argument("--align-tgt"), parser.add_argument("--align-gold")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/<config name>.json)")
    return parser.parse_args()


def evaluate_beam(translator, name: str, sources: list[str], references: list[str], beam: int) -> dict:
    """BLEU (cased, lowercased, and tokenized-lowercased as Multi30k papers report it), chrF, decoding time
    and BLEU by source length of one beam size."""
    started = time.perf_counter()
    translations = translator.translate(sources, beam=beam)
    seconds = time.perf_counter() - started
    hypotheses = [t.text for t in translations]
    cased = corpus_scores(hypotheses, references)
    lower = corpus_scores(hypotheses, references, lowercase=True)
    # Multi30k papers' convention (and the peers'): lowercased, punctuation split, no further tokenization.
    tok_lc = corpus_scores([tokenize_lowercase(h) for h in hypotheses], [tokenize_lowercase(r) for r in references],
                           tokenize="none")
    buckets = bleu_by_length([max(len(t.src_tokens), 1) for t in translations], hypotheses, references)
    print(f"{name} beam {beam}: BLEU {cased.bleu:.2f} (lowercased {lower.bleu:.2f}, tokenized "
          f"lowercased {tok_lc.bleu:.2f}), chrF {cased.chrf:.2f}, decoding {seconds:.1f} s", flush=True)
    return {
        "bleu": round(cased.bleu, 2), "bleu_signature": cased.bleu_signature,
        "bleu_lowercased": round(lower.bleu, 2), "bleu_lowercased_signature": lower.bleu_signature,
        "bleu_tokenized_lowercased": round(tok_lc.bleu, 2),
        "chrf": round(cased.chrf, 2), "decode_s": round(seconds, 2), "sentences": len(sources),
        "by_length": [{"lengths": b.label, "n": b.n, "bleu": round(b.bleu, 2)} for b in buckets],
    }


def main() -> int:
    args = parse_args()
    overrides = list(args.set)
    if args.max_time:
        overrides.append(f"train.max_time_s={args.max_time}")
    if args.threads:
        overrides.append(f"train.threads={args.threads}")
    if args.device != "cpu":
        overrides.append(f"train.device={args.device}")
    config = load_config(args.config, overrides)
    model_dir = Path(args.model_dir or Path("models") / config.name)
    if not args.reuse:
        from attnmt.train.trainer import train

        train(config, model_dir, overwrite=True, quiet=True)

    from attnmt.decode.translator import load

    checkpoint = args.checkpoint
    if args.average_last:
        from attnmt.folder.checkpoint import average_last

        average_last(model_dir, last=args.average_last, model_type=config.model.type, overwrite=True)
        checkpoint = "averaged"
    translator = load(model_dir, checkpoint=checkpoint, device=args.device)
    # A config with one corpus file holds its test pairs out into the model folder (data.test_size).
    test_src = config.data.test_src or str(model_dir / "test.src")
    test_tgt = config.data.test_tgt or str(model_dir / "test.tgt")
    pairs = read_parallel(test_src, test_tgt)
    sources, references = [src for src, _ in pairs], [ref for _, ref in pairs]
    evaluations = {f"beam{beam}": evaluate_beam(translator, config.name, sources, references, beam)
                   for beam in (int(b) for b in args.beams.split(","))}
    result = {"config": args.config, "overrides": overrides, "model_dir": str(model_dir), "checkpoint": checkpoint,
              "averaged_last": args.average_last,
              "test": {"src": test_src, "ref": test_tgt},
              "training": training_summary(model_dir), "evaluation": evaluations}
    if args.align_gold:
        from dataclasses import asdict

        from attnmt.align import align_files

        started = time.perf_counter()
        aligned = align_files(model_dir, args.align_src, args.align_tgt, gold_path=args.align_gold,
                              baselines=("diagonal",), checkpoint=checkpoint)
        result["alignment"] = {"gold": args.align_gold, "seconds": round(time.perf_counter() - started, 1),
                               **{method: asdict(scores) for method, scores in aligned.scores.items()}}
        print("alignment AER: " + ", ".join(f"{m} {s.aer:.3f}" for m, s in aligned.scores.items()))
    path = write_result(config.name, result, args.out)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
