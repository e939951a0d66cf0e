"""Refresh the measurements shipped in the package for the animations (attnmt/viz/*.json).

    python scripts/refresh_bundles.py curve benchmarks/results/demo.json
    python scripts/refresh_bundles.py attention-model /tmp/attention-model     # trains it (minutes)
    python scripts/refresh_bundles.py attention --model /tmp/attention-model/rnnsearch --sentence "..."

A maintainer's tool, not part of the package: the scenes only read the bundled files
(attnmt.viz.scenes.data).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnmt.viz.scenes.data import (
    BUNDLED_ATTENTION,
    BUNDLED_CURVE,
    AttentionGrid,
    _read_json,
    attention_from_model,
    attention_to_dict,
    curves_from_dict,
)


def write_bundled_curve(results_json: str | Path, dest: Path = BUNDLED_CURVE) -> Path:
    """Copy a measured demo result's buckets into the package (checked by parsing them first)."""
    path = Path(results_json)
    payload = _read_json(path)
    curves = curves_from_dict(payload, str(path))
    out = {"source": "measured: attnmt demo (synthetic language, greedy), benchmarks/results/demo.json",
           "copied_from": path.name,
           "buckets": {m: [{"lo": b.lo, "hi": b.hi, "n": b.n, "bleu": round(b.bleu, 2)} for b in bs]
                       for m, bs in curves.curves.items()}}
    dest.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return dest


def write_bundled_attention(model_dir: str | Path, sentence: str, dest: Path = BUNDLED_ATTENTION,
                            note: str = "") -> Path:
    """Translate ``sentence`` with a trained model and store its attention in the package."""
    grid = attention_from_model(model_dir, sentence, beam=1)
    grid = AttentionGrid(grid.src_tokens, grid.tgt_tokens, grid.weights,
                         "a trained demo rnnsearch model (synthetic language, greedy)")
    dest.write_text(json.dumps(attention_to_dict(grid, sentence=sentence, note=note)) + "\n", encoding="utf-8")
    return dest


# The model behind the bundled attention: the demo's RNNsearch, on sentences of up to
# ATTENTION_MAX_LEN words so that its grid stays readable, trained for a fixed number of steps
# (not the demo's fixed time) so that the result does not depend on the machine's load.
ATTENTION_MAX_LEN = 20
ATTENTION_STEPS = 1500


def train_attention_model(out_dir: str | Path, steps: int = ATTENTION_STEPS) -> tuple[Path, list[str]]:
    """Train the demo's RNNsearch on short synthetic sentences; returns its folder and test sentences."""
    from attnmt.data.synthetic_corpus import make_splits, write_corpus
    from attnmt.study.demo import DemoSettings, demo_config
    from attnmt.train.trainer import train

    out_dir = Path(out_dir)
    s = DemoSettings(n_train=6000, n_valid=100, n_test=100, max_len=ATTENTION_MAX_LEN, hidden_size=64, emb_size=48,
                     attn_size=32)
    splits = make_splits(s.n_train, s.n_valid, s.n_test, s.min_len, s.max_len, seed=s.seed)
    for name, pairs in splits.items():
        write_corpus(pairs, out_dir / "data", name)
    config = demo_config("rnnsearch", out_dir / "data", s)
    config.train.max_time_s, config.train.max_steps, config.train.progress = None, steps, False
    train(config, out_dir / "rnnsearch", quiet=True)
    return out_dir / "rnnsearch", [" ".join(p.src) for p in splits["test"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python scripts/refresh_bundles.py",
                                     description="Refresh the measurements shipped with the scenes.")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("curve", help="copy a demo result's BLEU buckets into attnmt/viz/demo_curve.json")
    p.add_argument("results_json")
    p = sub.add_parser("attention", help="store a model's attention on a sentence in attnmt/viz/demo_attention.json")
    p.add_argument("--model", required=True)
    p.add_argument("--sentence", required=True)
    p.add_argument("--note", default="")
    p = sub.add_parser("attention-model", help="train the model behind the bundled attention (minutes)")
    p.add_argument("out_dir")
    args = parser.parse_args(argv)
    if args.what == "curve":
        print(write_bundled_curve(args.results_json))
    elif args.what == "attention-model":
        model_dir, sentences = train_attention_model(args.out_dir)
        print(model_dir)
        print("\n".join(sentences[:10]))
    else:
        print(write_bundled_attention(args.model, args.sentence, note=args.note))


if __name__ == "__main__":
    main()
