"""Attention heatmaps in the style of Bahdanau et al. (2014), Figure 3.

Source tokens run along the top (rotated), target tokens down the left side, and each cell is the
weight alpha[t, s] that target step t gives source position s. The figure grows with the sentence
and the cells and fonts shrink, so a 60-80 token sentence stays readable.

Plots are drawn on a bare :class:`matplotlib.figure.Figure` with the Agg canvas, never through
pyplot: no display is needed, no global backend is switched and nothing leaks between calls.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Tried in order for every glyph (matplotlib falls back per glyph across the list), so Latin
# text uses DejaVu Sans and Chinese/Japanese/Korean tokens use whichever CJK font is installed.
FONT_FALLBACKS = (
    "DejaVu Sans",
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "IPAGothic",
    "IPAexGothic",
    "Droid Sans Fallback",
    "SimHei",
    "Microsoft YaHei",
    "MS Gothic",
    "AppleGothic",
    "Arial Unicode MS",
)

MIN_CELL_INCHES = 0.16  # below this, 6 pt labels overlap their neighbours
MAX_CELL_INCHES = 0.4


@functools.lru_cache(maxsize=1)
def font_families() -> list[str]:
    """The installed fonts of :data:`FONT_FALLBACKS`, in order (never empty).

    Naming only installed fonts keeps matplotlib from warning about each missing one.
    """
    installed = {font.name for font in font_manager.fontManager.ttflist}
    found = [name for name in FONT_FALLBACKS if name in installed]
    return found or ["sans-serif"]


def _as_matrix(alpha: Any) -> np.ndarray:
    """A float NumPy matrix from an array-like or a torch tensor (without importing torch)."""
    if hasattr(alpha, "detach"):  # torch.Tensor: may need grad detached, be bf16 or on a GPU
        alpha = alpha.detach().float().cpu().numpy()
    return np.asarray(alpha, dtype=np.float64)


def _label(token: str) -> str:
    """A token as literal tick text: a ``$`` would otherwise start matplotlib mathtext."""
    return str(token).replace("$", r"\$")


def _cell_inches(n: int) -> float:
    """Side of one heatmap cell: large for short sentences, shrinking down to a legible floor."""
    return float(np.clip(9.0 / max(n, 1), MIN_CELL_INCHES, MAX_CELL_INCHES))


def _label_inches(tokens: Sequence[str], fontsize: float) -> float:
    """Rough length of the longest tick label, so the margins can hold it."""
    longest = max((len(t) for t in tokens), default=1)
    return 0.15 + 0.62 * longest * fontsize / 72


def plot_attention(
    alpha: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: str | Path,
    title: str | None = None,
    cmap: str = "gray",
    dpi: int = 150,
) -> Path:
    """Draw the attention matrix ``alpha`` [T, S] (target x source) and save it to ``path``.

    The file type follows the suffix of ``path`` (``.png``, ``.pdf``, ``.svg``, ...); parent
    folders are created. The default grayscale colormap matches the paper (black 0, white 1);
    the colour scale is fixed to [0, 1] because every row is a probability distribution.
    Returns ``path``.
    """
    weights = _as_matrix(alpha)
    expected = (len(tgt_tokens), len(src_tokens))
    if weights.ndim != 2 or weights.shape != expected:
        raise ValueError(
            f"attention has shape {weights.shape}, expected [target, source] = {list(expected)} "
            "from the token lists (include EOS in tgt_tokens if alpha has a row for it)"
        )
    n_tgt, n_src = expected
    if n_tgt == 0 or n_src == 0:
        raise ValueError("cannot plot attention for an empty sentence")

    cell = _cell_inches(max(n_src, n_tgt))
    fontsize = float(np.clip(cell * 72 * 0.6, 6, 11))
    left = _label_inches(tgt_tokens, fontsize)
    top = _label_inches(src_tokens, fontsize) + (0.4 if title else 0.1)
    bar = 0.6  # colour bar, its ticks and a gap
    width, height = n_src * cell, n_tgt * cell
    fig_w, fig_h = left + width + bar + 0.3, top + height + 0.2

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"font.family": font_families(), "font.size": fontsize}):
        fig = Figure(figsize=(fig_w, fig_h))
        FigureCanvasAgg(fig)
        # Place the axes in inches so each cell is square whatever the figure size.
        ax = fig.add_axes((left / fig_w, 0.2 / fig_h, width / fig_w, height / fig_h))
        image = ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
        ax.xaxis.tick_top()
        ax.set_xticks(range(n_src), [_label(t) for t in src_tokens], rotation=90)
        ax.set_yticks(range(n_tgt), [_label(t) for t in tgt_tokens])
        ax.tick_params(length=0)
        if title:
            ax.set_title(title, fontsize=fontsize + 1)
        bar_height = min(height, 4.0)
        cax = fig.add_axes(
            ((left + width + 0.15) / fig_w, (0.2 + height - bar_height) / fig_h, 0.12 / fig_w, bar_height / fig_h)
        )
        fig.colorbar(image, cax=cax)
        with warnings.catch_warnings():
            # A token in a script no installed font covers is drawn as a box; that is no error.
            warnings.filterwarnings("ignore", message=r".*[Gg]lyph .* missing from")
            fig.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    return path
