"""What several commands share: output and input files, the model and decoding options."""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from attnmt.config.bounds import MAX_COUNT, MAX_HEADS, MAX_KEPT, MAX_LAYERS, MAX_TOKENS, MAX_WORKERS
from attnmt.config.decoding import check_option, config_key, option_fields, option_type
from attnmt.config.load_options import LoadOptions
from attnmt.config.typed import Range, declared_range
from attnmt.errors import UserError
from attnmt.runtime.safe_write import check_output

# attnmt.align's METHODS and ATTENTION_SYMMETRIZATIONS, spelled out so that parsing arguments needs no torch
# (tested equal)
ALIGN_METHODS = ("argmax", "threshold", "shift", "mutual", "shift-mutual")
SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and", "agreement")

DECODING_FLAGS = {f.name: f for f in option_fields("flag")}  # the decoding options' flags, by dest (add_decode_args)
# The values of every numeric option, by its dest (one name is one quantity in every command: --beam of
# translate, evaluate, plot-attention and animate is decode.beam). Checked after parsing by check_numbers,
# before any work: a float is finite in any case; Range() leaves the bounds to the code that reads the value
# (named beside it). tests/config/test_numbers.py checks that every int and float option has an entry.
OPTION_RANGES: dict[str, Range] = {
    # the decoding options' ranges (attnmt.config.decoding; --workers of prepare: encoding processes, --top-k of
    # explore: next pieces listed, within its own bounds too)
    **{name: field.metadata["range"] for name, field in DECODING_FLAGS.items() if "range" in field.metadata},
    "ensemble_weights": Range(0.0, None, above=True),
    "threshold": Range(0.0, 1.0),
    "layer": Range(-MAX_LAYERS, MAX_LAYERS - 1),  # and within the model's layers: attnmt.align
    "head": Range(0, MAX_HEADS - 1),
    "buffer": Range(None, 1_000_000),  # at least 1: attnmt.decode.interactive
    "length_edges": Range(0, MAX_TOKENS),  # increasing: attnmt.decode.evaluate
    "bootstrap": Range(0, 100_000),
    "jobs": Range(1, MAX_WORKERS),
    "last": Range(None, MAX_KEPT),  # at least 1: attnmt.folder.checkpoint.average_last
    "bucket_width": Range(1, MAX_TOKENS),
    "port": Range(0, 65535),
    "max_batch_size": Range(1, MAX_COUNT),
    "max_wait_ms": Range(0.0, 60_000.0),
    # how a model loads (attnmt.config.load_options.LoadOptions declares them)
    "threads": declared_range(LoadOptions, "threads"),
    "inter_threads": declared_range(LoadOptions, "inter_threads"),
    # the server's limits: attnmt.serve.schema.Limits and attnmt.serve.app.serve
    "max_texts": Range(), "max_text_chars": Range(), "max_beam": Range(), "max_queue_sentences": Range(),
    "max_queue_cost": Range(), "max_batch_cost": Range(),
    "examples": Range(), "what_if": Range(),  # explore: attnmt.explore.page.run_export
    "show": Range(0, None),  # align-prepare --check: changed lines listed
    "test_lines": Range(1, MAX_COUNT),  # align-prepare --test: test pairs written
}


def numeric_options(parser) -> list:
    """The options of ``parser`` (a command's) that take numbers: their type is int or float."""
    return [action for action in parser._actions if action.type in (int, float)]


def check_numbers(parser, args) -> None:
    """Every number on the command line within its option's range (OPTION_RANGES; a decoding option's checked by
    attnmt.config.decoding.check_option, as Python's and the config's are), a float finite; else a UserError naming
    the command, the option and what is allowed."""
    command = parser._subparsers._group_actions[0].choices[args.command]
    for action in numeric_options(command):
        value = getattr(args, action.dest, None)
        for item in value if isinstance(value, list) else [value]:
            if item is None or item == action.default:
                continue
            try:
                if action.dest in DECODING_FLAGS:
                    check_option(action.dest, item)
                else:
                    OPTION_RANGES.get(action.dest, Range()).check(action.dest, item)
            except UserError as e:
                raise UserError(f"{args.command} {action.option_strings[-1]}: "
                                f"{str(e).removeprefix('config: ')}") from None


def refuse_overwrite(path: Path, overwrite: bool) -> None:
    """Before the work: an output path that cannot be written, or a file there without --overwrite, is a
    UserError (attnmt.runtime.safe_write.check_output)."""
    check_output(path, overwrite)


def read_input(path: str | None) -> Iterator[str]:
    """The lines of --input (stdin for none or -), one at a time (attnmt.data.corpus: at most 1 MiB each)."""
    from attnmt.data.corpus import iter_lines, stream_lines

    return iter_lines(path) if path and path != "-" else stream_lines(sys.stdin.buffer, "<stdin>")


def add_checkpoint_arg(p) -> None:
    p.add_argument("--checkpoint", default=None,
                   help="which checkpoint of the model folder: best, last, averaged (attnmt average) or stepN "
                        "(train.keep_checkpoints), ema (train.ema_decay); default: best, or last (said in one line) "
                        "before the first validation has written best")


