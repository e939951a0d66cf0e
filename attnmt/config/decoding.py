"""The decoding options: every setting that decides how sentences are decoded, with its default and its range, in
one frozen dataclass that checks its values once, when it is built.

:class:`DecodeOptions` is the one definition; the other places read its field list:

* ``Translator.translate(..., **options)`` (and the CTranslate2 translator's) builds one from its keyword arguments
  on top of the model's ``decode.*`` (:func:`with_given`), or takes ``options=``, and hands it to the searches
  (:mod:`attnmt.decode.search`, :mod:`attnmt.decode.sampling`, :mod:`attnmt.decode.constraints`);
* the config's ``decode`` section (``attnmt.config.schema.DecodeConfig``) holds the fields that have a config key,
  with these defaults and ranges;
* the command line's decoding flags (``attnmt.cli.common.add_decode_args``) are the fields with a flag;
* the server's request (``attnmt.serve.schema.TranslateRequest``) has the fields a request may set.

Adding an option is a field here (its default, range, help and the places it may be given), the code that reads
it, and its test. This module is a foundation of the package's layers: it imports only ``config`` and ``errors``,
so that the config's ``decode`` section can be built from it.
"""

from __future__ import annotations

import dataclasses
import numbers
import typing
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional

from attnmt.config.bounds import MAX_BEAM, MAX_COUNT, MAX_TOKENS, MAX_WORKERS
from attnmt.config.typed import Range
from attnmt.errors import UserError, closest

__all__ = ["DecodeOptions", "OptionError", "STOPPING_RULES", "check_option", "config_key", "from_config",
           "option_fields", "option_type", "with_given"]

Stopping = Literal["exact", "early"]  # beam search's rules for ending a sentence (attnmt.decode.search.beam_search)
STOPPING_RULES = typing.get_args(Stopping)
MAX_TOP_K = 1_000_000  # far beyond any vocabulary, small enough for every integer type decoding puts it in
# A temperature outside this range turns the scores into inf or NaN in float32 (0.01 is already all but greedy,
# 100 all but uniform).
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0
# Batch b of a translate call draws from a generator seeded with (seed << 20) + b, which must fit torch's 64-bit seed
MAX_SAMPLE_SEED = 2**44 - 1


