"""The commands that use a model: translate (a file, or live lines), evaluate, plot-attention."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from attnmt.cli.common import (
    add_alignment_args,
    add_decode_args,
    add_model_args,
    decode_options,
    load_options,
    load_translator,
    read_input,
    refuse_overwrite,
)
from attnmt.errors import UserError
from attnmt.runtime.safe_write import open_output, write_text


def cmd_translate(args) -> None:
    from attnmt.decode.inputs import MAX_SOURCE_TOKENS
    from attnmt.decode.translator import load

    if args.output:
        refuse_overwrite(Path(args.output), args.overwrite)
    if (args.symmetrize or args.reverse_model) and not args.alignments:
        raise UserError("translate: --symmetrize and --reverse-model belong to --alignments; add it or leave them out")
    if args.symmetrize and not args.reverse_model:
        raise UserError("translate: --symmetrize combines two directions; pass --reverse-model DIR too")
    translator = load_translator(args)
    translator.max_src_tokens = MAX_SOURCE_TOKENS  # a refusal naming the line, not an hour-long decode
    options = decode_options(args, translator)
    reverse = ([load(d, checkpoint=args.checkpoint) for d in args.reverse_model]
               if args.alignments and args.reverse_model else None)
    from attnmt.decode.interactive import is_live

    if args.buffer is not None or (not args.input or args.input == "-") and is_live(sys.stdin):
        return _translate_live(args, translator, options, reverse)
    _translate_batched(args, translator, options, reverse)


# translate --input FILE: lines translated (sorted by length into batches) and written this many at a time, so
# that memory does not grow with the input
GROUP_LINES = 1000


def _translate_batched(args, translator, options, reverse) -> None:
    """Every GROUP_LINES lines translated and written; --output goes through attnmt.runtime.safe_write (a file: a
    temporary file renamed at the end, so that a failed run leaves no partial file; a pipe or a device:
    written to directly)."""
    from attnmt.decode.interactive import in_groups

    with open_output(args.output, overwrite=args.overwrite) if args.output else contextlib.nullcontext(
            sys.stdout) as out:
        in_groups(read_input(args.input), GROUP_LINES, lambda group, first: _write_translations(
            out, _translate_lines(args, translator, options, reverse, group, first), first, args, options.n_best))


def _translate_lines(args, translator, options, reverse, sentences: list[str], first: int) -> list:
    """translate's translations (and links, with --alignments) of ``sentences``, line ``first`` + 1 onwards, decoded
    with ``options``."""
    from attnmt.decode.inputs import InputRefused

    try:
        translations = translator.translate(sentences, options=options)
    except InputRefused as e:
        raise e.at(args.input if args.input and args.input != "-" else "<stdin>", first) from None
    if args.alignments:
        from attnmt.align import align_translations

        align_translations(translator, translations, args.align_method, args.threshold, args.layer, args.head,
                           reverse, args.symmetrize)
    return translations


def _write_translations(out, translations: list, first: int, args, n_best: int) -> None:
    from attnmt.align import format_links

    for i, tr in enumerate(translations, start=first):
        links = f" ||| {format_links(tr.alignment)}" if args.alignments else ""
        if n_best > 1:
            for option in tr.n_best or [tr]:
                out.write(f"{i} ||| {option.text} ||| {option.score:.4f}{links if option is tr else ''}\n")
        else:
            out.write(tr.text + links + "\n")


def _translate_live(args, translator, options, reverse) -> None:
    """Each group translated, written and flushed as soon as it is read (attnmt.decode.interactive): every --buffer N
    lines; without --buffer, a terminal's every line, a pipe's lines that are ready (up to GROUP_LINES)."""
    from attnmt.decode.interactive import in_groups, live_lines, ready_groups

    from_stdin = not args.input or args.input == "-"
    out = None

    interrupted: KeyboardInterrupt | None = None
    with contextlib.ExitStack() as outputs:
        def handle(group: list[str], first: int) -> None:
            nonlocal out
            translations = _translate_lines(args, translator, options, reverse, group, first)
            if out is None:  # opened with the first output (attnmt.runtime.safe_write: a file is complete at the end)
                out = (outputs.enter_context(open_output(args.output, overwrite=args.overwrite)) if args.output
                       else sys.stdout)
            _write_translations(out, translations, first, args, options.n_best)
            out.flush()

        try:
            if args.buffer is None and from_stdin and not sys.stdin.isatty():
                first = 0
                for group in ready_groups(sys.stdin.buffer, GROUP_LINES):
                    handle(group, first)
                    first += len(group)
            else:
                lines = live_lines(sys.stdin.buffer) if from_stdin else read_input(args.input)
                in_groups(lines, 1 if args.buffer is None else args.buffer, handle)
        except KeyboardInterrupt as e:  # how live input at a terminal ends: the --output file keeps what was translated
            interrupted = e
    if interrupted is not None:
        raise interrupted


def cmd_evaluate(args) -> None:
    from attnmt.decode.evaluate import evaluate_translator
    from attnmt.decode.inputs import MAX_SOURCE_TOKENS, InputRefused

    for path in (args.json, args.output):  # before the work, not after it
        if path:
            refuse_overwrite(Path(path), args.overwrite)
    if (args.n_best or 1) > 1 and not args.output:
        raise UserError("evaluate: --n-best writes N hypotheses per sentence to --output FILE; add --output")
    if args.output:
        given = (("--src", args.src), ("--ref", args.ref), ("--json", args.json))
        taken = {Path(path).resolve(): flag for flag, path in given if path}
        if (output := Path(args.output).resolve()) in taken:
            raise UserError(f"evaluate: --output {args.output} is also the {taken[output]} file; write the "
                            "translations to a file of their own")
    translator = load_translator(args)
    translator.max_src_tokens = MAX_SOURCE_TOKENS
    try:
        report = evaluate_translator(translator, args.src, args.ref, tokenize=args.tokenize, lowercase=args.lowercase,
                                     length_unit=args.length_unit, length_edges=args.length_edges,
                                     bootstrap=args.bootstrap, output=args.output,
                                     options=decode_options(args, translator))
    except InputRefused as e:
        raise e.at(args.src) from None
    print(report.render())
    if args.json:
        write_text(args.json, report.to_json(), overwrite=args.overwrite)


def cmd_plot_attention(args) -> None:
    from attnmt.data.pretokenize import segmented_sides
    from attnmt.decode.inputs import MAX_SOURCE_TOKENS, InputRefused
    from attnmt.decode.translator import load
    from attnmt.viz.heatmap import merge_pieces, plot_attention

    out = Path(args.out)
    refuse_overwrite(out, args.overwrite)
    translator = load(args.model, load_options(args))
    translator.max_src_tokens = MAX_SOURCE_TOKENS  # an exported model's too: a refusal, not an hour-long decode
    if not args.sentence.strip():
        raise UserError("plot-attention: the sentence is empty; pass the sentence to translate in quotes")
    try:
        tr = translator.translate([args.sentence], beam=args.beam)[0]
    except InputRefused as e:
        raise e.named("plot-attention: the sentence") from None
    if tr.attention is None:
        raise UserError(f"plot-attention: {args.model} is a {translator.model_type} model, which has no attention; "
                        "use an rnnsearch or transformer model")
    alpha, src, tgt = tr.attention, tr.src_tokens, tr.tgt_tokens + ["</s>"]
    if not args.pieces:
        tgt_ids = translator.tgt.tokenizer.word_ids(tr.tgt_tokens)
        alpha, src, tgt = merge_pieces(alpha, src, tgt, translator.src.tokenizer.word_ids(src),
                                       tgt_ids + [max(tgt_ids, default=-1) + 1],
                                       spaced=segmented_sides(translator.config.data))
    plot_attention(alpha, src, tgt, out, title=tr.text)
    print(f"{tr.text}\n{out}")


def register(sub) -> None:
    """Add this module's commands to the `attnmt` parser."""
    p = sub.add_parser("translate", help="translate sentences (stdin or --input), one per line")
    add_model_args(p, ensemble=True, beam=False)
    add_decode_args(p, helps={"n_best": "print the N best hypotheses as 'i ||| text ||| score' (with --sample: N "
                                        "samples)"})
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--buffer", type=int, default=None, metavar="N",
                   help="translate N lines at a time and flush each group's output as soon as it is read "
                        "(default: a terminal line by line; a pipe in groups of the lines ready, up to 1,000, each "
                        "flushed; a file on stdin or --input: 1,000 lines at a time; groups batched by length)")
    p.add_argument("--alignments", action="store_true",
                   help="print word links after each translation: 'text ||| 0-0 1-2 ...' (0-based source-output "
                        "word positions, as Marian's --alignment; with --n-best, on the best hypothesis)")
    add_alignment_args(p, method_flag="--align-method")
    p.add_argument("--reverse-model", action="append",
                   help="--alignments: a model of the other direction, to symmetrize with (--symmetrize; default "
                        "intersection); repeat it for an ensemble, as --model")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="BLEU, chrF and TER (sacreBLEU) of a model on a test set, also by length")
    add_model_args(p, ensemble=True, beam=False)
    add_decode_args(p, helps={"n_best": "--output: write the N best hypotheses of each sentence as 'i ||| text ||| "
                                        "score' (i from 0, best first), as translate --n-best; the scores are the "
                                        "best's (default 1)"})
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer (13a, none, zh, intl, ...)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument("--length-unit", choices=["tokens", "words"], default="tokens",
                   help="BLEU by source length counts tokens of the model's source tokenizer (default) or "
                        "whitespace-separated words, as the studies do")
    p.add_argument("--length-edges", type=int, nargs="+", metavar="N",
                   help="bucket edges for BLEU by length, e.g. 1 10 20 30 (buckets [1, 10), [10, 20), ...; "
                        "default: chosen from the data)")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N",
                   help="a 95%% bootstrap interval for each length bucket from N resamples (e.g. 1000; default 0)")
    p.add_argument("--json", help="also write the scores as JSON to this file")
    p.add_argument("--output", metavar="FILE",
                   help="also write the translations to FILE, one detokenized line per sentence (the JSON names "
                        "the file)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json or --output file")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("plot-attention", help="draw the attention heatmap of one sentence")
    add_model_args(p)
    p.add_argument("sentence", help="the sentence to translate, in quotes")
    p.add_argument("--out", default="attention.png", help="the picture to write; .png, .pdf or .svg (default: "
                                                          "attention.png)")
    p.add_argument("--pieces", action="store_true",
                   help="one row and column per subword piece, as the model reads and writes them (default: per "
                        "word, the pieces' attention merged; text in a CJK script keeps its pieces)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_plot_attention)
