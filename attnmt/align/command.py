"""What ``attnmt align`` does: align files with a model, a reverse model and baselines; score them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.align.eflomal import eflomal_align
from attnmt.align.extract import (
    AGREEMENT,
    METHODS,
    WordAttention,
    agreement_links,
    attention_matrices,
    diagonal_links,
    links_from_attention,
    mean_attention,
    model_method,
    reads_shift_rows,
)
from attnmt.align.link_sets import SYMMETRIZATIONS, GoldAlignment, Link, read_gold, symmetrize
from attnmt.align.scores import AlignmentScores, score_alignments
from attnmt.errors import UserError


@dataclass
class AlignResult:
    """What `attnmt align` computed: links per row, the row written as output, and scores given gold."""

    links: dict[str, list[set[Link]]]  # row name -> one link set per sentence pair
    scores: dict[str, AlignmentScores]  # row name -> scores (empty without gold)
    output: str  # the row whose links are the command's output
    seconds: dict[str, float] = field(default_factory=dict)  # what ran (diagonal, eflomal, a model) -> its time
    pairs: list[tuple[str, str]] = field(default_factory=list)  # the sentence pairs as aligned: the links' words


BASELINES = ("diagonal", "eflomal")
# What --symmetrize accepts for attention: the three on links, and agreement on the two models' matrices.
ATTENTION_SYMMETRIZATIONS: tuple[str, ...] = (*SYMMETRIZATIONS, AGREEMENT)


def members(models) -> list:
    """The models that align as one, as a list: a list as it is; an ensemble's Translator (load_ensemble), its
    member translators; one Translator or model folder, itself."""
    if isinstance(models, (list, tuple)):
        return list(models)
    return list(getattr(models, "members", None) or [models])


def ensemble_attention(translators, sources: Sequence[str], targets: Sequence[str], layer: int | None = None,
                       head: int | None = None) -> list[WordAttention]:
    """The word-level attention of one translator, or the mean over an ensemble's (extract.mean_attention)."""
    return mean_attention([attention_matrices(t, sources, targets, layer=layer, head=head)
                           for t in members(translators)])


def default_method(translators) -> str:
    """The extraction method the model (every member of an ensemble) is read with by default."""
    methods = sorted({model_method(t.config) for t in members(translators)})
    if len(methods) > 1:
        raise UserError(f"align: the ensemble's models are read with different methods by default "
                        f"({' and '.join(methods)}; shift for a model guided on the shift row); "
                        "choose one with --method")
    return methods[0]


def align_pairs(translator, sources: Sequence[str], targets: Sequence[str], method: str | None = None,
                threshold: float = 0.5, layer: int | None = None, head: int | None = None, reverse=None,
                symmetrization: str | None = None) -> list[set[Link]]:
    """Word links of (source, target) pairs from ``translator``'s attention, optionally symmetrized
    with those of ``reverse`` (a translator of the other direction, whose links are turned back into
    (source, target) order). Either may be a list of translators, an ensemble (:func:`ensemble_attention`).
    Used by ``attnmt align``, ``attnmt translate --alignments`` and the server.
    ``method`` None: the model's own (:func:`model_method`)."""
    method = method or default_method(translator)
    if symmetrization is not None and symmetrization not in ATTENTION_SYMMETRIZATIONS:
        allowed = " | ".join(ATTENTION_SYMMETRIZATIONS)
        raise UserError(f"symmetrization {symmetrization!r} is unknown; allowed: {allowed}")
    if symmetrization is not None and reverse is None:
        raise UserError("symmetrizing combines two directions; give a reverse model (--reverse-model DIR) too")
    rows = attention_rows(translator, sources, targets, (method,), threshold, layer, head, reverse)
    if reverse is None:
        return rows[f"attention {method}"]
    return rows[f"attention {method} {symmetrization or 'intersection'}"]


def align_translations(translator, translations: list, method: str | None = None, threshold: float = 0.5,
                       layer: int | None = None, head: int | None = None, reverse=None,
                       symmetrization: str | None = None) -> list:
    """Fill each :class:`attnmt.decode.translator.Translation`'s ``alignment``: word links between the source's
    whitespace words and the output's, read off the attention of a teacher-forced pass over the output
    (:func:`align_pairs`; the same methods and symmetrization as ``attnmt align``; ``method`` None: the
    model's own, ``shift`` for a model guided on that row, else ``argmax``). An ensemble aligns with the
    mean of its members' attention, as ``attnmt align --model A --model B``; ``reverse`` may be a
    translator, an ensemble's, or a list of translators. Returns ``translations``."""
    todo = [t for t in translations if t.source.split() and t.text.split()]
    found = align_pairs(translator, [t.source for t in todo], [t.text for t in todo], method, threshold, layer, head,
                        reverse, symmetrization)
    for t in translations:
        t.alignment = set()
    for t, links in zip(todo, found):
        t.alignment = links
    return translations


