"""What every translator shares (the model folder's, :class:`attnmt.decode.translator.Translator`, and an exported
model's, :class:`attnmt.export.ct2_translator.CT2Translator`): the Translation it returns, the refusal of a sentence
too long, the checks of the decoding settings and of a forced prefix, and the batches of similar length."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnmt.config.schema import MAX_BEAM, MAX_COUNT, STOPPING_RULES, DecodeConfig, load_config
from attnmt.config.typed import Range, declared_range
from attnmt.data.batching import token_batches
from attnmt.errors import UserError, closest

# translate()'s numeric options and their ranges, those of the decode.* keys they stand for: the command line's
# (attnmt.cli.common.OPTION_RANGES)
DECODING_RANGES: dict[str, Range] = {
    **{name: declared_range(DecodeConfig, key) for name, key in (
        ("beam", "beam"), ("length_penalty", "length_penalty"), ("coverage_penalty", "coverage_penalty"),
        ("min_len", "min_len"), ("no_repeat_ngram", "no_repeat_ngram"), ("max_len", "max_len_cap"),
        ("workers", "workers"), ("batch_size", "batch_size"))},
    "n_best": Range(1, MAX_BEAM),  # and at most the beam: check_decoding
    "batch_tokens": Range(1, MAX_COUNT),
}
REAL_OPTIONS = ("length_penalty", "coverage_penalty")  # the others are integers


class SentenceTooLong(UserError):
    """A source sentence with more tokens than a translator accepts; `at(path)` names the file and line."""

    def __init__(self, index: int, tokens: int, limit: int, where: str | None = None):
        self.index, self.tokens, self.limit = index, tokens, limit
        super().__init__(f"{where or f'sentence {index + 1}'} has {tokens:,} tokens, more than the {limit:,} this "
                         "translator accepts; split long lines into sentences")

    def at(self, path: str | Path) -> "SentenceTooLong":
        return SentenceTooLong(self.index, self.tokens, self.limit, f"{path}:{self.index + 1}")


@dataclass
class Translation:
    """One source sentence's best translation, with what the model looked at."""

    source: str  # the sentence as the model read it: split into words by its pretokenizer, if it has one
    text: str
    src_tokens: list[str]
    tgt_tokens: list[str]  # the output tokens, without </s>
    attention: np.ndarray | None  # [len(tgt_tokens) + 1, len(src_tokens)]: one row per output token and </s>
    score: float
    n_best: list["Translation"] = field(default_factory=list)  # all hypotheses, best first (incl. this one)
    # Word links (0-based source word, output word) when asked for (attnmt.align.align_translations)
    alignment: set[tuple[int, int]] | None = None


def sentence_list(sentences) -> list[str]:
    """``sentences`` as a list of str: one str becomes a list of one; anything else is a TypeError that says
    what to pass (a str is a sequence of characters: without this, each character would be translated)."""
    if isinstance(sentences, str):
        return [sentences]
    if not isinstance(sentences, (list, tuple)):
        raise TypeError(f"translate() takes a sentence (str) or a list of sentences, not {type(sentences).__name__}"
                        + ("; decode the bytes first" if isinstance(sentences, (bytes, bytearray)) else
                           "; pass list(...) of it" if hasattr(sentences, "__iter__") else ""))
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"translate(): sentence {i} is of type {type(sentence).__name__}, not str")
    return list(sentences)


def check_options(**options) -> None:
    """translate()'s numeric options as given (None: the config's, already checked) checked as the command line
    checks them: an integer (a number for the penalties), finite and within DECODING_RANGES; else a UserError
    naming the option and what is allowed."""
    for name, value in options.items():
        if value is None:
            continue
        allowed, real = DECODING_RANGES[name], name in REAL_OPTIONS
        if isinstance(value, bool) or not isinstance(value, numbers.Real if real else numbers.Integral):
            raise UserError(f"{name}={value!r} is not {'a number' if real else 'an integer'}; allowed: "
                            f"{allowed.describe()}")
        try:
            allowed.check(name, float(value) if real else int(value))
        except UserError as e:
            raise UserError(str(e).removeprefix("config: ")) from None


def check_lengths(lengths: Sequence[int], limit: int | None) -> None:
    """SentenceTooLong for the first sentence of more than ``limit`` tokens (None: no limit)."""
    if limit is None:
        return
    for i, n in enumerate(lengths):
        if n > limit:
            raise SentenceTooLong(i, n, limit)


def prefix_texts(prefix, single: bool, n: int) -> list[str | None] | None:
    """Each of ``n`` sentences' forced prefix as text or None (None: no sentence has one), from translate()'s
    ``prefix``: a str when ``single`` (one sentence given as a str), else a list of one str or None per sentence.
    Anything else is a UserError."""
    if prefix is None:
        return None
    texts = [prefix] if single and isinstance(prefix, str) else prefix
    if not isinstance(texts, (list, tuple)) or len(texts) != n or \
            not all(t is None or isinstance(t, str) for t in texts):
        raise UserError("prefix: give a str for one sentence, or a list of one str (or None) per sentence")
    return list(texts)


def check_decoding(beam: int, n_best: int, workers: int, stopping: str) -> None:
    if not 1 <= beam <= MAX_BEAM:
        raise UserError(f"beam={beam} is out of range; allowed: 1 to {MAX_BEAM}")
    if not 1 <= n_best <= beam:
        raise UserError(f"n_best={n_best} is out of range; allowed: 1 to the beam size ({beam})")
    if workers < 1:
        raise UserError(f"workers={workers} is out of range; allowed: 1 or more decoding processes")
    if stopping not in STOPPING_RULES:
        raise UserError(f"stopping={stopping!r} is not a stopping rule; allowed: {', '.join(STOPPING_RULES)}")


def decoding_batches(src_ids: list[list[int]], batch_tokens: int, max_sentences: int | None) -> list[list[int]]:
    """Sentences of similar length together (empty ones left out), the longest batches first: worker
    processes then finish together, not one of them with a long batch last."""
    lengths = [max(len(ids), 1) for ids in src_ids]
    batches = [nonempty for indices in token_batches(lengths, lengths, batch_tokens, shuffle=False, seed=0,
                                                     epoch=0, max_sentences=max_sentences)
               if (nonempty := [i for i in indices if src_ids[i]])]
    batches.sort(key=lambda indices: -max(lengths[i] for i in indices))
    return batches


def model_config(model_dir: Path):
    """The config.yaml of a model folder written by `attnmt train`; a UserError if there is none."""
    if not model_dir.is_dir():
        parent = model_dir.parent
        names = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
        near = closest(model_dir.name, names)
        hint = (f"did you mean {parent / near}?" if near else
                f"{parent} holds {', '.join(sorted(names)[:8])}" if names else
                "pass the folder that `attnmt train` wrote")
        raise UserError(f"no such folder: {model_dir}; {hint}")
    if not (model_dir / "config.yaml").is_file():
        raise UserError(f"{model_dir} is not an attnmt model folder (no config.yaml); pass the folder that "
                        "`attnmt train` wrote")
    return load_config(model_dir / "config.yaml")
