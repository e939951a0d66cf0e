"""Measuring one run: BLEU by source length, perplexity, accuracy by position, alignment error rate."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from pathlib import Path

from attnmt.errors import UserError
from attnmt.folder.checkpoint import checkpoint_path
from attnmt.runtime.safe_write import write_text
from attnmt.study.data import StudyData
from attnmt.study.runs import Run, ensure_trained
from attnmt.study.spec import Study, resolve_path


def _train_log_summary(model_dir: Path) -> dict:
    """Steps, time and stop reason of a model folder's last training run."""
    from attnmt.train.events import training_summary

    summary = training_summary(model_dir)
    return {"parameters": summary.get("parameters"), "steps": summary.get("steps"),
            "train_seconds": summary.get("wall_s"), "stop_reason": summary.get("stop_reason"),
            "precision": summary.get("precision")}


def _eval_key(run: Run, data: StudyData, study: Study) -> str:
    """Changes whenever the evaluation of a run would change: checkpoint, test data, settings."""
    checkpoint = checkpoint_path(run.model_dir, study.evaluation.checkpoint)
    stat = checkpoint.stat()
    evaluation = dataclasses.asdict(study.evaluation)
    evaluation.update(evaluation.pop("models").get(run.model, {}))  # only this run's own decoding
    settings = {"evaluation": evaluation, "alignment": dataclasses.asdict(study.alignment),
                "checkpoint": [str(checkpoint), stat.st_size, stat.st_mtime_ns], "data": data.fingerprint,
                "edges": bucket_edges_for(study, data.test_lengths), "version": 2}  # default edges: length_edges
    if data.extra_tests:
        settings["extra_tests"] = sorted(data.extra_tests)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def translate_for_study(translator, study: Study, model: str, sources: list[str]) -> list[str]:
    """The study's translations of ``sources`` by one of its models: the beam and penalties it is evaluated
    with (the coverage penalty for models with attention)."""
    d = study.evaluation.decoding(model)
    coverage = d["coverage_penalty"] if translator.has_attention else None
    return [t.text for t in translator.translate(sources, beam=d["beam"], length_penalty=d["length_penalty"],
                                                 coverage_penalty=coverage)]


def teacher_forced_stats(translator, sources: list[str], targets: list[str], width: int) -> dict:
    """Test perplexity and next-token accuracy by target position, with teacher forcing."""
    import torch.nn.functional as F

    from attnmt.config.special import PAD_ID
    from attnmt.decode.forced import forced_batches

    src_ids = [translator.src.ids(s) or [PAD_ID] for s in sources]
    tgt_ids = [translator.tgt.ids(t) for t in targets]
    total_nll, tokens = 0.0, 0
    correct: dict[int, int] = {}
    seen: dict[int, int] = {}
    for forced in forced_batches(translator.model, src_ids, tgt_ids, translator.device):
        logits, batch = forced.logits, forced.batch
        nll = F.cross_entropy(logits.float().transpose(1, 2), batch.tgt_out, ignore_index=PAD_ID, reduction="none")
        real = batch.tgt_out != PAD_ID
        total_nll += float(nll[real].sum())
        tokens += int(real.sum())
        hit = (logits.argmax(-1) == batch.tgt_out) & real
        for position in range(real.size(1)):
            group = position // width
            seen[group] = seen.get(group, 0) + int(real[:, position].sum())
            correct[group] = correct.get(group, 0) + int(hit[:, position].sum())
    groups = sorted(g for g in seen if seen[g])
    return {
        "loss": total_nll / max(tokens, 1),
        "perplexity": math.exp(min(total_nll / max(tokens, 1), 50.0)),
        "accuracy_by_position": [{"lo": g * width, "hi": (g + 1) * width, "n": seen[g],
                                  "accuracy": correct[g] / seen[g]} for g in groups],
    }


def bucket_edges_for(study: Study, lengths: list[int], clip: bool = False) -> list[int]:
    """The source-length bucket edges of the study. ``clip`` (for extra test sets): the first and
    last edge widened to cover ``lengths`` instead of an error."""
    from attnmt.decode.evaluate import length_edges

    edges = list(study.evaluation.bucket_edges) or length_edges(lengths)
    if clip:
        return [min(edges[0], min(lengths)), *edges[1:-1], max(edges[-1], max(lengths) + 1)]
    if min(lengths) < edges[0] or max(lengths) >= edges[-1]:
        raise UserError(f"evaluation.bucket_edges {edges} do not cover the test source lengths "
                        f"{min(lengths)}-{max(lengths)}; widen the first or last edge")
    return edges


def gold_sets(study: Study, data: StudyData) -> dict[str, tuple[list[str], list[str], list]]:
    """The gold alignment sets of the study: name -> (sources, targets, gold)."""
    from attnmt.align import read_gold
    from attnmt.data.corpus import read_parallel

    sets = {}
    if study.alignment.synthetic_test is not False and data.test_gold is not None:
        sets["synthetic-test"] = (data.test_src, data.test_tgt, data.test_gold)
    base_dir = Path(study.path or ".").parent
    for g in study.alignment.sets:
        pairs = read_parallel(resolve_path(g.src, base_dir), resolve_path(g.tgt, base_dir))
        gold = read_gold(resolve_path(g.gold, base_dir))
        if len(gold) != len(pairs):
            raise UserError(f"alignment set {g.name}: {len(gold)} gold lines but {len(pairs)} sentence pairs")
        sets[g.name] = ([s for s, _ in pairs], [t for _, t in pairs], gold)
    return sets


