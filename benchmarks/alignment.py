"""Attention as word alignment on real English-French: the text, the guidance links and the tables.

Run from the repository root; recipes/alignment_hansards/README.md runs them in order. Every data location is an
argument: the gold set is --gold-dir, a folder holding the NAACL 2003 English-French Hansards test set as
enfr.src, enfr.tgt (tokenized, line-aligned) and enfr.gold (1-based links, i-j sure, ipj possible).

    python -m benchmarks.alignment prepare --gold-dir GOLD [--tatoeba FILE] [--multi30k DIR] [--out-dir DIR]
        Tatoeba fra-eng (default data/tatoeba/fra-eng.tsv.gz, as `attnmt data tatoeba fra-eng data/tatoeba` writes
        it) and Multi30k en-fr train (default data/multi30k, as `attnmt data multi30k data/multi30k` writes it),
        tokenized and lowercased the way the gold is (attnmt.data.pretokenize), into DIR/train.tsv.gz (default
        DIR: data/align_enfr); the gold sentences, unlabelled, as DIR/gold.en and DIR/gold.fr (the recipes add
        them to training with the align_text transform); then eflomal's links of the training pairs, symmetrized
        with grow-diag-final-and, as guided alignment's links (DIR/train.en-fr.links, .fr-en.links),
        and from the same eflomal run each direction's own links (train.directional.en-fr.links: every French
        word linked to at most one English word, eflomal's forward alignment; .fr-en.links: its reverse).
        The gold sentences never get guidance links.
    python -m benchmarks.alignment table --gold-dir GOLD --model NAME=DIR[+DIR...][,REVERSE_DIR[+REVERSE_DIR...]] ...
            [--checkpoint best|last|averaged|stepN] [--roen-dir DIR] [--out JSON]
        The one table: diagonal, eflomal (each direction and symmetrized; it learns from the first model's
        training text plus the gold sentences), and each model x extraction method x symmetrization, with AER /
        precision / recall, the model's (or the ensemble's) BLEU on its held-out test set, its training time and
        the alignment time. --roen-dir (roen.src, roen.tgt, roen.gold) adds the Romanian-English baselines.
    python -m benchmarks.alignment self-links --model DIR [--reverse-model DIR] [--method M] [--layer L]
            [--stem STEM] [--data-dir DIR]
        Self-training: a pair's own links of the training pairs (by default the mutual maxima of the two
        directions' attention in agreement; without --reverse-model, the English->French model's own links)
        as DIR/STEM.en-fr.links and .fr-en.links (default data/align_enfr/train.self.*), the guidance of a new
        pair; with an unguided teacher (or its students) no label is used anywhere.
    python -m benchmarks.alignment figures --gold-dir GOLD --model DIR --name NAME [--method shift]
        Heatmaps of Hansards gold pairs whose word order changes, the gold's sure links circled.
    python -m benchmarks.alignment why --gold-dir GOLD --model DIR [--reverse-model DIR] [--method M]
        Where a model (or a pair, symmetrized) misaligns: AER by French word category and by sentence length on
        the gold, and agreement with eflomal on held-out training-domain sentences against the Hansards.
    python -m benchmarks.alignment lengths --gold-dir GOLD [--data-dir DIR] [--joined N --join-max-parts K --seed S]
        How long the sentences are: the share of English sources in each of why's length buckets, in
        DIR/train.tsv.gz (with N pairs joined as the joined_pairs transform joins them) and in the gold.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

from attnmt.cli.common import ALIGN_METHODS, SYMMETRIZATIONS  # attnmt.align's choices, without importing torch

ROOT = Path(__file__).resolve().parents[1]
# Where prepare writes and self-links / lengths read, relative to the folder the command runs in (the repository
# root): the recipes' configs read data/align_enfr/ from there.
DATA = Path("data") / "align_enfr"
TATOEBA = Path("data") / "tatoeba" / "fra-eng.tsv.gz"
MULTI30K = Path("data") / "multi30k"


def _read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8-sig") as f:
        return [line.rstrip("\n") for line in f]


def _need(path: Path, what: str) -> Path:
    """``path`` if it exists, else a one-line error naming it and the option that sets it."""
    from attnmt.errors import UserError

    if not path.exists():
        raise UserError(f"{path} not found: {what}")
    return path


def training_pairs(data_dir: Path) -> list[tuple[str, str]]:
    """The (English, French) pairs that ``prepare`` wrote to DATA_DIR/train.tsv.gz."""
    path = _need(data_dir / "train.tsv.gz", "run `python -m benchmarks.alignment prepare` first, or give --data-dir")
    return [tuple(line.split("\t")) for line in _read_gz(path)]


def corpus_pairs(tatoeba: Path, multi30k: Path) -> list[tuple[str, str]]:
    """Tatoeba fra-eng then Multi30k train, English and French tokenized the Hansards way."""
    from attnmt.data.pretokenize import tokenize

    pairs = []
    for line in _read_gz(_need(tatoeba, "give --tatoeba (or run `attnmt data tatoeba fra-eng data/tatoeba`)")):
        cols = line.split("\t")
        if len(cols) >= 2:
            pairs.append((cols[0], cols[1]))
    hint = "give --multi30k (or run `attnmt data multi30k data/multi30k`)"
    pairs += list(zip(_read_gz(_need(multi30k / "train.en.gz", hint)), _read_gz(_need(multi30k / "train.fr.gz", hint))))
    out = []
    for en, fr in pairs:
        en, fr = tokenize(en, "en"), tokenize(fr, "fr")
        if en and fr and "\t" not in en + fr:
            out.append((en, fr))
    return out


def gold_files(gold_dir: Path) -> tuple[Path, Path, Path]:
    """The gold set's enfr.src, enfr.tgt and enfr.gold in ``gold_dir``."""
    hint = "--gold-dir must hold the Hansards gold set as enfr.src, enfr.tgt and enfr.gold"
    return tuple(_need(gold_dir / f"enfr.{ext}", hint) for ext in ("src", "tgt", "gold"))


