"""The `attnmt` command: parses arguments and calls library functions, nothing more.

Every user-facing problem (a missing file, bad UTF-8, a wrong config key...) is one line on stderr
and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnmt.config import STOPPING_RULES

# attnmt.align's METHODS and SYMMETRIZATIONS, spelled out so that parsing arguments needs no torch (tested equal)
ALIGN_METHODS = ("argmax", "threshold", "shift")
SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")
from attnmt.errors import UserError


def _refuse_overwrite(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise UserError(f"{path} exists; choose another output path or pass --overwrite")


def _read_input(path: str | None) -> list[str]:
    from attnmt.data.corpus import read_lines, read_stream

    return read_lines(path) if path and path != "-" else read_stream(sys.stdin.buffer, "<stdin>")


def _add_checkpoint_arg(p) -> None:
    p.add_argument("--checkpoint", default="best",
                   help="which checkpoint of the model folder: best (default), last, averaged (attnmt average) "
                        "or stepN (train.keep_checkpoints), ema (train.ema_decay)")


def cmd_demo(args) -> None:
    from attnmt.demo import run_demo

    run_demo(args.out, quick=args.quick, overwrite=args.overwrite)


def cmd_train(args) -> None:
    from attnmt.config import load_config
    from attnmt.train import train

    config = load_config(args.config, args.set)
    model_dir = Path(args.model_dir or Path("models") / config.name)
    result = train(config, model_dir, resume=args.resume, overwrite=args.overwrite)
    print(f"{model_dir}: {result.state.step} steps, stopped by {result.state.stop_reason}; "
          f"best validation loss {result.state.best_valid_loss:.4f}")


def cmd_prepare(args) -> None:
    from attnmt.config import load_config
    from attnmt.data.prepare import prepare

    config = load_config(args.config, args.set)
    model_dir = Path(args.model_dir or Path("models") / config.name)
    done = prepare(config, model_dir, workers=args.workers, force=args.force)
    meta = done["meta"]
    corpora = ", ".join(f"{c['name']} {c['kept']:,} of {c['total']:,}" for c in meta["corpora"])
    timing = ", ".join(f"{phase} {s:.1f} s" for phase, s in done["seconds"].items())
    print(f"{done['location']}: {'prepared' if done['prepared'] else 'up to date'}, {meta['pairs']:,} pairs "
          f"({corpora})" + (f"; {timing}" if timing else ""))


def cmd_translate(args) -> None:
    from attnmt.translator import MAX_SOURCE_TOKENS, load

    if args.output:
        _refuse_overwrite(Path(args.output), args.overwrite)
    if (args.symmetrize or args.reverse_model) and not args.alignments:
        raise UserError("translate: --symmetrize and --reverse-model belong to --alignments; add it or leave them out")
    if args.symmetrize and not args.reverse_model:
        raise UserError("translate: --symmetrize combines two directions; pass --reverse-model DIR too")
    if args.alignments and len(args.model) > 1:
        raise UserError("translate: --alignments read one model's attention; pass a single --model")
    translator = _load_translator(args)
    translator.max_src_tokens = MAX_SOURCE_TOKENS  # a refusal naming the line, not an hour-long decode
    reverse = load(args.reverse_model, checkpoint=args.checkpoint) if args.alignments and args.reverse_model else None
    from attnmt.interactive import is_live

    if args.buffer is not None or (not args.input or args.input == "-") and is_live(sys.stdin):
        return _translate_live(args, translator, reverse)
    translations = _translate_lines(args, translator, reverse, _read_input(args.input), 0)
    # The output file is created only now: a failed run leaves no empty file that blocks the next one.
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        _write_translations(out, translations, 0, args)
    finally:
        if out is not sys.stdout:
            out.close()


def _translate_lines(args, translator, reverse, sentences: list[str], first: int) -> list:
    """translate's translations (and links, with --alignments) of ``sentences``, line ``first`` + 1 onwards."""
    from attnmt.translator import SentenceTooLong

    try:
        translations = translator.translate(sentences, beam=args.beam, n_best=args.n_best,
                                            workers=_workers(args, translator), stopping=args.stopping,
                                            **_decoding(args))
    except SentenceTooLong as e:
        where = args.input if args.input and args.input != "-" else "<stdin>"
        raise SentenceTooLong(e.index + first, e.tokens, e.limit).at(where) from None
    if args.alignments:
        translator.align(translations, args.align_method, args.threshold, args.layer, args.head, reverse,
                         args.symmetrize)
    return translations