class OptionError(UserError):
    """A decoding option refused: the one-line message, and ``option``, the name of the option at fault."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def option(default: Any, low: Any = None, high: Any = None, *, above: bool = False, help: str,  # noqa: A002
           config: bool | str = False, flag: bool = True, request: bool = True, sampling: bool = False,
           metavar: str | None = None) -> Any:
    """A field of :class:`DecodeOptions`: its default, its range (``low`` to ``high``, ``above``: low excluded),
    what it does (``help``), and where it may be given besides ``translate()``: ``config`` (True: a key of the
    config's ``decode`` section of the same name, or that key's name), ``flag`` (``--NAME`` of translate and
    evaluate), ``request`` (a field of the server's request). ``sampling``: it applies to sampling only."""
    ranged = low is not None or high is not None
    return dataclasses.field(default=default, metadata={
        **({"range": Range(low, high, above)} if ranged else {}), "help": help, "config": config or None,
        "flag": flag, "request": request, "sampling": sampling, "metavar": metavar})


@dataclass(frozen=True)
class DecodeOptions:
    """How sentences are decoded: the search, its length limits and constraints, sampling and the batches.

    Built, every value is checked (:func:`check_option` for each field, then the rules between them); a value out
    of its range is a UserError of one line naming the option and what is allowed."""

    beam: int = option(5, 1, MAX_BEAM, config=True, help="beam size; 1 is greedy search")
    n_best: int = option(1, 1, MAX_BEAM, metavar="N",
                         help="hypotheses per sentence, best first: at most the beam, or samples with sample")
    length_penalty: float = option(1.0, 0.0, 10.0, config=True, metavar="ALPHA",
                                   help="GNMT's alpha: scores are log prob / ((5 + length) / 6) ** alpha; 0 is off")
    coverage_penalty: float = option(
        0.0, 0.0, 10.0, config=True, metavar="BETA",
        help="beam search: GNMT's beta (Wu et al. 2016), beta * sum over source words of log(min(attention "
             "received, 1)) added to a finished hypothesis's score, against outputs that leave source words "
             "unread, e.g. 0.2; 0 is off; models with attention")
    # the output length: at most max_len_a * source length + max_len_b tokens (and max_len); the server decodes with
    # the model's own, which its cost estimate of a request assumes
    max_len_a: float = option(1.5, 0.0, 100.0, config=True, request=False, metavar="A",
                              help="at most A * source length + B output tokens: A")
    max_len_b: int = option(10, 0, MAX_TOKENS, config=True, request=False, metavar="B",
                            help="at most A * source length + B output tokens: B")
    max_len: Optional[int] = option(None, 1, MAX_TOKENS, config="max_len_cap", request=False, metavar="N",
                                    help="at most N output tokens; none: A * source length + B alone")
    min_len: int = option(0, 0, MAX_TOKENS, config=True, metavar="N",
                          help="no </s> before N output tokens, or the sentence's maximum length if lower; 0 is none")
    no_repeat_ngram: int = option(0, 0, MAX_TOKENS, config=True, metavar="N",
                                  help="no N-gram occurs twice in an output; 0 is off")
    stopping: Stopping = option(
        "exact", config=True, request=False,
        help="beam search: end a sentence when no live hypothesis can still win (exact), or when none would win "
             "if it ended now (early), with fewer steps")
    sample: bool = option(False, help="draw each token from the model's distribution instead of searching: no "
                                      "beam, n_best samples per sentence")
    top_k: int = option(0, 0, MAX_TOP_K, sampling=True, metavar="K",
                        help="sampling: from the K most likely tokens only; 0 is all")
    top_p: float = option(1.0, 0.0, 1.0, above=True, sampling=True, metavar="P",
                          help="sampling: from the fewest most likely tokens whose probability reaches P, the "
                               "nucleus; 1 is all")
    temperature: float = option(1.0, MIN_TEMPERATURE, MAX_TEMPERATURE, sampling=True, metavar="T",
                                help="sampling: divide the log probs by T, below 1 sharper, above 1 flatter")
    seed: int = option(0, 0, MAX_SAMPLE_SEED, sampling=True, metavar="S",
                       help="sampling: the random seed; the same seed gives the same samples")
    # how the sentences are batched and spread over processes: the same translations in any case (the server
    # batches requests itself, in one process)
    batch_size: int = option(64, 1, MAX_COUNT, config=True, request=False, metavar="N",
                             help="at most N sentences per decoding batch, of similar lengths")
    batch_tokens: int = option(2000, 1, MAX_COUNT, request=False, metavar="N",
                               help="at most N source tokens per decoding batch")
    workers: int = option(1, 1, MAX_WORKERS, config=True, request=False, metavar="N",
                          help="CPU only: decode batches in N forked processes of one thread each, e.g. one per "
                               "core")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, check_option(f.name, getattr(self, f.name)))
        _check_rules(self)


_FIELDS = {f.name: f for f in dataclasses.fields(DecodeOptions)}
_TYPES = typing.get_type_hints(DecodeOptions)


def option_fields(where: str) -> list[dataclasses.Field]:
    """The fields of the options that ``where`` carries: "flag" (the command line), "request" (the server),
    "config" (the config's decode section) or "sampling" (those that apply to sampling only)."""
    return [f for f in _FIELDS.values() if f.metadata[where] not in (False, None)]


def config_key(f: dataclasses.Field) -> str:
    """The key of the config's decode section that holds the option ``f`` (one of option_fields("config"))."""
    return f.name if f.metadata["config"] is True else f.metadata["config"]


