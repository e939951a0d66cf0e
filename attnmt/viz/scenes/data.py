"""What the scenes animate: measured BLEU-by-length curves and real attention matrices.

Nothing here is drawn by hand. A curve comes from a results JSON (``attnmt demo``'s
``results.json``, ``benchmarks/results/demo.json``, or a study with the same ``"buckets"``
structure), from evaluating trained models with :func:`attnmt.decode.evaluate.bleu_by_length`, or from
the copy of the built-in demo's measurements shipped in the package. An attention matrix comes
from a trained RNNsearch model translating a sentence, or from the copy of one such translation
shipped in the package (scripts/refresh_bundles.py makes both copies).

This module does not import manim, so the data can be prepared and checked without it.

Accepted curve JSON (every field other than ``"buckets"`` is ignored)::

    {"buckets": {"seq2seq":   [{"lo": 4, "hi": 14, "n": 100, "bleu": 61.2}, ...],
                 "rnnsearch": [{"lengths": "4-13", "n": 100, "bleu": 80.5}, ...]}}

A bucket holds the sentences whose source length is in ``[lo, hi)``; ``"lengths": "4-13"`` is the
same bucket written as an inclusive range (the form of ``benchmarks/results/demo.json``). ``n`` is
optional. An optional top-level ``"source"`` string names where the numbers come from. Also read:
the JSON of ``attnmt evaluate --json``, whose ``"buckets"`` is one model's list (a curve named
after the file), and ``attnmt study``'s results.json, ``{"models": {NAME: {"model_type": ...,
"buckets": [{"lo", "hi", "n", "mean"}]}}}``, whose buckets hold the BLEU averaged over seeds.

Maintenance of the two files shipped in the package::

    # the demo curve: copy the buckets of the measured demo (rerun after `python -m benchmarks.demo`)
    python scripts/refresh_bundles.py curve benchmarks/results/demo.json
    # the attention example: train the model (a few minutes), then store one test sentence's attention
    python scripts/refresh_bundles.py attention-model /tmp/attn     # prints test sentences
    python scripts/refresh_bundles.py attention --model /tmp/attn/rnnsearch --sentence "..." --note "..."
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.decode.evaluate import DEFAULT_BUCKET_WIDTH, LengthBucket
from attnmt.errors import UserError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # attnmt/viz
BUNDLED_CURVE = PACKAGE_DIR / "demo_curve.json"
BUNDLED_ATTENTION = PACKAGE_DIR / "demo_attention.json"

# The fixed-vector model is the one whose curve the Bottleneck scene traces.
FIXED_VECTOR_MODEL = "seq2seq"
MAX_WORDS = 60  # more source words than this do not fit on the frame as readable text
# attnmt.study.demo.DemoSettings().seed (a test keeps them equal): the demo's language. Not imported
# from there because attnmt.study.demo imports torch, which the default scenes do not otherwise need.
DEMO_SEED = 1
MAX_GRID = 32  # the largest K or Q of the SoftAlignment grid whose labels stay readable at 1080p


@dataclass(frozen=True)
class LengthCurves:
    """Measured BLEU per source-length bucket, one curve per model.

    ``main`` names the fixed-vector model (the curve the Bottleneck scene traces and whose drop
    saturates c); the others are drawn beside it for comparison. ``source`` says where the numbers
    come from; the scene prints it as a caption.
    """

    curves: dict[str, list[LengthBucket]]
    main: str
    source: str

    def points(self, name: str) -> list[tuple[float, float]]:
        """(bucket mid-point, BLEU) of one model, shortest bucket first: the curve's vertices."""
        return [(b.mid, b.bleu) for b in sorted(self.curves[name], key=lambda b: b.lo)]

    @property
    def max_length(self) -> int:
        """The longest source length any bucket covers."""
        return max(b.hi - 1 for buckets in self.curves.values() for b in buckets)


@dataclass(frozen=True)
class BottleneckData:
    """The Bottleneck scene's input: the curves and the source words that flow into c."""

    curves: LengthCurves
    words: list[str]
    words_source: str  # where the example sentence comes from, for the caption


