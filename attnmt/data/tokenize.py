"""Tokenizers: text <-> pieces (strings). Ids are the Vocabulary's business (``vocab.py``).

Two kinds:

* :class:`SentencePieceTokenizer`, subwords learnt with the sentencepiece library (``bpe`` or
  ``unigram``). Words need no spaces between them, so Chinese and Japanese work as they are.
* :class:`WordTokenizer`, a split on whitespace, optionally lowercased.

All tokenizers first collapse runs of ASCII whitespace (space, TAB, CR, LF, VT, FF) into one space
and strip both ends; this is the only normalisation. Sentencepiece runs with the ``identity``
normalisation rule (no NFKC), so ``decode(encode(s)) == normalize_whitespace(s)`` exactly for every
``s`` whose characters were seen in training (lowercased when ``lowercase`` is set). Non-ASCII
spaces such as the no-break space of French "Va !" are kept as characters, not treated as breaks.

On disk, a tokenizer named ``name`` in ``directory`` is ``{name}.json`` (``{"kind", "lowercase"}``)
plus, for sentencepiece, the model ``{name}.model``. :func:`load_tokenizer` tells the kinds apart;
a sentencepiece ``{name}.model`` trained elsewhere loads without the JSON.
"""

from __future__ import annotations

import io
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import sentencepiece as spm

from attnmt.errors import UserError

__all__ = [
    "KINDS",
    "SP_SPACE",
    "SentencePieceTokenizer",
    "Tokenizer",
    "WordTokenizer",
    "load_tokenizer",
    "normalize_whitespace",
    "train_tokenizer",
]

PathLike = str | Path

KINDS = ("bpe", "unigram", "word")
SP_SPACE = "\u2581"  # "▁": sentencepiece's visible space; a piece starting with it starts a word

_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")


def normalize_whitespace(text: str) -> str:
    """Collapse runs of ASCII whitespace into one space and strip both ends."""
    return _ASCII_SPACE.sub(" ", text).strip(" ")


