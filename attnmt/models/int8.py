"""int8 decoding on a CPU: dynamic quantization of a trained model's matrix products."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` whose matrix products are int8 (weights per output channel, activations per batch).

    For decoding on a CPU, where the output layer's matrix product dominates: int8 products run about
    twice as fast as float32 ones (fbgemm/oneDNN, AVX2 and up), at the same BLEU
    (benchmarks/rnn256.py measures both). Quantized: every nn.Linear with more than one output and the
    decoder's recurrent step (its matrices are copied into linear layers first). Float32 stay the
    embeddings, attention's elementwise work, the score vector v of additive attention (quantizing
    its [B,S,A] input at every step makes it 3x slower, measured) and the encoder's RNN (torch.ao's
    int8 LSTM ran no faster than the float32 one here: short sequences, small matrices).
    """
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    from attnmt.models.encoders import StackedRNN

    model = copy.deepcopy(model)
    for module in model.modules():
        if isinstance(module, StackedRNN):
            module.use_step_linears()  # the recurrent step as linear layers, which quantize_dynamic converts
    spec = {name: per_channel_dynamic_qconfig for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and module.out_features > 1}
    with warnings.catch_warnings():
        # torch.ao's dynamic quantization is deprecated in favour of torchao, whose int8 path on a
        # CPU is, as of torchao 0.18, far slower than float32: this one is still the fast one.
        warnings.filterwarnings("ignore", message=r".*(is deprecated|are deprecated)")
        return quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
