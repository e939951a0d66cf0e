"""The alignment table of any gold set (``attnmt align-table``): baselines and model pairs, one JSON.

For a gold set (two tokenized, line-aligned sentence files and their links, 1-based ``i-j`` sure and
``ipj`` possible), :func:`alignment_table` scores the baselines asked for (diagonal, eflomal: each
direction and symmetrized, learning from a training corpus plus the gold sentences) and each model pair
(every extraction method x symmetrization, ``attnmt align``'s rows), with AER, precision and recall; and
for each model its training time and steps (from its log), BLEU on its held-out test set and, given a test
set's two files (``attnmt align-prepare --test`` writes them), BLEU on that set too (the reverse model
translating the target file into the source).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from attnmt.errors import UserError


def parse_model(spec: str) -> tuple[str, list[str], list[str]]:
    """``NAME=DIR[+DIR...][,REVERSE_DIR[+REVERSE_DIR...]]`` as (name, forward folders, reverse folders)."""
    name, found, dirs = spec.partition("=")
    if not found or not name or not dirs:
        raise UserError(f"--model {spec!r}: give NAME=DIR, or NAME=DIR,REVERSE_DIR for a pair (DIR+DIR for an "
                        "ensemble)")
    forward, _, reverse = dirs.partition(",")
    return name, forward.split("+"), reverse.split("+") if reverse else []


def _bleu(translator, src: Path, ref: Path, beam: int, lowercase: bool = False) -> dict:
    """BLEU (sacreBLEU 13a; ``lowercase``: of lowercased text) of ``translator`` on ``src`` against ``ref``."""
    from attnmt.decode.evaluate import evaluate_translator

    started = time.perf_counter()
    report = evaluate_translator(translator, src, ref, beam=beam, lowercase=lowercase)
    return {"bleu": round(report.scores.bleu, 2), "bleu_signature": report.scores.bleu_signature,
            "sentences": report.n_sentences, "decode_s": round(time.perf_counter() - started, 1)}


def model_facts(model_dirs: Sequence[Path], beam: int, checkpoint: str | None = None,
                test: tuple[Path, Path] | None = None) -> dict:
    """Training time and steps from each model folder's log; BLEU (beam ``beam``) of ``checkpoint`` on the
    first folder's held-out test set, translated by that model or, given several folders, by their ensemble;
    and on ``test`` (source file, reference file; lowercased BLEU) when given."""
    from attnmt.decode.ensemble import load_ensemble
    from attnmt.decode.translator import load
    from attnmt.train.events import training_summary

    runs = []
    for model_dir in model_dirs:
        summary = training_summary(model_dir)
        runs.append({"model_dir": str(model_dir), "checkpoint": checkpoint, "train_s": summary.get("wall_s"),
                     "steps": summary.get("steps"),
                     "best_valid_ppl": round(summary["best_valid_ppl"], 2) if "best_valid_ppl" in summary else None})
    translator = (load(model_dirs[0], checkpoint=checkpoint) if len(model_dirs) == 1
                  else load_ensemble(list(model_dirs), checkpoint=checkpoint))
    bleu = {}
    if (model_dirs[0] / "test.src").is_file():
        own = _bleu(translator, model_dirs[0] / "test.src", model_dirs[0] / "test.tgt", beam)
        bleu = {"test_bleu": own["bleu"], "bleu_signature": own["bleu_signature"],
                "test_sentences": own["sentences"], "decode_s": own["decode_s"]}
    if test:
        bleu["test_files"] = {"src": str(test[0]), "ref": str(test[1]),
                              **_bleu(translator, Path(test[0]), Path(test[1]), beam, lowercase=True)}
    return {**runs[0], **bleu} if len(runs) == 1 else {"ensemble": runs, **bleu}


def _check_test(test: tuple[str | Path, str | Path] | None, parsed: list) -> None:
    """A test set's files read before any work: two files of the same length, and models to translate them."""
    from attnmt.decode.evaluate import read_test_set

    if test is None:
        return
    if not parsed:
        raise UserError(f"align-table --test-src {test[0]}: the test set is translated by the models; give "
                        "--model NAME=DIR[,REVERSE_DIR] too, or leave --test-src and --test-tgt out")
    if not read_test_set(*test):
        raise UserError(f"align-table --test-src {test[0]} is empty; give a test set with at least one sentence")