class Tokenizer(ABC):
    """Splits a sentence into pieces (``encode``) and joins pieces back into text (``decode``)."""

    kind: ClassVar[str] = ""  # the kind written to {name}.json; subclasses set it (or per instance)

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    @abstractmethod
    def encode(self, text: str) -> list[str]:
        """The pieces of ``text``; an empty or all-whitespace text gives ``[]``."""

    @abstractmethod
    def decode(self, pieces: Sequence[str]) -> str:
        """Join pieces into text (the inverse of :meth:`encode`, up to whitespace)."""

    @abstractmethod
    def word_ids(self, pieces: Sequence[str]) -> list[int]:
        """For each piece, the index of the whitespace-separated word it belongs to (from 0).

        Used to merge subword attention into word-level attention and alignments.
        """

    def save(self, directory: PathLike, name: str) -> None:
        """Write ``{name}.json`` (and the kind's own files) into ``directory``, creating it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._save_files(directory, name)
        meta = {"kind": self.kind, "lowercase": self.lowercase}
        (directory / f"{name}.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")

    def _save_files(self, directory: Path, name: str) -> None:  # noqa: B027 - optional hook
        """Hook for the files besides the JSON; nothing for kinds that the JSON describes fully."""

    @classmethod
    def load(cls, directory: PathLike, name: str) -> Tokenizer:
        """Load the tokenizer ``name`` saved in ``directory``; the base class detects the kind."""
        tokenizer = load_tokenizer(directory, name)
        if not isinstance(tokenizer, cls):
            raise UserError(
                f"{Path(directory) / name} is a {tokenizer.kind!r} tokenizer, not a {cls.__name__}; "
                "load it with load_tokenizer or retrain it"
            )
        return tokenizer

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, lowercase={self.lowercase})"


class WordTokenizer(Tokenizer):
    """Whitespace tokenization; with ``lowercase`` every piece is lowercased (decode cannot undo it)."""

    kind: ClassVar[str] = "word"

    def encode(self, text: str) -> list[str]:
        text = _prepare(text, self.lowercase)
        return text.split(" ") if text else []

    def decode(self, pieces: Sequence[str]) -> str:
        return normalize_whitespace(" ".join(pieces))

    def word_ids(self, pieces: Sequence[str]) -> list[int]:
        return list(range(len(pieces)))


class SentencePieceTokenizer(Tokenizer):
    """Subword pieces from a sentencepiece model (BPE or unigram language model)."""

    def __init__(self, model_proto: bytes, kind: str, lowercase: bool = False) -> None:
        super().__init__(lowercase)
        if kind not in ("bpe", "unigram"):
            raise ValueError(f"sentencepiece kind must be 'bpe' or 'unigram', not {kind!r}")
        self.kind = kind  # type: ignore[misc]  # per instance: one class serves both kinds
        self._model_proto = model_proto
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int, kind: str = "unigram", lowercase: bool = False, sample: int = 0
    ) -> SentencePieceTokenizer:
        """Learn a model of ``vocab_size`` pieces (a soft limit) from ``texts``, in memory.

        Deterministic for the same texts: one training thread (the unigram EM sums floats in
        another order with more threads), and all sentences are used, so no sampling. ``sample`` > 0 bounds
        the sentences sentencepiece keeps (its input_sentence_size, shuffled); `attnmt prepare` passes
        the size of the sample it drew itself, so that the vocabulary counts the same sentences.
        """
        if kind not in ("bpe", "unigram"):
            raise ValueError(f"sentencepiece kind must be 'bpe' or 'unigram', not {kind!r}")
        if vocab_size < 2:
            raise UserError(f"vocab_size must be at least 2 (got {vocab_size}); raise it")
        # Train on exactly what encode will see: the same whitespace (and case) normalisation.
        counter = _Counter(_prepare(t, lowercase) for t in texts)
        writer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(counter),
                model_writer=writer,
                model_type=kind,
                vocab_size=vocab_size,
                # The vocab size is a target, not a hard limit: a tiny corpus (a test, a demo)
                # cannot fill it, and that should not be an error.
                hard_vocab_limit=False,
                # Keep every character, so that rare CJK characters are pieces rather than UNK.
                character_coverage=1.0,
                # Unknown characters become UNK pieces, not UTF-8 bytes the vocabulary never saw.
                byte_fallback=False,
                normalization_rule_name="identity",  # exact round trip; NFKC would rewrite text
                # Only <unk> inside sentencepiece: BOS/EOS/PAD belong to attnmt's Vocabulary.
                unk_id=0,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                num_threads=1,
                # sentencepiece takes no bound of 100 or fewer sentences; the texts are then all kept anyway
                input_sentence_size=sample if sample > 100 else 0,
                shuffle_input_sentence=True,
                minloglevel=2,  # errors only: training logs hundreds of INFO lines to stderr
            )
        except RuntimeError as e:
            raise _training_error(e, vocab_size, counter.nonempty) from None
        return cls(writer.getvalue(), kind=kind, lowercase=lowercase)

    def encode(self, text: str) -> list[str]:
        text = _prepare(text, self.lowercase)
        return self._sp.encode(text, out_type=str) if text else []

    def decode(self, pieces: Sequence[str]) -> str:
        # Join by hand rather than with sentencepiece's decode_pieces: that renders every piece
        # outside its vocabulary (an unknown character, the Vocabulary's "<unk>") as " ⁇ ", while
        # keeping the surface string shows the reader what the model produced.
        return normalize_whitespace("".join(pieces).replace(SP_SPACE, " "))

    def word_ids(self, pieces: Sequence[str]) -> list[int]:
        ids: list[int] = []
        word = -1
        for piece in pieces:
            if piece.startswith(SP_SPACE) or word < 0:
                word += 1
            ids.append(word)
        return ids

    def _save_files(self, directory: Path, name: str) -> None:
        (directory / f"{name}.model").write_bytes(self._model_proto)

    @classmethod
    def from_model_file(
        cls, path: PathLike, kind: str | None = None, lowercase: bool = False
    ) -> SentencePieceTokenizer:
        """Load a ``.model`` file; without ``kind`` (bpe/unigram) it is read from the model itself."""
        path = Path(path)
        try:
            proto = path.read_bytes()
        except FileNotFoundError:
            raise UserError(f"sentencepiece model not found: {path}; check the path") from None
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror or e}; check the file") from None
        if not proto:  # sentencepiece loads an empty file and fails at the first sentence
            raise UserError(f"{path} is empty, not a sentencepiece model; restore it from the model folder it "
                            "came from, or retrain the tokenizer")
        try:
            return cls(proto, kind=kind or _model_type(proto), lowercase=lowercase)
        except (RuntimeError, ValueError) as e:
            raise UserError(
                f"{path} is not a usable sentencepiece bpe/unigram model ({e}); retrain the tokenizer"
            ) from None


def _prepare(text: str, lowercase: bool) -> str:
    """What every tokenizer does before splitting: whitespace normalisation, then lowercasing."""
    text = normalize_whitespace(text)
    return text.lower() if lowercase else text


class _Counter(Iterator[str]):
    """Passes sentences through, counting the non-empty ones for the error messages."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._it = iter(texts)
        self.nonempty = 0

    def __next__(self) -> str:
        text = next(self._it)
        self.nonempty += bool(text)
        return text