@dataclass(frozen=True)
class AttentionGrid:
    """A real attention matrix laid out as the SoftAlignment scene's K x Q grid.

    ``weights[j, i]`` is alpha_ij, the weight target step i gives source word j: row j is a source
    word, column i a target word (the last column is ``</s>``), and every column sums to 1.
    """

    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray  # [K, Q]
    source: str

    def __post_init__(self) -> None:
        k, q = self.weights.shape
        if (k, q) != (len(self.src_tokens), len(self.tgt_tokens)):
            raise ValueError(f"attention of shape {self.weights.shape} for {len(self.src_tokens)} source and "
                             f"{len(self.tgt_tokens)} target tokens")


# ---------------------------------------------------------------- curves


def _bucket(entry: Any, where: str) -> LengthBucket:
    """One bucket of a curve JSON, in any accepted form; UserError naming ``where`` otherwise."""
    if isinstance(entry, dict) and "bleu" not in entry and "mean" in entry:
        entry = {**entry, "bleu": entry["mean"]}  # a study's bucket: BLEU averaged over seeds
    if not isinstance(entry, dict) or "bleu" not in entry:
        raise UserError(f"{where}: a bucket must be an object with \"bleu\" and \"lo\"/\"hi\" or \"lengths\"")
    try:
        if "lo" in entry and "hi" in entry:
            lo, hi = int(entry["lo"]), int(entry["hi"])
        else:
            match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", str(entry.get("lengths", "")))
            if not match:
                raise ValueError("no \"lo\"/\"hi\" and no \"lengths\": \"A-B\"")
            lo, hi = int(match[1]), int(match[2]) + 1  # "4-13" is inclusive: [4, 14)
        bleu, n = float(entry["bleu"]), int(entry.get("n", 0))
    except (TypeError, ValueError) as e:
        raise UserError(f"{where}: bad bucket {entry!r} ({e})") from None
    if hi <= lo or not math.isfinite(bleu):
        raise UserError(f"{where}: bad bucket {entry!r} (needs lo < hi and a finite BLEU)")
    return LengthBucket(lo, hi, n, bleu)


def curves_from_dict(payload: Any, where: str, source: str | None = None) -> LengthCurves:
    """Curves from a parsed results JSON (see the module docstring for the format)."""
    buckets = payload.get("buckets") if isinstance(payload, dict) else None
    types: dict[str, Any] = {}
    if isinstance(buckets, list):  # `attnmt evaluate --json`: one model's buckets, named after the file
        buckets = {Path(where).stem: buckets}
    elif buckets is None and isinstance(payload, dict) and isinstance(payload.get("models"), dict):
        # `attnmt study`'s results.json: {"models": {name: {"model_type", "buckets": [...]}}}
        models = {name: m for name, m in payload["models"].items() if isinstance(m, dict) and "buckets" in m}
        buckets = {name: m["buckets"] for name, m in models.items()}
        types = {name: m.get("model_type") for name, m in models.items()}
    if not isinstance(buckets, dict) or not buckets:
        raise UserError(f"{where}: no \"buckets\" object; expected {{\"buckets\": {{MODEL: [{{\"lo\", \"hi\", "
                        "\"n\", \"bleu\"}}, ...]}}}} as written by `attnmt demo` (results.json)")
    curves: dict[str, list[LengthBucket]] = {}
    for name, entries in buckets.items():
        if not isinstance(entries, list) or not entries:
            raise UserError(f"{where}: buckets of {name!r} must be a non-empty list")
        curves[str(name)] = [_bucket(e, f"{where}: {name}") for e in entries]
    fixed = [name for name in curves if name == FIXED_VECTOR_MODEL or types.get(name) == FIXED_VECTOR_MODEL]
    main = fixed[0] if fixed else next(iter(curves))
    return LengthCurves(curves, main, source or str(payload.get("source") or f"measured: {where}"))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; pass a results JSON written by `attnmt demo` or `attnmt study`") \
            from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path} is not valid JSON ({e})") from None


