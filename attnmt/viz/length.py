"""BLEU against source sentence length, one line per model (Bahdanau et al. 2014, Figure 2).

The plot is where the demo's claim becomes visible: the fixed-vector seq2seq line falls as the
sentences get longer while the attention model's line stays up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attnmt.decode.evaluate import LengthBucket
from attnmt.viz.heatmap import font_families, save_figure

MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")


def plot_bleu_by_length(
    results: Mapping[str, Sequence[LengthBucket]],
    path: str | Path,
    title: str | None = None,
    dpi: int = 150,
) -> Path:
    """Plot BLEU at each bucket's mid-point, one marked line per model, and save it to ``path``.

    ``results`` maps a model name (the legend label) to its buckets from
    :func:`attnmt.decode.evaluate.bleu_by_length`. A model whose buckets all carry ``ci_low`` and
    ``ci_high`` gets error bars. The file type follows the suffix of ``path``. Returns ``path``.
    """
    if not results or not any(results.values()):
        raise ValueError("nothing to plot: no model has any length bucket")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"font.family": font_families()}):
        fig = Figure(figsize=(6.4, 4.2))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for (name, buckets), marker, style in zip(results.items(), cycle(MARKERS), cycle(LINESTYLES)):
            buckets = sorted(buckets, key=lambda b: b.lo)
            if not buckets:
                continue
            xs = [b.mid for b in buckets]
            ys = [b.bleu for b in buckets]
            yerr = None
            if all(b.has_ci for b in buckets):
                # errorbar wants distances below and above the point, never negative.
                yerr = [
                    [max(0.0, b.bleu - b.ci_low) for b in buckets],  # type: ignore[operator]
                    [max(0.0, b.ci_high - b.bleu) for b in buckets],  # type: ignore[operator]
                ]
            ax.errorbar(xs, ys, yerr=yerr, marker=marker, linestyle=style, capsize=3, label=name)
        ax.set_xlabel("Source sentence length (tokens)")
        ax.set_ylabel("BLEU")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
        if title:
            ax.set_title(title)
        fig.tight_layout()
        save_figure(fig, path, dpi=dpi)
    return path