def _rows(result, name: str | None) -> list[dict]:
    rows = []
    for row, scores in result.scores.items():
        label = f"{name}: {row}" if name and row.startswith(("attention", "reverse")) else row
        rows.append({"row": label, **{key: round(v, 4) if isinstance(v, float) else v
                                      for key, v in asdict(scores).items()}})
    return rows


def alignment_table(src: str | Path, tgt: str | Path, gold: str | Path, models: Sequence[str] = (),
                    baselines: Sequence[str] = (), eflomal_corpus: str | Path | None = None,
                    checkpoint: str | None = None, beam: int = 5,
                    test: tuple[str | Path, str | Path] | None = None) -> dict:
    """The table's rows and facts: ``baselines`` first (eflomal learns from ``eflomal_corpus``, a TSV, else the
    first model's training corpus, plus the gold sentences; without either, from the gold sentences alone), then
    each of ``models`` (:func:`parse_model`). ``test``: a test set's source and reference files, on which each
    model's BLEU is reported too (the reverse model's: reference into source)."""
    from attnmt.align.command import align_files

    if not models and not baselines:
        raise UserError("align-table: nothing to score; give --model NAME=DIR[,REVERSE_DIR] or --baseline, or both")
    parsed = [parse_model(spec) for spec in models]
    _check_test(test, parsed)
    swapped = (test[1], test[0]) if test else None
    rows: list[dict] = []
    facts: dict[str, dict] = {}
    if not parsed:
        result = align_files(None, src, tgt, gold_path=gold, baselines=tuple(baselines),
                             eflomal_corpus=eflomal_corpus)
        rows += _rows(result, None)
        facts["baselines"] = {"align_s": result.seconds}
    for k, (name, forward, reverse) in enumerate(parsed):
        # the baselines with the first model: eflomal's text defaults to that model's training corpus
        result = align_files(forward, src, tgt, gold_path=gold, baselines=tuple(baselines) if k == 0 else (),
                             reverse_model=reverse or None, checkpoint=checkpoint, eflomal_corpus=eflomal_corpus)
        facts[name] = {"forward": model_facts([Path(d) for d in forward], beam, checkpoint, test),
                       **({"reverse": model_facts([Path(d) for d in reverse], beam, checkpoint, swapped)}
                          if reverse else {}),
                       "align_s": result.seconds}
        rows += _rows(result, name)
    corpus = eflomal_corpus or ("the first model's training corpus" if parsed else None)
    text = f"{corpus} plus the gold sentences" if corpus else "the gold sentences alone"
    return {"gold": str(gold), "src": str(src), "tgt": str(tgt), "baselines": list(baselines),
            **({"test": {"src": str(test[0]), "tgt": str(test[1])}} if test else {}),
            **({"eflomal_text": text} if "eflomal" in baselines else {}), "models": facts, "rows": rows}


def format_table(rows: Sequence[dict]) -> str:
    lines = ["| links | AER | precision | recall | links |", "|---|---:|---:|---:|---:|"]
    return "\n".join(lines + [f"| {r['row']} | {r['aer']:.3f} | {r['precision']:.3f} | {r['recall']:.3f} | "
                              f"{r['predicted']} |" for r in rows])


def format_bleu(models: dict) -> str:
    """Each model's BLEU: on its own held-out test set and, where scored, on the test files (lowercased)."""
    lines = ["| model | steps | BLEU, own test (sentences) | BLEU, --test-src lowercased (sentences) |",
             "|---|---:|---:|---:|"]
    for name, facts in models.items():
        for direction in ("forward", "reverse"):
            if direction not in facts:
                continue
            f = facts[direction]
            steps = "+".join(str(r["steps"] or "-") for r in f.get("ensemble", [f]))
            own = f"{f['test_bleu']:.2f} ({f['test_sentences']})" if "test_bleu" in f else "-"
            given = f.get("test_files")
            files = f"{given['bleu']:.2f} ({given['sentences']})" if given else "-"
            lines.append(f"| {name} {direction} | {steps} | {own} | {files} |")
    return "\n".join(lines)