def curves_from_json(path: str | Path) -> LengthCurves:
    """Curves from a results JSON file: `attnmt demo`'s results.json, a study, or a benchmark result."""
    path = Path(path)
    return curves_from_dict(_read_json(path), str(path))


def demo_curves() -> LengthCurves:
    """The built-in demo's measured curves: the copy shipped in the package (scripts/refresh_bundles.py)."""
    if BUNDLED_CURVE.is_file():
        return curves_from_json(BUNDLED_CURVE)
    raise UserError(f"the built-in demo curve is missing ({BUNDLED_CURVE.name} is not in the package); pass "
                    "--study RESULTS.json (from `attnmt demo`) or --model DIR --test SRC REF")


def curves_from_models(
    model_dirs: Sequence[str | Path],
    src_path: str | Path,
    ref_path: str | Path,
    checkpoint: str | None = None,
    beam: int | None = None,
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
    tokenize: str = "13a",
) -> tuple[LengthCurves, list[str]]:
    """Translate a test set with each model and measure BLEU per source-length bucket.

    Returns the curves (the first seq2seq model is the main one, else the first model) and the
    longest test sentence as the first model's source tokens, the words the scene shows.
    """
    from attnmt.data.corpus import read_parallel
    from attnmt.decode.evaluate import bleu_by_length
    from attnmt.decode.translator import load

    if bucket_width < 1:
        raise UserError(f"--bucket-width must be at least 1, got {bucket_width}")
    pairs = read_parallel(src_path, ref_path)
    if not pairs:
        raise UserError(f"{src_path} is empty; pass a test set with at least one sentence")
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    curves: dict[str, list[LengthBucket]] = {}
    main: str | None = None
    words: list[str] = []
    for model_dir in model_dirs:
        translator = load(model_dir, checkpoint=checkpoint)
        translations = translator.translate(sources, beam=beam)
        lengths = [max(len(t.src_tokens), 1) for t in translations]
        name = _unique(Path(model_dir).name or str(model_dir), curves)
        curves[name] = bleu_by_length(lengths, [t.text for t in translations], references, width=bucket_width,
                                      tokenize=tokenize)
        if main is None and translator.model_type == FIXED_VECTOR_MODEL:
            main = name
        if not words:
            words = max((t.src_tokens for t in translations), key=len)
    source = (f"measured: {', '.join(curves)} on {Path(src_path).name} ({len(pairs)} sentences, "
              f"{bucket_width}-token buckets)")
    return LengthCurves(curves, main or next(iter(curves)), source), words


def _unique(name: str, taken: dict) -> str:
    """``name``, or ``name#2``, ``name#3``... if two model folders share a name."""
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}#{k}"
    return candidate


def demo_words(length: int) -> list[str]:
    """A sentence of ``length`` words of the demo's synthetic language (deterministic)."""
    from attnmt.data.synthetic import MIN_SENTENCE, SyntheticLanguage

    return SyntheticLanguage(seed=DEMO_SEED).sentence(random.Random(f"attnmt.animate:{DEMO_SEED}"),
                                                      max(length, MIN_SENTENCE)).src


def bottleneck_data(
    study: str | Path | None = None,
    model_dirs: Sequence[str | Path] = (),
    test: tuple[str | Path, str | Path] | None = None,
    sentence: str | None = None,
    checkpoint: str | None = None,
    beam: int | None = None,
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
) -> BottleneckData:
    """The curves (from ``study``, from evaluating ``model_dirs`` on ``test``, or the built-in demo's)
    and the words to show (``sentence``, else the longest test sentence, else a demo sentence)."""
    if study is not None and (model_dirs or test):
        raise UserError("bottleneck: give either --study or --model with --test, not both")
    if bool(model_dirs) != bool(test):
        raise UserError("bottleneck: --model and --test go together (the curve is measured on the test set)")
    words: list[str] = []
    words_source = "the longest test sentence"
    if test:
        curves, words = curves_from_models(model_dirs, test[0], test[1], checkpoint, beam, bucket_width)
    elif study is not None:
        curves = curves_from_json(study)
    else:
        curves = demo_curves()
    if sentence is not None:
        words, words_source = sentence.split(), "the given sentence"
        if not words:
            raise UserError("bottleneck: --sentence is empty; pass the sentence in quotes")
    if not words:
        words = demo_words(min(curves.max_length, MAX_WORDS))
        words_source = "a sentence of the demo's synthetic language"
    if len(words) > MAX_WORDS:
        words, words_source = words[:MAX_WORDS], f"{words_source}, first {MAX_WORDS} words"
    return BottleneckData(curves, words, words_source)