def attention_rows(translator, sources: Sequence[str], targets: Sequence[str], methods: Sequence[str],
                   threshold: float = 0.5, layer: int | None = None, head: int | None = None,
                   reverse=None) -> dict[str, list[set[Link]]]:
    """Links by each of ``methods`` from one teacher-forced pass: rows ``attention METHOD`` and, with a
    ``reverse`` translator, ``reverse attention METHOD`` and ``attention METHOD SYMMETRIZATION`` for each
    of :data:`ATTENTION_SYMMETRIZATIONS`. ``translator`` and ``reverse`` may each be a list: an ensemble."""
    for method in methods:
        if method not in METHODS:
            raise UserError(f"alignment method {method!r} is unknown; allowed: {' | '.join(METHODS)}")
    rows: dict[str, list[set[Link]]] = {}
    agreed: dict[bool, list[set[Link]]] = {}  # agreement depends only on which rows a method reads
    forward = ensemble_attention(translator, sources, targets, layer, head)
    backward = ensemble_attention(reverse, targets, sources, layer, head) if reverse is not None else None
    for method in methods:
        rows[f"attention {method}"] = [links_from_attention(m, method, threshold) for m in forward]
        if backward is None:
            continue
        rows[f"reverse attention {method}"] = [{(i, j) for j, i in links_from_attention(m, method, threshold)}
                                               for m in backward]
        for how in SYMMETRIZATIONS:
            rows[f"attention {method} {how}"] = symmetrize(rows[f"attention {method}"],
                                                           rows[f"reverse attention {method}"], how)
        shift = reads_shift_rows(method)
        if shift not in agreed:
            agreed[shift] = [agreement_links(f, b, method) for f, b in zip(forward, backward)]
        rows[f"attention {method} {AGREEMENT}"] = agreed[shift]
    return rows


def eflomal_rows(sources: Sequence[str], targets: Sequence[str],
                 corpus: Sequence[tuple[str, str]]) -> dict[str, list[set[Link]]]:
    """eflomal learns from ``corpus`` plus the pairs themselves (lowercased, as statistical aligners
    are usually run); its forward, reverse and symmetrized links of the pairs."""
    n = len(sources)
    forward, reverse = eflomal_align([s.lower() for s in sources] + [s.lower() for s, _ in corpus],
                                     [t.lower() for t in targets] + [t.lower() for _, t in corpus])
    forward, reverse = forward[:n], reverse[:n]
    rows = {"eflomal forward": forward, "eflomal reverse": reverse}
    for how in SYMMETRIZATIONS:
        rows[f"eflomal {how}"] = symmetrize(forward, reverse, how)
    return rows


def align_files(model_dir: str | Path | None, src_path: str | Path, tgt_path: str | Path,
                gold_path: str | Path | None = None, threshold: float = 0.5, baselines: Sequence[str] = (),
                checkpoint: str | None = None, method: str | None = None, reverse_model: str | Path | None = None,
                symmetrization: str | None = None, layer: int | None = None, head: int | None = None,
                eflomal_corpus: str | Path | None = None, pretokenized: bool = False) -> AlignResult:
    """Align line-aligned ``src_path``/``tgt_path`` with a model's attention (``method``: argmax, threshold or
    shift, see attnmt.align.extract; None: the model's own), a ``reverse_model`` trained in the other direction
    and the two ``symmetrization``, and ``baselines`` (diagonal, eflomal); score every row against ``gold_path``
    (1-based, NAACL format) if given. ``model_dir`` and ``reverse_model`` may each be a list of folders: an
    ensemble, whose attention is its members' mean.

    Words are whitespace-separated. Raw text is split into words as the model's training text was
    (``data.pretokenize``: Chinese segmented into words, ...) and every row aligns those words
    (:attr:`AlignResult.pairs`); with gold, or ``pretokenized``, the files are read as they are (the gold's
    links count their words).

    eflomal learns from the pairs plus ``eflomal_corpus`` (a TSV, source TAB target), by default the
    training corpus of ``model_dir``'s config when it names one.
    """
    from attnmt.data.corpus import read_parallel

    _check_align_options(model_dir, threshold, method, reverse_model, symmetrization, baselines)
    pairs = read_parallel(src_path, tgt_path)
    translator = reverse = None
    if model_dir is not None:
        from attnmt.decode.translator import load

        reverse = [load(d, checkpoint=checkpoint) for d in members(reverse_model)] if reverse_model else None
        translator = [load(d, checkpoint=checkpoint) for d in members(model_dir)]
        if gold_path is None and not pretokenized:
            pairs = _split_pairs(translator[0], pairs)
        _check_sentence_lengths(pairs, src_path, tgt_path)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    links: dict[str, list[set[Link]]] = {}
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def done(name: str) -> None:
        nonlocal clock
        seconds[name] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()

    if "diagonal" in baselines:
        links["diagonal"] = [diagonal_links(len(s.split()), len(t.split())) for s, t in pairs]
        done("diagonal")
    if "eflomal" in baselines:
        links.update(eflomal_rows(sources, targets, _eflomal_corpus(eflomal_corpus, model_dir)))
        done("eflomal")
    output = next(iter(links), "")
    if translator is not None:
        method = method or default_method(translator)
        # With gold every method (and symmetrization) is scored; the output is the one asked for.
        methods = METHODS if gold_path is not None else (method,)
        links.update(attention_rows(translator, sources, targets, methods, threshold, layer, head, reverse))
        done("attention")
        output = f"attention {method}" + (f" {symmetrization}" if symmetrization else "")
    if not links:
        raise UserError("align: nothing to align with; pass --model DIR, --baseline diagonal|eflomal, or both")
    scores = _score_against_gold(links, gold_path, pairs, src_path) if gold_path is not None else {}
    return AlignResult(links, scores, output, seconds, pairs)