def gold_pairs(gold_dir: Path) -> list[tuple[str, str]]:
    src, tgt, _ = gold_files(gold_dir)
    src, tgt = src.read_text(encoding="utf-8").splitlines(), tgt.read_text(encoding="utf-8").splitlines()
    return [(s.lower(), t.lower()) for s, t in zip(src, tgt)]


def write_tsv(path: Path, pairs) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)


def cmd_prepare(args) -> None:
    from attnmt.align import eflomal_align, symmetrize

    out = Path(args.out_dir)
    src, tgt, _ = gold_files(Path(args.gold_dir))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pairs = corpus_pairs(Path(args.tatoeba), Path(args.multi30k))
    write_tsv(out / "train.tsv.gz", pairs)
    # the gold set's sentences without their links: the text the models are scored on, as a statistical aligner
    # sees it; the recipes add them to training (the align_text transform), never with guidance
    shutil.copyfile(src, out / "gold.en")
    shutil.copyfile(tgt, out / "gold.fr")
    print(f"{len(pairs)} training pairs in {out / 'train.tsv.gz'}, the gold sentences in {out}/gold.en, gold.fr "
          f"({time.perf_counter() - started:.0f} s)")
    started = time.perf_counter()
    forward, reverse = eflomal_align([s for s, _ in pairs], [t for _, t in pairs])
    write_guidance(symmetrize(forward, reverse, "grow-diag-final-and"), out / "train")
    write_guidance(forward, out / "train.directional", reverse=reverse)
    print(f"eflomal guidance links (grow-diag-final-and; each direction's own: train.directional.*) in {out} "
          f"({time.perf_counter() - started:.0f} s)")


