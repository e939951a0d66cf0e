"""Attention as word alignment on real English-French: the data, the guidance links and the table.

    python -m benchmarks.alignment prepare [--with-gold-text]
        Tatoeba fra-eng + Multi30k en-fr (from ../shared/data), tokenized and lowercased the way
        the Hansards gold is (attnmt.data.pretokenize), into data/align_enfr/train.tsv.gz; then
        eflomal's links for those training pairs, symmetrized with grow-diag-final-and, as the
        guidance of train.guided_alignment (data/align_enfr/train.en-fr.links and .fr-en.links);
        from the same eflomal run, each direction's own links (train.directional.en-fr.links: every
        French word linked to at most one English word, eflomal's forward alignment; .fr-en.links:
        its reverse alignment, every English word to at most one French word).
        The gold set's sentences never get guidance links. --with-gold-text also writes
        train_with_gold_text.tsv.gz: the same pairs plus the 447 unlabelled gold sentence pairs
        (as statistical aligners always see the text they align).
    python -m benchmarks.alignment table --model NAME=DIR[+DIR...][,REVERSE_DIR[+REVERSE_DIR...]] ... [--out JSON]
        The one table: diagonal, eflomal (each direction and intersected), and each model x
        extraction method x symmetrization, with AER / precision / recall on the Hansards gold,
        the model's (or the ensemble's) BLEU on its held-out test set, its training time and the alignment time.
    python -m benchmarks.alignment self-links --model DIR [--reverse-model DIR] [--layer L]
        Self-training: a pair's own links of the training pairs (by default the mutual maxima of the
        two directions' attention in agreement; without --reverse-model, the English->French model's
        own links alone) as data/align_enfr/train.self.*.links, the guidance of a new model; with an
        unguided teacher (or its students) no label is used anywhere.
    python -m benchmarks.alignment figures --model DIR --name NAME [--method shift]
        Heatmaps of real Hansards pairs whose word order changes, the gold's sure links circled.
    python -m benchmarks.alignment why --model DIR
        Where one model's attention misaligns: AER by French word category and by sentence length on
        the gold, and agreement with eflomal on held-out training-domain sentences against Hansards.
    python -m benchmarks.alignment lengths [--joined N --join-max-parts K --seed S]
        How long the sentences are: the share of English sources in each of why's length buckets, in
        data/align_enfr/train.tsv.gz (with N pairs joined as data.joined_pairs joins them) and in the gold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from attnmt.cli.common import ALIGN_METHODS, SYMMETRIZATIONS  # attnmt.align's choices, without importing torch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GOLD = SHARED / "alignment" / "enfr-hansards"
OUT = ROOT / "data" / "align_enfr"


def _read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8-sig") as f:
        return [line.rstrip("\n") for line in f]


def training_pairs() -> list[tuple[str, str]]:
    """The (English, French) pairs that ``prepare`` wrote to OUT/train.tsv.gz."""
    return [tuple(line.split("\t")) for line in _read_gz(OUT / "train.tsv.gz")]


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
    from attnmt.align import eflomal_align, symmetrize

    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pairs = corpus_pairs()
    write_tsv(OUT / "train.tsv.gz", pairs)
    if args.with_gold_text:
        write_tsv(OUT / "train_with_gold_text.tsv.gz", pairs + gold_pairs())
    print(f"{len(pairs)} training pairs in {OUT / 'train.tsv.gz'} ({time.perf_counter() - started:.0f} s)")
    started = time.perf_counter()
    forward, reverse = eflomal_align([s for s, _ in pairs], [t for _, t in pairs])
    write_guidance(symmetrize(forward, reverse, "grow-diag-final-and"), "train")
    write_guidance(forward, "train.directional", reverse=reverse)
    print(f"eflomal guidance links (grow-diag-final-and; each direction's own: train.directional.*) in {OUT} "
          f"({time.perf_counter() - started:.0f} s)")


def write_guidance(links, stem: str, reverse=None) -> None:
    """(English, French) links of the training pairs as guidance: OUT/STEM.en-fr.links and
    OUT/STEM.fr-en.links, the latter turned to (French, English) (0-based Pharaoh, one line per pair of
    train.tsv.gz). Both files hold ``links``, or the French->English one holds ``reverse`` when given."""
    from attnmt.align import format_links

    def write(direction: str, sets) -> None:
        (OUT / f"{stem}.{direction}.links").write_text("".join(format_links(a) + "\n" for a in sets), encoding="utf-8")

    write("en-fr", links)
    write("fr-en", ({(j, i) for i, j in a} for a in (links if reverse is None else reverse)))


def cmd_self_links(args) -> None:
    """Self-training (Zenkel et al. 2020): a pair's own symmetrized attention links of the training pairs
    (an unguided pair's, or an earlier student's), written as the guidance of a new pair; without a
    reverse model, one direction's own links. No alignment label is used anywhere, as long as the
    teacher was never guided by one."""
    import torch

    from attnmt.align import align_pairs

    torch.set_num_threads(args.threads)
    pairs = training_pairs()
    forward, reverse, symmetrization = _load_pair(args)
    started, links = time.perf_counter(), []
    for start in range(0, len(pairs), args.chunk):
        chunk = pairs[start:start + args.chunk]
        links += align_pairs(forward, [s for s, _ in chunk], [t for _, t in chunk], method=args.method,
                             layer=args.layer, reverse=reverse, symmetrization=symmetrization)
        print(f"{len(links)}/{len(pairs)} pairs aligned ({time.perf_counter() - started:.0f} s)", flush=True)
    write_guidance(links, args.stem)
    print(f"-> {OUT / args.stem}.en-fr.links, .fr-en.links")


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

    src, tgt, gold = GOLD / "enfr.src", GOLD / "enfr.tgt", GOLD / "enfr.gold"
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
    # Romanian-English: ../shared/data holds no Romanian-English training corpus, so no model can be trained
    # for it here; the baselines show what its gold set measures (eflomal learns from its 248 pairs alone).
    roen = SHARED / "alignment" / "roen-naacl"
    result = align_files(None, roen / "roen.src", roen / "roen.tgt", gold_path=roen / "roen.gold",
                         baselines=("diagonal", "eflomal"))
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


# French function words (articles, prepositions, pronouns, auxiliaries): the words an aligner finds hardest.
FUNCTION_WORDS = set("""le la les de à et un une en que qui ne pas se ce il elle nous vous ils elles je tu on me te
lui leur leurs est sont a ont été être avoir pour par sur dans avec son sa ses mon ma mes ton ta tes notre nos votre
vos cette ces cet y plus mais ou si dont où""".split())


def word_category(word: str) -> str:
    if not any(ch.isalnum() for ch in word):
        return "punctuation"
    return "function word" if word.lower() in FUNCTION_WORDS else "content word"


def _restricted(links, gold, keep) -> tuple[list, list]:
    """Links and gold of each sentence kept to the target words (j) that ``keep(k, j)`` accepts."""
    from attnmt.align import GoldAlignment

    out_links, out_gold = [], []
    for k, (a, g) in enumerate(zip(links, gold)):
        out_links.append({(i, j) for i, j in a if keep(k, j)})
        out_gold.append(GoldAlignment(frozenset((i, j) for i, j in g.sure if keep(k, j)),
                                      frozenset((i, j) for i, j in g.possible if keep(k, j))))
    return out_links, out_gold


def _silver(links) -> list:
    """eflomal's links taken as a reference (every link sure), to compare domains where no gold exists."""
    from attnmt.align import GoldAlignment

    return [GoldAlignment(frozenset(a), frozenset(a)) for a in links]


