"""Attention as word alignment on the Hansards: what the workflow of any pair leaves to this gold set.

The text, the configs and the table are commands of the package (`attnmt align-prepare`, `attnmt align-config`,
`attnmt align-table`; docs/alignment.md, "Align your own language pair"). recipes/alignment_hansards/README.md runs
them for English-French and these steps beside them. --gold-dir is a folder holding the NAACL 2003 English-French
Hansards test set as enfr.src, enfr.tgt (tokenized, line-aligned) and enfr.gold (1-based links, i-j sure, ipj
possible); --data-dir the folder `attnmt align-prepare` wrote (default data/align_enfr).

    python -m benchmarks.alignment self-links --model DIR [--reverse-model DIR] [--method M] [--layer L]
            [--stem STEM] [--data-dir DIR]
        Self-training: a pair's own links of the training pairs (by default the mutual maxima of the two
        directions' attention in agreement; without --reverse-model, the forward model's own links)
        as DIR/STEM.SRC-TGT.links and .TGT-SRC.links (default data/align_enfr/train.self.*), the guidance of a new
        pair; with an unguided teacher (or its students) no label is used anywhere. Any prepared pair.
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
import sys
import time
from pathlib import Path

from attnmt.cli.common import ALIGN_METHODS, SYMMETRIZATIONS  # attnmt.align's choices, without importing torch

ROOT = Path(__file__).resolve().parents[1]
# Where align-prepare writes and self-links / lengths read, relative to the folder the command runs in (the repository
# root): the recipes' configs read data/align_enfr/ from there.
DATA = Path("data") / "align_enfr"


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
    """The (source, target) pairs that ``attnmt align-prepare`` wrote to DATA_DIR/train.tsv.gz."""
    path = _need(data_dir / "train.tsv.gz", "run `attnmt align-prepare` first, or give --data-dir")
    return [tuple(line.split("\t")) for line in _read_gz(path)]


def gold_files(gold_dir: Path) -> tuple[Path, Path, Path]:
    """The gold set's enfr.src, enfr.tgt and enfr.gold in ``gold_dir``."""
    hint = "--gold-dir must hold the Hansards gold set as enfr.src, enfr.tgt and enfr.gold"
    return tuple(_need(gold_dir / f"enfr.{ext}", hint) for ext in ("src", "tgt", "gold"))


def gold_pairs(gold_dir: Path) -> list[tuple[str, str]]:
    src, tgt, _ = gold_files(gold_dir)
    src, tgt = src.read_text(encoding="utf-8").splitlines(), tgt.read_text(encoding="utf-8").splitlines()
    return [(s.lower(), t.lower()) for s, t in zip(src, tgt)]


def _load_pair(args):
    """The --model translator, the --reverse-model one (or None) at --checkpoint, and how they combine
    (--symmetrize, agreement by default; None for one model)."""
    from attnmt.decode.translator import load

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
    from attnmt.align.prepare import read_manifest, write_links

    manifest = read_manifest(data_dir)
    for path in write_links(links, data_dir / args.stem, manifest["src_lang"], manifest["tgt_lang"]):
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
    from attnmt.decode.translator import load
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


def _add_self_links(sub) -> None:
    p = sub.add_parser("self-links", help="a pair's own links of the training pairs, as guidance (self-training)")
    p.add_argument("--model", required=True, help="a model folder of the prepared pair's direction (unguided, or an "
                   "earlier student)")
    p.add_argument("--reverse-model", help="its partner of the other direction (without it: the model's own links, "
                   "not symmetrized)")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default="mutual")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS), default=None,
                   help="how the two directions combine (default agreement); needs --reverse-model")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--checkpoint", default="best", help="which checkpoint of the folders labels the pairs: best, "
                   "last, averaged or stepN")
    _data_dir(p)
    p.add_argument("--stem", default="train.self", help="write DATA_DIR/STEM.SRC-TGT.links and .TGT-SRC.links")
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

    for add in (_add_self_links, _add_figures, add_why, add_lengths):
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
