"""`attnmt demo`: why attention was invented, shown by measurement on the built-in language.

Trains a seq2seq model (the whole source squeezed into one fixed vector) and an RNNsearch model
(attention over every source annotation) of the same hidden size on the synthetic language, then
measures BLEU per source-length bucket on held-out sentences. The fixed vector's quality falls
with length; attention's holds.

The demo is a built-in study (`demo_study`): the study runner (attnmt.study) writes the data,
trains both models side by side and measures them; the demo then draws its figures and writes
report.md and results.json.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.config.schema import Config, config_from_dict
from attnmt.decode.evaluate import LengthBucket, format_table
from attnmt.decode.translator import Translator, load
from attnmt.errors import UserError
from attnmt.models.registry import model_class
from attnmt.runtime.safe_write import make_folder, refuse_file_in_the_way, write_text
from attnmt.study.command import execute_study
from attnmt.study.spec import Study, study_from_dict
from attnmt.train.events import training_summary


@dataclass
class DemoSettings:
    """Sizes of the demo; `quick` is a smaller version that shows the same effect in about 75 seconds.

    Training stops after a fixed number of steps, not seconds, so that the demo's figures are the
    same on every machine (benchmarks/demo.py measures how long it takes). The cells follow the
    papers: Sutskever et al. used LSTMs, Bahdanau et al. gated recurrent units. seq2seq's steps are
    cheaper (no attention) and it gets more of them (2.5 times as many in the full demo), so that its
    fall with length is not a lack of training (3,000 steps at lr 3e-3 gave the same curve).
    """

    n_train: int = 24000
    n_valid: int = 300
    n_test: int = 600
    min_len: int = 4
    max_len: int = 60
    hidden_size: int = 128
    emb_size: int = 64
    attn_size: int = 64
    batch_tokens: int = 1500
    steps: dict[str, int] = field(default_factory=lambda: {"seq2seq": 2000, "rnnsearch": 800})
    lr: dict[str, float] = field(default_factory=lambda: {"seq2seq": 5e-3, "rnnsearch": 4e-3})
    cells: dict[str, str] = field(default_factory=lambda: {"seq2seq": "lstm", "rnnsearch": "gru"})
    bucket_edges: tuple[int, ...] = (4, 14, 24, 34, 44, 54, 61)
    seed: int = 1

    @classmethod
    def quick(cls) -> "DemoSettings":
        # The same models on sentences of up to 30 words: still long enough for seq2seq's curve to fall.
        return cls(n_train=6000, n_valid=100, n_test=150, max_len=30, steps={"seq2seq": 1000, "rnnsearch": 550},
                   bucket_edges=(4, 14, 24, 31))


def demo_raw_config(model_type: str, s: DemoSettings) -> dict:
    """The config of one demo model, as a config file would hold it (without its data files)."""
    sizes = {"cell": s.cells[model_type], "emb_size": s.emb_size, "hidden_size": s.hidden_size,
             "attn_size": s.attn_size, "dropout": 0.0, "reverse_source": True}
    reads = model_class(model_type).config_keys
    return {
        "name": f"demo-{model_type}",
        "data": {"tokenizer": "word", "max_len": 2 * s.max_len + 20},
        "model": {"type": model_type, **{k: v for k, v in sizes.items() if k in reads}},
        "train": {"seed": s.seed, "batch_tokens": s.batch_tokens, "lr": s.lr[model_type],
                  "max_steps": s.steps[model_type], "valid_every": 400, "valid_bleu_sample": 0, "threads": 1,
                  "early_stopping_patience": 100, "scheduler": "cosine", "warmup_steps": 0, "log_every": 25,
                  "tensorboard": False},
        "decode": {"beam": 1, "max_len_a": 1.5, "max_len_b": 10},
    }


def demo_config(model_type: str, data_dir: Path, s: DemoSettings) -> Config:
    """One demo model's config, reading the corpus that `attnmt.data.synthetic_corpus.write_corpus` wrote."""
    raw = demo_raw_config(model_type, s)
    raw["data"].update({f"{split}_{side}": str(data_dir / f"{split}.{side}") for split in ("train", "valid")
                        for side in ("src", "tgt")})
    return config_from_dict(raw)


def demo_study(s: DemoSettings) -> Study:
    """The demo as a study: the synthetic language, seq2seq and rnnsearch, one seed, greedy, the last checkpoint."""
    return study_from_dict({
        "name": "demo",
        "data": {"synthetic": {"train": s.n_train, "valid": s.n_valid, "test": s.n_test, "min_len": s.min_len,
                               "max_len": s.max_len, "seed": s.seed}},
        "seeds": [s.seed],
        "jobs": 2,
        "models": [{"name": m, "overrides": demo_raw_config(m, s)} for m in MODELS],
        "evaluation": {"beam": 1, "bleu_tokenize": "none", "bucket_edges": list(s.bucket_edges), "bootstrap": 0,
                       "checkpoint": "last"},
        "alignment": {"synthetic_test": False},
    })


@dataclass
class DemoResult:
    out_dir: Path
    buckets: dict[str, list[LengthBucket]]
    bleu: dict[str, float]
    seconds: float
    report: str
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds of each part of the demo


MODELS = ("seq2seq", "rnnsearch")


def prepare_out_dir(out_dir: Path, overwrite: bool) -> None:
    refuse_file_in_the_way(out_dir, "output folder")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise UserError(f"output folder {out_dir} exists and is not empty; choose another with --out or pass "
                            "--overwrite")
        import shutil

        shutil.rmtree(out_dir)
    make_folder(out_dir, "output folder")


def pick_examples(lengths: list[int], targets: tuple[int, int, int]) -> list[int]:
    """Indices of the test sentences closest in length to a short, a medium and a long target."""
    return [min(range(len(lengths)), key=lambda i: (abs(lengths[i] - t), i)) for t in targets]