def write_guidance(links, stem: Path, reverse=None) -> None:
    """(English, French) links of the training pairs as guidance: STEM.en-fr.links and STEM.fr-en.links, the
    latter turned to (French, English) (0-based Pharaoh, one line per pair of train.tsv.gz). Both files hold
    ``links``, or the French->English one holds ``reverse`` when given."""
    from attnmt.align import format_links

    def write(direction: str, sets) -> None:
        Path(f"{stem}.{direction}.links").write_text("".join(format_links(a) + "\n" for a in sets), encoding="utf-8")

    write("en-fr", links)
    write("fr-en", ({(j, i) for i, j in a} for a in (links if reverse is None else reverse)))


def _load_pair(args):
    """The --model translator, the --reverse-model one (or None) at --checkpoint, and how they combine
    (--symmetrize, agreement by default; None for one model)."""
    from attnmt.translator import load

    forward = load(args.model, checkpoint=args.checkpoint)
    reverse = load(args.reverse_model, checkpoint=args.checkpoint) if args.reverse_model else None
    return forward, reverse, (args.symmetrize or "agreement") if reverse is not None else None


def cmd_self_links(args) -> None:
    """Self-training (Zenkel et al. 2020): a pair's own symmetrized attention links of the training pairs
    (an unguided pair's, or an earlier student's), written as the guidance of a new pair; without a
    reverse model, one direction's own links. No alignment label is used anywhere, as long as the
    teacher was never guided by one."""
    import torch

    from attnmt.align import align_pairs

    torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir)
    pairs = training_pairs(data_dir)
    forward, reverse, symmetrization = _load_pair(args)
    started, links = time.perf_counter(), []
    for start in range(0, len(pairs), args.chunk):
        chunk = pairs[start:start + args.chunk]
        links += align_pairs(forward, [s for s, _ in chunk], [t for _, t in chunk], method=args.method,
                             layer=args.layer, reverse=reverse, symmetrization=symmetrization)
        print(f"{len(links)}/{len(pairs)} pairs aligned ({time.perf_counter() - started:.0f} s)", flush=True)
    write_guidance(links, data_dir / args.stem)
    print(f"-> {data_dir / args.stem}.en-fr.links, .fr-en.links")


def _model_facts(model_dirs: list[Path], beam: int, checkpoint: str = "best") -> dict:
    """Training time and steps from each model folder's log; BLEU (beam ``beam``) of ``checkpoint`` on the
    first folder's held-out test set, translated by that model or, given several folders, by their ensemble."""
    from attnmt.ensemble import load_ensemble
    from attnmt.evaluate import evaluate_translator
    from attnmt.runlog import training_summary
    from attnmt.translator import load

    runs = []
    for model_dir in model_dirs:
        summary = training_summary(model_dir)
        runs.append({"model_dir": str(model_dir), "checkpoint": checkpoint, "train_s": summary.get("wall_s"),
                     "steps": summary.get("steps"),
                     "best_valid_ppl": round(summary["best_valid_ppl"], 2) if "best_valid_ppl" in summary else None})
    started = time.perf_counter()
    translator = (load(model_dirs[0], checkpoint=checkpoint) if len(model_dirs) == 1
                  else load_ensemble(model_dirs, checkpoint=checkpoint))
    report = evaluate_translator(translator, model_dirs[0] / "test.src", model_dirs[0] / "test.tgt", beam=beam)
    bleu = {"test_bleu": round(report.scores.bleu, 2), "bleu_signature": report.scores.bleu_signature,
            "test_sentences": report.n_sentences, "decode_s": round(time.perf_counter() - started, 1)}
    return {**runs[0], **bleu} if len(runs) == 1 else {"ensemble": runs, **bleu}


