"""attnmt's own decoding against the same Transformer exported to CTranslate2, in alternating rounds.

    python -m benchmarks.ctranslate2 --model MODEL_DIR --src test.de --ref test.en [--rounds 3]

The model is exported twice (``attnmt export --quantization float32`` and ``int8``); four engines decode the
first ``--sentences`` lines: attnmt float32, attnmt ``--int8``, CTranslate2 float32 and CTranslate2 int8, at
each batch size (sentences per batch), beam size and thread count asked for. As in benchmarks/decoding.py the
machine's speed wanders, so the engines decode in turns, round after round (the order rotated each round), and
each figure is the median over rounds. Each decoding runs in a process of its own (``--child``), which loads
the model, translates once to warm up, then times ``translate()`` alone and reports its peak memory (the
process's maximum resident set, the interpreter and torch included for every engine alike).

Reported per engine and setting: sentences/s, target tokens/s (attnmt's target tokens of the output), peak
memory, BLEU and chrF against ``--ref`` (sacreBLEU, attnmt.decode.evaluate.corpus_scores), and the share of sentences
translated exactly as attnmt float32 translates them; per setting, the ratios the deployment guide quotes
(CTranslate2 int8 against attnmt float32 and against attnmt int8, BLEU differences). ``--profile N`` adds where
attnmt int8 (and attnmt compiled int8, when run) spends its time at the first batch size and the last beam and thread
count asked for: torch.profiler's operators by their own time over N sentences, and the share of the wall time no
operator accounts for (Python).

``--engines`` picks the engines (in quotes, e.g. ``--engines "attnmt int8" "attnmt compiled int8"``): beside the four,
``attnmt compiled float32`` and ``attnmt compiled int8`` decode with the decoder step compiled by torch.compile
(``load(compile_step=True)``, :mod:`attnmt.models.compiled`), whose compilation at load each run reports
(``compile_s``). Without a CTranslate2 engine nothing is exported, so any model type runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import run_child, write_result

ENGINES = ("attnmt float32", "attnmt int8", "ctranslate2 float32", "ctranslate2 int8")
# attnmt with its decoder step compiled (load(compile_step=True), attnmt.models.compiled): --engines adds them
COMPILED = ("attnmt compiled float32", "attnmt compiled int8")


def child(args) -> None:
    """One decoding in this process: the JSON of its seconds, outputs, target tokens and peak memory."""
    import torch

    from attnmt.decode.translator import load

    words = args.child.split()
    engine, precision = words[0], words[-1]
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if engine == "attnmt":
        translator = load(args.model, checkpoint=args.checkpoint, int8=precision == "int8",
                          compile_step="compiled" in words)
    else:
        translator = load(args.model, threads=args.threads)
        translator.return_attention = False  # attnmt's search keeps its attention as it goes; this one asks
    load_s = time.perf_counter() - start
    sources = Path(args.src).read_text(encoding="utf-8").splitlines()
    options = dict(beam=args.beam, batch_size=args.batch, batch_tokens=10**9)
    translator.translate(sources[:1], **options)  # warm-up
    if args.profile:
        print(json.dumps(profile(translator, sources[:args.profile], options)))
        return
    start = time.perf_counter()
    outputs = translator.translate(sources, **options)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "texts": [t.text for t in outputs],
                      "tgt_tokens": sum(len(t.tgt_tokens) + 1 for t in outputs), "load_s": load_s,
                      "compile_s": getattr(translator, "compile_seconds", None),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def profile(translator, sources: list[str], options: dict, top: int = 15) -> dict:
    """torch.profiler's operators by their own CPU time over one translate() call, and what is left (Python)."""
    import torch

    start = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        translator.translate(sources, **options)
    wall_us = (time.perf_counter() - start) * 1e6
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    in_ops = sum(e.self_cpu_time_total for e in ops)
    return {"sentences": len(sources), "wall_s": round(wall_us / 1e6, 3),
            "share_outside_operators": round(1 - in_ops / wall_us, 3),
            "operators": [{"name": e.key, "calls": e.count, "self_s": round(e.self_cpu_time_total / 1e6, 3),
                           "share_of_wall": round(e.self_cpu_time_total / wall_us, 3)} for e in ops[:top]]}


def ratios(engines: dict[str, dict]) -> dict:
    """The deployment targets' ratios for one setting, of the engines it ran: CTranslate2 int8's speed over each
    attnmt engine's, a compiled step's over its eager one's, and the BLEU differences."""
    def key(engine: str) -> str:
        return engine.replace(" ", "_")

    def faster(a: str, b: str) -> None:
        if a in engines and b in engines:
            out[f"{key(a)}_over_{key(b)}"] = round(engines[a]["sentences_per_s"] / engines[b]["sentences_per_s"], 2)

    def bleu(a: str, b: str, name: str) -> None:
        if a in engines and b in engines:
            out[name] = round(engines[a]["bleu"] - engines[b]["bleu"], 2)

    out: dict[str, float] = {}
    for engine in ("attnmt float32", "attnmt int8", *COMPILED):
        faster("ctranslate2 int8", engine)
    for precision in ("float32", "int8"):
        faster(f"attnmt compiled {precision}", f"attnmt {precision}")
        bleu(f"attnmt compiled {precision}", f"attnmt {precision}", f"attnmt_compiled_{precision}_bleu_minus_eager")
    bleu("ctranslate2 float32", "attnmt float32", "ctranslate2_float32_bleu_minus_attnmt_float32")
    bleu("ctranslate2 int8", "ctranslate2 float32", "ctranslate2_int8_bleu_minus_float32")
    bleu("attnmt int8", "attnmt float32", "attnmt_int8_bleu_minus_float32")
    return out