# ---------------------------------------------------------------- attention


def attention_from_model(model_dir: str | Path, sentence: str, checkpoint: str | None = None,
                         beam: int | None = None) -> AttentionGrid:
    """Translate ``sentence`` with an RNNsearch model and return its attention as a K x Q grid."""
    from attnmt.decode.translator import load

    if not sentence.strip():
        raise UserError("soft-alignment: --sentence is empty; pass the sentence to translate in quotes")
    translator = load(model_dir, checkpoint=checkpoint)
    model = translator.config.model
    # The scene writes out the additive score of Bahdanau et al.; another score would be mislabelled.
    if model.type != "rnnsearch" or (model.decoder, model.score) != ("bahdanau", "additive"):
        kind = (model.type if model.type != "rnnsearch"
                else f"rnnsearch with the {model.decoder} decoder and {model.score} score")
        raise UserError(f"soft-alignment: {model_dir} is a {kind} model; the scene shows additive (Bahdanau) "
                        "attention, so pass an rnnsearch model with model.decoder: bahdanau and model.score: additive")
    tr = translator.translate([sentence], beam=beam)[0]
    if tr.attention is None or not tr.src_tokens:
        raise UserError(f"soft-alignment: {model_dir} returned no attention for this sentence")
    tgt_tokens = [*tr.tgt_tokens, "</s>"]
    longest = max(len(tr.src_tokens), len(tgt_tokens))
    if longest > MAX_GRID:
        raise UserError(f"soft-alignment: the grid would be {len(tr.src_tokens)} x {len(tgt_tokens)} tokens; "
                        f"at most {MAX_GRID} per side stay readable, so pass a shorter sentence")
    return AttentionGrid(tr.src_tokens, tgt_tokens, np.asarray(tr.attention, dtype=np.float64).T,
                         f"model {Path(model_dir).name}: {sentence.strip()!r} -> {tr.text!r}")


def attention_to_dict(grid: AttentionGrid, **provenance: Any) -> dict:
    return {"src_tokens": grid.src_tokens, "tgt_tokens": grid.tgt_tokens,
            "attention_rows_target": np.round(grid.weights.T, 6).tolist(), "source": grid.source, **provenance}


def attention_from_dict(payload: Any, where: str) -> AttentionGrid:
    try:
        rows = np.asarray(payload["attention_rows_target"], dtype=np.float64)  # [Q, K] like Translation.attention
        return AttentionGrid(list(payload["src_tokens"]), list(payload["tgt_tokens"]), rows.T, str(payload["source"]))
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{where}: not an attention file written by scripts/refresh_bundles.py ({e})") from None


def bundled_attention() -> AttentionGrid:
    """The attention of a trained demo RNNsearch model on one test sentence, shipped in the package."""
    if not BUNDLED_ATTENTION.is_file():
        raise UserError(f"{BUNDLED_ATTENTION} is missing from the package; pass --model DIR --sentence \"...\"")
    return attention_from_dict(_read_json(BUNDLED_ATTENTION), str(BUNDLED_ATTENTION))


def alignment_data(model_dir: str | Path | None = None, sentence: str | None = None, checkpoint: str | None = None,
                   beam: int | None = None) -> AttentionGrid:
    """The SoftAlignment grid: ``model_dir``'s attention on ``sentence``, else the bundled one."""
    if model_dir is None:
        if sentence is not None:
            raise UserError("soft-alignment: --sentence needs --model (the attention of which model?)")
        return bundled_attention()
    if sentence is None:
        raise UserError("soft-alignment: --model needs --sentence \"...\" to translate")
    return attention_from_model(model_dir, sentence, checkpoint, beam)
