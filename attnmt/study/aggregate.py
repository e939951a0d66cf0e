"""Aggregation over seeds: seed means, spreads and bootstrap intervals of the mean."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from attnmt.study.data import StudyData
from attnmt.study.measure import bucket_edges_for, gold_sets
from attnmt.study.spec import Study


def seed_mean_interval(hypotheses: list[list[str]], references: list[str], tokenize: str, n_resamples: int,
                       confidence: float, seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of the mean BLEU over seeds: the same resampled sentences for every seed.

    ``hypotheses`` holds one list per seed, aligned with ``references``. Resampling sentences
    jointly keeps the seeds paired, so the interval reflects the test set's sampling error of the
    seed-averaged score (not the seeds' spread, which the report shows separately).
    """
    from attnmt.decode.evaluate import _bleu_from_statistics, _bleu_metric, _sentence_statistics

    if n_resamples <= 0 or not references:
        return None
    metric = _bleu_metric(tokenize, False)
    sentence_metric = _bleu_metric(tokenize, False, effective_order=True)
    stats = [_sentence_statistics(sentence_metric, hyps, references) for hyps in hypotheses]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(references), size=(n_resamples, len(references)))
    means = [np.mean([_bleu_from_statistics(metric, s[p].sum(axis=0)) for s in stats]) for p in picks]
    tail = 100 * (1 - confidence) / 2
    low, high = np.clip(np.percentile(means, [tail, 100 - tail]), 0.0, 100.0)
    return float(low), float(high)


def _spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "min": float(np.min(values)), "max": float(np.max(values)), "values": [float(v) for v in values]}


def aggregate(study: Study, data: StudyData, evals: list[dict]) -> dict:
    """Per model: mean, spread and interval over seeds of every score."""
    ev = study.evaluation
    lengths = data.test_lengths
    edges = bucket_edges_for(study, lengths)
    models: dict[str, dict] = {}
    for entry in study.models:
        runs = sorted((e for e in evals if e["model"] == entry.name), key=lambda e: e["seed"])
        if not runs:
            continue
        bucket_rows = _bucket_rows(study, edges, lengths, data.test_tgt, runs)
        overall = seed_mean_interval([r["hypotheses"] for r in runs], data.test_tgt, ev.bleu_tokenize, ev.bootstrap,
                                     ev.confidence, seed=len(edges))
        positions: dict[int, list[float]] = {}
        for r in runs:
            for p in r["accuracy_by_position"]:
                positions.setdefault(p["lo"], []).append(p["accuracy"])
        alignment: dict[str, dict] = {}
        for r in runs:
            for gold_name, methods in r["alignment"].items():
                for method, scores in methods.items():
                    alignment.setdefault(gold_name, {}).setdefault(method, []).append(scores)
        by_category: dict[str, list[float]] = {}
        for r in runs:
            for label, v in r.get("alignment_by_category", {}).items():
                by_category.setdefault(label, []).append(v["accuracy"])
        models[entry.name] = {
            "model_type": runs[0]["model_type"], "reverse_source": runs[0]["reverse_source"],
            "seeds": [r["seed"] for r in runs],
            "bleu": {**_spread([r["bleu"] for r in runs]), "ci_low": overall[0] if overall else None,
                     "ci_high": overall[1] if overall else None,
                     "seeds_interval": seeds_interval([r["bleu"] for r in runs], ev.confidence)},
            "chrf": _spread([r["chrf"] for r in runs]),
            "perplexity": {**_spread([r["perplexity"] for r in runs]),
                           "seeds_interval": seeds_interval([r["perplexity"] for r in runs], ev.confidence)},
            "buckets": bucket_rows,
            "accuracy_by_position": [{"lo": lo, "hi": lo + ev.position_width, **_spread(v)}
                                     for lo, v in sorted(positions.items())],
            "alignment": {g: {m: {key: _spread([s[key] for s in scores]) for key in ("aer", "precision", "recall")}
                              for m, scores in methods.items()} for g, methods in alignment.items()},
            "alignment_by_category": {label: {**_spread(v), "n": runs[0]["alignment_by_category"][label]["n"]}
                                      for label, v in by_category.items()},
            "training": {key: _spread([r["training"][key] for r in runs]) for key in ("steps", "train_seconds")
                         if all(r["training"].get(key) is not None for r in runs)},
            "precision": sorted({str(r["training"].get("precision")) for r in runs}),
            "extra_tests": {name: _aggregate_extra(study, sources, references, [r["extra_tests"][name] for r in runs])
                            for name, (sources, references) in data.extra_tests.items()
                            if all(name in r.get("extra_tests", {}) for r in runs)},
        }
    return models