def _write_translations(out, translations: list, first: int, args) -> None:
    from attnmt.align import format_links

    for i, tr in enumerate(translations, start=first):
        links = f" ||| {format_links(tr.alignment)}" if args.alignments else ""
        if args.n_best > 1:
            for option in tr.n_best or [tr]:
                out.write(f"{i} ||| {option.text} ||| {option.score:.4f}{links if option is tr else ''}\n")
        else:
            out.write(tr.text + links + "\n")


def _translate_live(args, translator, reverse) -> None:
    """Each group of --buffer lines (default 1) translated and flushed as soon as it is read (attnmt.interactive)."""
    from attnmt.interactive import in_groups, live_lines

    lines = live_lines(sys.stdin.buffer) if not args.input or args.input == "-" else iter(_read_input(args.input))
    out = None

    def handle(group: list[str], first: int) -> None:
        nonlocal out
        translations = _translate_lines(args, translator, reverse, group, first)
        if out is None:  # created with the first output, as in the batch path
            out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
        _write_translations(out, translations, first, args)
        out.flush()

    try:
        in_groups(lines, 1 if args.buffer is None else args.buffer, handle)
    finally:
        if out is not None and out is not sys.stdout:
            out.close()


def _load_translator(args):
    """The one model, or the ensemble of the models, that --model names (translate, evaluate)."""
    from attnmt.translator import load

    if len(args.model) == 1 and args.ensemble_weights is None:
        return load(args.model[0], checkpoint=args.checkpoint, int8=args.int8)
    from attnmt.ensemble import load_ensemble

    return load_ensemble(args.model, checkpoint=args.checkpoint, int8=args.int8, weights=args.ensemble_weights)


def _decoding(args) -> dict:
    """translate()'s length, repetition and sampling options from the decoding flags."""
    sampling = None
    given = [flag for flag, value in (("--top-k", args.top_k), ("--top-p", args.top_p),
                                      ("--temperature", args.temperature), ("--seed", args.seed)) if value is not None]
    if args.sample:
        from attnmt.sampling import Sampling

        sampling = Sampling(top_k=args.top_k or 0, top_p=1.0 if args.top_p is None else args.top_p,
                            temperature=1.0 if args.temperature is None else args.temperature, seed=args.seed or 0)
    elif given:
        raise UserError(f"{given[0]} belongs to --sample; add --sample or leave it out")
    return dict(min_len=args.min_len, no_repeat_ngram=args.no_repeat_ngram, max_len=args.max_len, sampling=sampling)


def _workers(args, translator) -> int:
    """--workers, else the model's decode.workers: decoding processes of translate and evaluate."""
    return translator.config.decode.workers if args.workers is None else args.workers


def cmd_evaluate(args) -> None:
    from attnmt.evaluate import evaluate_translator
    from attnmt.translator import MAX_SOURCE_TOKENS, SentenceTooLong

    if args.json:  # before the work, not after it
        _refuse_overwrite(Path(args.json), args.overwrite)
    translator = _load_translator(args)
    translator.max_src_tokens = MAX_SOURCE_TOKENS
    try:
        report = evaluate_translator(translator, args.src, args.ref, beam=args.beam, tokenize=args.tokenize,
                                     lowercase=args.lowercase, workers=_workers(args, translator),
                                     stopping=args.stopping, **_decoding(args))
    except SentenceTooLong as e:
        raise e.at(args.src) from None
    print(report.render())
    if args.json:
        Path(args.json).write_text(report.to_json(), encoding="utf-8")


def cmd_plot_attention(args) -> None:
    from attnmt.translator import load
    from attnmt.viz.heatmap import plot_attention

    out = Path(args.out)
    _refuse_overwrite(out, args.overwrite)
    translator = load(args.model, checkpoint=args.checkpoint, int8=args.int8)
    if not args.sentence.strip():
        raise UserError("plot-attention: the sentence is empty; pass the sentence to translate in quotes")
    tr = translator.translate([args.sentence], beam=args.beam)[0]
    if tr.attention is None:
        raise UserError(f"plot-attention: {args.model} is a {translator.model_type} model, which has no attention; "
                        "use an rnnsearch or transformer model")
    plot_attention(tr.attention, tr.src_tokens, tr.tgt_tokens + ["</s>"], out, title=tr.text)
    print(f"{tr.text}\n{out}")


def cmd_data(args) -> None:
    from attnmt.data.download import download_multi30k

    if args.dataset != "multi30k":
        raise UserError(f"data: unknown dataset {args.dataset!r}; available: multi30k")
    download_multi30k(Path(args.dest), from_dir=Path(args.from_dir) if args.from_dir else None,
                      overwrite=args.overwrite)
    print(f"multi30k files in {args.dest}")


