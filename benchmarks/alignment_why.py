"""Where attention misaligns, for `python -m benchmarks.alignment why` and `lengths` (see benchmarks/alignment.py).

``why`` scores a model's links on the Hansards gold by French word category and by source length, and against
eflomal's links on held-out training-domain sentences and on the Hansards; ``lengths`` compares the source-length
shares of the training text with the gold's.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnmt.cli.common import SYMMETRIZATIONS
from attnmt.data.pretokenize import fold_accents
from benchmarks.alignment import _data_dir, _gold_dir, _load_pair, gold_files, gold_pairs, training_pairs

# French function words (articles, prepositions, pronouns, auxiliaries): the words an aligner finds hardest.
FUNCTION_WORDS = set("""le la les de à et un une en que qui ne pas se ce il elle nous vous ils elles je tu on me te
lui leur leurs est sont a ont été être avoir pour par sur dans avec son sa ses mon ma mes ton ta tes notre nos votre
vos cette ces cet y plus mais ou si dont où""".split())
FUNCTION_WORDS |= {fold_accents(w) for w in FUNCTION_WORDS}  # "ete", "ou": text written with accents folded


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


def cmd_why(args) -> None:
    """Where the attention misaligns: by French word category, by sentence length, and on in-domain
    (held-out Tatoeba/Multi30k) against out-of-domain (Hansards) sentences, with eflomal as the reference.
    With ``--reverse-model``, the two directions' links symmetrized (default agreement)."""
    from attnmt.align import align_pairs, read_gold, score_alignments
    from attnmt.align.command import _eflomal_corpus, eflomal_rows

    gold = read_gold(gold_files(Path(args.gold_dir))[2])
    hansards = gold_pairs(Path(args.gold_dir))
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
    """Source-length shares of the training text (optionally with joined pairs drawn by the joined_pairs
    transform's add_joined, here from the whole file; training draws from what its held-out split leaves) against the
    gold set's."""
    from attnmt.data.augment import add_joined

    pairs = training_pairs(Path(args.data_dir))
    result = {"training_text": length_shares([s for s, _ in pairs])}
    if args.joined:
        joined_text, parts_of = add_joined(pairs, args.joined, args.join_max_parts, args.seed)
        result["training_text_with_joined"] = {"joined_pairs": len(parts_of), "join_max_parts": args.join_max_parts,
                                               **length_shares([s for s, _ in joined_text])}
    result["gold"] = length_shares([s for s, _ in gold_pairs(Path(args.gold_dir))])
    for name, entry in result.items():
        print(name, json.dumps(entry), flush=True)
    from benchmarks.common import write_result

    print(f"-> {write_result('alignment_lengths', result, args.out)}")



def add_why(sub) -> None:
    p = sub.add_parser("why", help="AER by word category, sentence length and domain")
    _gold_dir(p)
    p.add_argument("--model", required=True, help="an English->French model folder")
    p.add_argument("--method", action="append", default=None, help="extraction methods (default argmax, shift)")
    p.add_argument("--reverse-model", help="its French->English partner: score the two directions symmetrized")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS), default=None,
                   help="how the two directions combine (default agreement); needs --reverse-model")
    p.add_argument("--checkpoint", default="best", help="best, last, averaged or stepN of both folders")
    p.add_argument("--out")
    p.set_defaults(func=cmd_why)


def add_lengths(sub) -> None:
    p = sub.add_parser("lengths", help="source-length shares of the training text and of the gold")
    _gold_dir(p)
    _data_dir(p)
    p.add_argument("--joined", type=int, default=0, help="add this many joined pairs, as the joined_pairs transform")
    p.add_argument("--join-max-parts", type=int, default=3, help="as the joined_pairs transform's max_parts")
    p.add_argument("--seed", type=int, default=1, help="as train.seed, which draws the joined pairs")
    p.add_argument("--out")
    p.set_defaults(func=cmd_lengths)
