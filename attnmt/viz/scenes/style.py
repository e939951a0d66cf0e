"""Shared look of the scenes: colours, font and a text helper (plain ``Text``: no LaTeX needed)."""

from __future__ import annotations

import functools

import manimpango
from manim import BLUE_C, GRAY_B, GRAY_D, ORANGE, RED, WHITE, YELLOW, Text, VGroup

# Colours carry meaning across both scenes: yellow = what is being computed now, red = lost.
ACTIVE = YELLOW
LOST = RED
MAIN_CURVE = ORANGE  # the fixed-vector model
OTHER_CURVE = BLUE_C  # models drawn for comparison (attention)
DIM = GRAY_B
GRID_LINE = GRAY_D
FOREGROUND = WHITE
FONT_PREFERENCE = ("DejaVu Sans", "Noto Sans", "Liberation Sans")
# Set before a word and then dropped, so that every word's placement is that of a full line of
# text (cap height and descender): words with and without descenders then share one baseline.
STRUT = "Hg"


@functools.lru_cache(maxsize=1)
def font() -> str:
    """The first installed font of :data:`FONT_PREFERENCE` (its Unicode sub- and superscripts render),
    else "" for Pango's default."""
    installed = set(manimpango.list_fonts())
    return next((name for name in FONT_PREFERENCE if name in installed), "")


def text(content: str, size: float, color=FOREGROUND, max_width: float | None = None,
         max_height: float | None = None) -> Text:
    """A line of text at ``size`` points, shrunk (never grown) to fit ``max_width`` x ``max_height``."""
    # Pango cannot shape an empty string, and a token may be whitespace-only after tokenization.
    mob = Text(content if content.strip() else "\u00b7", font_size=size, color=color, font=font())
    if max_width is not None and mob.width > max_width:
        mob.scale_to_fit_width(max_width)
    if max_height is not None and mob.height > max_height:
        mob.scale_to_fit_height(max_height)
    return mob


def line_text(content: str, size: float, color=FOREGROUND, max_width: float | None = None,
              max_height: float | None = None) -> tuple[VGroup, float]:
    """A word for a line of words: ``(glyphs, dy)``, where ``glyphs.move_to((x, y + dy, 0))`` puts the
    word on the baseline of a line of text centred at height ``y``.

    ``max_width`` bounds the word, ``max_height`` the line's height (so all words of a line get the
    same size unless one is too wide).
    """
    shown = content if content.strip() else "\u00b7"
    full = Text(STRUT + shown, font_size=size, color=color, font=font(), disable_ligatures=True)
    if len(full.submobjects) != len(STRUT) + len("".join(shown.split())):
        # The shaper merged or split glyphs (complex scripts): no strut, centre the word itself.
        return text(content, size, color, max_width, max_height), 0.0
    glyphs = VGroup(*full.submobjects[len(STRUT):])
    if max_width is not None and glyphs.width > max_width:
        full.scale(max_width / glyphs.width)
    if max_height is not None and full.height > max_height:
        full.scale(max_height / full.height)
    return glyphs, float(glyphs.get_center()[1] - full.get_center()[1])


def line_words(words: list[str], size: float, color=FOREGROUND) -> tuple[list[tuple[VGroup, float]], float]:
    """Many words for lines of text, set in one go: ``([(glyphs, dy), ...], line height)``, each
    pair as from :func:`line_text`, and the height of a line of text (cap height and descender).

    Pango and the SVG parser cost about a tenth of a second per ``Text``, so the words are set as
    one line and cut apart by glyph counts; if shaping merged or split glyphs, each word is set alone.
    """
    shown = [w if w.strip() else "\u00b7" for w in words]
    full = Text(" ".join([STRUT, *shown]), font_size=size, color=color, font=font(), disable_ligatures=True)
    counts = [len("".join(w.split())) for w in shown]
    line_height = VGroup(*full.submobjects[:len(STRUT)]).height
    if len(full.submobjects) != len(STRUT) + sum(counts):
        return [line_text(w, size, color) for w in words], line_height
    centre_y = full.get_center()[1]
    out, start = [], len(STRUT)
    for count in counts:
        glyphs = VGroup(*full.submobjects[start:start + count])
        out.append((glyphs, float(glyphs.get_center()[1] - centre_y)))
        start += count
    return out, line_height