def cmd_table(args) -> None:
    from dataclasses import asdict

    from attnmt.align import align_files

    src, tgt, gold = gold_files(Path(args.gold_dir))
    rows: list[dict] = []
    models: dict[str, dict] = {}
    for k, spec in enumerate(args.model):
        name, _, dirs = spec.partition("=")
        forward_dirs, _, reverse_dirs = dirs.partition(",")
        forward, reverse = forward_dirs.split("+"), reverse_dirs.split("+") if reverse_dirs else []
        result = align_files(forward, src, tgt, gold_path=gold, baselines=("diagonal", "eflomal") if k == 0 else (),
                             reverse_model=reverse or None, checkpoint=args.checkpoint)
        models[name] = {"forward": _model_facts([Path(d) for d in forward], args.beam, args.checkpoint),
                        **({"reverse": _model_facts([Path(d) for d in reverse], args.beam, args.checkpoint)}
                           if reverse else {}),
                        "align_s": result.seconds}
        for row, scores in result.scores.items():
            label = row if not row.startswith(("attention", "reverse")) else f"{name}: {row}"
            rows.append({"row": label, **{key: round(v, 4) if isinstance(v, float) else v
                                          for key, v in asdict(scores).items()}})
        print(f"{name}: {models[name]}", flush=True)
    if args.roen_dir:
        # Romanian-English baselines only (no Romanian-English training text here): what its gold set measures,
        # eflomal learning from its 248 pairs alone.
        roen = Path(args.roen_dir)
        hint = "--roen-dir must hold roen.src, roen.tgt and roen.gold"
        result = align_files(None, _need(roen / "roen.src", hint), _need(roen / "roen.tgt", hint),
                             gold_path=_need(roen / "roen.gold", hint), baselines=("diagonal", "eflomal"))
        for row, scores in result.scores.items():
            rows.append({"row": f"ro-en: {row}", **{key: round(v, 4) if isinstance(v, float) else v
                                                    for key, v in asdict(scores).items()}})
    lines = ["| links | AER | precision | recall | links |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['row']} | {r['aer']:.3f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['predicted']} |"
              for r in rows]
    print("\n".join(lines))
    from benchmarks.common import write_result

    path = write_result("alignment_enfr", {"gold": str(gold), "eflomal_text": "the first model's training corpus "
                        "plus the gold sentences", "models": models, "rows": rows}, args.out)
    print(f"-> {path}")


def crossing_sentences(gold, pairs, n: int, low: int = 7, high: int = 13) -> list[int]:
    """The first ``n`` gold pairs of ``low``-``high`` words on both sides whose sure links cross
    (the word order changes), to show in heatmaps."""
    chosen = []
    for k, (g, (s, t)) in enumerate(zip(gold, pairs)):
        if not (low <= len(s.split()) <= high and low <= len(t.split()) <= high):
            continue
        links = sorted(g.sure)
        if any(i1 < i2 and j1 > j2 for i1, j1 in links for i2, j2 in links):
            chosen.append(k)
        if len(chosen) == n:
            break
    return chosen


def cmd_figures(args) -> None:
    """Word-level heatmaps of real Hansards sentences with the gold's sure links circled."""
    from attnmt.align import attention_matrices, read_gold
    from attnmt.align.extract import method_rows
    from attnmt.translator import load
    from attnmt.viz.heatmap import plot_attention

    gold = read_gold(gold_files(Path(args.gold_dir))[2])
    pairs = gold_pairs(Path(args.gold_dir))
    chosen = crossing_sentences(gold, pairs, args.n)
    translator = load(args.model)
    matrices = attention_matrices(translator, [pairs[k][0] for k in chosen], [pairs[k][1] for k in chosen])
    out = Path(args.out_dir)
    for k, m in zip(chosen, matrices):
        path = plot_attention(method_rows(m, args.method), m.src_words, m.tgt_words,
                              out / f"align_hansards_{args.name}_{k + 1}.png",
                              title=f"Hansards pair {k + 1}, {args.method} rows; circles: gold sure links",
                              marks=gold[k].sure)
        print(path)


