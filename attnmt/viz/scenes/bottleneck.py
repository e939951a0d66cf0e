"""`Bottleneck`: every source word must squeeze into one fixed-size vector c.

The words of a sentence appear one by one, each sending an arrow into c, a vector of fixed size
drawn as a row of cells. Beside it, the *measured* BLEU of the fixed-vector model is traced
against sentence length (with any other measured model, such as RNNsearch, for comparison).

How full c is drawn follows the measured curve, not a guess: c fills up until the length at
which the fixed-vector model's BLEU has fallen below 90% of its best
(:func:`.layout.capacity`, marked "c full" on the plot); from there on c is drawn overflowing,
and the arrows of the words that came more than that many words ago turn red and fade: the early
words it can no longer hold. If the measured curve never drops, c never overflows.

How it is animated: one number, the sentence length so far, drives everything. Each word gets
one short play in which only that word, its arrow and the traced curves move (an updater restyles
them from a ValueTracker); everything else jumps to the new length between plays. This is for
speed: manim deep-copies the mobjects it animates and redraws, every frame, all mobjects from the
first moving one on, so animating dozens of words and arrows at once costs minutes, not seconds.
"""

from __future__ import annotations

import math

import numpy as np
from manim import (
    DOWN,
    LEFT,
    ORIGIN,
    RIGHT,
    UP,
    Arrow,
    Axes,
    DashedLine,
    Dot,
    FadeIn,
    Line,
    Rectangle,
    Scene,
    ValueTracker,
    VGroup,
    VMobject,
    always_redraw,
    config,
    linear,
)

from attnmt.viz.scenes.data import BottleneckData
from attnmt.viz.scenes.layout import (
    AXES_REGION,
    LEGEND_TOP,
    TITLE_Y,
    VECTOR_CELLS,
    VECTOR_CENTER,
    VECTOR_SIZE,
    WORDS_REGION,
    capacity,
    curve_prefix,
    flow,
    interpolate,
    nice_axis,
)
from attnmt.viz.scenes.style import ACTIVE, DIM, FOREGROUND, LOST, MAIN_CURVE, OTHER_CURVE, line_words, text

WORDS_SECONDS = 12.0  # the whole sentence takes about this long, whatever its length
WORD_SIZES = (22, 19, 16, 14, 12, 10)  # font sizes tried in turn until the sentence fits
ARROW_OPACITY = 0.7
FADED = 0.12  # opacity of the arrow of a word c has lost entirely
OVERFLOW_Y = -3.2  # the overflow warning, under c and its counter


