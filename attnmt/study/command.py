"""`attnmt study`: plan the runs, train and measure them in parallel, aggregate and report."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError
from attnmt.models.registry import model_class
from attnmt.runtime.process import worker_started
from attnmt.runtime.safe_write import make_folder, write_text
from attnmt.study.aggregate import aggregate, diagonal_baselines
from attnmt.study.data import StudyData, prepare_data
from attnmt.study.figures import draw_heatmaps, plot_accuracy_by_position, plot_bleu_by_length_seeds
from attnmt.study.measure import bucket_edges_for, gold_sets, run_job
from attnmt.study.report import findings, render_html
from attnmt.study.runs import Run, plan_runs, training_status
from attnmt.study.spec import Study, load_study


@dataclass
class StudyResult:
    out_dir: Path
    report: Path
    results: Path
    summary: dict


def run_cost_rank(run: Run) -> int:
    """0 for runs that train an attention model, 1 for other training, 2 for nothing to train."""
    if run.config is None or training_status(run) == "finished":
        return 2
    return 0 if model_class(run.config.model.type).has_attention else 1


def _execute(runs: list[Run], data: StudyData, study: Study, out: Path, retrain: bool, jobs: int,
             say) -> list[dict]:
    """Train and evaluate every run, ``jobs`` at a time (separate processes of one thread each)."""
    outcomes: list[dict | None] = [None] * len(runs)

    def report(k: int, outcome: dict) -> None:
        t, e = outcome["training"], outcome["evaluation"]
        done = t["action"] + (f" in {t['seconds']:.0f} s ({t['steps']} steps)" if "seconds" in t else "")
        say(f"[{sum(o is not None for o in outcomes)}/{len(runs)}] {runs[k].label}: {done}; "
            f"BLEU {e['bleu']:.1f}, perplexity {e['perplexity']:.2f}")

    if jobs <= 1:
        for k, run in enumerate(runs):
            say(f"{run.label}: {training_status(run)} ...")
            outcomes[k] = run_job(run, data, study, out, retrain, None)
            report(k, outcomes[k])  # type: ignore[arg-type]
        return outcomes  # type: ignore[return-value]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # One thread per process: small recurrent models gain more from parallel runs than from threads.
    for run in runs:
        if run.config is not None and run.config.train.threads is None:
            run.config.train.threads = 1
    # Longest first, so that the last runs to finish are short ones: attention models cost the most.
    order = sorted(range(len(runs)), key=lambda k: run_cost_rank(runs[k]))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=worker_started) as pool:
        futures = {pool.submit(run_job, runs[k], data, study, out, retrain, 1): k for k in order}
        for future in as_completed(futures):
            k = futures[future]
            outcomes[k] = future.result()
            report(k, outcomes[k])  # type: ignore[arg-type]
    return outcomes  # type: ignore[return-value]


def _result(study, path, command, seconds: float, execute_seconds: float, jobs: int, cpu_started: float,
            data: StudyData, models: dict, runs: list[Run], outcomes: list[dict], heatmaps: list[dict]) -> dict:
    """Every number of the study, for results.json and the report."""
    # This process, plus the worker processes when there were any.
    workers_cpu = sum(o["training"]["cpu_seconds"] + o["evaluation_cpu_seconds"] for o in outcomes) if jobs > 1 else 0
    return {
        "study": study.name, "config": study.path, "command": command or f"attnmt study {path}",
        "models_from": study.models_from,
        "seconds": seconds,
        "timing": {"train_and_evaluate_seconds": execute_seconds, "jobs": jobs,
                   "cpu_seconds_this_time": time.process_time() - cpu_started + workers_cpu},
        "data": {**data.summary, "fingerprint": data.fingerprint, "directory": str(data.directory)},
        "evaluation": dataclasses.asdict(study.evaluation),
        "models": models, "diagonal": diagonal_baselines(study, data),
        "runs": [{"label": r.label, "model": r.model, "seed": r.seed, "model_dir": str(r.model_dir),
                  "action": o["training"]["action"], **o["evaluation"]["training"],
                  "train_cpu_seconds_this_time": o["training"]["cpu_seconds"],
                  "evaluate_cpu_seconds_this_time": o["evaluation_cpu_seconds"],
                  "bleu": o["evaluation"]["bleu"], "perplexity": o["evaluation"]["perplexity"],
                  "decode_seconds": o["evaluation"]["decode_seconds"]} for r, o in zip(runs, outcomes)],
        "heatmaps": heatmaps,
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": sys.version.split()[0]},
    }


@dataclass
class Executed:
    """A study's runs, trained and measured (what run_study reports, and what the demo shows)."""

    data: StudyData
    runs: list[Run]
    outcomes: list[dict]  # per run: {"training", "evaluation", "evaluation_cpu_seconds"}
    data_seconds: float
    execute_seconds: float