def option_type(name: str) -> tuple[Any, bool]:
    """The type of the option ``name`` (int, float, bool or a Literal) and whether it may be None."""
    tp = _TYPES[name]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union:
        return args[0], True
    return tp, False


def check_option(name: str, value: Any) -> Any:
    """``value`` as the option ``name`` holds it (an int, a finite float, a bool or one of its words), checked
    against the option's type and range: the one check of every decoding option's value. Anything else is a
    UserError naming the option and what is allowed."""
    kind, optional = option_type(name)
    allowed: Range | None = _FIELDS[name].metadata.get("range")
    if value is None and optional:
        return None
    if typing.get_origin(kind) is Literal:
        words = typing.get_args(kind)
        if value not in words:
            raise OptionError(name, f"{name}={value!r} is not one of the choices; allowed: {', '.join(words)}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise OptionError(name, f"{name}={value!r} is not true or false")
        return value
    real = kind is float
    if isinstance(value, bool) or not isinstance(value, numbers.Real if real else numbers.Integral):
        raise OptionError(name, f"{name}={value!r} is not {'a number' if real else 'an integer'}; allowed: "
                                f"{allowed.describe() if allowed else 'any'}")
    value = float(value) if real else int(value)
    if allowed is not None:
        try:
            allowed.check(name, value)
        except UserError as e:
            raise OptionError(name, str(e).removeprefix("config: ")) from None
    return value


def _check_rules(options: DecodeOptions) -> None:
    """The rules between options: sampling has no beam, n_best is at most the beam, min_len at most max_len."""
    if options.sample:
        if options.beam != 1:
            raise OptionError("beam", f"beam={options.beam} with sampling: sampling draws each token and beam "
                                      "search keeps the best ones; use one of them")
        if options.coverage_penalty:
            raise OptionError("coverage_penalty", "coverage_penalty with sampling: the penalty ranks the finished "
                                                  "hypotheses of beam search; leave it out to sample")
    else:
        for f in option_fields("sampling"):
            if getattr(options, f.name) != f.default:
                raise OptionError(f.name, f"{f.name}={getattr(options, f.name)!r} belongs to sampling; turn sample "
                                          f"on, or leave {f.name} out")
        if options.n_best > options.beam:
            raise OptionError("n_best", f"n_best={options.n_best} is out of range; allowed: 1 to the beam size "
                                        f"({options.beam})")
    if options.max_len is not None and options.min_len > options.max_len:
        raise OptionError("min_len", f"min_len={options.min_len} is above the maximum output length "
                                     f"{options.max_len} (max_len); lower the minimum or raise the maximum")


def with_given(defaults: DecodeOptions, given: Mapping[str, Any]) -> DecodeOptions:
    """``defaults`` with the options in ``given`` on top (a None value is not given), checked. Sampling draws
    each token: asked for, it decodes with beam 1 and no coverage penalty unless those are given too (and then
    refused). A name that is no option is a TypeError that names the closest."""
    chosen = {name: value for name, value in given.items() if value is not None}
    for name in chosen:
        if name not in _FIELDS:
            near = closest(name, list(_FIELDS))
            raise TypeError(f"{name!r} is not a decoding option" + (f"; did you mean {near!r}?" if near else
                                                                    f"; the options: {', '.join(_FIELDS)}"))
    if chosen.get("sample") and not defaults.sample:
        chosen.setdefault("beam", 1)
        chosen.setdefault("coverage_penalty", 0.0)
    return dataclasses.replace(defaults, **chosen)


def from_config(section: Any, **given: Any) -> DecodeOptions:
    """The options of a config's ``decode`` section (``attnmt.config.schema.DecodeConfig``), ``given`` on top."""
    values = {f.name: getattr(section, config_key(f)) for f in option_fields("config")}
    return with_given(DecodeOptions(**values), given)