def add_model_args(p, ensemble: bool = False, beam: bool = True) -> None:
    """--model (one, or several for an ensemble), --checkpoint, --int8, and --beam unless ``beam`` is False (the
    commands with every decoding flag: add_decode_args)."""
    if ensemble:
        p.add_argument("--model", required=True, action="append", metavar="DIR",
                       help="trained model folder; repeat it for an ensemble, whose log probs are averaged at "
                            "every step (the models must share their vocabularies)")
        p.add_argument("--ensemble-weights", type=float, nargs="+", metavar="W",
                       help="one weight per --model for the average (default: equal)")
    else:
        p.add_argument("--model", required=True, help="trained model folder")
    add_checkpoint_arg(p)
    if beam:
        p.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default from the config)")
    p.add_argument("--int8", action="store_true",
                   help="int8 linear layers: faster decoding on a CPU at about the same BLEU")
    add_compile_arg(p)


def add_compile_arg(p) -> None:
    """--compile: the decoder step compiled by torch.compile at load (attnmt.models.compiled)."""
    p.add_argument("--compile", action="store_true", dest="compile_step",
                   help="compile the decoder step (torch.compile) at load: faster decoding one sentence at a "
                        "time, after a minute or so of compiling")


def add_thread_args(p) -> None:
    """--threads and --inter-threads: how many threads decode (translate, evaluate, serve)."""
    p.add_argument("--threads", type=int, default=None,
                   help="threads for decoding: torch's, or CTranslate2's per batch for an exported model "
                        "(attnmt export; default: the library's)")
    p.add_argument("--inter-threads", type=int, default=1,
                   help="exported (CTranslate2) models: batches decoded at the same time (default: 1)")


def add_decode_args(p, helps: dict[str, str] | None = None) -> None:
    """The decoding options of translate and evaluate, one flag each (--NAME for the option NAME of
    attnmt.config.decoding that has a flag; ``helps``: a command's own help of one), and the thread options."""
    for f in option_fields("flag"):
        kind, _ = option_type(f.name)
        default = f"decode.{config_key(f)}, {f.default}" if f.metadata["config"] else f"{f.default}"
        help_text = (helps or {}).get(f.name) or f"{f.metadata['help']} (default: {default.lower()})"
        flag = "--" + f.name.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action="store_true", help=f.metadata["help"])
        elif typing.get_origin(kind) is Literal:
            p.add_argument(flag, choices=typing.get_args(kind), default=None, help=help_text)
        else:
            p.add_argument(flag, type=kind, default=None, metavar=f.metadata["metavar"], help=help_text)
    add_thread_args(p)


def load_options(args, **settings):
    """The LoadOptions (attnmt.config.load_options) of a command's flags: --checkpoint, --int8, --compile,
    --threads and --inter-threads where the command has them; ``settings`` on top."""
    flags = {"checkpoint": "checkpoint", "int8": "int8", "compile_step": "compile_step", "threads": "threads",
             "inter_threads": "inter_threads"}
    given = {field: getattr(args, flag) for field, flag in flags.items() if hasattr(args, flag)}
    return LoadOptions(**{**given, **settings})


def load_translator(args):
    """The one model, or the ensemble of the models, that --model names (translate, evaluate). --threads is the
    command's: CTranslate2's threads per batch for an exported model, else torch's for the whole run, set here."""
    from attnmt.decode.translator import load
    from attnmt.export import is_exported
    from attnmt.runtime.threads import use_threads

    if len(args.model) == 1 and args.ensemble_weights is None:
        exported = is_exported(args.model[0])
        translator = load(args.model[0], load_options(args, threads=args.threads if exported else None))
        if not exported:
            use_threads(args.threads)
        return translator
    from attnmt.decode.ensemble import load_ensemble

    return load_ensemble(args.model, load_options(args), weights=args.ensemble_weights)


def decode_options(args, translator):
    """The decoding options of translate and evaluate (attnmt.config.decoding.DecodeOptions): the model's
    decode.* (decode.workers too: these commands may fork), the flags given on top; checked."""
    given = {f.name: getattr(args, f.name) for f in option_fields("flag")}
    if not given["sample"]:
        flags = ["--" + f.name.replace("_", "-") for f in option_fields("sampling") if given[f.name] is not None]
        if flags:
            raise UserError(f"{flags[0]} belongs to --sample; add --sample or leave it out")
    if given["workers"] is None:
        given["workers"] = translator.config.decode.workers
    return translator.decode_options(**given)


def add_alignment_args(p, method_flag: str) -> None:
    """The options that say how attention becomes word links (align, translate --alignments)."""
    p.add_argument(method_flag, dest="align_method", choices=list(ALIGN_METHODS), default=None,
                   help="how attention becomes links: argmax of the row that predicts each word, threshold, "
                        "shift (the row whose query has read it), or mutual / shift-mutual (a cell that is the "
                        "largest of its row and its column); see docs/alignment.md. Default: shift for a "
                        "model trained with train.guided_alignment.row: shift, else argmax")
    p.add_argument("--threshold", type=float, default=0.5, help="weight for the threshold method (default 0.5)")
    p.add_argument("--layer", type=int, help="Transformer: the decoder layer whose cross-attention aligns "
                                             "(default: the last)")
    p.add_argument("--head", type=int, help="Transformer: one head of that layer (default: the heads' average)")
    p.add_argument("--symmetrize", choices=list(SYMMETRIZATIONS),
                   help="combine the links of the model and of --reverse-model (intersection, union or "
                        "grow-diag-final-and), or their attention (agreement: the mutual maxima of the product "
                        "of the two directions' matrices)")
