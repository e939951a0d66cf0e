"""Where things go on the frame, in manim scene units, and how scene units map to pixels.

Pure geometry, no manim import: the scenes place their mobjects with these functions, and the
tests use the same functions to find, for example, the pixel at the centre of an attention cell.

Manim's frame is 8 units high and, for every quality preset (16:9), 8 * 16 / 9 units wide, with the
origin at the centre and y pointing up.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

FRAME_HEIGHT = 8.0
FRAME_WIDTH = FRAME_HEIGHT * 16 / 9

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle in scene units."""

    left: float
    right: float
    bottom: float
    top: float

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.top - self.bottom

    @property
    def center(self) -> Point:
        return (self.left + self.right) / 2, (self.bottom + self.top) / 2


def to_pixel(x: float, y: float, width_px: int, height_px: int,
             frame_height: float = FRAME_HEIGHT) -> tuple[int, int]:
    """The (column, row) of the pixel at scene point (x, y) in a ``width_px`` x ``height_px`` frame.

    manim derives the frame's width from the pixel aspect ratio (854 x 480 is not exactly 16:9).
    """
    frame_width = frame_height * width_px / height_px
    col = (x + frame_width / 2) / frame_width * width_px
    row = (frame_height / 2 - y) / frame_height * height_px
    return min(max(int(col), 0), width_px - 1), min(max(int(row), 0), height_px - 1)


# ---------------------------------------------------------------- SoftAlignment

# Source labels on the left, target labels (rotated) above, column sums below, the three steps
# of additive attention in a panel on the right.
GRID_REGION = Box(left=-5.3, right=2.3, bottom=-2.9, top=2.2)
STEPS_REGION = Box(left=2.9, right=6.95, bottom=-3.6, top=2.6)
TITLE_Y = 3.55
MAX_CELL = 0.62


@dataclass(frozen=True)
class GridLayout:
    """A ``n_rows`` x ``n_cols`` grid of square cells of side ``cell`` whose top-left corner is (left, top).

    Row j is source word j (top to bottom), column i is target word i (left to right).
    """

    n_rows: int
    n_cols: int
    cell: float
    left: float
    top: float

    def cell_center(self, row: int, col: int) -> Point:
        return self.left + (col + 0.5) * self.cell, self.top - (row + 0.5) * self.cell

    @property
    def box(self) -> Box:
        return Box(self.left, self.left + self.n_cols * self.cell, self.top - self.n_rows * self.cell, self.top)


def grid_layout(n_rows: int, n_cols: int, region: Box = GRID_REGION, max_cell: float = MAX_CELL) -> GridLayout:
    """The largest square cells (at most ``max_cell``) that fit the grid into ``region``.

    The grid hugs the region's top-left corner, so the labels beside and above it keep their place
    whatever the sentence length.
    """
    if n_rows < 1 or n_cols < 1:
        raise ValueError(f"a grid needs at least one row and one column, got {n_rows} x {n_cols}")
    cell = min(region.width / n_cols, region.height / n_rows, max_cell)
    return GridLayout(n_rows, n_cols, cell, region.left, region.top)


# ---------------------------------------------------------------- Bottleneck

WORDS_REGION = Box(left=-6.9, right=0.2, bottom=0.35, top=3.05)
VECTOR_CENTER: Point = (-3.35, -1.55)
VECTOR_SIZE = (3.2, 0.5)  # width, height: the same whatever the sentence length, which is the point
VECTOR_CELLS = 8
AXES_REGION = Box(left=1.55, right=6.7, bottom=-2.55, top=2.25)
LEGEND_TOP = 3.1  # the legend sits between the title and the axes, clear of the curves


def nice_axis(max_value: float, max_ticks: int = 6) -> tuple[float, float]:
    """(axis end, tick step) for an axis from 0 that covers ``max_value`` with round ticks."""
    max_value = max(max_value, 1e-9)
    magnitude = 10 ** int(f"{max_value:e}".split("e")[1])
    for mantissa in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10):
        step = mantissa * magnitude
        if max_value / step <= max_ticks:
            break
    return -(-max_value // step) * step, step


def flow(widths: Sequence[float], line_height: float, region: Box, gap: float) -> list[Point] | None:
    """Centres of words of the given widths set as left-aligned lines of text in ``region``.

    Returns None when the words do not fit (the caller shrinks the text and tries again).
    """
    centres: list[Point] = []
    x, line = region.left, 0
    for w in widths:
        if x + w > region.right and x > region.left:  # wrap, unless the word alone is the line
            x, line = region.left, line + 1
        y = region.top - (line + 0.5) * line_height
        if y - line_height / 2 < region.bottom or w > region.width:
            return None
        centres.append((x + w / 2, y))
        x += w + gap
    return centres


def interpolate(points: Sequence[Point], x: float) -> float | None:
    """The piecewise-linear curve through ``points`` (sorted by x) at ``x``; None outside its range."""
    if not points or x < points[0][0] or x > points[-1][0]:
        return None
    xs = [p[0] for p in points]
    k = bisect.bisect_right(xs, x)
    if k >= len(points):
        return points[-1][1]
    (x0, y0), (x1, y1) = points[k - 1], points[k]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def curve_prefix(points: Sequence[Point], x: float) -> list[Point]:
    """The part of the curve through ``points`` up to ``x``: the vertices passed and the point at x.

    The curve is only drawn between measured points; it is never extrapolated.
    """
    prefix = [p for p in points if p[0] <= x]
    y = interpolate(points, x)
    if y is not None and (not prefix or prefix[-1][0] < x):
        prefix.append((x, y))
    return prefix


def capacity(points: Sequence[Point], keep: float = 0.9) -> float | None:
    """The sentence length at which the measured BLEU has fallen below ``keep`` times its best.

    The scene draws c as full (and overflowing) from this length on, so the picture follows the
    measurement: a curve that never drops gives a c that never overflows. None if it never drops.
    """
    if not points:
        return None
    best = max(range(len(points)), key=lambda k: points[k][1])
    threshold = keep * points[best][1]
    for (x0, y0), (x1, y1) in zip(points[best:], points[best + 1:]):
        if y1 < threshold:
            # Where the segment crosses the threshold.
            return x0 + (x1 - x0) * (y0 - threshold) / (y0 - y1)
    return None
