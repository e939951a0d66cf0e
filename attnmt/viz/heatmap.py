"""Attention heatmaps in the style of Bahdanau et al. (2014), Figure 3.

Source tokens run along the top (rotated), target tokens down the left side, and each cell is the
weight alpha[t, s] that target step t gives source position s. The figure grows with the sentence
and the cells and fonts shrink, so a 60-80 token sentence stays readable.

Plots are drawn on a bare :class:`matplotlib.figure.Figure` with the Agg canvas, never through
pyplot: no display is needed, no global backend is switched and nothing leaks between calls.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attnmt.runtime.safe_write import open_output

# Tried in order for every glyph (matplotlib falls back per glyph across the list), so Latin
# text uses DejaVu Sans and Chinese/Japanese/Korean tokens use whichever CJK font is installed.
FONT_FALLBACKS = (
    "DejaVu Sans",
    "Noto Sans CJK SC",
    "Noto Sans CJK TC",
    "Noto Sans CJK HK",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Noto Sans SC",
    "Noto Sans TC",
    "Noto Sans JP",
    "Noto Sans KR",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Source Han Sans TC",
    "Source Han Sans JP",
    "Source Han Sans KR",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Noto Serif CJK SC",
    "Noto Serif CJK JP",
    "IPAGothic",
    "IPAexGothic",
    "NanumGothic",
    "Droid Sans Fallback",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "MS Gothic",
    "AppleGothic",
    "Arial Unicode MS",
)
# Han characters are drawn differently in China, Taiwan/Hong Kong, Japan and Korea; a font
# collection such as Noto Sans CJK has one family per region. The region tags of each script's own
# families, most preferred first (Chinese without kana or hangul: simplified, then traditional).
REGION_TAGS = {"zh": ("SC", "CN", "GB", "TC", "HK"), "ja": ("JP",), "ko": ("KR",)}
# Font files worth registering when matplotlib's font cache predates the CJK font's installation
# (matplotlib scans the system fonts once, when it first builds the cache; see cjk_fonts).
_CJK_FILE = re.compile(r"cjk|sourcehan|wqy|wenquanyi|droidsansfallback|ipag|ipaexg|nanum|simhei|msyh|"
                       r"notosans(sc|tc|hk|jp|kr)|arialuni|pingfang|hiragino", re.IGNORECASE)

_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]")
# Han ideographs (with the extensions and compatibility blocks), CJK symbols and punctuation,
# kana, bopomofo, hangul, and the full-width forms of Chinese punctuation.
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u2fdf\u2ff0-\u31ff\u3200-\u9fff\ua960-\ua97f\uac00-\ud7ff"
                  "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]")

SP_SPACE = "\u2581"  # sentencepiece's word-start mark, "▁" (attnmt.data.tokenize.SP_SPACE)

MIN_CELL_INCHES = 0.16  # below this, 6 pt labels overlap their neighbours
MAX_CELL_INCHES = 0.4


def cjk_script(texts: Iterable[str]) -> str | None:
    """``"ja"`` if any text has kana, else ``"ko"`` if any has hangul, else ``"zh"`` if any has another
    CJK character (Han, CJK punctuation, full-width forms), else None."""
    joined = "".join(texts)
    if not _CJK.search(joined):
        return None
    return "ja" if _KANA.search(joined) else "ko" if _HANGUL.search(joined) else "zh"


def _installed_families() -> set[str]:
    return {font.name for font in font_manager.fontManager.ttflist}


def _system_cjk_files() -> list[str]:
    """Font files on this system whose names say CJK (cheap: no file is opened)."""
    try:
        files = font_manager.findSystemFonts()
    except Exception:  # a broken font folder or fc-list must never stop a plot
        return []
    return sorted(f for f in files if _CJK_FILE.search(Path(f).name))


@functools.lru_cache(maxsize=1)
def cjk_fonts() -> tuple[str, ...]:
    """The installed CJK families of :data:`FONT_FALLBACKS`, in that order (empty if none).

    matplotlib lists the system fonts once, when it builds its font cache; a CJK font installed
    after that (``apt-get install fonts-noto-cjk`` after the first plot) is not in the cache. Then
    the CJK font files found on the system are registered for this process (nothing is written to
    the cache). With no CJK font at all, one warning says how to install one; plots still work and
    show boxes for the missing glyphs.
    """
    names = [name for name in FONT_FALLBACKS[1:] if name in _installed_families()]
    if not names:
        for path in _system_cjk_files():
            try:
                font_manager.fontManager.addfont(path)
            except Exception:  # an unreadable or unsupported file: try the next one
                continue
        names = [name for name in FONT_FALLBACKS[1:] if name in _installed_families()]
    if not names:
        warnings.warn("no CJK font is installed, so Chinese, Japanese and Korean tokens are drawn as boxes; "
                      "install one, e.g. `apt-get install fonts-noto-cjk`", stacklevel=2)
    return tuple(names)


def font_families(texts: Iterable[str] = ()) -> list[str]:
    """The installed fonts to draw ``texts`` with, in order (never empty).

    Latin text first tries DejaVu Sans, matplotlib's own font. When ``texts`` hold CJK characters,
    the installed CJK fonts follow (see :func:`cjk_fonts`), those of the script's region first: the
    Simplified Chinese family for Chinese, the Japanese one when there is kana. Naming only
    installed fonts keeps matplotlib from warning about each missing one.
    """
    script = cjk_script(texts)
    return list(_families(script))


@functools.lru_cache(maxsize=8)
def _families(script: str | None) -> tuple[str, ...]:
    installed = _installed_families()
    base = [name for name in FONT_FALLBACKS if name in installed]
    if script is None:
        return tuple(base or ["sans-serif"])
    tags = REGION_TAGS[script]

    def rank(name: str) -> tuple[bool, int]:  # sans serif first (the look of the other labels), then region
        words = name.split()
        return "Serif" in words, next((k for k, tag in enumerate(tags) if tag in words), len(tags))

    latin = [name for name in ("DejaVu Sans",) if name in installed]
    cjk = sorted(cjk_fonts(), key=rank)  # stable: FONT_FALLBACKS order within a rank
    return tuple(latin + cjk) or ("sans-serif",)


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


def _text_ems(text: str) -> float:
    """Rough width of ``text`` in ems: a wide (CJK) character is one em, others ~0.62."""
    return sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.62 for c in str(text))


def _source_labels(tokens: Sequence[str], fontsize: float, cell: float) -> tuple[list[str], list[int], float]:
    """The source (top) labels, their rotations and the inches they need above the heatmap.

    Tokens are rotated by 90 degrees to fit their narrow columns. Source text with CJK characters
    is drawn as it can be written, upright: a token that fits its column as it is, a longer one of
    CJK characters top to bottom, one character a line (这本书 as 这 / 本 / 书); other tokens of such
    a sentence (a Latin word) are still rotated.
    """
    if cjk_script(map(str, tokens)) is None:
        return [_label(t) for t in tokens], [90] * len(tokens), _label_inches(tokens, fontsize)
    line = 1.25 * fontsize / 72
    labels, rotations, need = [], [], line
    for token in map(str, tokens):
        if _text_ems(token) * fontsize / 72 <= cell:
            labels.append(_label(token))
            rotations.append(0)
        elif all(unicodedata.east_asian_width(c) in "WF" or c == SP_SPACE for c in token):
            labels.append("\n".join(token))
            rotations.append(0)
            need = max(need, len(token) * line)
        else:
            labels.append(_label(token))
            rotations.append(90)
            need = max(need, _label_inches([token], fontsize))
    return labels, rotations, 0.15 + need


def _label_inches(tokens: Sequence[str], fontsize: float) -> float:
    """Rough length of the longest tick label, so the margins can hold it."""
    longest = max((_text_ems(t) for t in tokens), default=0.62)
    return 0.15 + longest * fontsize / 72


def _checked_matrix(alpha: Any, src_tokens: Sequence[str], tgt_tokens: Sequence[str]) -> np.ndarray:
    """``alpha`` as a [T, S] array that matches the token lists; ValueError otherwise."""
    weights = _as_matrix(alpha)
    expected = (len(tgt_tokens), len(src_tokens))
    if weights.ndim != 2 or weights.shape != expected:
        raise ValueError(
            f"attention has shape {weights.shape}, expected [target, source] = {list(expected)} "
            "from the token lists (include EOS in tgt_tokens if alpha has a row for it)"
        )
    if 0 in expected:
        raise ValueError("cannot plot attention for an empty sentence")
    return weights


def merge_pieces(alpha: Any, src_pieces: Sequence[str], tgt_pieces: Sequence[str], src_word_ids: Sequence[int],
                 tgt_word_ids: Sequence[int], spaced: tuple[bool, bool] = (False, False)
                 ) -> tuple[np.ndarray, list[str], list[str]]:
    """Attention between subword pieces as attention between words, with the words as labels.

    ``*_word_ids`` give each piece's word (``Tokenizer.word_ids``; the ``</s>`` row its own word). As in
    :func:`attnmt.align.word_attention`, the columns of a source word's pieces are summed and the rows of a
    target word's pieces averaged, so rows still sum to 1. A word's label is its pieces joined without
    sentencepiece's ``▁``. A side written in a CJK script keeps one column (or row) per piece, shown
    without ``▁``: such text has no spaces, so its whitespace word would be the whole sentence; unless the side is
    ``spaced`` (source, target): a model trained on text segmented into words has its words between spaces.
    """
    from attnmt.align import word_attention

    weights = _checked_matrix(alpha, src_pieces, tgt_pieces)

    def words(pieces: Sequence[str], ids: Sequence[int], segmented: bool) -> tuple[list[int], list[str]]:
        ids = list(range(len(pieces))) if not segmented and cjk_script(map(str, pieces)) else list(ids)
        joined = [""] * (max(ids, default=-1) + 1)
        for piece, i in zip(pieces, ids):
            joined[i] += str(piece).replace(SP_SPACE, "")
        return ids, [text or SP_SPACE for text in joined]

    (src_ids, src_words), (tgt_ids, tgt_words) = (words(src_pieces, src_word_ids, spaced[0]),
                                                  words(tgt_pieces, tgt_word_ids, spaced[1]))
    return word_attention(weights, src_ids, tgt_ids), src_words, tgt_words


def _circle(ax, marks: Iterable[tuple[int, int]], cell: float) -> None:
    """Red circles around the (source, target) cells ``marks``."""
    links = sorted(marks)
    ax.scatter([i for i, _ in links], [j for _, j in links], s=(cell * 72 * 0.8) ** 2, facecolors="none",
               edgecolors="red", linewidths=0.8)


def save_figure(fig: Figure, path: str | Path, **options: Any) -> None:
    """``fig`` written to ``path`` by attnmt.runtime.safe_write, in the format its suffix names (png when it has none);
    the commands check for an existing file before the work."""
    with open_output(path, "wb", overwrite=True) as f:
        fig.savefig(f, format=Path(path).suffix.lstrip(".").lower() or "png", **options)


def plot_attention(
    alpha: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: str | Path,
    title: str | None = None,
    cmap: str = "gray",
    dpi: int = 150,
    marks: Iterable[tuple[int, int]] | None = None,
) -> Path:
    """Draw the attention matrix ``alpha`` [T, S] (target x source) and save it to ``path``.

    The file type follows the suffix of ``path`` (``.png``, ``.pdf``, ``.svg``, ...); parent
    folders are created. The default grayscale colormap matches the paper (black 0, white 1);
    the colour scale is fixed to [0, 1] because every row is a probability distribution.
    ``marks``: (source, target) cells to circle in red, e.g. gold alignment links, so that where
    attention and alignment part ways can be seen. Returns ``path``.
    """
    weights = _checked_matrix(alpha, src_tokens, tgt_tokens)
    n_tgt, n_src = weights.shape

    cell = _cell_inches(max(n_src, n_tgt))
    fontsize = float(np.clip(cell * 72 * 0.6, 6, 11))
    left = _label_inches(tgt_tokens, fontsize)
    src_labels, rotations, src_inches = _source_labels(src_tokens, fontsize, cell)
    top = src_inches + (0.4 if title else 0.1)
    bar = 0.6  # colour bar, its ticks and a gap
    width, height = n_src * cell, n_tgt * cell
    fig_w, fig_h = left + width + bar + 0.3, top + height + 0.2

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    families = font_families([*map(str, src_tokens), *map(str, tgt_tokens), title or ""])
    with matplotlib.rc_context({"font.family": families, "font.size": fontsize}):
        fig = Figure(figsize=(fig_w, fig_h))
        FigureCanvasAgg(fig)
        # Place the axes in inches so each cell is square whatever the figure size.
        ax = fig.add_axes((left / fig_w, 0.2 / fig_h, width / fig_w, height / fig_h))
        image = ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
        ax.xaxis.tick_top()
        ax.set_xticks(range(n_src), src_labels)
        for text, rotation in zip(ax.get_xticklabels(), rotations):
            text.set_rotation(rotation)
        ax.set_yticks(range(n_tgt), [_label(t) for t in tgt_tokens])
        ax.tick_params(length=0)
        if marks is not None:
            _circle(ax, marks, cell)
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
            save_figure(fig, path, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    return path
