"""What several commands share: output and input files, the model and decoding options."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from attnmt.config.schema import (
    MAX_BEAM,
    MAX_COUNT,
    MAX_HEADS,
    MAX_KEPT,
    MAX_LAYERS,
    MAX_TOKENS,
    MAX_WORKERS,
    STOPPING_RULES,
    DecodeConfig,
)
from attnmt.config.typed import Range, declared_range
from attnmt.errors import UserError
from attnmt.runtime.safe_write import check_output

# attnmt.align's METHODS and ATTENTION_SYMMETRIZATIONS, spelled out so that parsing arguments needs no torch
# (tested equal)
ALIGN_METHODS = ("argmax", "threshold", "shift", "mutual", "shift-mutual")
SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and", "agreement")

# The values of every numeric option, by its dest (one name is one quantity in every command: --beam of
# translate, evaluate, plot-attention and animate is decode.beam). Checked after parsing by check_numbers,
# before any work: a float is finite in any case; Range() leaves the bounds to the code that reads the value
# (named beside it). tests/test_numbers.py checks that every int and float option has an entry.
OPTION_RANGES: dict[str, Range] = {
    "beam": declared_range(DecodeConfig, "beam"),
    "workers": declared_range(DecodeConfig, "workers"),  # translate and evaluate; prepare: encoding processes
    "min_len": declared_range(DecodeConfig, "min_len"),
    "no_repeat_ngram": declared_range(DecodeConfig, "no_repeat_ngram"),
    "length_penalty": declared_range(DecodeConfig, "length_penalty"),
    "coverage_penalty": declared_range(DecodeConfig, "coverage_penalty"),
    "max_len": declared_range(DecodeConfig, "max_len_cap"),
    "n_best": Range(1, MAX_BEAM),  # and at most the beam: attnmt.decode.translator
    "ensemble_weights": Range(0.0, None, above=True),
    "top_k": Range(0, None),  # top-k, top-p, temperature and seed: attnmt.decode.sampling.Sampling
    "top_p": Range(),
    "temperature": Range(),
    "seed": Range(),
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
    "threads": Range(1, MAX_WORKERS),
    "inter_threads": Range(1, MAX_WORKERS),  # an exported model's translators working at once (attnmt.export)
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
    """Every number on the command line within its option's range (OPTION_RANGES), a float finite; else
    a UserError naming the command, the option and what is allowed."""
    command = parser._subparsers._group_actions[0].choices[args.command]
    for action in numeric_options(command):
        value = getattr(args, action.dest, None)
        for item in value if isinstance(value, list) else [value]:
            if item is None or item == action.default:
                continue
            allowed = OPTION_RANGES.get(action.dest, Range())
            try:
                allowed.check(action.dest, item)
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


def add_model_args(p, ensemble: bool = False) -> None:
    """--model (one, or several for an ensemble), --checkpoint, --beam, --int8."""
    if ensemble:
        p.add_argument("--model", required=True, action="append", metavar="DIR",
                       help="trained model folder; repeat it for an ensemble, whose log probs are averaged at "
                            "every step (the models must share their vocabularies)")
        p.add_argument("--ensemble-weights", type=float, nargs="+", metavar="W",
                       help="one weight per --model for the average (default: equal)")
    else:
        p.add_argument("--model", required=True, help="trained model folder")
    add_checkpoint_arg(p)
    p.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default from the config)")
    p.add_argument("--int8", action="store_true",
                   help="int8 linear layers: faster decoding on a CPU at about the same BLEU")


def add_thread_args(p) -> None:
    """--threads and --inter-threads: how many threads decode (translate, evaluate, serve)."""
    p.add_argument("--threads", type=int, default=None,
                   help="threads for decoding: torch's, or CTranslate2's per batch for an exported model "
                        "(attnmt export; default: the library's)")
    p.add_argument("--inter-threads", type=int, default=1,
                   help="exported (CTranslate2) models: batches decoded at the same time (default: 1)")


def add_decode_args(p) -> None:
    """The decoding options of translate and evaluate: workers, stopping, length, repetition, sampling."""
    p.add_argument("--workers", type=int, default=None,
                   help="CPU only: decode batches in N processes of one thread each, e.g. one per core "
                        "(default: decode.workers, 1)")
    add_thread_args(p)
    p.add_argument("--stopping", choices=STOPPING_RULES, default=None,
                   help="beam search: end a sentence when no live hypothesis can still win (exact), or when "
                        "none would win if it ended now (early: fewer steps) (default: decode.stopping, exact)")
    p.add_argument("--min-len", type=int, default=None,
                   help="no </s> before N output tokens (or the sentence's maximum length, if lower) "
                        "(default: decode.min_len, 0)")
    p.add_argument("--no-repeat-ngram", type=int, default=None, metavar="N",
                   help="no N-gram occurs twice in an output (default: decode.no_repeat_ngram, 0 = off)")
    p.add_argument("--length-penalty", type=float, default=None, metavar="ALPHA",
                   help="GNMT length penalty: scores are log prob / ((5 + length) / 6) ** ALPHA "
                        "(default: decode.length_penalty, 1; 0 = off)")
    p.add_argument("--coverage-penalty", type=float, default=None, metavar="BETA",
                   help="beam search: GNMT coverage penalty, BETA * sum over source words of log(min(attention "
                        "received, 1)), against outputs that leave source words unread, e.g. 0.2 "
                        "(default: decode.coverage_penalty, 0 = off; models with attention)")
    p.add_argument("--max-len", type=int, default=None,
                   help="at most N output tokens (default: decode.max_len_cap, none beyond a * src + b)")
    p.add_argument("--sample", action="store_true",
                   help="draw each token from the model's distribution instead of searching (with --n-best N: "
                        "N samples per sentence)")
    p.add_argument("--top-k", type=int, default=None, help="--sample: from the K most likely tokens only")
    p.add_argument("--top-p", type=float, default=None,
                   help="--sample: from the fewest most likely tokens whose probability reaches P (nucleus)")
    p.add_argument("--temperature", type=float, default=None,
                   help="--sample: divide the log probs by T, 0.01 to 100 (< 1 sharper, > 1 flatter; default 1)")
    p.add_argument("--seed", type=int, default=None, help="--sample: the random seed, 0 to 2**44 - 1 (default 0)")


def load_translator(args):
    """The one model, or the ensemble of the models, that --model names (translate, evaluate). --threads is the
    command's: CTranslate2's threads per batch for an exported model, else torch's for the whole run, set here."""
    from attnmt.decode.translator import load
    from attnmt.export import is_exported
    from attnmt.runtime.threads import use_threads

    if len(args.model) == 1 and args.ensemble_weights is None:
        exported = is_exported(args.model[0])
        translator = load(args.model[0], checkpoint=args.checkpoint, int8=args.int8,
                          threads=args.threads if exported else None, inter_threads=args.inter_threads)
        if not exported:
            use_threads(args.threads)
        return translator
    if args.inter_threads != 1 or args.threads is not None:
        raise UserError("--threads and --inter-threads set an exported model's threads; an ensemble decodes with "
                        "--workers")
    from attnmt.decode.ensemble import load_ensemble

    return load_ensemble(args.model, checkpoint=args.checkpoint, int8=args.int8, weights=args.ensemble_weights)


def decoding(args) -> dict:
    """translate()'s length, repetition and sampling options from the decoding flags."""
    sampling = None
    given = [flag for flag, value in (("--top-k", args.top_k), ("--top-p", args.top_p),
                                      ("--temperature", args.temperature), ("--seed", args.seed)) if value is not None]
    if args.sample:
        from attnmt.decode.sampling import Sampling

        sampling = Sampling(top_k=args.top_k or 0, top_p=1.0 if args.top_p is None else args.top_p,
                            temperature=1.0 if args.temperature is None else args.temperature, seed=args.seed or 0)
    elif given:
        raise UserError(f"{given[0]} belongs to --sample; add --sample or leave it out")
    return dict(min_len=args.min_len, no_repeat_ngram=args.no_repeat_ngram, max_len=args.max_len, sampling=sampling,
                length_penalty=args.length_penalty, coverage_penalty=args.coverage_penalty)


def workers(args, translator) -> int:
    """--workers, else the model's decode.workers: decoding processes of translate and evaluate."""
    return translator.config.decode.workers if args.workers is None else args.workers


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
