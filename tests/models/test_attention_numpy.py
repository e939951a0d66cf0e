"""Tests of the NumPy attention reference, attnmt.models.reference, against direct per-element definitions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.models import reference as A

ROOT = Path(__file__).resolve().parents[2]
PROPERTY = settings(max_examples=25, deadline=None)


@st.composite
def masked_problem(draw: st.DrawFn) -> dict:
    """Random additive-attention inputs: shapes, a seed for the values, and a mask (rows may be fully masked)."""
    B, S = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    Dq, Dk, Dv, Att = (draw(st.integers(1, 5)) for _ in range(4))
    mask = np.array(draw(st.lists(st.booleans(), min_size=B * S, max_size=B * S))).reshape(B, S)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return {
        "q": rng.normal(size=(B, Dq)),
        "K": rng.normal(size=(B, S, Dk)),
        "V": rng.normal(size=(B, S, Dv)),
        "W_q": rng.normal(size=(Att, Dq)),
        "W_k": rng.normal(size=(Att, Dk)),
        "v": rng.normal(size=Att),
        "mask": mask,
    }


def reference_softmax(row: np.ndarray) -> np.ndarray:
    z = np.exp(row - row.max())
    return z / z.sum()


# --- softmax and masks ----------------------------------------------------------------------------


def test_softmax_without_mask_is_the_textbook_softmax_and_shift_invariant() -> None:
    x = np.random.default_rng(0).normal(size=(3, 5)) * 10
    expected = np.stack([reference_softmax(row) for row in x])
    np.testing.assert_allclose(A.softmax(x), expected, rtol=1e-12)
    np.testing.assert_allclose(A.softmax(x + 1000.0), expected, rtol=1e-12)  # no overflow
    np.testing.assert_allclose(A.softmax(x.T, axis=0), expected.T, rtol=1e-12)


def test_softmax_mask_zero_weights_and_fully_masked_rows() -> None:
    x = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [5.0, -1.0, 0.0]])
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    with np.errstate(all="raise"):  # no division by zero, no invalid operation, on the way
        w = A.softmax(x, mask=mask)
    real = reference_softmax(np.array([1.0, 3.0]))  # a softmax over the real positions alone
    np.testing.assert_allclose(w[0], [real[0], 0.0, real[1]])
    assert w[0, 1] == 0.0
    assert np.array_equal(w[1], np.zeros(3))  # fully masked: defined as all-zero weights
    np.testing.assert_allclose(w[2], reference_softmax(x[2]))


def test_softmax_broadcasts_mask_and_accepts_integers() -> None:
    w = A.softmax(np.arange(6).reshape(2, 3), mask=np.array([True, True, False]))
    assert w.dtype == np.float64
    assert np.array_equal(w[:, 2], [0.0, 0.0])
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_float32_stays_float32() -> None:
    x = np.ones((2, 3), dtype=np.float32)
    assert A.softmax(x).dtype == np.float32


def test_causal_and_padding_masks() -> None:
    assert np.array_equal(A.causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert np.array_equal(A.padding_mask([2, 0, 3], 3), [[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    assert A.causal_mask(3).dtype == bool and A.padding_mask([1], 2).dtype == bool


# --- score functions against their per-element definitions ---------------------------------------


def test_scores_match_their_equations() -> None:
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 3)), rng.normal(size=(2, 4, 3))
    W_q, W_k, v, W = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=(3, 3))
    for b in range(2):
        for j in range(4):
            assert A.additive_scores(q, k, W_q, W_k, v)[b, j] == pytest.approx(v @ np.tanh(W_q @ q[b] + W_k @ k[b, j]))
            assert A.dot_scores(q, k)[b, j] == pytest.approx(q[b] @ k[b, j])
            assert A.general_scores(q, k, W)[b, j] == pytest.approx(q[b] @ W @ k[b, j])


def test_general_scores_with_rectangular_W() -> None:
    rng = np.random.default_rng(2)
    q, k, W = rng.normal(size=4), rng.normal(size=(6, 2)), rng.normal(size=(4, 2))
    np.testing.assert_allclose(A.general_scores(q, k, W), [q @ W @ kj for kj in k])


# --- attention ------------------------------------------------------------------------------------


@PROPERTY
@given(masked_problem())
def test_additive_attention_equals_the_per_key_loop(p: dict) -> None:
    context, alpha = A.additive_attention(**p)
    context_loop, alpha_loop = A.additive_attention_loop(**p)
    np.testing.assert_allclose(alpha, alpha_loop, atol=1e-12)
    np.testing.assert_allclose(context, context_loop, atol=1e-12)


@PROPERTY
@given(masked_problem())
def test_additive_attention_properties(p: dict) -> None:
    context, alpha = A.additive_attention(**p)
    mask = p["mask"]
    assert np.all(alpha[~mask] == 0.0)  # exactly zero, not just small
    real_rows = mask.any(-1)
    np.testing.assert_allclose(alpha.sum(-1)[real_rows], 1.0)
    assert np.all(context[~real_rows] == 0.0)
    assert np.isfinite(context).all()
    np.testing.assert_allclose(context, np.einsum("bs,bsd->bd", alpha, p["V"]), atol=1e-12)


def test_additive_attention_unbatched() -> None:
    rng = np.random.default_rng(3)
    q, K, W_q, W_k, v = (
        rng.normal(size=2),
        rng.normal(size=(3, 2)),
        rng.normal(size=(4, 2)),
        rng.normal(size=(4, 2)),
        rng.normal(size=4),
    )
    context, alpha = A.additive_attention(q, K, K, W_q, W_k, v)
    assert context.shape == (2,) and alpha.shape == (3,)
    np.testing.assert_allclose(alpha, reference_softmax(np.array([v @ np.tanh(W_q @ q + W_k @ k) for k in K])))


@PROPERTY
@given(
    B=st.integers(1, 3),
    Tq=st.integers(1, 5),
    Tk=st.integers(1, 6),
    d=st.integers(1, 4),
    causal=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_scaled_dot_product_attention_row_by_row(B: int, Tq: int, Tk: int, d: int, causal: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    Q, K, V = rng.normal(size=(B, Tq, d)), rng.normal(size=(B, Tk, d)), rng.normal(size=(B, Tk, 3))
    mask = rng.random((B, 1, Tk)) < 0.7
    if causal:
        mask = mask & (np.arange(Tk) <= np.arange(Tq)[:, None])
    out, w = A.scaled_dot_product_attention(Q, K, V, mask)
    full_mask = np.broadcast_to(mask, (B, Tq, Tk))
    for b in range(B):
        for i in range(Tq):
            real = full_mask[b, i]
            expected = np.zeros(Tk)
            if real.any():
                expected[real] = reference_softmax(Q[b, i] @ K[b, real].T / np.sqrt(d))
            np.testing.assert_allclose(w[b, i], expected, atol=1e-12)
            np.testing.assert_allclose(out[b, i], expected @ V[b], atol=1e-12)
    assert np.all(w[~full_mask] == 0.0)


def test_causal_self_attention_weights_are_lower_triangular() -> None:
    X = np.random.default_rng(4).normal(size=(5, 3))
    _, w = A.scaled_dot_product_attention(X, X, X, A.causal_mask(5))
    assert np.all(np.triu(w, 1) == 0.0)
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert w[0, 0] == 1.0


def mha_params(rng: np.random.Generator, D: int, bias: bool = True) -> dict[str, np.ndarray]:
    params = {f"W_{n}": rng.normal(size=(D, D)) / np.sqrt(D) for n in "qkvo"}
    return params | ({f"b_{n}": rng.normal(size=D) for n in "qkvo"} if bias else {})


@PROPERTY
@given(
    B=st.integers(1, 3),
    Tq=st.integers(1, 4),
    Tk=st.integers(1, 5),
    heads_and_dh=st.sampled_from([(1, 3), (2, 2), (3, 1), (4, 2)]),
    bias=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_multi_head_attention_equals_a_loop_over_heads(
    B: int, Tq: int, Tk: int, heads_and_dh: tuple[int, int], bias: bool, seed: int
) -> None:
    H, dh = heads_and_dh
    D = H * dh
    rng = np.random.default_rng(seed)
    p = mha_params(rng, D, bias)
    X_q, X_kv = rng.normal(size=(B, Tq, D)), rng.normal(size=(B, Tk, D))
    mask = A.padding_mask(rng.integers(0, Tk + 1, size=B), Tk)[:, None, :]
    out, w = A.multi_head_attention(X_q, X_kv, p, H, mask)
    assert out.shape == (B, Tq, D) and w.shape == (B, H, Tq, Tk)

    zero = np.zeros(D)
    heads = []
    for h in range(H):
        rows = slice(h * dh, (h + 1) * dh)
        Q = X_q @ p["W_q"][rows].T + p.get("b_q", zero)[rows]
        K = X_kv @ p["W_k"][rows].T + p.get("b_k", zero)[rows]
        V = X_kv @ p["W_v"][rows].T + p.get("b_v", zero)[rows]
        head, w_h = A.scaled_dot_product_attention(Q, K, V, mask)
        np.testing.assert_allclose(w[:, h], w_h, atol=1e-12)
        heads.append(head)
    expected = np.concatenate(heads, axis=-1) @ p["W_o"].T + p.get("b_o", zero)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_multi_head_attention_causal_and_fully_masked_rows() -> None:
    rng = np.random.default_rng(5)
    p, X = mha_params(rng, 4), rng.normal(size=(2, 3, 4))
    mask = A.causal_mask(3) & A.padding_mask([3, 0], 3)[:, None, :]
    out, w = A.multi_head_attention(X, X, p, 2, mask)
    assert np.all(np.triu(w[0], 1) == 0.0) and np.all(w[1] == 0.0)
    np.testing.assert_allclose(out[1], np.broadcast_to(p["b_o"], (3, 4)))  # zero heads -> only the output bias
    with pytest.raises(ValueError, match="divisible"):
        A.multi_head_attention(X, X, p, 3)


# --- the tour and its hand-derived gradients ------------------------------------------------------


def test_retrieval_loss_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(6)
    params = {"W_q": rng.normal(size=(4, 2)), "W_k": rng.normal(size=(4, 2)), "v": rng.normal(size=4)}
    q, K, target = A._retrieval_tasks(rng, 5, 3, 2)
    _, grads = A.additive_retrieval_loss(params, q, K, target)
    eps = 1e-6
    for name, p in params.items():
        numeric = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            plus = A.additive_retrieval_loss(params, q, K, target)[0]
            p[idx] = old - eps
            minus = A.additive_retrieval_loss(params, q, K, target)[0]
            p[idx] = old
            numeric[idx] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-5, atol=1e-8)


def test_tour_claims_hold() -> None:
    lines: list[str] = []
    result = A.tour(out=lines.append)
    assert result.ok
    assert not result.identity_picks_nearest
    assert result.accuracy_identity < 0.9 <= result.accuracy_fitted
    assert result.accuracy_fitted_mirrored < 0.1  # the odd symmetry e(-q, -K) = -e(q, K)
    assert any("PASSED" in line for line in lines)


def test_module_runs_as_a_script_without_torch() -> None:
    # Make `import torch` fail, then run `python -m attnmt.models.reference`: the reference and its tour
    # must stand on NumPy alone.
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            "runpy.run_path('attnmt/models/reference.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "check (identity fails, fitted >= 0.9 on held-out tasks): PASSED" in proc.stdout
