"""NumPy reference of every attention primitive in attnmt (deliberately no torch import).

The PyTorch modules in ``attnmt.models.attention`` are tested against these functions.

Conventions
- Masks are boolean, **True = may attend** (a real position), broadcastable to the scores.
- A masked position gets exactly zero weight. A row in which *every* position is masked gets
  all-zero weights, so its context/output is zero (or just the output bias), never NaN.
- Weight matrices have the shape of the equations, W: [out, in], applied as ``x @ W.T``
  (the layout of ``torch.nn.Linear.weight``, so weights copy across unchanged).
- Everything is vectorised over leading batch axes and over positions.

``python -m attnmt.models.reference`` runs a short tour (see :func:`tour`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.floating]
BoolArray = NDArray[np.bool_]

__all__ = [
    "additive_attention",
    "additive_attention_loop",
    "additive_retrieval_loss",
    "additive_scores",
    "causal_mask",
    "dot_scores",
    "general_scores",
    "main",
    "multi_head_attention",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax",
    "tour",
]


# --- masks and the masked softmax -----------------------------------------------------------------


def softmax(x: ArrayLike, axis: int = -1, mask: ArrayLike | None = None) -> Array:
    """Softmax along ``axis`` over the positions where ``mask`` (broadcastable to x) is True.

    Masked positions get exactly 0; a fully masked row gets all zeros instead of NaN.
    """
    x = np.asarray(x, dtype=np.result_type(x, 1.0))
    if mask is not None:
        x = np.where(np.broadcast_to(mask, x.shape), x, -np.inf)
    x_max = np.max(x, axis=axis, keepdims=True)
    # Subtract the row max for stability; a fully masked row has max -inf, so shift it by 0 instead
    # (exp(-inf) = 0 then, where -inf - -inf would be NaN).
    z = np.exp(x - np.where(np.isfinite(x_max), x_max, 0.0))
    total = z.sum(axis=axis, keepdims=True)
    return np.divide(z, total, out=np.zeros_like(z), where=total > 0)


def causal_mask(L: int) -> BoolArray:
    """[L, L] lower-triangular mask: position i may attend positions j <= i."""
    return np.tri(L, dtype=bool)


def padding_mask(lengths: ArrayLike, L: int) -> BoolArray:
    """[B, L] mask, True at the first ``lengths[b]`` positions of row b."""
    return np.arange(L) < np.asarray(lengths)[..., None]


# --- score functions: e_j for one query q [..., Dq] against keys k [..., S, Dk] -> [..., S] -------


def additive_scores(q: ArrayLike, k: ArrayLike, W_q: ArrayLike, W_k: ArrayLike, v: ArrayLike) -> Array:
    """Bahdanau et al. (2014), eq. 6: e_j = v^T tanh(W_q q + W_k k_j); W_q [A,Dq], W_k [A,Dk], v [A]."""
    q, k = np.asarray(q), np.asarray(k)
    return np.tanh((q @ np.asarray(W_q).T)[..., None, :] + k @ np.asarray(W_k).T) @ np.asarray(v)


def dot_scores(q: ArrayLike, k: ArrayLike) -> Array:
    """Luong et al. (2015), eq. 8 'dot': e_j = q^T k_j."""
    return (np.asarray(k) @ np.asarray(q)[..., None])[..., 0]


def general_scores(q: ArrayLike, k: ArrayLike, W: ArrayLike) -> Array:
    """Luong et al. (2015), eq. 8 'general': e_j = q^T W k_j; W [Dq, Dk]."""
    return dot_scores(q, np.asarray(k) @ np.asarray(W).T)


# --- attention ------------------------------------------------------------------------------------


def additive_attention(
    q: ArrayLike,
    K: ArrayLike,
    V: ArrayLike,
    W_q: ArrayLike,
    W_k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
) -> tuple[Array, Array]:
    """Bahdanau eq. 5-6: alpha = softmax_j(e_j), c = sum_j alpha_j V_j; returns (c [..., Dv], alpha [..., S])."""
    alpha = softmax(additive_scores(q, K, W_q, W_k, v), mask=mask)
    return (alpha[..., None, :] @ np.asarray(V))[..., 0, :], alpha


def additive_attention_loop(
    q: ArrayLike,
    K: ArrayLike,
    V: ArrayLike,
    W_q: ArrayLike,
    W_k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
) -> tuple[Array, Array]:
    """The textbook form of :func:`additive_attention`, one key at a time (for the benchmark only)."""
    q, K, V, W_q, W_k, v = map(np.asarray, (q, K, V, W_q, W_k, v))
    query_term = q @ W_q.T  # W_q q does not depend on j; recomputing it per key would be a strawman
    e = np.empty(K.shape[:-1], dtype=np.result_type(q, K, W_k, 1.0))
    for j in range(K.shape[-2]):
        e[..., j] = np.tanh(query_term + K[..., j, :] @ W_k.T) @ v
    alpha = softmax(e, mask=mask)
    context = np.zeros(V.shape[:-2] + V.shape[-1:], dtype=np.result_type(alpha, V))
    for j in range(V.shape[-2]):
        context += alpha[..., j, None] * V[..., j, :]
    return context, alpha


def scaled_dot_product_attention(
    Q: ArrayLike, K: ArrayLike, V: ArrayLike, mask: ArrayLike | None = None
) -> tuple[Array, Array]:
    """Vaswani et al. (2017), eq. 1: softmax(Q K^T / sqrt(d_k)) V; Q [..., Tq, dk], K [..., Tk, dk], V [..., Tk, dv].

    ``mask`` broadcasts to [..., Tq, Tk]. Returns (output [..., Tq, dv], weights [..., Tq, Tk]).
    """
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), mask=mask)
    return weights @ V, weights


def multi_head_attention(
    X_q: ArrayLike,
    X_kv: ArrayLike,
    params: Mapping[str, ArrayLike],
    n_heads: int,
    mask: ArrayLike | None = None,
) -> tuple[Array, Array]:
    """Vaswani et al. (2017), section 3.2.2: Concat(head_1..head_h) W_o, head_i = Attention(Q_i, K_i, V_i).

    Q_i, K_i, V_i are X_q, X_kv, X_kv projected by head i's rows of W_q, W_k, W_v.

    X_q [B, Tq, D], X_kv [B, Tk, D]. ``params`` holds W_q, W_k, W_v, W_o [D, D] and optionally the
    biases b_q, b_k, b_v, b_o [D] (absent = no bias); head i uses rows i*dh:(i+1)*dh of W_q/W_k/W_v.
    ``mask`` broadcasts to [B, Tq, Tk] (shared by all heads): ``padding_mask(...)[:, None, :]`` for
    key padding, ``causal_mask(T)`` for self-attention in a decoder, or their ``&``.
    Returns (output [B, Tq, D], weights [B, H, Tq, Tk]).
    """
    X_q, X_kv = np.asarray(X_q), np.asarray(X_kv)
    D = X_q.shape[-1]
    if D % n_heads:
        raise ValueError(f"model size {D} is not divisible by n_heads={n_heads}")

    def project(X: Array, name: str) -> Array:
        Y = X @ np.asarray(params[f"W_{name}"]).T
        bias = params.get(f"b_{name}")
        return Y if bias is None else Y + np.asarray(bias)

    def split_heads(Y: Array) -> Array:  # [B, T, D] -> [B, H, T, dh]
        return np.swapaxes(Y.reshape(*Y.shape[:-1], n_heads, D // n_heads), -2, -3)

    Q, K, V = split_heads(project(X_q, "q")), split_heads(project(X_kv, "k")), split_heads(project(X_kv, "v"))
    heads, weights = scaled_dot_product_attention(Q, K, V, None if mask is None else np.expand_dims(mask, -3))
    concat = np.swapaxes(heads, -2, -3).reshape(X_q.shape)
    return project(concat, "o"), weights


# --- the tour: what additive attention computes, and that its parameters must be learned ---------


def additive_retrieval_loss(
    params: Mapping[str, Array], q: Array, K: Array, target: NDArray[np.integer]
) -> tuple[float, dict[str, Array]]:
    """Mean cross-entropy -log alpha_target of additive attention, and its hand-derived gradients.

    params: W_q [A,D], W_k [A,D], v [A]; q [N,D], K [N,S,D], target [N] (index of the key to retrieve).
    With z_j = W_q q + W_k k_j, H_j = tanh(z_j), e_j = v^T H_j, alpha = softmax(e):
      dL/de_j = (alpha_j - [j = target]) / N,   dL/dv = sum_j dL/de_j H_j,
      dL/dz_j = dL/de_j v * (1 - H_j^2),         dL/dW_q = sum_j dL/dz_j q^T,   dL/dW_k = sum_j dL/dz_j k_j^T.
    """
    n = len(q)
    H = np.tanh((q @ params["W_q"].T)[:, None, :] + K @ params["W_k"].T)  # [N,S,A]
    alpha = softmax(H @ params["v"])
    loss = float(-np.log(alpha[np.arange(n), target]).mean())
    de = alpha.copy()
    de[np.arange(n), target] -= 1.0
    de /= n
    dz = de[..., None] * params["v"] * (1.0 - H**2)  # [N,S,A]
    grads = {
        "W_q": dz.sum(axis=1).T @ q,
        "W_k": np.einsum("nsa,nsd->ad", dz, K),
        "v": np.einsum("ns,nsa->a", de, H),
    }
    return loss, grads


def _retrieval_tasks(rng: np.random.Generator, n: int, n_keys: int, dim: int) -> tuple[Array, Array, NDArray[np.intp]]:
    """n tasks in the unit cube: a query, n_keys keys, and the index of the key nearest the query."""
    q, K = rng.uniform(size=(n, dim)), rng.uniform(size=(n, n_keys, dim))
    return q, K, np.argmin(((K - q[:, None, :]) ** 2).sum(-1), axis=-1)


def _accuracy(params: Mapping[str, Array], q: Array, K: Array, target: NDArray[np.intp]) -> float:
    """Fraction of tasks whose attention weight peaks at the target key."""
    e = additive_scores(q, K, params["W_q"], params["W_k"], params["v"])
    return float((e.argmax(-1) == target).mean())


def _fit(params: dict[str, Array], rng: np.random.Generator, steps: int, n_keys: int, lr: float = 0.03) -> float:
    """Adam on fresh random retrieval tasks each step (so it cannot memorise); returns the final loss."""
    m = {name: np.zeros_like(p) for name, p in params.items()}
    s = {name: np.zeros_like(p) for name, p in params.items()}
    beta1, beta2, loss = 0.9, 0.999, float("nan")
    for t in range(1, steps + 1):
        loss, grads = additive_retrieval_loss(params, *_retrieval_tasks(rng, 256, n_keys, params["W_q"].shape[1]))
        for name, g in grads.items():
            m[name] = beta1 * m[name] + (1 - beta1) * g
            s[name] = beta2 * s[name] + (1 - beta2) * g**2
            m_hat, s_hat = m[name] / (1 - beta1**t), s[name] / (1 - beta2**t)
            params[name] -= lr * m_hat / (np.sqrt(s_hat) + 1e-8)
    return loss


@dataclass(frozen=True)
class TourResult:
    """The numbers behind the tour's claims; ``ok`` is True when all of them hold."""

    identity_picks_nearest: bool  # on the hand-made example (the claim is that it does not)
    chance: float
    accuracy_identity: float  # held-out, W_q = W_k = I, v = 1
    accuracy_random_init: float  # held-out, the random initialisation of the fitted weights
    accuracy_fitted: float  # held-out, after training
    accuracy_fitted_mirrored: float  # the same held-out tasks negated: (-q, -K)
    final_loss: float

    @property
    def ok(self) -> bool:
        return not self.identity_picks_nearest and self.accuracy_fitted >= 0.9 > self.accuracy_identity


