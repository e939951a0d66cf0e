"""`attnmt animate`: the chapter's two manim animations, rendered from a real model's numbers.

* ``bottleneck``: the source words flow into one fixed-size vector c, which overflows, beside
  the measured BLEU-by-length curve of the fixed-vector model (:mod:`.scenes.bottleneck`);
* ``soft-alignment``: additive attention computed column by column on a K x Q grid that ends
  as the attention heatmap (:mod:`.scenes.soft_alignment`).

Where the numbers come from is described in :mod:`.scenes.data`: a results JSON, models evaluated
on a test set, a model translating a sentence, or the built-in demo's measurements shipped in the
package. Nothing is drawn by hand.

manim (Community edition) is an optional dependency: ``pip install 'attnmt[anim]'``. It needs
ffmpeg, cairo and pango from the system (Debian/Ubuntu:
``apt-get install ffmpeg libcairo2-dev libpango1.0-dev pkg-config``). All text is set with
manim's ``Text`` (Pango), so no LaTeX is needed.

Rendering happens in a temporary media folder; only the requested files are written: an MP4, a
GIF beside it with ``gif=True``, or just the last frame as a PNG with ``last_frame=True`` (fast:
manim skips every animation and draws the final state once).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.decode.evaluate import DEFAULT_BUCKET_WIDTH
from attnmt.errors import UserError

SCENES = ("bottleneck", "soft-alignment")
QUALITIES = {"low": "low_quality", "medium": "medium_quality", "high": "high_quality"}  # 480p15, 720p30, 1080p60
SYSTEM_PACKAGES = "ffmpeg libcairo2-dev libpango1.0-dev pkg-config"
INSTALL_HINT = (f"pip install 'attnmt[anim]' (manim also needs ffmpeg, cairo and pango; on Debian/Ubuntu: "
                f"apt-get install {SYSTEM_PACKAGES})")
GIF_FPS = 10  # GIFs are for READMEs: more frames only make the file bigger (and 1/10 s is an exact GIF delay)


@dataclass(frozen=True)
class AnimateResult:
    """The files written (MP4 [+ GIF], or one PNG) and how long rendering them took (after the
    scene's data was prepared)."""

    files: list[Path]
    seconds: float


def require_manim() -> None:
    """Raise UserError with the install command if manim cannot be imported."""
    try:
        import manim  # noqa: F401
    except (ImportError, OSError) as e:  # OSError: manim is there but cairo or pango is not
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"attnmt animate needs manim, which cannot be imported ({reason}); install it with: "
                        f"{INSTALL_HINT}") from None


def output_paths(scene: str, out: str | Path | None, last_frame: bool, gif: bool) -> list[Path]:
    """The files a render writes: ``out`` (default ``<scene>.mp4``, or ``.png`` for the last frame)
    and, with ``gif``, the same name ending in ``.gif``."""
    if gif and last_frame:
        raise UserError("animate: --gif and --last-frame exclude each other (the last frame is one PNG)")
    expected = ".png" if last_frame else ".mp4"
    path = Path(out) if out is not None else Path(scene.replace("-", "_") + expected)
    if path.suffix.lower() != expected:
        what = "--last-frame writes a PNG" if last_frame else "the animation is an MP4 (add --gif for a GIF too)"
        raise UserError(f"animate: --out {path} should end in {expected}: {what}")
    return [path, path.with_suffix(".gif")] if gif else [path]


def animate(
    scene: str,
    out: str | Path | None = None,
    *,
    quality: str = "high",
    gif: bool = False,
    last_frame: bool = False,
    overwrite: bool = False,
    study: str | Path | None = None,
    model_dirs: Sequence[str | Path] = (),
    test: tuple[str | Path, str | Path] | None = None,
    sentence: str | None = None,
    checkpoint: str | None = None,
    beam: int | None = None,
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
) -> AnimateResult:
    """Render ``scene`` (``"bottleneck"`` or ``"soft-alignment"``) to ``out``.

    bottleneck: the curve comes from ``study`` (a results JSON), from evaluating ``model_dirs`` on
    ``test = (src, ref)`` per ``bucket_width``-token source-length bucket, or else from the built-in
    demo; ``sentence`` replaces the words shown. soft-alignment: the attention of ``model_dirs[0]``
    (one RNNsearch model) on ``sentence``, or else the bundled attention of a trained demo model.
    """
    if scene not in SCENES:
        raise UserError(f"animate: unknown scene {scene!r}; choose one of: {', '.join(SCENES)}")
    if quality not in QUALITIES:
        raise UserError(f"animate: unknown quality {quality!r}; choose one of: {', '.join(QUALITIES)}")
    paths = output_paths(scene, out, last_frame, gif)
    for path in paths:
        if path.exists() and not overwrite:
            raise UserError(f"{path} exists; choose another output path or pass --overwrite")
    require_manim()  # before evaluating any model: say what is missing first

    make_scene = _scene_factory(scene, study, model_dirs, test, sentence, checkpoint, beam, bucket_width)
    started = time.perf_counter()
    render(make_scene, paths[0], quality, last_frame)
    if gif:
        mp4_to_gif(paths[0], paths[1])
    return AnimateResult(paths, time.perf_counter() - started)


