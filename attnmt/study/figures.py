"""The study's figures: BLEU by length over seeds, accuracy by position, attention heatmaps."""

from __future__ import annotations

from contextlib import contextmanager
from itertools import cycle
from pathlib import Path
from typing import Any, Iterator

from attnmt.errors import UserError
from attnmt.models.registry import model_class
from attnmt.study.data import StudyData
from attnmt.study.runs import Run
from attnmt.study.spec import Study


@contextmanager
def _line_figure(path: Path, height: float, title: str, xlabel: str, ylabel: str) -> Iterator[Any]:
    """A study line plot in the house fonts: yields the axes to draw on, then labels and saves it."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attnmt.viz.heatmap import font_families, save_figure

    with matplotlib.rc_context({"font.family": font_families()}):
        fig = Figure(figsize=(6.8, height))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        yield ax
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, path, dpi=120)


def plot_bleu_by_length_seeds(models: dict[str, dict], path: Path, title: str) -> Path:
    """Bahdanau et al. (2014), Figure 2, with seeds: per model the seed mean (line, markers) with its
    bootstrap interval (error bars) and each seed on its own (thin lines)."""
    from attnmt.viz.length import LINESTYLES, MARKERS

    with _line_figure(path, 4.4, title, "Source sentence length (words)", "BLEU") as ax:
        for (name, m), marker, style, color in zip(models.items(), cycle(MARKERS), cycle(LINESTYLES),
                                                   cycle(f"C{k}" for k in range(10))):
            rows = m["buckets"]
            xs = [(r["lo"] + r["hi"] - 1) / 2 for r in rows]
            for s in range(len(m["seeds"])):
                ax.plot(xs, [r["values"][s] for r in rows], color=color, alpha=0.3, linewidth=0.8)
            yerr = None
            if all(r["ci_low"] is not None for r in rows):
                yerr = [[max(0.0, r["mean"] - r["ci_low"]) for r in rows],
                        [max(0.0, r["ci_high"] - r["mean"]) for r in rows]]
            ax.errorbar(xs, [r["mean"] for r in rows], yerr=yerr, marker=marker, linestyle=style, color=color,
                        capsize=3, label=f"{name} ({len(m['seeds'])} seeds)")
        ax.set_ylim(bottom=0)
    return path


def plot_accuracy_by_position(models: dict[str, dict], path: Path, title: str) -> Path:
    """Next-token accuracy (teacher forcing) against target position, seed mean and range per model."""
    from attnmt.viz.length import MARKERS

    with _line_figure(path, 4.0, title, "Target position (tokens of the model's target tokenizer)",
                      "Next-token accuracy, teacher forcing (%)") as ax:
        for (name, m), marker, color in zip(models.items(), cycle(MARKERS), cycle(f"C{k}" for k in range(10))):
            rows = m["accuracy_by_position"]
            xs = [(r["lo"] + r["hi"] - 1) / 2 for r in rows]
            ax.fill_between(xs, [100 * r["min"] for r in rows], [100 * r["max"] for r in rows], color=color, alpha=0.15)
            ax.plot(xs, [100 * r["mean"] for r in rows], marker=marker, color=color, label=name)
        ax.set_ylim(0, 100)
    return path


def choose_heatmap_sentences(study: Study, lengths: list[int]) -> list[int]:
    """The test sentences to draw: given indices, else the ones closest to the given lengths,
    else a short, a medium and the longest one."""
    h = study.heatmaps
    for i in h.sentences:
        if not 0 <= i < len(lengths):
            raise UserError(f"heatmaps.sentences: {i} is not a test sentence index (0 to {len(lengths) - 1})")
    if h.sentences:
        return list(h.sentences)
    targets = h.lengths or [10, (min(lengths) + max(lengths)) // 2, max(lengths)]
    chosen = []
    for target in targets:
        best = min((i for i in range(len(lengths)) if i not in chosen), key=lambda i: (abs(lengths[i] - target), i))
        chosen.append(best)
    return chosen


def draw_heatmaps(study: Study, data: StudyData, runs: list[Run], figures: Path) -> list[dict]:
    """Word-level, teacher-forced attention of the chosen test pairs (the same matrices the alignment reads)."""
    from attnmt.align import argmax_links, attention_matrices, score_alignments
    from attnmt.decode.translator import load
    from attnmt.viz.heatmap import plot_attention

    if not study.heatmaps.enabled:
        return []
    name = study.heatmaps.model
    for run in runs:
        if (not name and _attention_model(run)) or run.model == name:
            break
    else:
        return []
    translator = load(run.model_dir)
    if not translator.has_attention:
        raise UserError(f"heatmaps.model: {run.model} is a {translator.model_type} model, which has no attention; "
                        "choose another")
    shown = []
    for i in choose_heatmap_sentences(study, data.test_lengths):
        try:
            (m,) = attention_matrices(translator, [data.test_src[i]], [data.test_tgt[i]])
        except UserError:
            # Detokenized text whose words the tokenizer splits otherwise (French "J'aimerais"): a
            # sentence chosen by its length is left out; one asked for by index is an error.
            if study.heatmaps.sentences:
                raise
            continue
        path = figures / f"attention_{len(shown) + 1}.png"
        title = f"{run.label}: test sentence {i} ({len(m.src_words)} source words)"
        item = {"file": path.name, "sentence": i, "source_words": len(m.src_words), "model": run.label}
        gold = None if data.test_gold is None else data.test_gold[i]
        plot_attention(m.weights, m.src_words, m.tgt_words, path, dpi=110, marks=None if gold is None else gold.sure,
                       title=title if gold is None else title + " — red circles: gold links")
        if gold is not None:
            item["aer"] = score_alignments([argmax_links(m.weights)], [gold]).aer
        shown.append(item)
    return shown


def _attention_model(run: Run) -> bool:
    from attnmt.config.schema import load_config

    return model_class(load_config(run.model_dir / "config.yaml").model.type).has_attention


# ================================================================ report