class Bottleneck(Scene):
    """The scene; ``data`` holds the measured curves and the words."""

    def __init__(self, data: BottleneckData, **kwargs):
        self.data = data
        super().__init__(**kwargs)

    def construct(self) -> None:
        curves = self.data.curves
        self.full_at = capacity(curves.points(curves.main))
        self.add(text("Bottleneck: the whole sentence must fit into one fixed-size vector c", 26)
                 .move_to((0, TITLE_Y, 0)))
        self.add(text(f"curves {curves.source}; words: {self.data.words_source}", 13, DIM, max_width=13.8)
                 .to_edge(DOWN, buff=0.12))
        self.words = self._words()
        self._styles: list[tuple | None] = [None] * len(self.words)  # each word's last drawn style
        vector, self.cells = self._vector()
        self.arrows = VGroup(*(self._arrow(word, k) for k, word in enumerate(self.words)))
        self.overflow = text("c overflows: the early words are lost", 18, LOST).move_to(
            (VECTOR_CENTER[0], OVERFLOW_Y, 0))
        self.counter = _Counter(VGroup(vector[0], vector[2]), len(str(len(self.words))))
        length = ValueTracker(0.0)
        plot, traced = self._plot(length)
        # What moves during a play goes last: manim redraws every frame the mobjects from the first
        # moving one on, and paints those before it once per play, as a static background.
        active = VGroup()  # the word being added, restyled by an updater while it fades in
        self.add(vector, plot, self.arrows, VGroup(*self.words), self.overflow, self.counter.mob, traced, active)
        n_words = len(self.words)
        last_x = max(p[0] for name in curves.curves for p in curves.points(name))
        end = max(float(n_words), last_x)

        if config.save_last_frame:  # only the final state is drawn: skip straight to it
            length.set_value(end)
            self._draw(end)
            self.update_mobjects(0)  # the curves follow `length` through their updaters
            return

        self._draw(0.0)
        self.play(FadeIn(vector), FadeIn(plot), run_time=1.0)
        step_s = WORDS_SECONDS / n_words
        for n in range(1, n_words + 1):
            # Everything else jumps to n words at once; only the new word and arrow fade in.
            self._draw(n)
            self._style(n - 1, n - 1)
            active.remove(*active.submobjects)
            active.add(self.words[n - 1], self.arrows[n - 1])
            active.add_updater(lambda _, k=n - 1: self._style(k, length.get_value()))
            self.play(length.animate.set_value(n), run_time=step_s, rate_func=linear)
            active.clear_updaters()
        if end > n_words:  # the measured curve reaches beyond the sentence: draw the rest of it
            self.play(length.animate.set_value(end), run_time=1.0, rate_func=linear)
        self._draw(end)
        self.wait(2.5)

    # ------------------------------------------------------------ drawing a moment

    def _draw(self, length: float) -> None:
        """Words, arrows and c for a sentence of ``length`` words so far."""
        n_words = len(self.words)
        n = min(length, n_words)
        full_at = self.full_at
        for k in range(n_words):
            self._style(k, n)
        over = full_at is not None and n > full_at
        fraction = n / full_at if full_at is not None else n / n_words
        lit = min(VECTOR_CELLS, math.ceil(fraction * VECTOR_CELLS - 1e-9))
        for k, cell in enumerate(self.cells):
            cell.set_fill(LOST if over else MAIN_CURVE, opacity=0.85 if k < lit else 0)
        self.overflow.set_opacity(1 if over else 0)
        self.counter.show(round(n))

    def _style(self, k: int, n: float) -> None:
        """Word k and its arrow when the sentence has ``n`` words: fading in as n passes k, red and
        fading once it lies more than c's capacity back."""
        full_at = self.full_at
        shown = float(np.clip(n - k, 0.0, 1.0))
        age = n - (k + 1) - full_at if full_at is not None else 0.0
        kept = max(FADED, 1 - age / full_at) if age > 0 else 1.0
        style = (age > 0, round(shown, 3), round(kept, 3))
        if self._styles[k] == style:  # restyling every glyph of every word each time is slow
            return
        self._styles[k] = style
        color = LOST if age > 0 else FOREGROUND
        self.words[k].set_color(color).set_opacity(shown * (max(0.35, kept) if age > 0 else 1.0))
        self.arrows[k].set_color(color).set_opacity(shown * ARROW_OPACITY * kept)

    # ------------------------------------------------------------ building blocks

    def _words(self) -> list:
        """The sentence's words as text, the largest size at which they fit the words region."""
        first = WORD_SIZES[0]
        placed, line_height = line_words(self.data.words, first)
        line_height *= 1.5
        widths = [m.width for m, _ in placed]
        # Text scales linearly with its size: find the size that fits, then scale once.
        for size in (*WORD_SIZES, WORD_SIZES[-1] / 2):
            k = size / first
            centres = flow([w * k for w in widths], line_height * k, WORDS_REGION, gap=0.16 * k)
            if centres is not None:
                break
        for (mob, dy), (x, y) in zip(placed, centres or []):
            mob.scale(k).move_to((x, y + dy * k, 0))
        return [mob for mob, _ in placed]

    def _vector(self) -> tuple[VGroup, VGroup]:
        """c: a row of VECTOR_CELLS cells, the same size whatever the sentence length."""
        width, height = VECTOR_SIZE
        cells = VGroup(*(Rectangle(width=width / VECTOR_CELLS, height=height, stroke_color=FOREGROUND,
                                   stroke_width=2, fill_color=MAIN_CURVE, fill_opacity=0)
                         for _ in range(VECTOR_CELLS))).arrange(RIGHT, buff=0)
        cells.move_to((*VECTOR_CENTER, 0))
        name = text("c", 30).next_to(cells, LEFT, buff=0.2)
        caption = text("one fixed-size vector", 16, DIM).next_to(cells, DOWN, buff=0.12)
        return VGroup(cells, name, caption), cells

    def _arrow(self, word, k: int) -> Arrow:
        """Word k's arrow, ending on c's top edge (spread out a little so that the arrows stay apart)."""
        spread = (k + 0.5) / len(self.words) - 0.5
        end = self.cells.get_top() + np.array((0.8 * self.cells.width * spread, 0, 0))
        return Arrow(word.get_bottom(), end, buff=0.06, stroke_width=2, tip_length=0.12,
                     max_tip_length_to_length_ratio=0.08, color=FOREGROUND)

    def _plot(self, length: ValueTracker) -> tuple[VGroup, VGroup]:
        """Axes with the "c full" mark and a legend; and the measured curves traced up to ``length``."""
        curves = self.data.curves
        region = AXES_REGION
        x_max, x_step = nice_axis(curves.max_length)
        best = max(b.bleu for bs in curves.curves.values() for b in bs)
        y_max, y_step = nice_axis(min(100.0, max(best, 5.0)))  # a near-zero curve still gets a readable axis
        axes = Axes(x_range=[0, x_max, x_step], y_range=[0, y_max, y_step], x_length=region.width,
                    y_length=region.height, tips=False, axis_config={"color": DIM, "stroke_width": 2})
        axes.move_to((*region.center, 0))
        ticks = VGroup(*(text(f"{v:g}", 13, DIM).next_to(axes.c2p(v, 0), DOWN, buff=0.12)
                         for v in np.arange(x_step, x_max + x_step / 2, x_step)),
                       *(text(f"{v:g}", 13, DIM).next_to(axes.c2p(0, v), LEFT, buff=0.12)
                         for v in np.arange(y_step, y_max + y_step / 2, y_step)))
        names = VGroup(text("source sentence length (words)", 15, DIM).next_to(axes.x_axis, DOWN, buff=0.45),
                       text("BLEU", 15, DIM).rotate(np.pi / 2).next_to(axes.y_axis, LEFT, buff=0.55))
        traced, legend = VGroup(), VGroup()
        for name in curves.curves:
            points = curves.points(name)
            main = name == curves.main
            color, width = (MAIN_CURVE, 5) if main else (OTHER_CURVE, 3)
            traced.add(always_redraw(lambda p=points, c=color, w=width:
                                     _polyline(axes, curve_prefix(p, length.get_value()), c, w)))
            legend.add(VGroup(Line(ORIGIN, RIGHT * 0.4, color=color, stroke_width=width),
                              text(f"{name} ({'one fixed vector' if main else 'compared'})", 14))
                       .arrange(RIGHT, buff=0.12))
        legend.arrange(DOWN, aligned_edge=LEFT, buff=0.1).align_to(np.array((region.left, LEGEND_TOP, 0)), UP + LEFT)
        main_points = curves.points(curves.main)
        dot = always_redraw(lambda: _dot(axes, main_points, length.get_value()))
        group = VGroup(axes, ticks, names, legend)
        if self.full_at is not None:
            mark = DashedLine(axes.c2p(self.full_at, 0), axes.c2p(self.full_at, y_max), color=LOST, stroke_width=2)
            # At the foot of the mark: where the curves are, at that length, high above.
            group.add(mark, text("c full", 13, LOST).next_to(mark.get_bottom(), UP + RIGHT, buff=0.08))
        return group, VGroup(traced, dot)


