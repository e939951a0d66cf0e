"""The commands around a model: align (word links, AER), serve (HTTP), explore (the explorer as one file),
animate (manim)."""

from __future__ import annotations

import sys
from pathlib import Path

from attnmt.cli.common import (
    add_alignment_args,
    add_checkpoint_arg,
    add_compile_arg,
    add_thread_args,
    load_options,
    refuse_overwrite,
)
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text


def cmd_align(args) -> None:
    from attnmt.align import align_files, format_links, format_scores

    if args.model is None and not args.baseline:
        raise UserError("align: pass --model DIR (attention links) or --baseline diagonal|eflomal, or both")
    for path in (args.out, args.json, args.text_out):
        if path:
            refuse_overwrite(Path(path), args.overwrite)
    result = align_files(args.model, args.src, args.tgt, gold_path=args.gold, threshold=args.threshold,
                         baselines=args.baseline or (), checkpoint=args.checkpoint, method=args.align_method,
                         reverse_model=args.reverse_model, symmetrization=args.symmetrize, layer=args.layer,
                         head=args.head, eflomal_corpus=args.eflomal_corpus, pretokenized=args.pretokenized)
    lines = [format_links(links, one_based=args.one_based) + "\n" for links in result.links[result.output]]
    if args.text_out:
        write_text(args.text_out, "".join(f"{s} ||| {t}\n" for s, t in result.pairs), overwrite=args.overwrite)
    if args.out:
        write_text(args.out, "".join(lines), overwrite=args.overwrite)
    elif not args.gold:
        sys.stdout.write("".join(lines))
    if result.scores:
        print(format_scores(result.scores))
    if args.json:
        import json
        from dataclasses import asdict

        write_text(args.json, json.dumps({m: asdict(s) for m, s in result.scores.items()}, indent=2),
                   overwrite=args.overwrite)


def cmd_serve(args) -> None:
    from attnmt.serve import ServeConfig, serve

    serve(ServeConfig.from_options(
        args.model, host=args.host, port=args.port, max_batch_size=args.max_batch_size,
        max_wait_ms=args.max_wait_ms, max_texts=args.max_texts, max_text_chars=args.max_text_chars,
        max_beam=args.max_beam, max_queue_sentences=args.max_queue_sentences, max_queue_cost=args.max_queue_cost,
        max_batch_cost=args.max_batch_cost, load=load_options(args), log_level=args.log_level))


def cmd_export(args) -> None:
    from attnmt.export.convert import export_ctranslate2

    out = export_ctranslate2(args.model_dir, args.out, quantization=args.quantization, checkpoint=args.checkpoint,
                             overwrite=args.overwrite)
    print(out)


def cmd_explore(args) -> None:
    from attnmt.explore.page import run_export

    for path in run_export(args.model_dir, export=args.export, json_path=args.json, sentences=args.sentences,
                           checkpoint=args.checkpoint, beam=args.beam, top_k=args.top_k, alternatives=args.what_if,
                           examples=args.examples, overwrite=args.overwrite):
        print(path)


def cmd_animate(args) -> None:
    from attnmt.viz.animate import animate

    result = animate(args.scene, args.out, quality=args.quality, gif=args.gif, last_frame=args.last_frame,
                     overwrite=args.overwrite, study=args.study, model_dirs=args.model or [],
                     test=tuple(args.test) if args.test else None, sentence=args.sentence,
                     checkpoint=args.checkpoint, beam=args.beam, bucket_width=args.bucket_width)
    print("\n".join(str(path) for path in result.files))


def _register_align(sub) -> None:
    p = sub.add_parser("align", help="word alignments from a model's attention (Pharaoh i-j), scored against gold")
    p.add_argument("--model", action="append",
                   help="trained attention model folder (rnnsearch or transformer); repeat it for an ensemble, "
                        "whose attention is the mean of its models' word-level attention")
    add_checkpoint_arg(p)
    p.add_argument("--src", required=True,
                   help="source sentences, one per line: raw text, split into words as --model's training text was "
                        "(its data.pretokenize: Chinese segmented, ...), or tokenized text with --gold or "
                        "--pretokenized")
    p.add_argument("--tgt", required=True, help="target sentences, line-aligned with --src, read as --src is")
    p.add_argument("--gold", help="gold links, 1-based 'i-j' (sure) and 'ipj' (possible): prints AER, precision, "
                                  "recall; the sentences are read as they are, in the gold's words")
    p.add_argument("--pretokenized", action="store_true",
                   help="the sentences are split into words already: read them at spaces, as with --gold")
    p.add_argument("--text-out", metavar="FILE",
                   help="write the sentence pairs as aligned, 'source ||| target' a line: the words the links count")
    add_alignment_args(p, method_flag="--method")
    p.add_argument("--reverse-model", action="append",
                   help="a model of the other direction (translates --tgt into --src); repeatable, as --model")
    p.add_argument("--baseline", choices=["diagonal", "eflomal"], action="append",
                   help="also align with a baseline (repeatable): diagonal (no model) or eflomal (statistical, "
                        "pip install eflomal), which learns from the sentences plus --eflomal-corpus")
    p.add_argument("--eflomal-corpus", help="TSV (source TAB target, tokenized like --src/--tgt) that eflomal also "
                                            "learns from (default: --model's training corpus)")
    p.add_argument("--one-based", action="store_true", help="write 1-based links (default: 0-based, as fast_align)")
    p.add_argument("--out", help="write the links here (default: stdout, unless --gold is given): the symmetrized "
                                 "ones, else --model's, else the first baseline's")
    p.add_argument("--json", help="also write the scores as JSON to this file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out, --json or --text-out file")
    p.set_defaults(func=cmd_align)


