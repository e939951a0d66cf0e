"""`SoftAlignment`: additive attention computed one target word at a time on a K x Q grid.

Rows are the K source words (annotations h_j), columns the Q target words (decoder steps i, the
last one ``</s>``). For each column the three steps of Bahdanau et al. (2014) light up in turn:

1. score: e_ij = v^T tanh(W_s s_{i-1} + W_h h_j), drawn in blue, brighter for a higher score;
2. softmax: alpha_ij, drawn as the cell's grey level (black 0, white 1), with the column's sum;
3. context: the weighted column flows into c_i = sum_j alpha_ij h_j.

The weights are a real model's (see :mod:`.data`). The scores are recovered from them exactly up
to the column's constant: softmax is unchanged by adding a constant to every e_ij, so
log alpha_ij - max_j log alpha_ij is e_ij - max_j e_ij. The finished grid is the attention heatmap,
the soft alignment of Bahdanau et al., Figure 3.

How it is animated: one number, ``progress``, runs from 0 to 3Q (column i's three steps are
``[3i, 3i + 3)``) and :meth:`SoftAlignment._draw` derives the picture from it. Each step is one
play in which only the current column's cells (and the copy flowing into c_i) move, restyled by an
updater from a ValueTracker; highlights and labels change between plays. This is for speed: manim
deep-copies the mobjects it animates and redraws, every frame, all mobjects from the first moving
one on, so animating the whole grid costs minutes, not seconds.
"""

from __future__ import annotations

import numpy as np
from manim import (
    BLACK,
    BLUE_D,
    DOWN,
    LEFT,
    PI,
    RIGHT,
    UP,
    Create,
    FadeIn,
    Rectangle,
    Scene,
    Square,
    SurroundingRectangle,
    ValueTracker,
    VGroup,
    config,
    interpolate_color,
    linear,
)

from attnmt.viz.scenes.data import AttentionGrid
from attnmt.viz.scenes.layout import STEPS_REGION, TITLE_Y, grid_layout
from attnmt.viz.scenes.style import ACTIVE, DIM, FOREGROUND, GRID_LINE, line_words, text

STEPS = (
    ("1  score", "eᵢⱼ = vᵀ tanh(Wₛ sᵢ₋₁ + Wₕ hⱼ)"),
    ("2  softmax", "αᵢⱼ = exp(eᵢⱼ) / Σₖ exp(eᵢₖ)"),
    ("3  context", "cᵢ = Σⱼ αᵢⱼ hⱼ"),
)
SLOW_COLUMNS = 2  # the first columns are shown step by step, the rest quickly
SLOW_STEP_S, FAST_COLUMN_S = 0.9, 0.6
LABEL_GAP = 0.12
LABEL_LEFT_EDGE = -7.0  # the source labels may reach this far left


def alpha_color(alpha: float):
    """A cell's colour for weight ``alpha``: grey level alpha, so its brightness is the weight."""
    return interpolate_color(BLACK, FOREGROUND, float(np.clip(alpha, 0.0, 1.0)))


def score_levels(column: np.ndarray) -> np.ndarray:
    """The column's scores e_ij - max_j e_ij (from log alpha), scaled to [0, 1] for the blue tint."""
    e = np.log(np.maximum(column, 1e-12))
    span = e.max() - e.min()
    return (e - e.min()) / span if span > 0 else np.full_like(e, 0.5)