def measured(done, out_dir: Path) -> tuple[dict[str, list[LengthBucket]], dict[str, float], dict[str, Translator]]:
    """Each model's BLEU by source length and corpus BLEU, as the study measured them; its translator."""
    buckets, bleu, translators = {}, {}, {}
    for run, outcome in zip(done.runs, done.outcomes):
        evaluation = outcome["evaluation"]
        buckets[run.model] = [LengthBucket(**b) for b in evaluation["buckets"]]
        bleu[run.model] = evaluation["bleu"]
        translators[run.model] = load(run.model_dir, checkpoint="last")
    return buckets, bleu, translators


def draw_figures(out_dir: Path, buckets: dict[str, list[LengthBucket]], rnnsearch: Translator, sources: list[str],
                 src_lengths: list[int], s: DemoSettings) -> list[tuple[str, int, str]]:
    """bleu_by_length.png and the attention of a short, a medium and a long test sentence."""
    from attnmt.viz.heatmap import plot_attention
    from attnmt.viz.length import plot_bleu_by_length

    plot_bleu_by_length(buckets, out_dir / "bleu_by_length.png",
                        title="BLEU by source length (synthetic language, greedy)")
    shown = []
    for label, i in zip(("short", "medium", "long"), pick_examples(src_lengths, (8, s.max_len // 2, s.max_len))):
        tr = rnnsearch.translate([sources[i]], beam=1)[0]
        path = out_dir / f"attention_{label}.png"
        plot_attention(tr.attention, tr.src_tokens, tr.tgt_tokens + ["</s>"], path,
                       title=f"rnnsearch attention, {label} sentence ({len(tr.src_tokens)} source tokens)")
        shown.append((label, len(tr.src_tokens), path.name))
    return shown


def run_demo(out_dir: str | Path = "attnmt-demo", quick: bool = False, overwrite: bool = False,
             settings: DemoSettings | None = None, quiet: bool = False) -> DemoResult:
    """Train seq2seq and rnnsearch side by side on the synthetic language; write the report and figures."""
    s = settings or (DemoSettings.quick() if quick else DemoSettings())
    out_dir = Path(out_dir)
    prepare_out_dir(out_dir, overwrite)
    started = time.perf_counter()
    say = (lambda *a: None) if quiet else print

    say(f"synthetic language: {s.n_train} training pairs, source lengths {s.min_len}-{s.max_len}")
    say(f"training {' and '.join(f'{m} ({n} steps)' for m, n in s.steps.items())} side by side ...")
    done = execute_study(demo_study(s), out_dir.resolve(), jobs=min(2, len(os.sched_getaffinity(0))))
    test_src = done.data.test_src
    buckets, bleu, translators = measured(done, out_dir)
    # the study trains and measures each model in one process: its training time is its log's
    training = {f"training_{run.model}": training_summary(run.model_dir).get("wall_s", 0.0) for run in done.runs}
    phases = {"data": done.data_seconds, "training": max(training.values()), **training}
    phases["evaluation"] = done.execute_seconds - phases["training"]
    shown = draw_figures(out_dir, buckets, translators["rnnsearch"], test_src, done.data.test_lengths, s)

    seconds = time.perf_counter() - started
    phases["figures"] = seconds - phases["data"] - phases["training"] - phases["evaluation"]
    phases = {k: round(v, 1) for k, v in phases.items()}
    report = render_report(buckets, bleu, shown, seconds, s)
    write_text(out_dir / "report.md", report, overwrite=True)  # the demo's folder: checked by prepare_out_dir
    write_text(out_dir / "results.json", json.dumps({
        "seconds": seconds, "phases_s": phases, "bleu": bleu,
        "buckets": {m: [vars(b) for b in bs] for m, bs in buckets.items()},
    }, indent=2), overwrite=True)
    say(report)
    say(explorer_hint({run.model: run.model_dir for run in done.runs}, out_dir))
    return DemoResult(out_dir, buckets, bleu, seconds, report, phases)


def explorer_hint(model_dirs: dict[str, Path], out_dir: Path) -> str:
    """How to watch the demo's models decode step by step: the explorer as one file, or in `attnmt serve`'s page."""
    import shlex

    models = [f"{name}={directory}" for name, directory in model_dirs.items()]
    page = shlex.quote(str(out_dir / "explore.html"))
    return "\n".join([
        "Watch both models translate step by step, side by side:",
        f"  attnmt explore {' '.join(shlex.quote(m) for m in models)} --checkpoint last --export {page}",
        "  (one file: open it in a browser), or serve them and open http://127.0.0.1:8000/ :",
        f"  attnmt serve {' '.join('--model ' + shlex.quote(m) for m in models)} --checkpoint last",
    ])


def render_report(buckets, bleu, shown, seconds, s: DemoSettings) -> str:
    lines = [
        "# attnmt demo: the fixed-vector bottleneck, measured",
        "",
        f"Synthetic language, {s.n_train} training pairs; seq2seq and rnnsearch with hidden size {s.hidden_size}; "
        f"greedy decoding of {s.n_test} held-out sentences; BLEU per source-length bucket (sacreBLEU, "
        "tokenize=none).",
        "",
    ]
    lines.append(format_table(buckets))
    lines.append(f"All {s.n_test} sentences: seq2seq {bleu['seq2seq']:.1f} BLEU, "
                 f"rnnsearch {bleu['rnnsearch']:.1f} BLEU.")
    lines += ["", "![BLEU by source length](bleu_by_length.png)", ""]
    for label, n, name in shown:
        lines.append(f"![{label} sentence, {n} tokens]({name})")
    lines += ["", f"Total time: {seconds:.0f} s.", ""]
    return "\n".join(lines)
