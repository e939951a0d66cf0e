"""What every translator shares (the model folder's, :class:`attnmt.decode.translator.Translator`, and an exported
model's, :class:`attnmt.export.ct2_translator.CT2Translator`): the Translation it returns, a call's decoding
options, the forced prefixes, and the batches of similar length. What a translator is given to translate comes in
through :mod:`attnmt.decode.inputs`, the input gate."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.config.decoding import DecodeOptions, with_given
from attnmt.config.schema import Config, load_config
from attnmt.data.batching import token_batches
from attnmt.decode.constraints import constraints_of
from attnmt.errors import UserError, closest


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


def call_options(config: Config, options: DecodeOptions | None, sampling: Any, given: dict[str, Any],
                 **instead: Any) -> DecodeOptions:
    """A translate() call's decoding options (:mod:`attnmt.config.decoding`), checked: ``options``, else the model's
    ``decode.*`` in one process (``workers`` 1: forking is the caller's choice) with ``instead`` where the
    translator cannot use the config's value; then the keyword options ``given`` on top (None: not given), and
    ``sampling`` (an :class:`attnmt.decode.sampling.Sampling`: sample with its settings)."""
    if sampling is not None:
        settings = {"sample": True, **dataclasses.asdict(sampling)}
        twice = next((name for name in settings if given.get(name) is not None), None)
        if twice is not None:
            raise UserError(f"{twice} is given twice: as {twice}= and in sampling=; give it once")
        given = {**given, **settings}
    if options is None:
        options = config.decode.options(workers=1, **{k: v for k, v in instead.items() if given.get(k) is None})
    return with_given(options, given)


def search_arguments(options: DecodeOptions) -> dict[str, Any]:
    """The keyword arguments of :func:`attnmt.decode.search.greedy_search` (and of sampling's search) that a call's
    ``options`` set: the length limits, the length penalty and the constraints. ``beam_search`` takes them beside
    its own (``beam_size``, ``n_best``, ``stopping``, ``coverage_penalty``)."""
    return dict(max_len_a=options.max_len_a, max_len_b=options.max_len_b, max_len_cap=options.max_len,
                length_penalty=options.length_penalty, **constraints_of(options))


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