class SoftAlignment(Scene):
    """The scene; ``grid`` is the attention to animate."""

    def __init__(self, grid: AttentionGrid, **kwargs):
        self.grid = grid
        super().__init__(**kwargs)

    def construct(self) -> None:
        g = self.grid
        k_rows, q_cols = g.weights.shape
        self.layout = grid_layout(k_rows, q_cols)
        self.cells = self._cells()
        self.src_labels, self.tgt_labels = self._labels()
        self.steps = self._steps()
        self.context = self._context_box()
        self.sums, self.compact_sums = self._sums()
        self.ghost = VGroup(*(Square(self.layout.cell, stroke_width=0, fill_opacity=0) for _ in range(k_rows)))
        self.frame = SurroundingRectangle(VGroup(*(self.cells[j][0] for j in range(k_rows))), color=ACTIVE,
                                          buff=0.03, stroke_width=3)
        self._shown = (-1, -1)  # (column, step) last drawn, so updaters restyle only on a change
        self.add(text("Soft alignment: additive attention, one target word at a time", 26)
                 .move_to((0, TITLE_Y, 0)))
        self.add(text(f"attention of {g.source}", 14, DIM, max_width=13.5).to_edge(DOWN, buff=0.12))
        static = VGroup(self.cells, self.src_labels, self.tgt_labels, self.steps, self.context)

        if config.save_last_frame:  # only the final state is drawn: skip straight to it
            self.add(static, self.sums, self.compact_sums, self.ghost)
            self._draw(3.0 * q_cols)
            self._finish()
            return

        self.play(FadeIn(static), run_time=1.0)
        self.add(self.sums, self.compact_sums, self.ghost)
        self._draw(0.0)
        self.play(Create(self.frame), run_time=0.4)
        progress = ValueTracker(0.0)
        # What moves during a play goes last: manim redraws every frame the mobjects from the first
        # moving one on, and paints those before it once per play, as a static background. So each
        # play moves only the current column's cells (and the ghost), restyled by an updater; the
        # highlights change between plays.
        active = VGroup()
        self.add(active)
        for i in range(q_cols):
            column = [self.cells[j][i] for j in range(k_rows)]
            step_s = SLOW_STEP_S if i < SLOW_COLUMNS else FAST_COLUMN_S / 3
            for step in range(3):
                self._draw(3.0 * i + step)
                active.remove(*active.submobjects)
                active.add(*column, *([self.ghost] if step == 2 else []))
                active.add_updater(lambda _: self._draw(progress.get_value()))
                self.play(progress.animate.set_value(3 * i + step + 1), run_time=step_s, rate_func=linear)
                active.clear_updaters()
                if i < SLOW_COLUMNS:  # a pause to read the formula
                    self.wait(0.3)
        self._draw(3.0 * q_cols)
        self._finish()
        self.wait(2.5)

    def _finish(self) -> None:
        """The final state: every column done, no highlight left over the grid."""
        self.remove(self.frame)
        for s in self.steps:
            s.set_color(DIM)
        self.add(text("the finished grid is the soft\nalignment: the attention heatmap", 18, ACTIVE,
                      max_width=STEPS_REGION.width).next_to(self.context, UP, buff=0.35)
                 .align_to(self.steps, LEFT))

    # ------------------------------------------------------------ drawing a moment

    def _draw(self, progress: float) -> None:
        """Colour the grid for ``progress`` in [0, 3Q]: columns before the current one are done."""
        q_cols = self.grid.weights.shape[1]
        col = min(int(progress // 3), q_cols - 1)
        step = min(int(progress - 3 * col), 2) if progress < 3 * q_cols else 3
        frac = progress - 3 * col - min(step, 2)
        if self._shown[0] != col:  # a new column: finish the previous one
            for i in range(max(self._shown[0], 0), col):
                self._paint_column(i, 3, 1.0)
                self._mark_column(i, done=True)
        if self._shown != (col, step):
            self._mark_column(col, done=step == 3, active_step=step)
        self._shown = (col, step)
        self._paint_column(col, step, frac)
        self._move_ghost(col, frac if step == 2 else None)

    def _paint_column(self, i: int, step: int, frac: float) -> None:
        """Column i's cells part of the way (``frac``) through ``step`` (3: done)."""
        alpha = self.grid.weights[:, i]
        scores = score_levels(alpha)
        for j, row in enumerate(self.cells):
            score = interpolate_color(BLACK, BLUE_D, float(scores[j]))
            if step == 0:
                color = interpolate_color(BLACK, score, frac)
            elif step == 1:
                color = interpolate_color(score, alpha_color(alpha[j]), frac)
            else:
                color = alpha_color(alpha[j])
            row[i].set_fill(color, opacity=1)

    def _mark_column(self, i: int, done: bool, active_step: int | None = None) -> None:
        """Highlight column i, its target word and the active formula, and show its sum."""
        x = self.layout.cell_center(0, i)[0]
        self.frame.set_x(x)
        for k, s in enumerate(self.steps):
            s.set_color(ACTIVE if k == active_step else DIM)
        for k, label in enumerate(self.tgt_labels):
            label.set_color(ACTIVE if k == i and not done else FOREGROUND)
        self.sums[i].set_opacity(1 if active_step in (1, 2) and not done else 0)
        self.compact_sums[i].set_opacity(1 if done else 0)

    def _move_ghost(self, i: int, frac: float | None) -> None:
        """During step 3, a copy of column i shrinks into the context box; otherwise hidden."""
        if frac is None:
            self.ghost.set_opacity(0)
            return
        target = self.context.get_center()
        scale = 1 - 0.9 * frac
        for j, square in enumerate(self.ghost):
            start = np.array((*self.layout.cell_center(j, i), 0.0))
            square.scale_to_fit_width(self.layout.cell * scale)
            square.move_to(start + (target - start) * frac)
            square.set_fill(alpha_color(self.grid.weights[j, i]), opacity=1 - 0.6 * frac)

    # ------------------------------------------------------------ building blocks

    def _cells(self) -> VGroup:
        """K rows of Q squares, all black (weight 0) until their column is computed."""
        rows = VGroup()
        for j in range(self.layout.n_rows):
            row = VGroup()
            for i in range(self.layout.n_cols):
                row.add(Square(self.layout.cell, stroke_color=GRID_LINE, stroke_width=1, fill_color=BLACK,
                               fill_opacity=1).move_to((*self.layout.cell_center(j, i), 0)))
            rows.add(row)
        return rows

    def _labels(self) -> tuple[VGroup, VGroup]:
        """Source words left of their rows, target words (rotated) above their columns.

        Each side is set as one line of text (fast, and one baseline for all its words), then cut
        into words; a word too long for its place is shrunk alone.
        """
        g, layout = self.grid, self.layout
        box = layout.box
        size = 22.0
        src_words, line = line_words(g.src_tokens, size)
        tgt_words, _ = line_words(g.tgt_tokens, size)
        # One size for all labels: the line height must fit a cell and the longest word its room.
        src_room, tgt_room = box.left - LABEL_LEFT_EDGE - LABEL_GAP, TITLE_Y - 0.3 - box.top - LABEL_GAP
        k_src = k_tgt = min(0.8 * layout.cell / line, src_room / max(m.width for m, _ in src_words),
                            tgt_room / max(m.width for m, _ in tgt_words), 1.0)
        src = VGroup()
        for j, (label, dy) in enumerate(src_words):
            label.scale(k_src).move_to((0, layout.cell_center(j, 0)[1] + dy * k_src, 0))
            src.add(label.align_to(np.array((box.left - LABEL_GAP, 0, 0)), RIGHT))
        tgt = VGroup()
        for i, (label, dy) in enumerate(tgt_words):
            label.scale(k_tgt).rotate(PI / 2)  # a quarter turn maps the offset dy to -dy in x
            label.move_to((layout.cell_center(0, i)[0] - dy * k_tgt, 0, 0))
            tgt.add(label.align_to(np.array((0, box.top + LABEL_GAP, 0)), DOWN))
        return src, tgt

    def _sums(self) -> tuple[VGroup, VGroup]:
        """Per column: the sum of its weights while it is computed, then a compact one under it."""
        totals = self.grid.weights.sum(axis=0)
        below = self.layout.box.bottom - 0.08
        cell = self.layout.cell
        made: dict[str, object] = {}  # each distinct string is set once, then copied: Text is slow

        def label(content: str, size: float, color, max_width: float | None = None):
            if content not in made:
                made[content] = text(content, size, color, max_width=max_width)
            return made[content].copy()

        sums, compact = VGroup(), VGroup()
        for i, total in enumerate(totals):
            x = self.layout.cell_center(0, i)[0]
            # The running sum sits under the row of compact ones, so that it never covers them.
            sums.add(label(f"Σⱼ αᵢⱼ = {total:.2f}", 16, ACTIVE).move_to((x, 0, 0))
                     .align_to(np.array((0, below - 0.3, 0)), UP).set_opacity(0))
            compact.add(label(f"{total:.2g}", 12, DIM, 0.9 * cell).move_to((x, 0, 0))
                        .align_to(np.array((0, below, 0)), UP).set_opacity(0))
        return sums, compact

    def _steps(self) -> VGroup:
        """The three formulas, stacked in the right-hand panel."""
        region = STEPS_REGION
        group = VGroup()
        for name, formula in STEPS:
            group.add(VGroup(text(name, 20, DIM), text(formula, 18, DIM, max_width=region.width))
                      .arrange(DOWN, aligned_edge=LEFT, buff=0.12))
        group.arrange(DOWN, aligned_edge=LEFT, buff=0.4)
        return group.align_to(np.array((region.left, 0, 0)), LEFT).align_to(np.array((0, region.top, 0)), UP)

    def _context_box(self) -> VGroup:
        """Where the weighted column goes: the context vector c_i, one per target word."""
        box = Rectangle(width=1.2, height=0.6, color=FOREGROUND, stroke_width=2)
        group = VGroup(box, text("cᵢ", 22).move_to(box))
        return group.move_to((STEPS_REGION.left + 0.6, STEPS_REGION.bottom + 0.7, 0))
