"""Aggregation over seeds: seed means, spreads and bootstrap intervals of the mean."""

from __future__ import annotations

import dataclasses

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
    from attnmt.evaluate import _bleu_from_statistics, _bleu_metric, _sentence_statistics

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
        bucket_rows = []
        for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
            members = [i for i, n in enumerate(lengths) if lo <= n < hi]
            if not members:
                continue
            per_seed = [next(b for b in r["buckets"] if b["lo"] == lo) for r in runs]
            interval = seed_mean_interval([[r["hypotheses"][i] for i in members] for r in runs],
                                          [data.test_tgt[i] for i in members], ev.bleu_tokenize, ev.bootstrap,
                                          ev.confidence, seed=k)
            bucket_rows.append({"lo": lo, "hi": hi, "n": len(members), **_spread([b["bleu"] for b in per_seed]),
                                "ci_low": interval[0] if interval else None,
                                "ci_high": interval[1] if interval else None,
                                "seed_intervals": [[b["ci_low"], b["ci_high"]] for b in per_seed]})
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
                     "ci_high": overall[1] if overall else None},
            "chrf": _spread([r["chrf"] for r in runs]),
            "perplexity": _spread([r["perplexity"] for r in runs]),
            "buckets": bucket_rows,
            "accuracy_by_position": [{"lo": lo, "hi": lo + ev.position_width, **_spread(v)}
                                     for lo, v in sorted(positions.items())],
            "alignment": {g: {m: {key: _spread([s[key] for s in scores]) for key in ("aer", "precision", "recall")}
                              for m, scores in methods.items()} for g, methods in alignment.items()},
            "alignment_by_category": {label: {**_spread(v), "n": runs[0]["alignment_by_category"][label]["n"]}
                                      for label, v in by_category.items()},
            "training": {key: _spread([r["training"][key] for r in runs])
                         for key in ("steps", "train_seconds") if all(r["training"].get(key) is not None for r in runs)},
        }
    return models


def diagonal_baselines(study: Study, data: StudyData) -> dict[str, dict]:
    """AER of the diagonal (no model) on every gold set of the study."""
    from attnmt.align import diagonal_links, score_alignments

    return {name: dataclasses.asdict(score_alignments(
        [diagonal_links(len(s.split()), len(t.split())) for s, t in zip(sources, targets)], gold))
        for name, (sources, targets, gold) in gold_sets(study, data).items()}


# ================================================================ figures