def register(sub) -> None:
    """Add this module's commands to the `attnmt` parser."""
    _register_align(sub)
    p = sub.add_parser("serve", help="serve models over HTTP: a JSON API and a page with attention heatmaps")
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]DIR",
                   help="a trained model folder, named NAME or after its folder (repeatable; the first is the "
                        "default)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine "
                                                       "only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    add_checkpoint_arg(p)
    p.add_argument("--max-batch-size", type=int, default=32,
                   help="most sentences decoded together (default: 32; 1 = one request at a time)")
    p.add_argument("--max-wait-ms", type=float, default=10.0,
                   help="how long a request waits for others to batch with (default: 10)")
    p.add_argument("--max-texts", type=int, default=32, help="most sentences per request (default: 32; at most "
                                                             "10000)")
    p.add_argument("--max-text-chars", type=int, default=1000, help="most characters per sentence (default: 1000)")
    p.add_argument("--max-beam", type=int, default=10, help="largest beam a request may ask for (default: 10)")
    p.add_argument("--max-queue-sentences", type=int, default=256,
                   help="most sentences queued or decoding; a request that would go over gets 503 with "
                        "Retry-After (default: 256; at least --max-texts)")
    p.add_argument("--max-queue-cost", type=int, default=100_000,
                   help="most cost queued or decoding, a sentence costing beam x n-best x (source tokens + 1); "
                        "over it: 503 with Retry-After, and 422 for a request that alone costs more "
                        "(default: 100000)")
    p.add_argument("--max-batch-cost", type=float, default=10_000,
                   help="most cost in one batch: a larger request is split and decoded in turns with the "
                        "others, so a small request never waits for all of it (default: 10000)")
    _add_engine_args(p)
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level; 'warning' drops the line per request (default: info)")
    p.set_defaults(func=cmd_serve)
    add_explore_parser(sub)
    add_animate_parser(sub)
    add_export_parser(sub)


def _add_engine_args(p) -> None:
    add_thread_args(p)
    p.add_argument("--int8", action="store_true", help="int8 linear layers: faster decoding at about the same BLEU")
    add_compile_arg(p)


def add_export_parser(sub) -> None:
    from attnmt.export import QUANTIZATIONS

    p = sub.add_parser("export", help="export a trained Transformer to another engine's format: CTranslate2, a "
                                      "folder that attnmt translate, evaluate and serve run as a model")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="trained model folder (a Transformer)")
    p.add_argument("--format", choices=["ctranslate2"], default="ctranslate2",
                   help="the engine: ctranslate2 (the only one; default)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    p.add_argument("--quantization", choices=QUANTIZATIONS, default="float32",
                   help="weights as stored: float32 (default), int8, int16 or bfloat16")
    add_checkpoint_arg(p)
    p.add_argument("--overwrite", action="store_true", help="replace the files of an existing --out folder")
    p.set_defaults(func=cmd_export)


def add_explore_parser(sub) -> None:
    p = sub.add_parser("explore", help="the explorer as one HTML file to open without a server: each sentence "
                                       "decoded step by step, its beam and what-ifs, models side by side")
    p.add_argument("model_dir", nargs="+", metavar="[NAME=]DIR",
                   help="a trained model folder (named after the folder, or NAME); give two to compare them, e.g. "
                        "the seq2seq and rnnsearch of `attnmt demo`")
    p.add_argument("--export", metavar="FILE.html",
                   help="write the page here: data and scripts inside, no network needed")
    p.add_argument("--json", metavar="FILE", help="also (or only) write the explore records as JSON (docs/explore.md)")
    p.add_argument("--sentences", metavar="FILE",
                   help="source sentences, one a line (default: --examples sentences of spread lengths from the "
                        "first model's held-out data, shortest first)")
    p.add_argument("--examples", type=int, default=6,
                   help="without --sentences: how many held-out sentences (default: 6)")
    p.add_argument("--beam", type=int, default=None, help="beam size (default: each model's decode.beam)")
    p.add_argument("--top-k", type=int, default=10, help="next pieces listed per decoder step (default: 10)")
    p.add_argument("--what-if", type=int, default=2,
                   help="per decoder step, how many other pieces of its top-k to re-decode with, for the page's "
                        "what-if (default: 2; 0: none, a much smaller file)")
    add_checkpoint_arg(p)
    p.add_argument("--overwrite", action="store_true", help="replace existing --export / --json files")
    p.set_defaults(func=cmd_explore)


def add_animate_parser(sub) -> None:
    p = sub.add_parser("animate", help="render the chapter's manim animations from real measurements (needs "
                                       "attnmt[anim])")
    p.add_argument("scene", choices=["bottleneck", "soft-alignment"],
                   help="bottleneck (BLEU by sentence length, seq2seq against rnnsearch) or soft-alignment (an "
                        "attention grid filling in)")
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
    add_checkpoint_arg(p)
    p.add_argument("--beam", type=int, default=None, help="beam size (default from the model's config)")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.set_defaults(func=cmd_animate)