# Source-length buckets (words, inclusive) of why's breakdown and of lengths; None: no upper bound.
LENGTH_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, None))


def _bucket_name(low: int, high: int | None) -> str:
    return f"{low}-{high if high is not None else ''}"


def _in_bucket(words: int, low: int, high: int | None) -> bool:
    return low <= words and (high is None or words <= high)


def _breakdown(found, gold, hansards) -> dict:
    """AER of the Hansards links ``found`` against ``gold``: overall, by French word category and by
    source length."""
    from attnmt.align import score_alignments

    entry: dict = {"gold_aer": round(score_alignments(found, gold).aer, 4), "by_category": {},
                   "by_source_length": {}}
    words = [t.split() for _, t in hansards]
    for cat in ("content word", "function word", "punctuation"):
        def in_category(k, j, cat=cat):
            return word_category(words[k][j]) == cat

        sc = score_alignments(*_restricted(found, gold, in_category))
        entry["by_category"][cat] = {"aer": round(sc.aer, 4), "precision": round(sc.precision, 4),
                                     "recall": round(sc.recall, 4), "sure": sc.sure}
    for low, high in LENGTH_BUCKETS:
        keep = [k for k, (s, _) in enumerate(hansards) if _in_bucket(len(s.split()), low, high)]
        if keep:
            sc = score_alignments([found[k] for k in keep], [gold[k] for k in keep])
            entry["by_source_length"][_bucket_name(low, high)] = {"sentences": len(keep), "aer": round(sc.aer, 4)}
    return entry


