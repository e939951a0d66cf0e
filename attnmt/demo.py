"""`attnmt demo`: why attention was invented, shown by measurement on the built-in language.

Trains a seq2seq model (the whole source squeezed into one fixed vector) and an RNNsearch model
(attention over every source annotation) of the same hidden size on the synthetic language, then
measures BLEU per source-length bucket on held-out sentences. The fixed vector's quality falls
with length; attention's holds.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.config import Config, DataConfig, DecodeConfig, TrainConfig
from attnmt.data.synthetic_corpus import make_splits, write_corpus
from attnmt.errors import UserError
from attnmt.evaluate import LengthBucket, bleu_by_length, corpus_scores, format_table
from attnmt.models import model_config
from attnmt.runlog import training_summary
from attnmt.train import train
from attnmt.translator import Translator, load


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


def demo_config(model_type: str, data_dir: Path, s: DemoSettings) -> Config:
    return Config(
        name=f"demo-{model_type}",
        data=DataConfig(
            train_src=str(data_dir / "train.src"), train_tgt=str(data_dir / "train.tgt"),
            valid_src=str(data_dir / "valid.src"), valid_tgt=str(data_dir / "valid.tgt"),
            tokenizer="word", max_len=2 * s.max_len + 20,
        ),
        model=model_config(model_type, cell=s.cells[model_type], emb_size=s.emb_size, hidden_size=s.hidden_size,
                           attn_size=s.attn_size, dropout=0.0, reverse_source=True),
        train=TrainConfig(seed=s.seed, batch_tokens=s.batch_tokens, lr=s.lr[model_type], max_steps=s.steps[model_type],
                          valid_every=400, valid_bleu_sample=0, threads=1,
                          early_stopping_patience=100, scheduler="cosine", warmup_steps=0, log_every=25,
                          tensorboard=False),
        decode=DecodeConfig(beam=1, max_len_a=1.5, max_len_b=10),
    )


@dataclass
class DemoResult:
    out_dir: Path
    buckets: dict[str, list[LengthBucket]]
    bleu: dict[str, float]
    seconds: float
    report: str
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds of each part of the demo


MODELS = ("seq2seq", "rnnsearch")


def _die_with_parent() -> None:
    """Linux: end this worker when the demo process ends, however it ends (no orphans training on)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _train_one(args: tuple[Config, Path]) -> None:
    config, model_dir = args
    _die_with_parent()
    train(config, model_dir, quiet=True)


def _logged_step(model_dir: Path) -> int:
    """The last training step a model folder's log reports (the children train quietly)."""
    try:
        lines = (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:  # a line being written
            continue
        if record.get("event") == "train":
            return int(record["step"])
    return 0


def train_all(configs: dict[str, Config], models_dir: Path, quiet: bool) -> None:
    """Train the models side by side, one process and one thread each.

    Two single-threaded processes use two cores better than two threads on one small model: the
    recurrent steps are too small to split, and idle threads spinning in barriers cost more than
    they give when anything else runs on the machine.
    """
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    jobs = [(config, models_dir / name) for name, config in configs.items()]
    workers = min(len(jobs), len(os.sched_getaffinity(0)))
    if workers <= 1:
        for job in jobs:
            _train_one(job)
        return
    progress = None
    if not quiet:
        from tqdm import tqdm

        progress = tqdm(total=sum(c.train.max_steps for c in configs.values()), unit="step", desc="training",
                        leave=False, dynamic_ncols=True)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_train_one, job) for job in jobs]
        while not all(f.done() for f in futures):
            time.sleep(0.5)
            if progress is not None:
                progress.n = sum(_logged_step(model_dir) for _, model_dir in jobs)
                progress.refresh()
        for f in futures:
            f.result()
    if progress is not None:
        progress.close()


def prepare_out_dir(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise UserError(f"output folder {out_dir} exists and is not empty; choose another with --out or pass "
                            "--overwrite")
        import shutil

        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def pick_examples(lengths: list[int], targets: tuple[int, int, int]) -> list[int]:
    """Indices of the test sentences closest in length to a short, a medium and a long target."""
    return [min(range(len(lengths)), key=lambda i: (abs(lengths[i] - t), i)) for t in targets]


def evaluate_models(out_dir: Path, sources: list[str], references: list[str], src_lengths: list[int],
                    s: DemoSettings) -> tuple[dict[str, list[LengthBucket]], dict[str, float], dict[str, Translator]]:
    """Greedy translations of the test set by each model: BLEU by source length and corpus BLEU."""
    buckets: dict[str, list[LengthBucket]] = {}
    bleu: dict[str, float] = {}
    translators: dict[str, Translator] = {}
    for model_type in MODELS:
        translator = load(out_dir / "models" / model_type, checkpoint="last")
        hyps = [t.text for t in translator.translate(sources, beam=1)]
        buckets[model_type] = bleu_by_length(src_lengths, hyps, references, edges=list(s.bucket_edges),
                                             tokenize="none")
        bleu[model_type] = corpus_scores(hyps, references, tokenize="none").bleu
        translators[model_type] = translator
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

    splits = make_splits(s.n_train, s.n_valid, s.n_test, s.min_len, s.max_len, seed=s.seed)
    data_dir = out_dir / "data"
    for name, pairs in splits.items():
        write_corpus(pairs, data_dir, name)
    test = splits["test"]
    sources = [" ".join(p.src) for p in test]
    references = [" ".join(p.tgt) for p in test]
    src_lengths = [len(p.src) for p in test]
    say(f"synthetic language: {len(splits['train'])} training pairs, source lengths {s.min_len}-{s.max_len}")

    configs = {m: demo_config(m, data_dir, s) for m in MODELS}
    say(f"training {' and '.join(f'{m} ({n} steps)' for m, n in s.steps.items())} side by side ...")
    phases = {"data": time.perf_counter() - started}
    train_all(configs, out_dir / "models", quiet)
    phases["training"] = time.perf_counter() - started - sum(phases.values())
    for m in MODELS:  # each model's own training time, from its log (they train side by side)
        phases[f"training_{m}"] = training_summary(out_dir / "models" / m).get("wall_s", 0.0)

    buckets, bleu, translators = evaluate_models(out_dir, sources, references, src_lengths, s)
    phases["evaluation"] = time.perf_counter() - started - phases["data"] - phases["training"]
    shown = draw_figures(out_dir, buckets, translators["rnnsearch"], sources, src_lengths, s)

    seconds = time.perf_counter() - started
    phases["figures"] = seconds - phases["data"] - phases["training"] - phases["evaluation"]
    phases = {k: round(v, 1) for k, v in phases.items()}
    report = render_report(buckets, bleu, shown, seconds, s)
    (out_dir / "report.md").write_text(report, encoding="utf-8")
    (out_dir / "results.json").write_text(json.dumps({
        "seconds": seconds, "phases_s": phases, "bleu": bleu,
        "buckets": {m: [vars(b) for b in bs] for m, bs in buckets.items()},
    }, indent=2), encoding="utf-8")
    say(report)
    return DemoResult(out_dir, buckets, bleu, seconds, report, phases)


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
