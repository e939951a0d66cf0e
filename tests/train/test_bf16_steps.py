"""The bf16 (autocast) forms of a CPU training step: the decoder's per-step weight slice cast once per batch."""

from __future__ import annotations

import torch

from attnmt.models.encoders import StackedRNN


def test_the_weight_slice_of_the_per_step_input_is_cast_once_under_autocast():
    torch.manual_seed(0)
    rnn = StackedRNN("lstm", 6 + 4, 8, 1, 0.0)
    known = torch.randn(3, 5, 6)
    gates, w_rest = rnn.input_projection(known)
    assert w_rest.dtype == torch.float32 and w_rest.data_ptr() == rnn.rnn.weight_ih_l0[:, 6:].data_ptr()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        gates_bf16, w_rest_bf16 = rnn.input_projection(known)
    assert w_rest_bf16.dtype == torch.bfloat16 and gates_bf16.dtype == torch.bfloat16
    assert torch.equal(w_rest_bf16, rnn.rnn.weight_ih_l0[:, 6:].to(torch.bfloat16))


def _decoder_steps(rnn, known, rest, cast_once: bool):
    """A teacher-forced LSTM over ``known`` [B,T,k] and per-step inputs ``rest`` [B,T,r] under bf16 autocast; the
    loss and the input weight's gradient."""
    rnn.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if cast_once:
            gates, w_rest = rnn.input_projection(known)
        else:  # the older form: autocast casts the slice at every step
            w_ih = rnn.rnn.weight_ih_l0
            gates = torch.nn.functional.linear(known, w_ih[:, :known.size(-1)], rnn.rnn.bias_ih_l0)
            w_rest = w_ih[:, known.size(-1):]
        state = rnn.state_from_layers(torch.zeros(known.size(0), 1, 8))
        outputs = []
        for t in range(known.size(1)):
            out, state = rnn.step(rest[:, t], state, gates[:, t], w_rest)
            outputs.append(out)
        loss = torch.stack(outputs, 1).float().square().sum()
    loss.backward()
    return loss.detach(), rnn.rnn.weight_ih_l0.grad.clone()


def test_the_decoder_steps_compute_the_same_as_with_a_cast_per_step():
    """The forward is the same bit for bit; the slice's gradient is summed over the steps in bf16 before its one
    cast back (as autocast does for every parameter it caches), so it agrees to bf16's precision."""
    torch.manual_seed(1)
    rnn = StackedRNN("lstm", 6 + 4, 8, 1, 0.0)
    known, rest = torch.randn(3, 7, 6), torch.randn(3, 7, 4)
    loss_once, grad_once = _decoder_steps(rnn, known, rest, cast_once=True)
    loss_each, grad_each = _decoder_steps(rnn, known, rest, cast_once=False)
    assert torch.equal(loss_once, loss_each)
    assert grad_once.dtype == torch.float32 and torch.isfinite(grad_once).all()
    torch.testing.assert_close(grad_once, grad_each, rtol=0.02, atol=0.02 * grad_each.abs().max().item())
