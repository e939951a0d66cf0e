"""Translation quality with sacreBLEU: corpus BLEU, chrF and TER, and BLEU by source-length bucket.

All scores come from sacreBLEU so that they are comparable with published numbers and carry a
signature that says exactly how they were computed; attnmt never counts n-grams itself.

Hypotheses and references are detokenized strings (one per sentence) scored with sacreBLEU's
``13a`` tokenizer by default. Text that is already tokenized, such as the synthetic language's
space-joined tokens, should be scored with ``tokenize="none"``.

BLEU by length follows Bahdanau et al. (2014), Figure 2: sentences are grouped by *source*
length and each group gets its own corpus BLEU, which shows whether a model degrades on long
inputs. Optionally each bucket carries a bootstrap confidence interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER

from attnmt.errors import UserError
from attnmt.runtime.safe_write import open_output

DEFAULT_BUCKET_WIDTH = 10


@dataclass(frozen=True)
class Scores:
    """Corpus-level BLEU and chrF (0-100) with their sacreBLEU signatures."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


@dataclass(frozen=True)
class LengthBucket:
    """Corpus BLEU of the ``n`` sentences whose source length is in ``[lo, hi)``.

    ``ci_low``/``ci_high`` bound a bootstrap confidence interval of ``bleu`` when one was computed.
    """

    lo: int
    hi: int
    n: int
    bleu: float
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def mid(self) -> float:
        """The middle of the integer lengths the bucket covers (``lo .. hi - 1``), for plotting."""
        return (self.lo + self.hi - 1) / 2

    @property
    def label(self) -> str:
        """``"10-19"``: the inclusive range of source lengths."""
        return f"{self.lo}-{self.hi - 1}"

    @property
    def has_ci(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


def _bleu_metric(tokenize: str, lowercase: bool, effective_order: bool = False) -> BLEU:
    if tokenize not in BLEU.TOKENIZERS:
        choices = ", ".join(BLEU.TOKENIZERS)
        raise UserError(f"unknown BLEU tokenizer {tokenize!r}; use one of: {choices}")
    # tokenize=none says the text is tokenized already: sacreBLEU's warning about tokenized input is moot.
    return BLEU(tokenize=tokenize, lowercase=lowercase, effective_order=effective_order, force=tokenize == "none")


def _check_corpus(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("cannot score an empty corpus (no sentences)")


def corpus_scores(
    hypotheses: Sequence[str],
    references: Sequence[str],
    tokenize: str = "13a",
    lowercase: bool = False,
) -> Scores:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each.

    Empty hypotheses are allowed (they score zero); an empty corpus raises ValueError.
    """
    _check_corpus(hypotheses, references)
    hyps, refs = list(hypotheses), [list(references)]
    bleu = _bleu_metric(tokenize, lowercase)
    chrf = CHRF(lowercase=lowercase)
    return Scores(
        bleu=bleu.corpus_score(hyps, refs).score,
        chrf=chrf.corpus_score(hyps, refs).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
    )


def sentence_scores(hypothesis: str, reference: str, tokenize: str = "13a") -> tuple[float, float]:
    """One sentence's BLEU (sacreBLEU's sentence_bleu: effective n-gram order, so a short sentence is not zero
    for a missing 4-gram alone) and chrF, 0-100, against one reference."""
    bleu = _bleu_metric(tokenize, lowercase=False, effective_order=True)
    return bleu.sentence_score(hypothesis, [reference]).score, CHRF().sentence_score(hypothesis, [reference]).score


def bleu_tokenize_for(lang: str | None) -> str:
    """The sacreBLEU tokenizer for text in ``lang``: "zh" for Chinese, "char" for Japanese and Korean (written
    without spaces between words), "13a" otherwise."""
    code = (lang or "").lower().split("-")[0].split("_")[0]
    return "zh" if code == "zh" else "char" if code in ("ja", "ko") else "13a"


def corpus_ter(hypotheses: Sequence[str], references: Sequence[str], lowercase: bool = False) -> tuple[float, str]:
    """Corpus TER (Snover et al. 2006; sacreBLEU's implementation, 0-100, lower is better) and its signature.

    The edits (insertions, deletions, substitutions and shifts of word sequences) that turn each hypothesis
    into its reference, summed, over the summed reference lengths. Case-sensitive unless ``lowercase``.
    """
    _check_corpus(hypotheses, references)
    ter = TER(case_sensitive=not lowercase)
    return ter.corpus_score(list(hypotheses), [list(references)]).score, str(ter.get_signature())


def length_edges(
    lengths: Sequence[int], width: int = DEFAULT_BUCKET_WIDTH, n_buckets: int | None = None
) -> list[int]:
    """Bucket edges covering ``lengths``: buckets are ``[edges[k], edges[k+1])``.

    By default the buckets are ``width`` wide and aligned to multiples of it (1-9, 10-19, ...),
    as in Bahdanau et al. (2014), Figure 2; the first starts at 1, not 0, when no length is 0 (a
    sentence has at least one token), so that its label says what it holds. With ``n_buckets`` the
    range from the shortest to the longest length is cut into that many equal integer-width buckets instead.
    """
    if not lengths:
        raise ValueError("no lengths to bucket")
    shortest, longest = min(lengths), max(lengths)
    if n_buckets is not None:
        if n_buckets < 1:
            raise ValueError(f"n_buckets must be >= 1, got {n_buckets}")
        step = max(1, math.ceil((longest + 1 - shortest) / n_buckets))
        return [shortest + k * step for k in range(n_buckets + 1)]
    if width < 1:
        raise ValueError(f"bucket width must be >= 1, got {width}")
    first = shortest // width * width
    last = longest // width * width + width
    edges = list(range(first, last + 1, width))
    if edges[0] == 0 and shortest > 0:
        edges[0] = 1
    return edges


def _bucket_of(length: int, edges: Sequence[int]) -> int:
    """Index k of the bucket ``[edges[k], edges[k+1])`` holding ``length``."""
    for k in range(len(edges) - 1):
        if edges[k] <= length < edges[k + 1]:
            return k
    raise ValueError(f"source length {length} is outside the bucket edges [{edges[0]}, {edges[-1]})")


def bleu_by_length(
    source_lengths: Sequence[int],
    hypotheses: Sequence[str],
    references: Sequence[str],
    edges: Sequence[int] | None = None,
    n_buckets: int | None = None,
    width: int = DEFAULT_BUCKET_WIDTH,
    tokenize: str = "13a",
    lowercase: bool = False,
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[LengthBucket]:
    """Corpus BLEU per source-length bucket, shortest bucket first; empty buckets are omitted.

    Buckets are ``[edges[k], edges[k+1])``; explicit ``edges`` must cover every length. Without
    them, :func:`length_edges` chooses them from the data (``width``-wide, or ``n_buckets``
    equal ones). With ``bootstrap > 0`` each bucket also gets a percentile bootstrap interval at
    ``confidence``, from that many resamples of its sentences (seeded, so reproducible).
    """
    _check_corpus(hypotheses, references)
    if len(source_lengths) != len(hypotheses):
        raise ValueError(f"{len(source_lengths)} source lengths but {len(hypotheses)} hypotheses")
    if edges is not None and n_buckets is not None:
        raise ValueError("give bucket edges or n_buckets, not both")
    if edges is None:
        edges = length_edges(source_lengths, width=width, n_buckets=n_buckets)
    edges = list(edges)
    if len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bucket edges must be at least two strictly increasing numbers, got {edges}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")

    members: list[list[int]] = [[] for _ in range(len(edges) - 1)]
    for i, length in enumerate(source_lengths):
        members[_bucket_of(length, edges)].append(i)

    metric = _bleu_metric(tokenize, lowercase)
    # Sentence-level statistics for the bootstrap; effective order does not change the n-gram
    # counts, it only avoids sacreBLEU's warning about sentence BLEU without it.
    sentence_metric = _bleu_metric(tokenize, lowercase, effective_order=True)
    rng = np.random.default_rng(seed)
    buckets = []
    for k, idx in enumerate(members):
        if not idx:
            continue
        hyps = [hypotheses[i] for i in idx]
        refs = [references[i] for i in idx]
        bleu = metric.corpus_score(hyps, [refs]).score
        ci_low = ci_high = None
        if bootstrap > 0:
            stats = _sentence_statistics(sentence_metric, hyps, refs)
            ci_low, ci_high = _bootstrap_interval(metric, stats, bootstrap, confidence, rng)
        buckets.append(LengthBucket(edges[k], edges[k + 1], len(idx), bleu, ci_low, ci_high))
    return buckets


def _sentence_statistics(metric: BLEU, hypotheses: list[str], references: list[str]) -> np.ndarray:
    """Per-sentence BLEU sufficient statistics ``[n, 2 + 2 * order]``: sys_len, ref_len, correct, total."""
    rows = []
    for hyp, ref in zip(hypotheses, references):
        s = metric.sentence_score(hyp, [ref])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.asarray(rows, dtype=np.int64)


def _bleu_from_statistics(metric: BLEU, stats: np.ndarray) -> float:
    """Corpus BLEU from summed statistics, by sacreBLEU's own formula and smoothing."""
    order = metric.max_ngram_order
    return BLEU.compute_bleu(
        correct=[int(c) for c in stats[2 : 2 + order]],
        total=[int(t) for t in stats[2 + order :]],
        sys_len=int(stats[0]),
        ref_len=int(stats[1]),
        smooth_method=metric.smooth_method,
        smooth_value=metric.smooth_value,
        effective_order=metric.effective_order,
        max_ngram_order=order,
    ).score


def _bootstrap_interval(
    metric: BLEU, stats: np.ndarray, n_resamples: int, confidence: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of corpus BLEU, resampling the sentences of ``stats``."""
    picks = rng.integers(0, len(stats), size=(n_resamples, len(stats)))
    scores = [_bleu_from_statistics(metric, stats[p].sum(axis=0)) for p in picks]
    tail = 100 * (1 - confidence) / 2
    # Clip away float noise such as 100.00000000000004 from sacreBLEU's exp/log arithmetic.
    low, high = np.clip(np.percentile(scores, [tail, 100 - tail]), 0.0, 100.0)
    return float(low), float(high)


# ---------------------------------------------------------------- reports


def _markdown(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    rule = ["---:" if a == "right" else "---" for a in align]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n"


def _format_bleu(bucket: LengthBucket, digits: int) -> str:
    text = f"{bucket.bleu:.{digits}f}"
    if bucket.has_ci:
        text += f" [{bucket.ci_low:.{digits}f}, {bucket.ci_high:.{digits}f}]"
    return text


def format_table(
    results: Mapping[str, Sequence[LengthBucket]] | Sequence[LengthBucket], digits: int = 1
) -> str:
    """A Markdown table of BLEU by source length: one row per bucket, one column per model.

    ``results`` maps model names to their buckets (a plain list of buckets is one column headed
    "BLEU"). Intervals, when present, follow the score in brackets. Normally every model was
    scored on the same test set, so the bucket sizes agree and appear once in the ``n`` column;
    if they differ, each cell shows its own ``n``.
    """
    if not isinstance(results, Mapping):
        results = {"BLEU": results}
    ranges = sorted({(b.lo, b.hi) for buckets in results.values() for b in buckets})
    by_model = {name: {(b.lo, b.hi): b for b in buckets} for name, buckets in results.items()}
    rows = []
    for lo, hi in ranges:
        present = [m[(lo, hi)] for m in by_model.values() if (lo, hi) in m]
        counts = {b.n for b in present}
        same_n = len(counts) == 1
        cells = [f"{lo}-{hi - 1}", str(present[0].n) if same_n else "varies"]
        for buckets in by_model.values():
            bucket = buckets.get((lo, hi))
            if bucket is None:
                cells.append("-")
            else:
                cells.append(_format_bleu(bucket, digits) + ("" if same_n else f" (n={bucket.n})"))
        rows.append(cells)
    header = ["Source length", "n", *results]
    return _markdown(header, rows, ["left", "right"] + ["right"] * len(results))


def format_scores(results: Mapping[str, Scores], digits: int = 1) -> str:
    """A Markdown table of corpus BLEU and chrF per model, followed by the sacreBLEU signatures."""
    rows = [[name, f"{s.bleu:.{digits}f}", f"{s.chrf:.{digits}f}"] for name, s in results.items()]
    table = _markdown(["Model", "BLEU", "chrF"], rows, ["left", "right", "right"])
    # Models scored the same way share a signature; list each distinct one once.
    signatures = dict.fromkeys(sig for s in results.values() for sig in (s.bleu_signature, s.chrf_signature))
    if signatures:
        table += "\nsacreBLEU signatures: " + ", ".join(f"`{sig}`" for sig in signatures) + "\n"
    return table


@dataclass
class EvaluationReport:
    """What `attnmt evaluate` prints: corpus scores and BLEU by source length."""

    scores: Scores
    buckets: list[LengthBucket]
    n_sentences: int
    beam: int
    seconds: float
    ter: float | None = None  # corpus TER (corpus_ter), lower is better
    ter_signature: str = ""
    sampling: str | None = None  # how the translations were sampled (attnmt.decode.sampling.Sampling), if they were
    length_unit: str = "tokens"  # what the buckets count: "tokens" of the model's source tokenizer, or "words"
    output: str | None = None  # the file the hypotheses were written to (write_hypotheses), if any
    n_best: int = 1  # hypotheses per sentence in that file

    def render(self) -> str:
        ter = [] if self.ter is None else [f"TER  = {self.ter:.2f}   ({self.ter_signature})"]
        search = f"beam: {self.beam}" if self.sampling is None else f"sampled: {self.sampling}"
        return "\n".join([
            f"sentences: {self.n_sentences}   {search}   decoding: {self.seconds:.1f} s",
            f"BLEU = {self.scores.bleu:.2f}   ({self.scores.bleu_signature})",
            f"chrF = {self.scores.chrf:.2f}   ({self.scores.chrf_signature})",
            *ter,
            *([f"hypotheses: {self.output}" + (f" ({self.n_best} per sentence)" if self.n_best > 1 else "")]
              if self.output else []),
            "",
            "BLEU by source length (" + ("words of the source line" if self.length_unit == "words" else
                                         "tokens of the model's source tokenizer") + "):",
            format_table(self.buckets),
        ])

    def to_json(self) -> str:
        import json
        from dataclasses import asdict

        return json.dumps(asdict(self), indent=2)


def check_length_edges(edges: Sequence[int] | None, lengths: Sequence[int], unit: str, src_path) -> None:
    """UserError unless ``edges`` (when given) increase strictly and cover every source length."""
    if edges is None:
        return
    shown = " ".join(map(str, edges))
    if len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:])):
        raise UserError(f"--length-edges {shown}: give at least two strictly increasing numbers, e.g. 1 10 20 30")
    if not (edges[0] <= min(lengths) and max(lengths) < edges[-1]):
        raise UserError(f"--length-edges {shown}: {src_path} has sources of {min(lengths)} to {max(lengths)} {unit}; "
                        f"give edges from at most {min(lengths)} to above {max(lengths)}")


def write_hypotheses(path: str | Path, translations: Sequence, n_best: int = 1) -> None:
    """The translations, one detokenized line per sentence; with ``n_best`` > 1, every hypothesis as
    ``i ||| text ||| score`` (``i`` the sentence from 0, best first; ``score`` the search's, a log
    probability after the length penalty), the format of ``attnmt translate --n-best`` and fairseq's."""
    with open_output(path, overwrite=True) as f:  # evaluate --output: refused before the work without --overwrite
        for i, tr in enumerate(translations):
            if n_best > 1:
                f.writelines(f"{i} ||| {option.text} ||| {option.score:.4f}\n" for option in tr.n_best or [tr])
            else:
                f.write(tr.text + "\n")


# evaluate holds a test set, its translations and its references until it has scored them all (corpus BLEU): these
# bound it, far above any published test set (WMT's are 1,000 to 3,000 sentences)
MAX_TEST_PAIRS = 1_000_000
MAX_TEST_CHARS = 200_000_000


def read_test_set(src_path, ref_path) -> list[tuple[str, str]]:
    """The (source, reference) pairs of a test set: at most MAX_TEST_PAIRS lines and MAX_TEST_CHARS characters
    of both sides together, each line at most attnmt.data.corpus.MAX_LINE_BYTES; a larger one is a UserError."""
    from attnmt.data.corpus import iter_parallel, lines_over

    def too_large(n: int, what: str) -> UserError:
        return UserError(f"{src_path}:{n}: the test set passes {what}, the most evaluate holds in memory to score "
                         "it; evaluate a sample, or translate it with attnmt translate (which streams) and score "
                         "that with sacrebleu")

    if lines_over(src_path, MAX_TEST_PAIRS) and lines_over(ref_path, MAX_TEST_PAIRS):  # refused before reading
        raise too_large(MAX_TEST_PAIRS + 1, f"{MAX_TEST_PAIRS:,} lines")
    pairs, chars = [], 0
    for n, (src, ref) in enumerate(iter_parallel(src_path, ref_path), start=1):
        chars += len(src) + len(ref)
        if n > MAX_TEST_PAIRS or chars > MAX_TEST_CHARS:
            raise too_large(n, f"{MAX_TEST_PAIRS:,} lines" if n > MAX_TEST_PAIRS
                            else f"{MAX_TEST_CHARS:,} characters (source and reference)")
        pairs.append((src, ref))
    return pairs


def evaluate_translator(translator, src_path, ref_path, tokenize: str = "13a", lowercase: bool = False,
                        length_unit: str = "tokens", length_edges: Sequence[int] | None = None, bootstrap: int = 0,
                        output: str | Path | None = None, options=None, **given) -> EvaluationReport:
    """Translate a test set with a loaded model and score it against the references.

    BLEU by source length counts ``length_unit`` ("tokens" of the model's source tokenizer, or
    whitespace-separated "words", as the studies do) in buckets ``[edges[k], edges[k+1])`` (chosen
    from the data when ``length_edges`` is None), each with a percentile bootstrap interval from
    ``bootstrap`` resamples when it is above 0. The decoding options (``options`` and the keyword ones, such as
    ``beam``, ``n_best``, ``workers``, ``sampling``): as in :meth:`attnmt.decode.translator.Translator.translate`.
    ``output``: also write the hypotheses there (:func:`write_hypotheses`, ``n_best`` per sentence);
    the scores are those of the best one.
    """
    import time

    from attnmt.decode.sampling import Sampling

    options = translator.decode_options(options, **given)
    pairs = read_test_set(src_path, ref_path)
    if not pairs:
        raise UserError(f"{src_path} is empty; pass a test set with at least one sentence")
    if bootstrap < 0:
        raise UserError(f"--bootstrap {bootstrap}: give a number of resamples of 0 (no intervals) or more")
    if length_unit not in ("tokens", "words"):
        raise ValueError(f"length_unit must be 'tokens' or 'words', got {length_unit!r}")
    sources = [s for s, _ in pairs]
    references = [r for _, r in pairs]
    if length_unit == "words":  # known before the work, so checked before it
        lengths = [max(len(s.split()), 1) for s in sources]
        check_length_edges(length_edges, lengths, length_unit, src_path)
    started = time.perf_counter()
    translations = translator.translate(sources, options=options)
    seconds = time.perf_counter() - started
    hypotheses = [t.text for t in translations]
    if length_unit == "tokens":
        lengths = [max(len(t.src_tokens), 1) for t in translations]
        check_length_edges(length_edges, lengths, length_unit, src_path)
    if output is not None:  # once nothing can fail: a refused run leaves no file behind
        write_hypotheses(output, translations, options.n_best)
    return EvaluationReport(
        scores=corpus_scores(hypotheses, references, tokenize=tokenize, lowercase=lowercase),
        buckets=bleu_by_length(lengths, hypotheses, references, edges=length_edges, tokenize=tokenize,
                               lowercase=lowercase, bootstrap=bootstrap),
        n_sentences=len(pairs),
        beam=options.beam,
        seconds=seconds,
        **dict(zip(("ter", "ter_signature"), corpus_ter(hypotheses, references, lowercase=lowercase))),
        sampling=str(Sampling.of(options)) if options.sample else None,
        length_unit=length_unit,
        output=None if output is None else str(output),
        n_best=options.n_best,
    )
