"""The input gate: the one way in for the sentences a model is asked to translate, and the limits it holds them to.

Every entry point hands its sentences to the gate: the command line's translate, evaluate, align, plot-attention
and explore; the Python API (``Translator.translate`` and ``.explore``, an exported model's ``translate``); the
server's POST /translate and /explore. The limits are one frozen :class:`InputLimits` (bytes and characters of a
sentence, tokens of a sentence, sentences and tokens of a request); the server's ``Limits`` builds its own from
its settings (:meth:`attnmt.serve.schema.Limits.inputs`).

Each refusal is an :class:`InputRefused`, a UserError of one line: exit 2 on the command line, a UserError in
Python, 422 over HTTP. It comes before the work that grows with what was sent: the count of sentences before any
is looked at, a sentence's size before it is tokenized, its tokens as soon as it is, the request's total as it
grows. So time and memory stay bounded whatever arrives: a 100,000-word sentence costs its tokenization, never
a search over it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attnmt.data.corpus import MAX_LINE_BYTES
from attnmt.errors import UserError

__all__ = ["MAX_REQUEST_SENTENCES", "MAX_SOURCE_TOKENS", "InputLimits", "InputRefused", "SentenceTooLong",
           "check_count", "check_sentences", "check_text", "check_words", "gated_tokens", "sentence_list"]

MAX_SOURCE_TOKENS = 512  # tokens of one sentence: beam search time grows with the cube of the sentence length
MAX_REQUEST_SENTENCES = 10_000  # the most sentences a server may take in one request (--max-texts)


@dataclass(frozen=True)
class InputLimits:
    """What one call may bring in. None: no limit of that kind (a sentence's bytes are always bounded).

    ``line_bytes``: UTF-8 bytes of one sentence (the readers' line limit, 1 MiB); ``line_chars``: its characters
    (the server's ``max_text_chars``); ``sentence_tokens``: its source tokens (512); ``sentences``: sentences in
    one call (the server's ``max_texts``); ``request_tokens``: source tokens of one call, summed.
    """

    line_bytes: int = MAX_LINE_BYTES
    line_chars: int | None = None
    sentence_tokens: int | None = MAX_SOURCE_TOKENS
    sentences: int | None = None
    request_tokens: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.name != "line_bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"InputLimits.{f.name}={value!r} is out of range; allowed: an integer of 1 or more"
                                + ("" if f.name == "line_bytes" else ", or None for no limit"))

    def replace(self, **changes) -> "InputLimits":
        return dataclasses.replace(self, **changes)


class InputRefused(UserError):
    """A refusal of the gate: ``rule`` says what is wrong and what to do, ``index`` is the sentence at fault (None:
    the request as a whole). The message names the sentence ``sentence N`` until :meth:`at` or :meth:`named`
    names it as its caller knows it (a file's line, a request's field)."""

    def __init__(self, rule: str, index: int | None = None, where: str | None = None):
        self.rule, self.index = rule, index
        where = where or (f"sentence {index + 1}" if index is not None else "the request")
        super().__init__(f"{where} {rule}")

    def named(self, where: str) -> "InputRefused":
        """The same refusal, of the sentence (or request) called ``where``."""
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.args = (f"{where} {self.rule}",)
        return other

    def at(self, path, first: int = 0) -> "InputRefused":
        """The same refusal, naming the line of ``path`` the sentence came from (``first``: the line number, from
        0, of the call's first sentence)."""
        return self.named(str(path) if self.index is None else f"{path}:{first + self.index + 1}")

    def shifted(self, first: int) -> "InputRefused":
        """The same refusal, of the sentence ``first`` places further on (a group of a longer input)."""
        if self.index is None:
            return self
        other = self.named(f"sentence {first + self.index + 1}")
        other.index = first + self.index
        return other


class SentenceTooLong(InputRefused):
    """A source sentence with more tokens than a translator accepts; :meth:`at` names the file and line."""

    def __init__(self, index: int, tokens: int, limit: int, where: str | None = None):
        self.tokens, self.limit = tokens, limit
        super().__init__(f"has {tokens:,} tokens, more than the {limit:,} this translator accepts; split long "
                         "lines into sentences", index, where)


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


def check_count(n: int, limits: InputLimits) -> None:
    """InputRefused for more sentences in one call than ``limits.sentences``."""
    if limits.sentences is not None and n > limits.sentences:
        raise InputRefused(f"has {n} sentences; at most {limits.sentences} are allowed")


def check_text(text: str, index: int, limits: InputLimits) -> None:
    """InputRefused for a sentence over ``limits.line_chars`` characters or ``limits.line_bytes`` UTF-8 bytes (its
    bytes are counted only when its length leaves a doubt), or one with a NUL character."""
    if limits.line_chars is not None and len(text) > limits.line_chars:
        raise InputRefused(f"has {len(text)} characters; at most {limits.line_chars} are allowed", index)
    if "\x00" in text:  # what the file readers refuse as binary: no tokenizer or terminal takes it as text
        raise InputRefused("has a NUL character (\\x00); send text, one sentence per item", index)
    over = (f"is longer than {limits.line_bytes:,} bytes, the limit for one sentence; split it into sentences, "
            "one a line")
    if len(text) > limits.line_bytes:  # a character is at least one byte
        raise InputRefused(over, index)
    # and at most four; a lone surrogate (a str can hold one, UTF-8 cannot) is counted as the three it is written in
    if 4 * len(text) > limits.line_bytes and len(text.encode("utf-8", "surrogatepass")) > limits.line_bytes:
        raise InputRefused(over, index)


def check_sentences(sentences: Sequence[str], limits: InputLimits) -> None:
    """The checks that need no tokenizer, in order: the count, then each sentence's size."""
    check_count(len(sentences), limits)
    for i, text in enumerate(sentences):
        check_text(text, i, limits)


def gated_tokens(sentences: Sequence[str], tokenize: Callable[[str], list[str]], limits: InputLimits,
                 limit: int | None = None) -> list[list[str]]:
    """Each sentence's tokens (``tokenize``: a TextProcessor's ``tokens``), checked on the way: the count and each
    sentence's size first (:func:`check_sentences`), then each sentence's tokens as soon as it is tokenized
    (:class:`SentenceTooLong` over ``limit``, default ``limits.sentence_tokens``) and the running total against
    ``limits.request_tokens``. The first refusal stops the work: no later sentence is tokenized."""
    check_sentences(sentences, limits)
    most = limits.sentence_tokens if limit is None else limit
    total, tokens = 0, []
    for i, text in enumerate(sentences):
        pieces = tokenize(text)
        if most is not None and len(pieces) > most:
            raise SentenceTooLong(i, len(pieces), most)
        total += len(pieces)
        if limits.request_tokens is not None and total > limits.request_tokens:
            raise InputRefused(f"has more than {limits.request_tokens:,} source tokens (at sentence {i + 1}); send "
                               "fewer or shorter sentences")
        tokens.append(pieces)
    return tokens


def check_words(sentences: Sequence[str], limits: InputLimits) -> None:
    """For text read as whitespace words (``attnmt align``): each sentence's size, then its words against
    ``limits.sentence_tokens``; a sentence's words are counted only up to one more than the limit."""
    check_sentences(sentences, limits)
    most = limits.sentence_tokens
    if most is None:
        return
    for i, text in enumerate(sentences):
        if len(text.split(maxsplit=most)) > most:
            words = len(text.split())
            raise InputRefused(f"has {words:,} words, more than the {most:,} a sentence may have; split long lines "
                               "into sentences", i)