def setting_name(batch: int, beam: int, threads: int) -> str:
    return f"batch {batch}, beam {beam}, {threads} thread{'s' if threads > 1 else ''}"


def measure(args, folders: dict[str, str], source: Path) -> dict[str, dict[str, list[dict]]]:
    """Every run's child report, by setting name and engine, over ``args.rounds`` alternating rounds."""
    runs: dict[str, dict[str, list[dict]]] = {}
    settings = list(itertools.product(args.batch, args.beam, args.threads))
    engines = tuple(args.engines)
    for round_ in range(args.rounds):
        order = engines[round_ % len(engines):] + engines[:round_ % len(engines)]
        for batch, beam, threads in settings:
            name = setting_name(batch, beam, threads)
            for engine in order:
                report = run_child("ctranslate2", [
                    "--child", engine, "--model", folders[engine], "--checkpoint", args.checkpoint,
                    "--src", str(source), "--batch", str(batch), "--beam", str(beam), "--threads", str(threads)],
                    f"{engine} ({name})")
                runs.setdefault(name, {}).setdefault(engine, []).append(report)
            print(f"round {round_ + 1}/{args.rounds}: {name}", file=sys.stderr)
    return runs


def summarize(runs: dict[str, dict[str, list[dict]]], references: list[str]) -> dict:
    """The medians, scores and agreement with attnmt float32 of each setting and engine."""
    from attnmt.decode.evaluate import corpus_scores

    table = {}
    for name, engines in runs.items():
        baseline = engines["attnmt float32" if "attnmt float32" in engines else next(iter(engines))][0]["texts"]
        table[name] = {}
        for engine, reports in engines.items():
            texts = reports[0]["texts"]
            scores = corpus_scores(texts, references)
            seconds = statistics.median(r["seconds"] for r in reports)
            table[name][engine] = {
                "sentences_per_s": round(len(texts) / seconds, 2),
                "target_tokens_per_s": round(reports[0]["tgt_tokens"] / seconds, 1),
                "seconds": [round(r["seconds"], 3) for r in reports],
                "peak_rss_mb": round(max(r["peak_rss_mb"] for r in reports), 1),
                "bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2),
                "identical_to_attnmt_float32": round(sum(a == b for a, b in zip(texts, baseline)) / len(texts), 4),
            }
            if reports[0].get("compile_s") is not None:  # the compiled step's compilation at load, in each round
                table[name][engine]["compile_s"] = [round(r["compile_s"], 1) for r in reports]
        table[name]["ratios"] = ratios(table[name])
    return table


def profile_child(args, source: Path, engine: str) -> dict:
    """The profile of an attnmt engine at the first batch size and the last beam and thread count, in its own
    process."""
    batch, beam, threads = args.batch[0], args.beam[-1], args.threads[-1]
    report = run_child("ctranslate2", [
        "--child", engine, "--model", args.model, "--checkpoint", args.checkpoint, "--src", str(source),
        "--batch", str(batch), "--beam", str(beam), "--threads", str(threads), "--profile", str(args.profile)],
        "the profile")
    return {"setting": setting_name(batch, beam, threads), **report}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a trained Transformer model folder")
    parser.add_argument("--src", required=True, help="source sentences, one a line")
    parser.add_argument("--ref", help="reference translations, one a line (required unless --child)")
    parser.add_argument("--checkpoint", default="best", help="the checkpoint to decode and export (default: best)")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N lines (default: 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: 3)")
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 1], help="sentences per batch (default: 64 1)")
    parser.add_argument("--beam", type=int, nargs="+", default=[1, 5], help="beam sizes (default: 1 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="threads (default: 1 2)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile attnmt int8 over the first N sentences (default: 0, no profile)")
    parser.add_argument("--engines", nargs="+", choices=ENGINES + COMPILED, default=list(ENGINES), metavar="ENGINE",
                        help=f"the engines to run, in quotes (default: the four; also {', '.join(COMPILED)})")
    parser.add_argument("--child", choices=ENGINES + COMPILED, help=argparse.SUPPRESS)
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/ctranslate2.json)")
    args = parser.parse_args(argv)
    if args.child:
        args.batch, args.beam, args.threads = args.batch[0], args.beam[0], args.threads[0]
        child(args)
        return 0
    if not args.ref:
        parser.error("--ref is required")
    from attnmt.data.corpus import read_lines
    from attnmt.export.convert import export_ctranslate2

    sources, references = read_lines(args.src)[:args.sentences], read_lines(args.ref)[:args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source.txt"
        source.write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        folders = {"attnmt float32": args.model, "attnmt int8": args.model}
        folders.update({engine: args.model for engine in COMPILED})
        for precision in ("float32", "int8"):
            if f"ctranslate2 {precision}" not in args.engines:
                continue
            folders[f"ctranslate2 {precision}"] = str(export_ctranslate2(
                args.model, Path(tmp) / precision, quantization=precision, checkpoint=args.checkpoint))
        runs = measure(args, folders, source)
        profiled = {engine: profile_child(args, source, engine) for engine in ("attnmt int8", "attnmt compiled int8")
                    if args.profile and engine in args.engines}
    import ctranslate2

    result = {"model": args.model, "checkpoint": args.checkpoint, "sentences": len(sources), "rounds": args.rounds,
              "engines": args.engines, "ctranslate2": ctranslate2.__version__, "settings": summarize(runs, references)}
    for engine, report in profiled.items():
        result[f"profile_{engine.replace(' ', '_')}"] = report
    print(write_result("ctranslate2", result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