def _load_pair(args):
    """The --model translator, the --reverse-model one (or None) at --checkpoint, and how they combine
    (--symmetrize, agreement by default; None for one model)."""
    from attnmt.translator import load

    forward = load(args.model, checkpoint=args.checkpoint)
    reverse = load(args.reverse_model, checkpoint=args.checkpoint) if args.reverse_model else None
    return forward, reverse, (args.symmetrize or "agreement") if reverse is not None else None


def cmd_why(args) -> None:
    """Where the attention misaligns: by French word category, by sentence length, and on in-domain
    (held-out Tatoeba/Multi30k) against out-of-domain (Hansards) sentences, with eflomal as the reference.
    With ``--reverse-model``, the two directions' links symmetrized (default agreement)."""
    from attnmt.align import align_pairs, read_gold, score_alignments
    from attnmt.align.command import _eflomal_corpus, eflomal_rows

    gold = read_gold(GOLD / "enfr.gold")
    hansards = gold_pairs()
    model_dir = Path(args.model)
    held = list(zip((model_dir / "test.src").read_text(encoding="utf-8").splitlines(),
                    (model_dir / "test.tgt").read_text(encoding="utf-8").splitlines()))
    corpus = _eflomal_corpus(None, model_dir)
    translator, reverse, symmetrization = _load_pair(args)
    result: dict = {"model_dir": str(model_dir), "reverse_model_dir": args.reverse_model,
                    "symmetrization": symmetrization, "checkpoint": args.checkpoint, "methods": {}}
    reference, domains = {}, (("hansards", hansards), ("held_out", held))
    for domain, pairs in domains:
        rows = eflomal_rows([s for s, _ in pairs], [t for _, t in pairs], corpus)
        reference[domain] = _silver(rows["eflomal intersection"])
        # How far eflomal's own symmetrizations are apart: the scale of "close to eflomal" in each domain.
        result.setdefault("eflomal_grow_diag_final_and_against_intersection", {})[domain] = round(
            score_alignments(rows["eflomal grow-diag-final-and"], reference[domain]).aer, 4)
    for method in args.method:
        found = {domain: align_pairs(translator, [s for s, _ in pairs], [t for _, t in pairs], method=method,
                                     reverse=reverse, symmetrization=symmetrization) for domain, pairs in domains}
        entry = _breakdown(found["hansards"], gold, hansards)
        entry["against_eflomal_intersection"] = {d: round(score_alignments(found[d], reference[d]).aer, 4)
                                                 for d in found}
        result["methods"][method] = entry
        print(method, json.dumps(entry), flush=True)
    # Which row aligns: the row that predicts y_t (offset 0), the next, or the one after (argmax each).
    from attnmt.align import argmax_links, attention_matrices

    result["by_row_offset"] = {}
    for offset in (0, 1, 2):
        matrices = attention_matrices(translator, [s for s, _ in hansards], [t for _, t in hansards],
                                      shift_offset=offset)
        sc = score_alignments([argmax_links(m.shifted) for m in matrices], gold)
        result["by_row_offset"][f"t+{offset}"] = round(sc.aer, 4)
    result["query_lag"] = getattr(translator.model, "query_lag", None)
    print("by row offset", result["by_row_offset"], flush=True)
    eflomal_links = [set(g.sure) for g in reference["hansards"]]
    result["eflomal_intersection_gold_aer"] = round(score_alignments(eflomal_links, gold).aer, 4)
    result["eflomal_intersection"] = _breakdown(eflomal_links, gold, hansards)
    from benchmarks.common import write_result

    name = (f"alignment_why_{model_dir.name}" + (f"_{symmetrization}" if symmetrization else "")
            + (f"_{args.checkpoint}" if args.checkpoint != "best" else ""))
    print(f"-> {write_result(name, result, args.out)}")