def tour(out: Callable[[str], None] = print, steps: int = 500, seed: int = 0) -> TourResult:
    """Print a short tour of the primitives and check that additive attention must be *learned*."""
    with np.printoptions(precision=3, suppress=True):
        return _tour(out, steps, seed)


def _tour_primitives(out: Callable[[str], None], rng: np.random.Generator) -> None:
    """The tour's parts 1-4: each primitive once on random inputs."""
    out("1. Additive attention (Bahdanau eq. 5-6): one query, 4 keys (the last one padding)")
    q, K = rng.normal(size=3), rng.normal(size=(4, 3))
    W_q, W_k, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    context, alpha = additive_attention(q, K, K, W_q, W_k, v, mask=padding_mask(3, 4))
    out(f"   alpha = {alpha}  (sum {alpha.sum():.3f}; the padded key gets exactly 0)\n   context = {context}")

    out("2. Scaled dot-product attention (Vaswani eq. 1): Q [3,4], K = V [5,4]")
    _, weights = scaled_dot_product_attention(rng.normal(size=(3, 4)), *[rng.normal(size=(5, 4))] * 2)
    out(f"{weights}\n   row sums = {weights.sum(-1)}")

    out("3. Causal self-attention over 4 positions: the weights are lower-triangular")
    X = rng.normal(size=(4, 4))
    out(str(scaled_dot_product_attention(X, X, X, mask=causal_mask(4))[1]))

    out("4. Multi-head attention: B=2, Tq=3, Tk=5, D=8, H=2, second sentence has 2 real keys")
    D = 8
    params = {f"W_{n}": rng.normal(size=(D, D)) / np.sqrt(D) for n in "qkvo"} | {f"b_{n}": np.zeros(D) for n in "qkvo"}
    key_mask = padding_mask([5, 2], 5)[:, None, :]
    output, weights = multi_head_attention(rng.normal(size=(2, 3, D)), rng.normal(size=(2, 5, D)), params, 2, key_mask)
    out(f"   output {output.shape}, weights {weights.shape}; weights[1, 0, 0] = {weights[1, 0, 0]}")