def training_study(study: Study, out: Path) -> tuple[Study, Path]:
    """The study whose models ``study`` evaluates, and its output folder: itself, or its ``models_from``
    study in ``runs/study-<name>`` beside ``out`` (where that study trains and keeps them)."""
    if not study.models_from:
        return study, out
    owner = load_study(study.models_from)
    return owner, out.parent / f"study-{owner.name}"


def _test_additions(study: Study) -> tuple[int, int]:
    return study.evaluation.test_short, study.evaluation.test_short_max_words


def execute_study(study: Study, out: Path, retrain: bool = False, jobs: int = 1, say=None) -> Executed:
    """Write the study's data into ``out``, then train (what is missing) and measure every run."""
    say = say or (lambda *a: None)
    started = time.perf_counter()
    make_folder(out, "study folder")
    trainer, train_out = training_study(study, out)
    data = prepare_data(trainer, train_out)
    training_fingerprint = data.training_fingerprint
    if trainer is not study and _test_additions(study) != _test_additions(trainer):
        # Test pairs of its own (evaluation.test_short), in its own folder; the training data is the owner's.
        data = prepare_data(study, out)
    say(f"study {study.name}: data in {data.directory} ({data.summary['train']['pairs']} training pairs, test "
        f"{data.summary['test']['min_words']}-{data.summary['test']['max_words']} words); output {out}")
    bucket_edges_for(study, data.test_lengths)  # fail now, not after training, if the buckets do not fit
    runs = plan_runs(trainer, train_out, training_fingerprint)
    gold_sets(study, data)  # likewise for unreadable gold files
    data_seconds = time.perf_counter() - started
    outcomes = _execute(runs, data, study, out, retrain, jobs, say)
    return Executed(data, runs, outcomes, data_seconds, time.perf_counter() - started - data_seconds)


def run_study(path: str | Path, out: str | Path | None = None, retrain: bool = False, jobs: int | None = None,
              quiet: bool = False, command: str | None = None,
              overrides: list[str] | tuple[str, ...] = ()) -> StudyResult:
    """Run the study of ``path``: train what is missing, evaluate, write report.html and results.json.

    ``jobs`` (default: the study's ``jobs``) runs are trained and evaluated at the same time; ``overrides``
    (``section.key=value``) change the study file's values, e.g. where its data is.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    study = load_study(path, overrides)
    if command is None and overrides:
        command = f"attnmt study {path}" + "".join(f" --set {item}" for item in overrides)
    jobs = study.jobs if jobs is None else jobs
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: must be at least 1")
    # Absolute, so that the model configs name their data wherever they are read from.
    out = (Path(out) if out is not None else Path("runs") / f"study-{study.name}").resolve()
    done = execute_study(study, out, retrain, jobs, say)
    data, runs, outcomes = done.data, done.runs, done.outcomes
    models = aggregate(study, data, [o["evaluation"] for o in outcomes])
    figure_dir = out / "figures"
    figures = {
        "bleu_by_length": plot_bleu_by_length_seeds(models, figure_dir / "bleu_by_length.png",
                                                    f"{study.name}: BLEU by source length"),
        "accuracy_by_position": plot_accuracy_by_position(models, figure_dir / "accuracy_by_position.png",
                                                          f"{study.name}: next-token accuracy by target position"),
    }
    heatmaps = draw_heatmaps(study, data, runs, figure_dir)
    seconds = time.perf_counter() - started
    result = _result(study, path, command, seconds, done.execute_seconds, jobs, cpu_started, data, models, runs,
                     outcomes, heatmaps)
    result["findings"] = findings(models, result["diagonal"])
    results_path = out / "results.json"
    write_text(results_path, json.dumps(result, indent=1, ensure_ascii=False), overwrite=True)  # the study's own
    report_path = out / "report.html"
    write_text(report_path, render_html(study, result, figures, heatmaps, figure_dir), overwrite=True)
    say("\n".join(result["findings"]))
    say(f"report: {report_path}  numbers: {results_path}  ({seconds:.0f} s)")
    return StudyResult(out, report_path, results_path, result)