def _scene_factory(scene: str, study: str | Path | None, model_dirs: Sequence[str | Path],
                   test: tuple[str | Path, str | Path] | None, sentence: str | None, checkpoint: str,
                   beam: int | None, bucket_width: int) -> Callable[[], Any]:
    """Prepare the scene's data (which may evaluate models) and return what builds the scene.

    The scene modules import manim, so they are imported only here, once manim is known to work.
    """
    from attnmt.viz.scenes import data

    if scene == "bottleneck":
        prepared = data.bottleneck_data(study, model_dirs, test, sentence, checkpoint, beam, bucket_width)

        def make():
            from attnmt.viz.scenes.bottleneck import Bottleneck

            return Bottleneck(prepared)

        return make
    if study is not None or test is not None:
        raise UserError("soft-alignment: --study and --test belong to the bottleneck scene; pass --model DIR "
                        "--sentence \"...\" (or nothing, for the bundled example)")
    if len(model_dirs) > 1:
        raise UserError("soft-alignment: pass one --model (its attention fills the grid)")
    grid = data.alignment_data(model_dirs[0] if model_dirs else None, sentence, checkpoint, beam)

    def make():
        from attnmt.viz.scenes.soft_alignment import SoftAlignment

        return SoftAlignment(grid)

    return make


def render(make_scene: Callable[[], Any], out: Path, quality: str = "low", last_frame: bool = False) -> Path:
    """Render the scene that ``make_scene()`` builds to ``out`` (MP4, or the last frame as PNG).

    manim writes into a temporary media folder (its cache of texts and partial movies is of no
    use afterwards); only the final file is copied to ``out``.
    """
    from manim import tempconfig

    settings = {
        "quality": QUALITIES[quality],
        "format": "png" if last_frame else "mp4",
        "output_file": "scene",
        "disable_caching": True,
        "verbosity": "WARNING",
        "progress_bar": "none",
    }
    with tempfile.TemporaryDirectory(prefix="attnmt-animate-") as media:
        with tempconfig({**settings, "media_dir": media}):
            scene = make_scene()
            scene.render()
            writer = scene.renderer.file_writer
            produced = Path(writer.image_file_path if last_frame else writer.movie_file_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(produced, out)
    return out


def mp4_to_gif(mp4: Path, gif: Path, fps: int = GIF_FPS) -> Path:
    """Convert a rendered MP4 to a looping GIF with one palette made for the whole clip.

    Uses PyAV (installed with manim) and ffmpeg's palettegen/paletteuse filters: one global
    palette keeps the flat colours of the scenes free of per-frame flicker.
    """
    import av

    with av.open(str(mp4)) as source, av.open(str(gif), mode="w", format="gif") as target:
        video = source.streams.video[0]
        rate = min(fps, round(video.average_rate or fps))
        stream = target.add_stream("gif", rate=rate)
        stream.width, stream.height, stream.pix_fmt = video.codec_context.width, video.codec_context.height, "pal8"
        graph = av.filter.Graph()
        chain = [graph.add_buffer(template=video), graph.add("fps", str(rate)), graph.add("split")]
        palettegen = graph.add("palettegen", "stats_mode=full")
        paletteuse = graph.add("paletteuse", "dither=bayer:bayer_scale=5:diff_mode=rectangle")
        sink = graph.add("buffersink")
        chain[0].link_to(chain[1])
        chain[1].link_to(chain[2])
        chain[2].link_to(palettegen, 0, 0)
        chain[2].link_to(paletteuse, 1, 0)
        palettegen.link_to(paletteuse, 0, 1)
        paletteuse.link_to(sink)
        graph.configure()
        for frame in source.decode(video):
            graph.push(frame)
        graph.push(None)  # end of stream: palettegen emits its palette only now
        written = 0
        while True:
            try:
                frame = graph.pull()
            except (av.error.EOFError, av.error.BlockingIOError):
                break
            frame.pts = written
            if stream.codec_context.time_base is not None:  # None until the encoder opens
                frame.time_base = stream.codec_context.time_base
            written += 1
            target.mux(stream.encode(frame))
        target.mux(stream.encode(None))
    return gif