def _tour(out: Callable[[str], None], steps: int, seed: int) -> TourResult:
    rng = np.random.default_rng(seed)
    _tour_primitives(out, rng)

    out("5. Additive attention with W_q = W_k = I, v = 1 does NOT find the key nearest the query:")
    q = np.array([0.2, 0.2])
    K = np.array([[0.25, 0.15], [0.9, 0.9], [0.0, 0.6]])
    identity = {"W_q": np.eye(2), "W_k": np.eye(2), "v": np.ones(2)}
    _, alpha = additive_attention(q, K, K, **identity)
    nearest = int(np.argmin(((K - q) ** 2).sum(-1)))
    out(f"   q = {q}, keys = {K.tolist()}\n   nearest key = {nearest}, alpha = {alpha}, peak at key {alpha.argmax()}")
    out("   (e_j = sum_a tanh(q_a + k_ja) grows with every coordinate of k_j: it prefers large keys, not near ones)")

    n_keys, dim, attn_size = 5, 2, 32
    out(f"6. Fit W_q, W_k [{attn_size},{dim}] and v [{attn_size}] by {steps} Adam steps on 'retrieve the nearest of")
    out(f"   {n_keys} keys' (cross-entropy, hand-derived gradients; points uniform in the unit square)")
    held_out = _retrieval_tasks(np.random.default_rng(seed + 1), 2000, n_keys, dim)
    fitted = {
        "W_q": rng.normal(size=(attn_size, dim)),
        "W_k": rng.normal(size=(attn_size, dim)),
        "v": rng.normal(size=attn_size) / np.sqrt(attn_size),
    }
    accuracy_random_init = _accuracy(fitted, *held_out)
    final_loss = _fit(fitted, rng, steps, n_keys)
    q_h, K_h, target_h = held_out
    result = TourResult(
        identity_picks_nearest=bool(alpha.argmax() == nearest),
        chance=1 / n_keys,
        accuracy_identity=_accuracy(identity, *held_out),
        accuracy_random_init=accuracy_random_init,
        accuracy_fitted=_accuracy(fitted, *held_out),
        accuracy_fitted_mirrored=_accuracy(fitted, -q_h, -K_h, target_h),
        final_loss=final_loss,
    )
    out(f"   held-out accuracy (weight peaks at the nearest key), chance = {result.chance:.2f}:")
    out(f"     identity W, v = 1: {result.accuracy_identity:.3f}")
    out(f"     random init:       {result.accuracy_random_init:.3f}")
    out(f"     fitted:            {result.accuracy_fitted:.3f}  (final training loss {final_loss:.3f})")
    _, alpha = additive_attention(q, K, K, **fitted)
    out(f"   the example of step 5 after fitting: alpha = {alpha}, peak at key {alpha.argmax()}")
    out("   caveat: without biases e is odd, e(-q, -K) = -e(q, K), so the fitted weights rank the mirrored")
    out(f"   tasks backwards: accuracy on (-q, -K) = {result.accuracy_fitted_mirrored:.3f}. On data symmetric about 0")
    out("   a bias-free score is right on at most half of the tasks; hence the unit square here.")
    out(f"check (identity fails, fitted >= 0.9 on held-out tasks): {'PASSED' if result.ok else 'FAILED'}")
    return result


def main() -> int:
    """Run the tour; exit status 1 if its check fails."""
    return 0 if tour().ok else 1


if __name__ == "__main__":
    sys.exit(main())
