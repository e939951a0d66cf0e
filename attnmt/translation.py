"""What every translator shares (the model folder's, :class:`attnmt.translator.Translator`, and an exported
model's, :class:`attnmt.ct2.translator.CT2Translator`): the Translation it returns, the refusal of a sentence
too long, the checks of the decoding settings and the batches of similar length."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnmt.config import STOPPING_RULES, load_config
from attnmt.data.batching import token_batches
from attnmt.errors import UserError, closest


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

    source: str
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


def check_decoding(beam: int, n_best: int, workers: int, stopping: str) -> None:
    if not 1 <= beam <= 100:
        raise UserError(f"beam={beam} is out of range; allowed: 1 to 100")
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