def seeds_interval(values: list[float], confidence: float) -> list[float] | None:
    """Student-t interval of the mean over seeds (the seeds' spread, not the test set's sampling
    error); None with one seed."""
    if len(values) < 2:
        return None
    from scipy import stats  # about a second to import: only when there is an interval to compute

    mean, sem = float(np.mean(values)), float(np.std(values, ddof=1)) / np.sqrt(len(values))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sem
    return [mean - half, mean + half]


def _bucket_rows(study: Study, edges: list[int], lengths: list[int], references: list[str],
                 runs: list[dict]) -> list[dict]:
    """Per non-empty bucket: the seeds' BLEU, their spread and the bootstrap interval of their mean."""
    ev = study.evaluation
    rows = []
    for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
        members = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if not members:
            continue
        per_seed = [next(b for b in r["buckets"] if b["lo"] == lo) for r in runs]
        interval = seed_mean_interval([[r["hypotheses"][i] for i in members] for r in runs],
                                      [references[i] for i in members], ev.bleu_tokenize, ev.bootstrap,
                                      ev.confidence, seed=k)
        rows.append({"lo": lo, "hi": hi, "n": len(members), **_spread([b["bleu"] for b in per_seed]),
                     "ci_low": interval[0] if interval else None,
                     "ci_high": interval[1] if interval else None,
                     "seed_intervals": [[b["ci_low"], b["ci_high"]] for b in per_seed],
                     "repeating": _spread([float(np.mean([repeats(r["hypotheses"][i]) for i in members]))
                                           for r in runs]),
                     "length_ratio": _spread([length_ratio([r["hypotheses"][i] for i in members],
                                                           [references[i] for i in members], ev.bleu_tokenize)
                                              for r in runs])})
    return rows


def length_ratio(hypotheses: list[str], references: list[str], tokenize: str) -> float:
    """Output length over reference length in sacreBLEU's tokens (its ``sys_len / ref_len``): below 1 the
    translations are short and BLEU's brevity penalty applies, as when a search drops part of the source."""
    from attnmt.decode.evaluate import _bleu_metric

    score = _bleu_metric(tokenize, False).corpus_score(hypotheses, [references])
    return score.sys_len / score.ref_len if score.ref_len else 0.0


def repeats(text: str, n: int = 4, times: int = 3) -> bool:
    """Whether some word ``n``-gram occurs at least ``times`` times in ``text``: the loop a decoder
    falls into when it has lost its place in the source."""
    words = text.split()
    counts = Counter(tuple(words[i: i + n]) for i in range(len(words) - n + 1))
    return bool(counts) and max(counts.values()) >= times


def _aggregate_extra(study: Study, sources: list[str], references: list[str], runs: list[dict]) -> dict:
    """A further test set over seeds: corpus BLEU with its interval, perplexity, BLEU by length."""
    ev = study.evaluation
    lengths = [len(s.split()) for s in sources]
    edges = bucket_edges_for(study, lengths, clip=True)
    overall = seed_mean_interval([r["hypotheses"] for r in runs], references, ev.bleu_tokenize, ev.bootstrap,
                                 ev.confidence, seed=len(edges))
    return {"n": len(sources),
            "bleu": {**_spread([r["bleu"] for r in runs]), "ci_low": overall[0] if overall else None,
                     "ci_high": overall[1] if overall else None},
            "chrf": _spread([r["chrf"] for r in runs]),
            "perplexity": {**_spread([r["perplexity"] for r in runs]),
                           "seeds_interval": seeds_interval([r["perplexity"] for r in runs], ev.confidence)},
            "buckets": _bucket_rows(study, edges, lengths, references, runs)}


def diagonal_baselines(study: Study, data: StudyData) -> dict[str, dict]:
    """AER of the diagonal (no model) on every gold set of the study."""
    from attnmt.align import diagonal_links, score_alignments

    return {name: dataclasses.asdict(score_alignments(
        [diagonal_links(len(s.split()), len(t.split())) for s, t in zip(sources, targets)], gold))
        for name, (sources, targets, gold) in gold_sets(study, data).items()}


# ================================================================ figures