def _training_error(e: RuntimeError, vocab_size: int, nonempty: int) -> UserError:
    """Turn sentencepiece's multi-line C++ assertion into one actionable line."""
    message = str(e)
    if nonempty == 0 or "sentences_.empty()" in message:
        return UserError("no text to train the tokenizer on (all lines empty); check the training data")
    required = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", message)
    if required:
        need = int(required.group(2))
        return UserError(
            f"vocab_size {vocab_size} is below the {need} distinct characters (+ <unk>) in the "
            f"training text; set vocab_size to at least {need}"
        )
    first = message.strip().splitlines()[0] if message.strip() else type(e).__name__
    return UserError(f"sentencepiece training failed ({first}); check vocab_size and the data")


def _model_type(proto: bytes) -> str:
    """'bpe' or 'unigram', from the trainer spec stored in a sentencepiece model."""
    try:  # needs protobuf, and only for models trained elsewhere (ours have a {name}.json)
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as e:
        raise ValueError(f"reading its model type needs the protobuf package ({e})") from None

    model = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # generated code
    try:
        model.ParseFromString(proto)
    except Exception as e:  # protobuf's DecodeError has no stable import path across versions
        raise ValueError(f"cannot parse the model: {e}") from None
    types = {1: "unigram", 2: "bpe"}
    if model.trainer_spec.model_type not in types:
        raise ValueError(f"model type {model.trainer_spec.model_type} is neither unigram nor bpe")
    return types[model.trainer_spec.model_type]


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read tokenizer file {path} ({e}); retrain the tokenizer") from None
    if not isinstance(meta, dict) or meta.get("kind") not in KINDS:
        raise UserError(
            f"{path} does not describe a tokenizer (need kind one of {', '.join(KINDS)}); "
            "retrain the tokenizer"
        )
    if not isinstance(meta.get("lowercase", False), bool):
        raise UserError(f"{path}: 'lowercase' must be true or false; fix or retrain the tokenizer")
    return meta


def train_tokenizer(
    kind: str,
    texts: Iterable[str],
    vocab_size: int,
    directory: PathLike,
    name: str,
    lowercase: bool = False,
    sample: int = 0,
) -> Tokenizer:
    """Train a tokenizer of ``kind`` ("bpe", "unigram" or "word") and save it as ``name`` in ``directory``.

    ``vocab_size`` is the sentencepiece target size; the word tokenizer has nothing to learn and
    ignores it (cap the word vocabulary with ``Vocabulary.build(max_size=...)``).
    """
    if kind not in KINDS:
        raise UserError(f"unknown tokenizer kind {kind!r}; use one of {', '.join(KINDS)}")
    tokenizer: Tokenizer
    if kind == "word":
        tokenizer = WordTokenizer(lowercase=lowercase)
    else:
        tokenizer = SentencePieceTokenizer.train(texts, vocab_size, kind=kind, lowercase=lowercase, sample=sample)
    tokenizer.save(directory, name)
    return tokenizer


def load_tokenizer(directory: PathLike, name: str) -> Tokenizer:
    """Load the tokenizer saved as ``name`` in ``directory``, whatever its kind.

    ``{name}.json`` gives the kind; without it, a sentencepiece ``{name}.model`` is loaded as is.
    """
    directory = Path(directory)
    meta_path = directory / f"{name}.json"
    model_path = directory / f"{name}.model"
    if meta_path.exists():
        meta = _read_meta(meta_path)
        lowercase = bool(meta.get("lowercase", False))
        if meta["kind"] == "word":
            return WordTokenizer(lowercase=lowercase)
        return SentencePieceTokenizer.from_model_file(model_path, kind=meta["kind"], lowercase=lowercase)
    if model_path.exists():
        return SentencePieceTokenizer.from_model_file(model_path)
    raise UserError(
        f"no tokenizer {name!r} in {directory} (looked for {meta_path.name} and {model_path.name}); "
        "train one first or check the path"
    )