def length_shares(sources: list[str]) -> dict:
    """How many ``sources`` there are, their median and mean length in words and their share in each
    length bucket."""
    lengths = sorted(len(s.split()) for s in sources)
    shares = {_bucket_name(low, high): round(sum(_in_bucket(n, low, high) for n in lengths) / len(lengths), 4)
              for low, high in LENGTH_BUCKETS}
    return {"sentences": len(lengths), "median_words": lengths[len(lengths) // 2],
            "mean_words": round(sum(lengths) / len(lengths), 2), "shares": shares}


def cmd_lengths(args) -> None:
    """Source-length shares of the training text (optionally with joined pairs drawn by data.joined_pairs'
    add_joined, here from the whole file; training draws from what its held-out split leaves) against the
    gold set's."""
    from attnmt.data.augment import add_joined

    pairs = training_pairs()
    result = {"training_text": length_shares([s for s, _ in pairs])}
    if args.joined:
        joined_text, parts_of = add_joined(pairs, args.joined, args.join_max_parts, args.seed)
        result["training_text_with_joined"] = {"joined_pairs": len(parts_of), "join_max_parts": args.join_max_parts,
                                               **length_shares([s for s, _ in joined_text])}
    result["gold"] = length_shares([s for s, _ in gold_pairs()])
    for name, entry in result.items():
        print(name, json.dumps(entry), flush=True)
    from benchmarks.common import write_result

    print(f"-> {write_result('alignment_lengths', result, args.out)}")


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

    gold = read_gold(GOLD / "enfr.gold")
    pairs = gold_pairs()
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--with-gold-text", action="store_true")
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("table")
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR[,REVERSE_DIR]",
                   help="an English->French model folder, optionally with its French->English partner; "
                        "DIR+DIR (either side) for an ensemble, aligned with the mean of its models' attention")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--checkpoint", default="best", help="which checkpoint of every model folder: best, last, "
                   "averaged (attnmt average) or stepN, as attnmt align --checkpoint")
    p.add_argument("--out", help="JSON path (default benchmarks/results/alignment_enfr.json)")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("self-links")
    p.add_argument("--model", required=True, help="an English->French model folder (unguided, or an earlier student)")
    p.add_argument("--reverse-model", help="its French->English partner (without it: the English->French model's "
                   "own links, not symmetrized)")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default="mutual")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS), default=None,
                   help="how the two directions combine (default agreement); needs --reverse-model")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--checkpoint", default="best", help="which checkpoint of the folders labels the pairs: best, "
                   "last, averaged or stepN")
    p.add_argument("--stem", default="train.self", help="write data/align_enfr/STEM.en-fr.links and .fr-en.links")
    p.add_argument("--chunk", type=int, default=20000, help="pairs aligned at a time")
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=cmd_self_links)
    p = sub.add_parser("figures")
    p.add_argument("--model", required=True)
    p.add_argument("--name", required=True, help="a short name for the file names")
    p.add_argument("--method", choices=list(ALIGN_METHODS), default="argmax")
    p.add_argument("--n", type=int, default=2)
    p.add_argument("--out-dir", default=str(ROOT / "docs" / "img"))
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("why")
    p.add_argument("--model", required=True, help="an English->French model folder")
    p.add_argument("--method", action="append", default=None, help="extraction methods (default argmax, shift)")
    p.add_argument("--reverse-model", help="its French->English partner: score the two directions symmetrized")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS), default=None,
                   help="how the two directions combine (default agreement); needs --reverse-model")
    p.add_argument("--checkpoint", default="best", help="best, last, averaged or stepN of both folders")
    p.add_argument("--out")
    p.set_defaults(func=cmd_why)
    p = sub.add_parser("lengths")
    p.add_argument("--joined", type=int, default=0, help="add this many joined pairs, as data.joined_pairs")
    p.add_argument("--join-max-parts", type=int, default=3, help="as data.join_max_parts")
    p.add_argument("--seed", type=int, default=1, help="as train.seed, which draws the joined pairs")
    p.add_argument("--out")
    p.set_defaults(func=cmd_lengths)
    args = parser.parse_args(argv)
    if args.func in (cmd_self_links, cmd_why) and args.symmetrize and not args.reverse_model:
        parser.error(f"{args.command}: --symmetrize combines two directions; give --reverse-model DIR too, or drop it")
    if getattr(args, "method", "x") is None:
        args.method = ["argmax", "shift"]
    args.func(args)


if __name__ == "__main__":
    main()
