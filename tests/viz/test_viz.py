"""The plots are written, have the expected shape and are not blank."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from attnmt.decode.evaluate import LengthBucket
from attnmt.viz.heatmap import plot_attention
from attnmt.viz.length import plot_bleu_by_length


def _attention(n_tgt: int, n_src: int) -> np.ndarray:
    """Row-stochastic weights peaked near the diagonal, like a trained model's."""
    rng = np.random.default_rng(0)
    weights = rng.random((n_tgt, n_src)) + 8 * np.eye(n_tgt, n_src)
    return weights / weights.sum(axis=1, keepdims=True)


def _read(path: Path) -> np.ndarray:
    assert path.exists() and path.stat().st_size > 0
    image = mpimg.imread(path)
    assert image.ndim == 3
    assert image[..., :3].std() > 0.05  # not a blank canvas
    return image


def test_heatmap_is_wide_for_a_long_source_and_tall_for_a_long_target(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(20)]
    wide = _read(plot_attention(_attention(4, 20), words, words[:4], tmp_path / "wide.png", title="t", dpi=60))
    tall = _read(plot_attention(_attention(20, 4), words[:4], words, tmp_path / "tall.png", dpi=60))
    assert wide.shape[1] > 1.8 * wide.shape[0]
    assert tall.shape[0] > 1.8 * tall.shape[1]


def test_heatmap_of_a_60_token_sentence_grows_with_it(tmp_path: Path) -> None:
    src = [f"source{i}" for i in range(60)]
    tgt = [f"target{i}" for i in range(61)] + ["</s>"]
    path = tmp_path / "nested" / "long.png"
    image = _read(plot_attention(_attention(62, 60), src, tgt, path, dpi=40))
    assert min(image.shape[:2]) > 60 * 0.16 * 40  # at least the minimum cell size per token


def test_heatmap_accepts_tensor_like_input_and_odd_tokens(tmp_path: Path) -> None:
    class FakeTensor:  # the torch.Tensor methods plot_attention relies on
        def __init__(self, data: np.ndarray) -> None:
            self.data = data

        def detach(self) -> FakeTensor:
            return self

        def float(self) -> FakeTensor:
            return self

        def cpu(self) -> FakeTensor:
            return self

        def numpy(self) -> np.ndarray:
            return self.data

    # "$" would start mathtext; CJK must not fail even when no CJK font is installed.
    src, tgt = ["$5", "北京", "a_b", "</s>"], ["five", "Beijing", "</s>"]
    _read(plot_attention(FakeTensor(_attention(3, 4)), src, tgt, tmp_path / "odd.png", dpi=50))


def test_heatmap_refuses_a_shape_that_does_not_match_the_tokens(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shape"):
        plot_attention(_attention(3, 4), ["a"] * 4, ["b"] * 2, tmp_path / "bad.png")


def test_bleu_by_length_plot_with_and_without_error_bars(tmp_path: Path) -> None:
    results = {
        "seq2seq": [LengthBucket(0, 10, 5, 30.0, 27.0, 33.0), LengthBucket(10, 20, 5, 18.0, 15.0, 21.0)],
        "RNNsearch": [LengthBucket(0, 10, 5, 31.0), LengthBucket(10, 20, 5, 30.0)],
    }
    image = _read(plot_bleu_by_length(results, tmp_path / "length.png", title="BLEU by length", dpi=60))
    assert image.shape[1] / image.shape[0] == pytest.approx(6.4 / 4.2, rel=0.05)
    pdf = plot_bleu_by_length(results, tmp_path / "length.pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError):
        plot_bleu_by_length({}, tmp_path / "empty.png")
