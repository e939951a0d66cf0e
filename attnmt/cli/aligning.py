"""The alignment workflow for any language pair: align-prepare, align-config, align-table (attnmt.align)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from attnmt.cli.common import refuse_overwrite
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text

# align-prepare --pretokenize: attnmt.data.pretokenize.PRETOKENIZERS but none (--pretokenized)
PRETOKENIZE_CHOICES = ["words", "hansards", "jieba", "mecab"]


def cmd_align_prepare(args) -> None:
    from attnmt.align.prepare import TEST_LINES, Corpus, format_check, gold_check, prepare_alignment
    from attnmt.data.corpus import read_parallel

    pretokenize = "none" if args.pretokenized else args.pretokenize
    if args.check:
        from attnmt.data.pretokenize import check_pair, segmenter_hint

        check_pair(pretokenize, args.src_lang, args.tgt_lang)
        gold = read_parallel(args.gold_src, args.gold_tgt)
        for k, (path, lang) in enumerate(((args.gold_src, args.src_lang), (args.gold_tgt, args.tgt_lang))):
            check = gold_check([p[k] for p in gold], pretokenize, lang, show=args.show, user_dict=args.user_dict)
            print(format_check(check, f"gold {path}"))
        for hint in filter(None, (segmenter_hint(pretokenize, lang) for lang in (args.src_lang, args.tgt_lang))):
            print(hint)
        return
    if not args.out_dir:
        raise UserError("align-prepare: give --out-dir DIR, the folder to write (e.g. data/align_deen)")
    if args.test_lines is not None and not args.test:
        raise UserError("align-prepare --test-lines: it counts the pairs of --test SRC_FILE TGT_FILE; give --test "
                        "too, or leave --test-lines out")
    corpora = ([Corpus(tsv=f) for f in args.tsv or []] + [Corpus(tsv=f, swapped=True) for f in args.tsv_swapped or []]
               + [Corpus(src=s, tgt=t) for s, t in args.parallel or []])
    prepare_alignment(args.src_lang, args.tgt_lang, corpora, args.gold_src, args.gold_tgt, args.out_dir,
                      pretokenize=pretokenize, links=not args.no_links, fold_accents=args.fold_accents,
                      test=args.test, test_lines=TEST_LINES if args.test_lines is None else args.test_lines,
                      user_dict=args.user_dict)


def cmd_align_config(args) -> None:
    from attnmt.align.template import KINDS, write_configs

    for path in write_configs(args.data_dir, args.out_dir, args.name, kinds=args.kind or KINDS,
                              overwrite=args.overwrite):
        print(path)


def cmd_align_table(args) -> None:
    from attnmt.align.table import alignment_table, format_bleu, format_table

    if args.out:
        refuse_overwrite(Path(args.out), args.overwrite)
    if (args.test_src is None) != (args.test_tgt is None):
        raise UserError("align-table: give --test-src and --test-tgt together (a test set's two line-aligned files, "
                        "e.g. the test.SRC and test.TGT of align-prepare --test), or neither")
    table = alignment_table(args.src, args.tgt, args.gold, models=args.model or (), baselines=args.baseline or (),
                            eflomal_corpus=args.eflomal_corpus, checkpoint=args.checkpoint, beam=args.beam,
                            test=(args.test_src, args.test_tgt) if args.test_src else None)
    print(format_table(table["rows"]))
    if table["models"].keys() - {"baselines"}:
        print(format_bleu(table["models"]))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {"command": " ".join(["attnmt", *sys.argv[1:]]), **table}
        write_text(out, json.dumps(record, indent=2, ensure_ascii=False) + "\n", overwrite=args.overwrite)
        print(f"-> {out}")


def _register_prepare(sub) -> None:
    p = sub.add_parser("align-prepare", help="an alignment recipe's text for any pair: training pairs, the gold "
                                             "sentences unlabelled, eflomal's guidance links")
    p.add_argument("--src-lang", required=True, help="the pair's source language code, e.g. de")
    p.add_argument("--tgt-lang", required=True, help="the pair's target language code, e.g. en")
    p.add_argument("--tsv", action="append", metavar="FILE",
                   help="a corpus: source TAB target per line, plain or .gz (repeatable)")
    p.add_argument("--tsv-swapped", action="append", metavar="FILE",
                   help="a corpus: target TAB source per line, e.g. Tatoeba's deu-eng.tsv.gz (English first) for "
                        "a de-en pair (repeatable)")
    p.add_argument("--parallel", action="append", nargs=2, metavar=("SRC_FILE", "TGT_FILE"),
                   help="a corpus as two line-aligned files, e.g. data/multi30k/train.de.gz data/multi30k/"
                        "train.en.gz (repeatable)")
    p.add_argument("--gold-src", required=True, help="the gold set's source sentences, tokenized, one per line")
    p.add_argument("--gold-tgt", required=True, help="the gold set's target sentences, line-aligned with --gold-src")
    p.add_argument("--pretokenize", choices=PRETOKENIZE_CHOICES, default="words",
                   help="how the corpora are split into the gold's words: words (any language: punctuation off "
                        "word edges, inner hyphens and the language's abbreviations kept), hansards (English "
                        "and French as the NAACL 2003 Hansards set: lowercased, elisions spelled out), jieba "
                        "(Chinese segmented into words by jieba; attnmt[zh]) or mecab (Japanese, by MeCab with "
                        "UniDic; attnmt[ja]); a segmenter splits the pair's other language as words does; "
                        "default words")
    p.add_argument("--user-dict", metavar="FILE",
                   help="with --pretokenize jieba or mecab: words to keep whole, such as names, one a line "
                        "(jieba's format: a word, optionally its frequency and tag; frequency 0 removes a word "
                        "from jieba's dictionary); copied into --out-dir for the configs")
    p.add_argument("--pretokenized", action="store_true",
                   help="the corpora are tokenized as the gold is already: split on spaces only")
    p.add_argument("--check", action="store_true",
                   help="only report how many gold lines the pretokenizer would change, and list them; write nothing")
    p.add_argument("--show", type=int, default=10, help="with --check: list at most N changed lines per side")
    p.add_argument("--fold-accents", action="store_true",
                   help="write accented letters as plain ASCII in every corpus, the test pairs and the gold sentences "
                        "(é -> e, ç -> c, œ -> oe, « » -> \"), as the Canadian Hansards release spells French; "
                        "each word stays one word")
    p.add_argument("--test", nargs=2, metavar=("SRC_FILE", "TGT_FILE"),
                   help="a held-out corpus as two line-aligned files: its first --test-lines pairs, prepared as the "
                        "training pairs are, become test.SRC and test.TGT (BLEU for align-table --test-src)")
    p.add_argument("--test-lines", type=int, default=None, metavar="N",
                   help="with --test: how many test pairs to write (default 1000)")
    p.add_argument("--no-links", action="store_true",
                   help="skip eflomal's guidance links (unguided recipes only)")
    p.add_argument("--out-dir", help="the folder to write, under data/ (e.g. data/align_deen)")
    p.set_defaults(func=cmd_align_prepare)


def register(sub) -> None:
    """Add this module's commands to the `attnmt` parser."""
    _register_prepare(sub)
    p = sub.add_parser("align-config", help="the alignment recipe's configs (guided, unguided, self-trained) for "
                                            "the pair align-prepare wrote")
    p.add_argument("--data-dir", required=True, help="the folder align-prepare wrote")
    p.add_argument("--out-dir", required=True, help="where to write KIND_SRC_TGT.yaml for both directions")
    p.add_argument("--name", required=True, help="the configs' name prefix: models/NAME_KIND_SRC_TGT by default")
    p.add_argument("--kind", action="append", choices=["guided", "unguided", "teacher", "selftrained"],
                   help="only these recipes (repeatable; default all four)")
    p.add_argument("--overwrite", action="store_true", help="replace existing configs")
    p.set_defaults(func=cmd_align_config)

    p = sub.add_parser("align-table", help="AER / precision / recall of baselines and model pairs on any gold set, "
                                           "with BLEU, as one JSON")
    p.add_argument("--src", required=True, help="the gold set's source sentences, tokenized, one per line")
    p.add_argument("--tgt", required=True, help="its target sentences, line-aligned with --src")
    p.add_argument("--gold", required=True, help="its links, 1-based 'i-j' (sure) and 'ipj' (possible)")
    p.add_argument("--model", action="append", metavar="NAME=DIR[,REVERSE_DIR]",
                   help="a model folder of the src -> tgt direction, optionally with its partner of the other; "
                        "DIR+DIR (either side) for an ensemble (repeatable)")
    p.add_argument("--baseline", action="append", choices=["diagonal", "eflomal"],
                   help="add this baseline's rows (repeatable): diagonal, or eflomal (each direction and "
                        "symmetrized)")
    p.add_argument("--eflomal-corpus", help="TSV (source TAB target, tokenized like --src) that eflomal learns "
                                            "from beside the gold sentences (default: the first model's corpus)")
    p.add_argument("--checkpoint", default=None, help="which checkpoint of every model folder: best, last, "
                                                       "averaged or stepN (default: best, else last)")
    p.add_argument("--test-src", metavar="FILE",
                   help="also score each model's BLEU on this test set (sacreBLEU 13a, lowercased), e.g. the test.SRC "
                        "of align-prepare --test; the reverse model translates --test-tgt into it")
    p.add_argument("--test-tgt", metavar="FILE", help="the references of --test-src, line-aligned with it")
    p.add_argument("--beam", type=int, default=5, help="beam size of the BLEU on each model's test sets (default 5)")
    p.add_argument("--out", help="write the table as JSON here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_align_table)