def evaluate_run(run: Run, data: StudyData, study: Study, out: Path) -> dict:
    """Everything the report needs from one trained model; cached in ``out/evals``."""
    from attnmt.align import argmax_links, attention_matrices, score_alignments, threshold_links
    from attnmt.decode.evaluate import bleu_by_length, corpus_scores
    from attnmt.decode.translator import load

    cache = out / "evals" / f"{run.label}.json"
    key = _eval_key(run, data, study)
    if cache.is_file():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            return cached
    ev = study.evaluation
    translator = load(run.model_dir, checkpoint=ev.checkpoint)
    started = time.perf_counter()
    hypotheses = translate_for_study(translator, study, run.model, data.test_src)
    decode_seconds = time.perf_counter() - started
    lengths = data.test_lengths
    buckets = bleu_by_length(lengths, hypotheses, data.test_tgt, edges=bucket_edges_for(study, lengths),
                             tokenize=ev.bleu_tokenize, bootstrap=ev.bootstrap, confidence=ev.confidence, seed=run.seed)
    scores = corpus_scores(hypotheses, data.test_tgt, tokenize=ev.bleu_tokenize)
    result: dict = {
        "key": key, "model": run.model, "seed": run.seed, "model_dir": str(run.model_dir),
        "model_type": translator.model_type,
        "reverse_source": bool(getattr(translator.config.model, "reverse_source", False)),  # seq2seq's key
        "training": _train_log_summary(run.model_dir),
        "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
        "buckets": [dataclasses.asdict(b) for b in buckets], "decode_seconds": decode_seconds,
        **teacher_forced_stats(translator, data.test_src, data.test_tgt, ev.position_width),
        "alignment": {}, "hypotheses": hypotheses,
        "extra_tests": {name: measure_test_set(translator, study, run, sources, references)
                        for name, (sources, references) in data.extra_tests.items()},
    }
    wanted = study.alignment.models or [m.name for m in study.models]
    if run.model in wanted and translator.has_attention:
        for name, (sources, targets, gold) in gold_sets(study, data).items():
            matrices = attention_matrices(translator, sources, targets)
            argmax = [argmax_links(m.weights) for m in matrices]
            result["alignment"][name] = {
                "argmax": dataclasses.asdict(score_alignments(argmax, gold)),
                "threshold": dataclasses.asdict(score_alignments(
                    [threshold_links(m.weights, study.alignment.threshold) for m in matrices], gold)),
            }
            if name == "synthetic-test" and data.test_labels is not None:
                result["alignment_by_category"] = argmax_accuracy_by_label(argmax, gold, data.test_labels)
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_text(cache, json.dumps(result, ensure_ascii=False), overwrite=True)
    return result


def measure_test_set(translator, study: Study, run: Run, sources: list[str], references: list[str]) -> dict:
    """BLEU (corpus and by source length), chrF and perplexity of one run on a further test set."""
    from attnmt.decode.evaluate import bleu_by_length, corpus_scores

    ev, seed = study.evaluation, run.seed
    hypotheses = translate_for_study(translator, study, run.model, sources)
    lengths = [len(s.split()) for s in sources]
    buckets = bleu_by_length(lengths, hypotheses, references, edges=bucket_edges_for(study, lengths, clip=True),
                             tokenize=ev.bleu_tokenize, bootstrap=ev.bootstrap, confidence=ev.confidence, seed=seed)
    scores = corpus_scores(hypotheses, references, tokenize=ev.bleu_tokenize)
    stats = teacher_forced_stats(translator, sources, references, ev.position_width)
    return {"bleu": scores.bleu, "chrf": scores.chrf, "perplexity": stats["perplexity"],
            "buckets": [dataclasses.asdict(b) for b in buckets], "hypotheses": hypotheses}


def argmax_accuracy_by_label(predicted: list[set], gold: list, labels: list[list[str]]) -> dict[str, dict]:
    """For each target-word label, the share of target words whose argmax link is a sure gold link."""
    counts: dict[str, list[int]] = {}
    for links, g, sentence_labels in zip(predicted, gold, labels):
        for i, j in links:
            c = counts.setdefault(sentence_labels[j], [0, 0])
            c[0] += (i, j) in g.sure
            c[1] += 1
    return {label: {"accuracy": hit / n, "n": n} for label, (hit, n) in sorted(counts.items())}


def run_job(run: Run, data: StudyData, study: Study, out: Path, retrain: bool, threads: int | None) -> dict:
    """Train (if needed) and evaluate one run; the unit of work of the process pool."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    # CPU time, not only wall time: on a shared machine it is what says how long an idle one would take.
    cpu = time.process_time()
    training = ensure_trained(run, retrain=retrain)
    training["cpu_seconds"] = time.process_time() - cpu
    cpu = time.process_time()
    evaluation = evaluate_run(run, data, study, out)
    return {"training": training, "evaluation": evaluation, "evaluation_cpu_seconds": time.process_time() - cpu}


# ================================================================ aggregation over seeds