def _split_pairs(translator, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pairs`` split into words as ``translator``'s training text was (its split_source, split_target)."""
    split_src = translator.split_source or (lambda text: text)
    split_tgt = translator.split_target or (lambda text: text)
    return [(split_src(s), split_tgt(t)) for s, t in pairs]


def _check_sentence_lengths(pairs: Sequence[tuple[str, str]], src_path, tgt_path) -> None:
    """The input gate's refusal (:func:`attnmt.decode.inputs.check_words`) of a sentence of more words than a model
    reads (its attention matrix grows with the square), naming the file and line."""
    from attnmt.decode.inputs import InputLimits, InputRefused, check_words

    for side, path in enumerate((src_path, tgt_path)):
        try:
            check_words([pair[side] for pair in pairs], InputLimits())
        except InputRefused as e:
            raise e.at(path) from None


def _check_align_options(model_dir, threshold: float, method: str | None, reverse_model, symmetrization: str | None,
                         baselines: Sequence[str]) -> None:
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"--threshold {threshold} is out of range; allowed: > 0 and <= 1")
    if method is not None and method not in METHODS:
        raise UserError(f"--method {method!r} is unknown; allowed: {' | '.join(METHODS)}")
    if symmetrization is not None and reverse_model is None:
        raise UserError("align: --symmetrize combines two directions; pass --reverse-model DIR too")
    if reverse_model is not None and model_dir is None:
        raise UserError("align: --reverse-model needs --model (the forward direction) too")
    for name in baselines:
        if name not in BASELINES:
            raise UserError(f"--baseline {name!r} is unknown; allowed: {' | '.join(BASELINES)}")


def _score_against_gold(links: dict[str, list[set[Link]]], gold_path, pairs: list[tuple[str, str]],
                        src_path) -> dict[str, AlignmentScores]:
    gold = read_gold(gold_path)
    if len(gold) != len(pairs):
        raise UserError(f"{gold_path} has {len(gold)} lines but {src_path} has {len(pairs)}; they must be "
                        "line-aligned")
    _check_gold_in_range(gold, pairs, gold_path)
    return {name: score_alignments(found, gold) for name, found in links.items()}


def _eflomal_corpus(path, model_dir) -> list[tuple[str, str]]:
    """The extra text eflomal learns from: ``path``, else the model's training corpus, else none."""
    from attnmt.data.dataset import read_split

    if path is not None:
        from attnmt.data.corpus import read_tsv

        return read_tsv(path)
    if not model_dir:
        return []
    from attnmt.decode.translator import model_config

    return read_split(model_config(Path(members(model_dir)[0])).data, "train") or []


def _check_gold_in_range(gold: Sequence[GoldAlignment], pairs: Sequence[tuple[str, str]], path) -> None:
    """A gold link beyond a sentence's words means the files do not belong together."""
    for number, (g, (s, t)) in enumerate(zip(gold, pairs), start=1):
        n_src, n_tgt = len(s.split()), len(t.split())
        bad = [(i, j) for i, j in g.possible if i >= n_src or j >= n_tgt]
        if bad:
            i, j = bad[0]
            raise UserError(f"{path}:{number}: link {i + 1}-{j + 1} is outside the sentence pair ({n_src} source, "
                            f"{n_tgt} target words); check that the gold file belongs to these sentences")