def _gold_dir(p) -> None:
    p.add_argument("--gold-dir", required=True, metavar="DIR",
                   help="the Hansards gold set: DIR/enfr.src, enfr.tgt (tokenized) and enfr.gold (1-based links)")


def _data_dir(p) -> None:
    p.add_argument("--data-dir", default=str(DATA), help=f"what prepare wrote (default {DATA})")


def _add_prepare(sub) -> None:
    p = sub.add_parser("prepare", help="the training text, the gold sentences unlabelled and eflomal's guidance links")
    _gold_dir(p)
    p.add_argument("--tatoeba", default=str(TATOEBA), help=f"Tatoeba's fra-eng pairs, English TAB French (default "
                   f"{TATOEBA}, where `attnmt data tatoeba fra-eng data/tatoeba` writes it)")
    p.add_argument("--multi30k", default=str(MULTI30K), help=f"folder with Multi30k's train.en.gz and train.fr.gz "
                   f"(default {MULTI30K}, where `attnmt data multi30k data/multi30k` writes them)")
    p.add_argument("--out-dir", default=str(DATA), help=f"where to write (default {DATA}, where the recipes read)")
    p.set_defaults(func=cmd_prepare)


def _add_table(sub) -> None:
    p = sub.add_parser("table", help="AER / precision / recall of models and baselines on the gold, with BLEU")
    _gold_dir(p)
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR[,REVERSE_DIR]",
                   help="an English->French model folder, optionally with its French->English partner; "
                        "DIR+DIR (either side) for an ensemble, aligned with the mean of its models' attention")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--checkpoint", default="best", help="which checkpoint of every model folder: best, last, "
                   "averaged (attnmt average) or stepN, as attnmt align --checkpoint")
    p.add_argument("--roen-dir", help="also the Romanian-English baselines: DIR/roen.src, roen.tgt, roen.gold")
    p.add_argument("--out", help="JSON path (default benchmarks/results/alignment_enfr.json)")
    p.set_defaults(func=cmd_table)


def _add_self_links(sub) -> None:
    p = sub.add_parser("self-links", help="a pair's own links of the training pairs, as guidance (self-training)")
    p.add_argument("--model", required=True, help="an English->French model folder (unguided, or an earlier student)")
    p.add_argument("--reverse-model", help="its French->English partner (without it: the English->French model's "
                   "own links, not symmetrized)")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default="mutual")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS), default=None,
                   help="how the two directions combine (default agreement); needs --reverse-model")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--checkpoint", default="best", help="which checkpoint of the folders labels the pairs: best, "
                   "last, averaged or stepN")
    _data_dir(p)
    p.add_argument("--stem", default="train.self", help="write DATA_DIR/STEM.en-fr.links and .fr-en.links")
    p.add_argument("--chunk", type=int, default=20000, help="pairs aligned at a time")
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=cmd_self_links)


def _add_figures(sub) -> None:
    p = sub.add_parser("figures", help="heatmaps of gold pairs whose word order changes")
    _gold_dir(p)
    p.add_argument("--model", required=True)
    p.add_argument("--name", required=True, help="a short name for the file names")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default="argmax")
    p.add_argument("--n", type=int, default=2)
    p.add_argument("--out-dir", default=str(ROOT / "docs" / "img"))
    p.set_defaults(func=cmd_figures)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    from benchmarks.alignment_why import add_lengths, add_why

    for add in (_add_prepare, _add_table, _add_self_links, _add_figures, add_why, add_lengths):
        add(sub)
    args = parser.parse_args(argv)
    if args.command in ("self-links", "why") and args.symmetrize and not args.reverse_model:
        parser.error(f"{args.command}: --symmetrize combines two directions; give --reverse-model DIR too, or drop it")
    if getattr(args, "method", "x") is None:
        args.method = ["argmax", "shift"]
    from attnmt.errors import UserError

    try:
        args.func(args)
    except UserError as e:
        print(f"benchmarks.alignment: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