class _Counter:
    """"n = 17 words" under c.

    Its digits are fixed slots holding all ten digits, of which one is shown: manim draws a moving
    mobject from the family it had when the animation began, so replacing submobjects mid-play
    would leave the old digits on screen (and setting a new Text every frame is slow too).
    """

    def __init__(self, anchor: VGroup, n_slots: int):
        # Set as one line, so that the digits and the words share a baseline.
        parts, line_height = line_words(["n", "=", *"0123456789", "words"], 18, DIM)
        (n, n_dy), (equals, eq_dy), digits, (words, words_dy) = parts[0], parts[1], parts[2:12], parts[12]
        gap, digit_width = 0.12, max(d.width for d, _ in digits)
        x = anchor.get_center()[0] - (n.width + equals.width + n_slots * digit_width + words.width + 4 * gap) / 2
        y = anchor.get_bottom()[1] - 0.15 - line_height / 2

        def place(mob, dy: float, width: float) -> None:
            nonlocal x
            mob.move_to((x + width / 2, y + dy, 0))
            x += width + gap

        place(n, n_dy, n.width)
        place(equals, eq_dy, equals.width)
        self.slots = [VGroup(*(d.copy() for d, _ in digits)) for _ in range(n_slots)]
        for slot in self.slots:
            for digit, (_, dy) in zip(slot, digits):
                digit.move_to((x + digit_width / 2, y + dy, 0))
            x += digit_width
        x += gap
        place(words, words_dy, words.width)
        self.mob = VGroup(n, equals, *self.slots, words)
        self.value: int | None = None

    def show(self, value: int) -> None:
        if value == self.value:
            return
        self.value = value
        shown = str(value)[-len(self.slots):].rjust(len(self.slots))
        for slot, char in zip(self.slots, shown):
            for d, digit in enumerate(slot):
                digit.set_opacity(1 if char == str(d) else 0)


def _polyline(axes: Axes, points: list[tuple[float, float]], color, width: float) -> VMobject:
    """The traced part of a curve; a single measured point is a dot."""
    if len(points) == 1:
        return Dot(axes.c2p(*points[0]), radius=0.05, color=color)
    line = VMobject(stroke_color=color, stroke_width=width)
    if points:
        line.set_points_as_corners([axes.c2p(x, y) for x, y in points])
    return line


def _dot(axes: Axes, points: list[tuple[float, float]], x: float):
    """The marker at the current length on the fixed-vector curve (hidden outside its range)."""
    y = interpolate(points, x)
    return VMobject() if y is None else Dot(axes.c2p(x, y), radius=0.08, color=ACTIVE)
