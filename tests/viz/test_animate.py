"""`attnmt animate`: the data behind the scenes, the CLI's errors, and the rendered frames.

Rendering tests draw only the last frame at low quality (854 x 480), from the tiny trained model,
and look at the pixels: for SoftAlignment, the brightest cell of every column must be where the
model's attention is largest. They skip, saying why, where manim cannot be imported.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.viz.scenes import data, layout

LOW = (480, 854)  # rows, columns of a low-quality frame


@pytest.fixture(scope="module")
def manim_importable() -> None:
    """Skip unless manim imports. A fixture rather than a skipif mark, so that only the worker that runs these
    tests pays for importing manim, not every worker that collects the module."""
    try:
        import manim  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install (no cairo or pango) is "not importable" too
        pytest.skip("manim is not importable: pip install 'attnmt[anim]' and apt-get install ffmpeg libcairo2-dev "
                    "libpango1.0-dev pkg-config")


needs_manim = pytest.mark.usefixtures("manim_importable")


def _one_line_error(capsys, code: int, *fragments: str) -> str:
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnmt: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _image(path: Path) -> np.ndarray:
    from PIL import Image

    assert path.is_file() and path.stat().st_size > 0
    pixels = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255
    assert pixels.shape[:2] == LOW, pixels.shape
    assert pixels.std() > 0.05, "blank frame"
    return pixels


def _sentence(tiny_corpus: Path) -> str:
    return (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[0]


# ---------------------------------------------------------------- without manim


def test_without_manim_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "manim", None)  # `import manim` now raises ImportError
    code = main(["animate", "bottleneck", "--last-frame", "--out", str(tmp_path / "b.png")])
    line = _one_line_error(capsys, code, "pip install 'attnmt[anim]'", "apt-get install ffmpeg")
    assert "libcairo2-dev" in line and "libpango1.0-dev" in line
    assert not (tmp_path / "b.png").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["soft-alignment", "--gif", "--last-frame"], "exclude each other"),
    (["bottleneck", "--last-frame", "--out", "x.mp4"], "should end in .png"),
    (["bottleneck", "--out", "x.gif"], "should end in .mp4"),
])
def test_bad_output_options_are_one_line(capsys, tmp_path, argv, fragment):
    _one_line_error(capsys, main(["animate", *argv]), fragment)


def test_existing_output_is_kept(capsys, tmp_path):
    out = tmp_path / "frame.png"
    out.write_bytes(b"keep")
    _one_line_error(capsys, main(["animate", "soft-alignment", "--last-frame", "--out", str(out)]), "--overwrite")
    assert out.read_bytes() == b"keep"


# ---------------------------------------------------------------- data (no manim needed)


def test_curves_accept_the_demo_results_and_the_benchmark_format(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"seconds": 1.0, "buckets": {
        "rnnsearch": [{"lo": 4, "hi": 14, "n": 5, "bleu": 80.0, "ci_low": None, "ci_high": None}],
        "seq2seq": [{"lo": 4, "hi": 14, "n": 5, "bleu": 60.0}, {"lo": 14, "hi": 24, "n": 5, "bleu": 20.0}]}}))
    curves = data.curves_from_json(results)
    assert curves.main == "seq2seq"  # the fixed-vector model, wherever it is listed
    assert curves.points("seq2seq") == [(8.5, 60.0), (18.5, 20.0)]
    assert curves.max_length == 23

    evaluated = tmp_path / "s2s.json"  # `attnmt evaluate --json`: one model's list of buckets
    evaluated.write_text(json.dumps({"buckets": [{"lo": 0, "hi": 10, "n": 3, "bleu": 12.5}]}))
    assert data.curves_from_json(evaluated).points("s2s") == [(4.5, 12.5)]

    study = tmp_path / "study.json"  # `attnmt study`: per model, BLEU averaged over seeds
    study.write_text(json.dumps({"models": {
        "attn": {"model_type": "rnnsearch", "buckets": [{"lo": 0, "hi": 10, "n": 3, "mean": 70.0}]},
        "fixed": {"model_type": "seq2seq", "buckets": [{"lo": 0, "hi": 10, "n": 3, "mean": 30.0, "std": 1.0}]}}}))
    curves = data.curves_from_json(study)
    assert curves.main == "fixed" and curves.points("attn") == [(4.5, 70.0)]

    bench = tmp_path / "demo.json"
    bench.write_text(json.dumps({"buckets": {"seq2seq": [{"lengths": "4-13", "n": 5, "bleu": 60.0}]}}))
    assert data.curves_from_json(bench).curves["seq2seq"][0].hi == 14  # "4-13" is inclusive


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "not valid JSON"),
    ('{"bleu": {}}', "no \"buckets\""),
    ('{"buckets": {"m": [{"lo": 5, "hi": 5, "bleu": 1}]}}', "needs lo < hi"),
    ('{"buckets": {"m": [{"n": 3}]}}', "\"bleu\""),
])
def test_bad_curve_json_names_the_file(tmp_path, content, fragment):
    path = tmp_path / "study.json"
    path.write_text(content)
    with pytest.raises(UserError) as e:
        data.curves_from_json(path)
    assert str(path) in str(e.value) and fragment in str(e.value)


def test_missing_demo_curve_says_what_to_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "BUNDLED_CURVE", tmp_path / "none.json")
    with pytest.raises(UserError, match="--study"):
        data.demo_curves()


def test_demo_words_use_the_demo_language():
    from attnmt.study.demo import DemoSettings

    assert data.DEMO_SEED == DemoSettings().seed
    words = data.demo_words(25)
    assert len(words) == 25 and words == data.demo_words(25)


def test_bundled_attention_is_a_real_distribution():
    grid = data.bundled_attention()
    k, q = grid.weights.shape
    assert (k, q) == (len(grid.src_tokens), len(grid.tgt_tokens)) and grid.tgt_tokens[-1] == "</s>"
    np.testing.assert_allclose(grid.weights.sum(axis=0), 1.0, atol=1e-4)
    # A trained model aligns sharply: most columns put most of their weight on one source word.
    assert np.median(grid.weights.max(axis=0)) > 0.8


def test_capacity_follows_the_measured_drop():
    assert layout.capacity([(5, 60), (15, 54), (25, 30)]) == pytest.approx(15)  # 90% of 60 at 54
    assert layout.capacity([(5, 60), (15, 62), (25, 61)]) is None  # never drops: c never overflows
    assert layout.curve_prefix([(5, 60), (15, 40)], 10) == [(5, 60), (10, 50.0)]
    assert layout.curve_prefix([(5, 60), (15, 40)], 3) == []  # never extrapolated


def test_flow_wraps_and_reports_overflow():
    region = layout.Box(0, 10, 0, 2)
    centres = layout.flow([4, 4, 4], 1.0, region, gap=0.5)
    assert centres == [(2, 1.5), (6.5, 1.5), (2, 0.5)]
    assert layout.flow([4] * 7, 1.0, region, gap=0.5) is None


def test_grid_cells_fit_their_region():
    grid = layout.grid_layout(12, 30)
    box, region = grid.box, layout.GRID_REGION
    assert region.left <= box.left and box.right <= region.right + 1e-9
    assert region.bottom <= box.bottom + 1e-9 and box.top <= region.top


# ---------------------------------------------------------------- rendering (manim)


@needs_manim
def test_soft_alignment_frame_shows_the_models_attention(tiny_model, tiny_corpus, tmp_path, capsys):
    sentence = _sentence(tiny_corpus)
    out = tmp_path / "soft.png"
    assert main(["animate", "soft-alignment", "--model", str(tiny_model), "--sentence", sentence,
                 "--quality", "low", "--last-frame", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    pixels = _image(out)

    grid = data.alignment_data(tiny_model, sentence)  # what the scene drew: the same translation
    weights = grid.weights
    cells = layout.grid_layout(*weights.shape)
    brightness = np.zeros_like(weights)
    for j in range(weights.shape[0]):
        for i in range(weights.shape[1]):
            col, row = layout.to_pixel(*cells.cell_center(j, i), LOW[1], LOW[0])
            brightness[j, i] = pixels[row - 1:row + 2, col - 1:col + 2].mean()
    for i in range(weights.shape[1]):
        brightest = int(brightness[:, i].argmax())
        # Ties are allowed only within one grey level of the 8-bit frame.
        assert weights[brightest, i] >= weights[:, i].max() - 1.5 / 255, (i, weights[:, i], brightness[:, i])
    # Each cell's grey level is its weight.
    np.testing.assert_allclose(brightness, weights, atol=0.02)


@needs_manim
def test_soft_alignment_without_a_model_uses_the_bundled_attention(tmp_path):
    from attnmt.viz.animate import animate

    result = animate("soft-alignment", tmp_path / "bundled.png", quality="low", last_frame=True)
    pixels = _image(result.files[0])
    grid = data.bundled_attention()
    cells = layout.grid_layout(*grid.weights.shape)
    for i in range(grid.weights.shape[1]):
        j = int(grid.weights[:, i].argmax())
        col, row = layout.to_pixel(*cells.cell_center(j, i), LOW[1], LOW[0])
        assert pixels[row, col].mean() == pytest.approx(grid.weights[j, i], abs=0.02)


@needs_manim
def test_bottleneck_frame_from_a_measured_curve(tiny_model, tiny_corpus, tmp_path, capsys):
    out = tmp_path / "bottleneck.png"
    code = main(["animate", "bottleneck", "--model", str(tiny_model), "--test", str(tiny_corpus / "test.src"),
                 str(tiny_corpus / "test.tgt"), "--bucket-width", "2", "--quality", "low", "--last-frame",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    pixels = _image(out)
    # The measured curve is drawn in the plot's region, in the fixed-vector curve's orange.
    region = layout.AXES_REGION
    left, top = layout.to_pixel(region.left, region.top, LOW[1], LOW[0])
    right, bottom = layout.to_pixel(region.right, region.bottom, LOW[1], LOW[0])
    plot = pixels[top:bottom, left:right]
    orange = (plot[..., 0] > 0.8) & (plot[..., 1] > 0.4) & (plot[..., 1] < 0.7) & (plot[..., 2] < 0.4)
    assert orange.sum() > 20
    # The words are drawn (bright text in the words region).
    words = layout.WORDS_REGION
    left, top = layout.to_pixel(words.left, words.top, LOW[1], LOW[0])
    right, bottom = layout.to_pixel(words.right, words.bottom, LOW[1], LOW[0])
    assert (pixels[top:bottom, left:right].max(axis=-1) > 0.5).sum() > 100


@needs_manim
def test_soft_alignment_rejects_a_model_without_attention(tiny_corpus, tmp_path, capsys):
    from attnmt.train.trainer import train
    from tests.conftest import tiny_config

    model = tmp_path / "s2s"
    train(tiny_config(tiny_corpus, "seq2seq", max_steps=2, valid_every=2), model, quiet=True)
    code = main(["animate", "soft-alignment", "--model", str(model), "--sentence", _sentence(tiny_corpus),
                 "--last-frame", "--out", str(tmp_path / "x.png")])
    _one_line_error(capsys, code, "seq2seq", "rnnsearch")


@needs_manim
@pytest.mark.slow
def test_mp4_and_gif(tiny_model, tiny_corpus, tmp_path):
    import av

    from attnmt.viz.animate import animate

    result = animate("soft-alignment", tmp_path / "soft.mp4", quality="low", gif=True, model_dirs=[tiny_model],
                     sentence=_sentence(tiny_corpus))
    assert [p.suffix for p in result.files] == [".mp4", ".gif"]
    for path in result.files:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            frames = sum(1 for _ in container.decode(stream))
            assert (stream.codec_context.height, stream.codec_context.width) == LOW
            assert frames > 30, (path, frames)
