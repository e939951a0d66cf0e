"""Attention as word alignment on real English-French: the data, the guidance links and the table.

    python benchmarks/alignment.py prepare [--with-gold-text]
        Tatoeba fra-eng + Multi30k en-fr (from ../shared/data), tokenized and lowercased the way
        the Hansards gold is (attnmt.data.pretokenize), into data/align_enfr/train.tsv.gz; then
        eflomal's links for those training pairs, symmetrized with grow-diag-final-and, as the
        guidance of train.guided_alignment (data/align_enfr/train.en-fr.links and .fr-en.links).
        The gold set's sentences never get guidance links. --with-gold-text also writes
        train_with_gold_text.tsv.gz: the same pairs plus the 447 unlabelled gold sentence pairs
        (as statistical aligners always see the text they align).
    python benchmarks/alignment.py table --model NAME=DIR[,REVERSE_DIR] ... [--out JSON]
        The one table: diagonal, eflomal (each direction and intersected), and each model x
        extraction method x symmetrization, with AER / precision / recall on the Hansards gold,
        the model's BLEU on its held-out test set, its training time and the alignment time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GOLD = SHARED / "alignment" / "enfr-hansards"
OUT = ROOT / "data" / "align_enfr"


def _read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8-sig") as f:
        return [line.rstrip("\n") for line in f]


def corpus_pairs() -> list[tuple[str, str]]:
    """Tatoeba fra-eng then Multi30k train, English and French tokenized the Hansards way."""
    from attnmt.data.pretokenize import tokenize

    pairs = []
    for line in _read_gz(SHARED / "tatoeba" / "fra-eng.tsv.gz"):
        cols = line.split("\t")
        if len(cols) >= 2:
            pairs.append((cols[0], cols[1]))
    pairs += list(zip(_read_gz(SHARED / "multi30k" / "train.en.gz"), _read_gz(SHARED / "multi30k" / "train.fr.gz")))
    out = []
    for en, fr in pairs:
        en, fr = tokenize(en, "en"), tokenize(fr, "fr")
        if en and fr and "\t" not in en + fr:
            out.append((en, fr))
    return out


def gold_pairs() -> list[tuple[str, str]]:
    src = (GOLD / "enfr.src").read_text(encoding="utf-8").splitlines()
    tgt = (GOLD / "enfr.tgt").read_text(encoding="utf-8").splitlines()
    return [(s.lower(), t.lower()) for s, t in zip(src, tgt)]


def write_tsv(path: Path, pairs) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)


def cmd_prepare(args) -> None:
    from attnmt.align import eflomal_align, format_links, symmetrize

    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pairs = corpus_pairs()
    write_tsv(OUT / "train.tsv.gz", pairs)
    if args.with_gold_text:
        write_tsv(OUT / "train_with_gold_text.tsv.gz", pairs + gold_pairs())
    print(f"{len(pairs)} training pairs in {OUT / 'train.tsv.gz'} ({time.perf_counter() - started:.0f} s)")
    started = time.perf_counter()
    forward, reverse = eflomal_align([s for s, _ in pairs], [t for _, t in pairs])
    links = symmetrize(forward, reverse, "grow-diag-final-and")
    (OUT / "train.en-fr.links").write_text("".join(format_links(a) + "\n" for a in links), encoding="utf-8")
    (OUT / "train.fr-en.links").write_text("".join(format_links({(j, i) for i, j in a}) + "\n" for a in links),
                                           encoding="utf-8")
    print(f"eflomal guidance links (grow-diag-final-and) in {OUT} ({time.perf_counter() - started:.0f} s)")


def _model_facts(model_dir: Path, beam: int) -> dict:
    """Training time and steps from the model folder's log; BLEU (beam ``beam``) on its held-out test set."""
    from attnmt.evaluate import evaluate_translator
    from attnmt.train import training_summary
    from attnmt.translator import load

    summary = training_summary(model_dir)
    started = time.perf_counter()
    report = evaluate_translator(load(model_dir), model_dir / "test.src", model_dir / "test.tgt", beam=beam)
    return {"model_dir": str(model_dir), "train_s": summary.get("wall_s"), "steps": summary.get("steps"),
            "best_valid_ppl": round(summary["best_valid_ppl"], 2) if "best_valid_ppl" in summary else None,
            "test_bleu": round(report.scores.bleu, 2), "bleu_signature": report.scores.bleu_signature,
            "test_sentences": report.n_sentences, "decode_s": round(time.perf_counter() - started, 1)}


def cmd_table(args) -> None:
    from dataclasses import asdict

    from attnmt.align import align_files

    src, tgt, gold = GOLD / "enfr.src", GOLD / "enfr.tgt", GOLD / "enfr.gold"
    rows: list[dict] = []
    models: dict[str, dict] = {}
    for k, spec in enumerate(args.model):
        name, _, dirs = spec.partition("=")
        forward, _, reverse = dirs.partition(",")
        result = align_files(forward, src, tgt, gold_path=gold, baselines=("diagonal", "eflomal") if k == 0 else (),
                             reverse_model=reverse or None)
        models[name] = {"forward": _model_facts(Path(forward), args.beam),
                        **({"reverse": _model_facts(Path(reverse), args.beam)} if reverse else {}),
                        "align_s": result.seconds}
        for row, scores in result.scores.items():
            label = row if not row.startswith(("attention", "reverse")) else f"{name}: {row}"
            rows.append({"row": label, **{key: round(v, 4) if isinstance(v, float) else v
                                          for key, v in asdict(scores).items()}})
        print(f"{name}: {models[name]}", flush=True)
    lines = ["| links | AER | precision | recall | links |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['row']} | {r['aer']:.3f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['predicted']} |"
              for r in rows]
    print("\n".join(lines))
    from common import write_result

    path = write_result("alignment_enfr", {"gold": str(gold), "eflomal_text": "the first model's training corpus "
                        "plus the gold sentences", "models": models, "rows": rows}, args.out)
    print(f"-> {path}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--with-gold-text", action="store_true")
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("table")
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR[,REVERSE_DIR]",
                   help="an English->French model folder, optionally with its French->English partner")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--out", help="JSON path (default benchmarks/results/alignment_enfr.json)")
    p.set_defaults(func=cmd_table)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