def cmd_serve(args) -> None:
    from attnmt.serve import serve

    serve(args.model, host=args.host, port=args.port, max_batch_size=args.max_batch_size,
          max_wait_ms=args.max_wait_ms, max_texts=args.max_texts, max_text_chars=args.max_text_chars,
          max_beam=args.max_beam, checkpoint=args.checkpoint, threads=args.threads, log_level=args.log_level,
          int8=args.int8)


def _add_alignment_args(p, method_flag: str) -> None:
    """The options that say how attention becomes word links (align, translate --alignments)."""
    p.add_argument(method_flag, dest="align_method", choices=list(ALIGN_METHODS), default="argmax",
                   help="how attention becomes links: argmax of the row that predicts each word, threshold, or "
                        "shift (the row whose query has read it; see docs/alignment.md). Default argmax")
    p.add_argument("--threshold", type=float, default=0.5, help="weight for the threshold method (default 0.5)")
    p.add_argument("--layer", type=int, help="Transformer: the decoder layer whose cross-attention aligns "
                                             "(default: the last)")
    p.add_argument("--head", type=int, help="Transformer: one head of that layer (default: the heads' average)")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS),
                   help="combine the links of the model and of --reverse-model (intersection, union or "
                        "grow-diag-final-and)")


def cmd_align(args) -> None:
    from attnmt.align import align_files, format_links, format_scores

    if args.model is None and not args.baseline:
        raise UserError("align: pass --model DIR (attention links) or --baseline diagonal|eflomal, or both")
    for path in (args.out, args.json):
        if path:
            _refuse_overwrite(Path(path), args.overwrite)
    result = align_files(args.model, args.src, args.tgt, gold_path=args.gold, threshold=args.threshold,
                         baselines=args.baseline or (), checkpoint=args.checkpoint, method=args.align_method,
                         reverse_model=args.reverse_model, symmetrization=args.symmetrize, layer=args.layer,
                         head=args.head, eflomal_corpus=args.eflomal_corpus)
    lines = [format_links(links, one_based=args.one_based) + "\n" for links in result.links[result.output]]
    if args.out:
        Path(args.out).write_text("".join(lines), encoding="utf-8")
    elif not args.gold:
        sys.stdout.write("".join(lines))
    if result.scores:
        print(format_scores(result.scores))
    if args.json:
        import json
        from dataclasses import asdict

        Path(args.json).write_text(json.dumps({m: asdict(s) for m, s in result.scores.items()}, indent=2),
                                   encoding="utf-8")


def cmd_average(args) -> None:
    from attnmt.checkpoint import average_last
    from attnmt.translator import model_config

    model_dir = Path(args.model)
    model_type = model_config(model_dir).model.type
    out, averaged = average_last(model_dir, last=args.last, name=args.name, model_type=model_type,
                                 overwrite=args.overwrite)
    print(f"{out}: the mean of {', '.join(p.stem for p in averaged)}; use it with --checkpoint {args.name}")


def cmd_study(args) -> None:
    from attnmt.study import run_study

    run_study(args.config, out=args.out, retrain=args.retrain, jobs=args.jobs, quiet=args.quiet)


def cmd_animate(args) -> None:
    from attnmt.viz.animate import animate

    result = animate(args.scene, args.out, quality=args.quality, gif=args.gif, last_frame=args.last_frame,
                     overwrite=args.overwrite, study=args.study, model_dirs=args.model or [],
                     test=tuple(args.test) if args.test else None, sentence=args.sentence,
                     checkpoint=args.checkpoint, beam=args.beam, bucket_width=args.bucket_width)
    print("\n".join(str(path) for path in result.files))


