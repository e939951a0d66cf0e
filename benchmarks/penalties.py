"""Beam search's length and coverage penalties (GNMT's alpha and beta) on a grid: BLEU and output length.

    python -m benchmarks.penalties --model DIR [--model DIR ...] --src valid.src --ref valid.tgt \
        [--beam 5] [--alpha 0.2 0.3 0.4 0.6 1.0] [--beta 0 0.2 0.3 0.4] [--name penalties_NAME]

Each model folder decodes the source file with beam search at every (alpha, beta) of the grid
(``attnmt translate --length-penalty ALPHA --coverage-penalty BETA``); each cell records sacreBLEU
(13a) and the output/reference length ratio. Made to choose alpha and beta on validation pairs, before
a test set sees them (the alpha 0.3 and beta 0.3 of recipes/bottleneck_enfr/study.yaml, e.g. with
``--src runs/study-bottleneck_enfr/data/valid.src``). A model without attention gets only
beta 0. Writes benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import write_result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="model folder (repeatable)")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.6, 1.0])
    parser.add_argument("--beta", type=float, nargs="+", default=[0.0, 0.2, 0.3, 0.4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="penalties", help="result name (benchmarks/results/NAME.json)")
    args = parser.parse_args()

    import sacrebleu
    import torch

    from attnmt.data.corpus import read_parallel
    from attnmt.decode.translator import load

    torch.set_num_threads(args.threads)
    pairs = read_parallel(args.src, args.ref)
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    models = []
    for folder in args.model:
        translator = load(folder, checkpoint=args.checkpoint)
        cells = []
        for beta in args.beta if translator.has_attention else [0.0]:
            for alpha in args.alpha:
                started = time.perf_counter()
                translations = translator.translate(sources, beam=args.beam, length_penalty=alpha,
                                                    coverage_penalty=beta)
                seconds = time.perf_counter() - started
                bleu = sacrebleu.corpus_bleu([t.text for t in translations], [references], tokenize="13a")
                cells.append({"alpha": alpha, "beta": beta, "bleu": bleu.score,
                              "length_ratio": bleu.sys_len / bleu.ref_len, "decode_seconds": seconds})
                print(f"{folder}: alpha {alpha:g} beta {beta:g}: BLEU {bleu.score:.2f}, "
                      f"length ratio {bleu.sys_len / bleu.ref_len:.3f} ({seconds:.0f} s)", flush=True)
        best = max(cells, key=lambda c: c["bleu"])
        models.append({"model_dir": folder, "model_type": translator.model_type, "cells": cells,
                       "best": {"alpha": best["alpha"], "beta": best["beta"], "bleu": best["bleu"]}})
    path = write_result(args.name, {"src": args.src, "ref": args.ref, "sentences": len(sources), "beam": args.beam,
                                    "checkpoint": args.checkpoint, "models": models})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