def _add_animate_parser(sub) -> None:
    p = sub.add_parser("animate", help="render the chapter's manim animations from real measurements (needs "
                                       "attnmt[anim])")
    p.add_argument("scene", choices=["bottleneck", "soft-alignment"])
    p.add_argument("--out", help="output file (default: SCENE.mp4, or SCENE.png with --last-frame)")
    p.add_argument("--quality", choices=["low", "medium", "high"], default="high",
                   help="480p15, 720p30 or 1080p60 (default: high)")
    p.add_argument("--gif", action="store_true", help="also write a GIF next to the MP4")
    p.add_argument("--last-frame", action="store_true", help="write only the final frame as PNG (fast)")
    p.add_argument("--study", metavar="RESULTS.json",
                   help="bottleneck: measured BLEU by length: results.json of `attnmt demo` or `attnmt study`, "
                        "or `attnmt evaluate --json` (default: the built-in demo's measurements)")
    p.add_argument("--model", action="append", metavar="DIR",
                   help="bottleneck: a model to evaluate on --test (repeatable); soft-alignment: the rnnsearch "
                        "model whose attention fills the grid")
    p.add_argument("--test", nargs=2, metavar=("SRC", "REF"), help="bottleneck: the test set for --model")
    p.add_argument("--sentence", help="soft-alignment: the sentence to translate with --model; bottleneck: the "
                                      "words to show")
    p.add_argument("--bucket-width", type=int, default=10,
                   help="bottleneck: source-length bucket width for --test (default: 10)")
    _add_checkpoint_arg(p)
    p.add_argument("--beam", type=int, default=None, help="beam size (default from the model's config)")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.set_defaults(func=cmd_animate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Neural machine translation with attention.")
    from attnmt import __version__

    parser.add_argument("--version", action="version", version=f"attnmt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="train seq2seq and rnnsearch on the built-in language and compare them")
    p.add_argument("--out", default="attnmt-demo", help="output folder (default: attnmt-demo)")
    p.add_argument("--quick", action="store_true", help="a smaller demo: sentences up to 30 words, about 75 s")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("--model-dir", help="output model folder (default: models/<config name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.lr=0.0005 (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue from the folder's last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model folder")
    p.set_defaults(func=cmd_train)

    def model_args(p, ensemble: bool = False):
        if ensemble:
            p.add_argument("--model", required=True, action="append", metavar="DIR",
                           help="trained model folder; repeat it for an ensemble, whose log probs are averaged at "
                                "every step (the models must share their vocabularies)")
            p.add_argument("--ensemble-weights", type=float, nargs="+", metavar="W",
                           help="one weight per --model for the average (default: equal)")
        else:
            p.add_argument("--model", required=True, help="trained model folder")
        _add_checkpoint_arg(p)
        p.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default from the config)")
        p.add_argument("--int8", action="store_true",
                       help="int8 linear layers: faster decoding on a CPU at about the same BLEU")

    def decode_args(p):
        p.add_argument("--workers", type=int, default=None,
                       help="CPU only: decode batches in N processes of one thread each, e.g. one per core "
                            "(default: decode.workers, 1)")
        p.add_argument("--stopping", choices=STOPPING_RULES, default=None,
                       help="beam search: end a sentence when no live hypothesis can still win (exact), or when "
                            "none would win if it ended now (early: fewer steps) (default: decode.stopping, exact)")
        p.add_argument("--min-len", type=int, default=None,
                       help="no </s> before N output tokens (or the sentence's maximum length, if lower) "
                            "(default: decode.min_len, 0)")
        p.add_argument("--no-repeat-ngram", type=int, default=None, metavar="N",
                       help="no N-gram occurs twice in an output (default: decode.no_repeat_ngram, 0 = off)")
        p.add_argument("--max-len", type=int, default=None,
                       help="at most N output tokens (default: decode.max_len_cap, none beyond a * src + b)")
        p.add_argument("--sample", action="store_true",
                       help="draw each token from the model's distribution instead of searching (with --n-best N: "
                            "N samples per sentence)")
        p.add_argument("--top-k", type=int, default=None, help="--sample: from the K most likely tokens only")
        p.add_argument("--top-p", type=float, default=None,
                       help="--sample: from the fewest most likely tokens whose probability reaches P (nucleus)")
        p.add_argument("--temperature", type=float, default=None,
                       help="--sample: divide the log probs by T (< 1 sharper, > 1 flatter; default 1)")
        p.add_argument("--seed", type=int, default=None, help="--sample: the random seed (default 0)")

    p = sub.add_parser("prepare", help="read, tokenize and encode a config's training corpora once into a "
                                       "memory-mapped store that train reuses")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("--model-dir", help="model folder whose store/ to write (default: models/<config name>); "
                                       "data.store_dir puts it in a shared folder instead")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set data.vocab_size=16000 (repeatable)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="encoding processes (default: data.workers, else the number of cores)")
    p.add_argument("--force", action="store_true", help="prepare again even if the store is up to date")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("translate", help="translate sentences (stdin or --input), one per line")
    model_args(p, ensemble=True)
    decode_args(p)
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--n-best", type=int, default=1, help="print the N best hypotheses as 'i ||| text ||| score'")
    p.add_argument("--buffer", type=int, default=None, metavar="N",
                   help="translate N lines at a time and flush each group's output as soon as it is read (default "
                        "1 when stdin is a terminal or a pipe; a file on stdin or --input is batched whole)")
    p.add_argument("--alignments", action="store_true",
                   help="print word links after each translation: 'text ||| 0-0 1-2 ...' (0-based source-output "
                        "word positions, as Marian's --alignment; with --n-best, on the best hypothesis)")
    _add_alignment_args(p, method_flag="--align-method")
    p.add_argument("--reverse-model", help="--alignments: a model of the other direction, to symmetrize with "
                                           "(--symmetrize; default intersection)")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="BLEU, chrF and TER (sacreBLEU) of a model on a test set, also by length")
    model_args(p, ensemble=True)
    decode_args(p)
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer (13a, none, zh, intl, ...)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument("--json", help="also write the scores as JSON to this file")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("plot-attention", help="draw the attention heatmap of one sentence")
    model_args(p)
    p.add_argument("sentence")
    p.add_argument("--out", default="attention.png")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_plot_attention)

    p = sub.add_parser("average", help="average the weights of a model's last kept checkpoints (train.keep_checkpoints)")
    p.add_argument("--model", required=True, help="trained model folder")
    p.add_argument("--last", type=int, default=None, help="average the newest N kept checkpoints (default: all kept)")
    p.add_argument("--name", default="averaged", help="write checkpoints/NAME.pt (default: averaged)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoints/NAME.pt")
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("data", help="fetch a public corpus")
    p.add_argument("dataset", help="multi30k")
    p.add_argument("dest", help="destination folder")
    p.add_argument("--from", dest="from_dir", help="copy from a local folder with the official file names")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("serve", help="serve models over HTTP: a JSON API and a page with attention heatmaps")
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]DIR",
                   help="a trained model folder, named NAME or after its folder (repeatable; the first is the "
                        "default)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine "
                                                       "only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    _add_checkpoint_arg(p)
    p.add_argument("--max-batch-size", type=int, default=32,
                   help="most sentences decoded together (default: 32; 1 = one request at a time)")
    p.add_argument("--max-wait-ms", type=float, default=10.0,
                   help="how long a request waits for others to batch with (default: 10)")
    p.add_argument("--max-texts", type=int, default=32, help="most sentences per request (default: 32)")
    p.add_argument("--max-text-chars", type=int, default=1000, help="most characters per sentence (default: 1000)")
    p.add_argument("--max-beam", type=int, default=10, help="largest beam a request may ask for (default: 10)")
    p.add_argument("--threads", type=int, default=None, help="torch threads for decoding (default: torch's)")
    p.add_argument("--int8", action="store_true", help="int8 linear layers: faster decoding at about the same BLEU")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level; 'warning' drops the line per request (default: info)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("align", help="word alignments from a model's attention (Pharaoh i-j), scored against gold")
    p.add_argument("--model", help="trained attention model folder (rnnsearch or transformer)")
    _add_checkpoint_arg(p)
    p.add_argument("--src", required=True, help="tokenized source sentences, one per line")
    p.add_argument("--tgt", required=True, help="tokenized target sentences, line-aligned with --src")
    p.add_argument("--gold", help="gold links, 1-based 'i-j' (sure) and 'ipj' (possible): prints AER, precision, "
                                  "recall")
    _add_alignment_args(p, method_flag="--method")
    p.add_argument("--reverse-model", help="a model of the other direction (translates --tgt into --src)")
    p.add_argument("--baseline", choices=["diagonal", "eflomal"], action="append",
                   help="also align with a baseline (repeatable): diagonal (no model) or eflomal (statistical, "
                        "pip install eflomal), which learns from the sentences plus --eflomal-corpus")
    p.add_argument("--eflomal-corpus", help="TSV (source TAB target, tokenized like --src/--tgt) that eflomal also "
                                            "learns from (default: --model's training corpus)")
    p.add_argument("--one-based", action="store_true", help="write 1-based links (default: 0-based, as fast_align)")
    p.add_argument("--out", help="write the links here (default: stdout, unless --gold is given): the symmetrized "
                                 "ones, else --model's, else the first baseline's")
    p.add_argument("--json", help="also write the scores as JSON to this file")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_align)

    p = sub.add_parser("study", help="train, evaluate and report a study (models x seeds) from a study YAML")
    p.add_argument("config", help="study YAML (see studies/)")
    p.add_argument("--out", help="output folder (default: runs/study-<name>); re-running reuses its models")
    p.add_argument("--retrain", action="store_true", help="train every model again")
    p.add_argument("--jobs", type=int, help="runs trained at the same time, one thread each (default: the "
                                            "study's jobs, else 1)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_study)
    _add_animate_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except UserError as e:
        print(f"attnmt: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnmt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
