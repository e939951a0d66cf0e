"""The compiled decoder step's pieces that need no compilation (tests/slow/test_compiled_step.py compiles)."""

from __future__ import annotations

import copy
import gc
import weakref

import pytest
import torch

from attnmt.cli import main
from attnmt.decode.translator import load
from attnmt.models.compiled import _Int8Linear, _opaque_int8_layers


@pytest.mark.parametrize("model", ["tiny_model", "tiny_transformer"])
def test_the_opaque_int8_layer_computes_what_torch_ao_computes(request, model):
    # compile_decoder_step swaps torch.ao's int8 layers for attnmt::linear_int8 (which torch.compile can keep in
    # its graph): the same packed weights through the same kernel, so the step's output is equal bit for bit
    translator = load(request.getfixturevalue(model), int8=True)
    quantized, swapped = translator.model, copy.deepcopy(translator.model)
    _opaque_int8_layers(swapped)
    assert not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in swapped.modules())
    assert any(isinstance(m, _Int8Linear) for m in swapped.modules())
    src, src_len = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    with torch.inference_mode():
        outputs = []
        for m in (quantized, swapped):
            enc = m.encode(src, src_len)
            state = m.init_state(enc)
            for token in (1, 9, 10):
                log_probs, state, _ = m.decode_step(torch.tensor([token]), state, enc)
            outputs.append(log_probs)
    assert torch.equal(outputs[0], outputs[1])


def test_compile_is_refused_for_an_ensemble(capsys, tiny_model, tiny_corpus):
    src = tiny_corpus / "test.src"
    assert main(["translate", "--model", str(tiny_model), "--model", str(tiny_model), "--compile",
                 "--input", str(src)]) == 2
    assert "--compile decodes one model" in capsys.readouterr().err


def test_an_int8_weight_lives_as_long_as_its_layer(tiny_model):
    # the operator is handed each layer's weight (no table of every model's weights that a server reloading models
    # would grow); a deep copy of the model holds weights of its own that compute the same
    model = load(tiny_model, int8=True).model
    _opaque_int8_layers(model)
    layers = [m for m in model.modules() if isinstance(m, _Int8Linear)]
    copied = copy.deepcopy(layers[0])
    x = torch.randn(3, layers[0].in_features)
    assert copied.weight is not layers[0].weight and torch.equal(copied(x), layers[0](x))
    weights = [weakref.ref(layer.weight) for layer in layers]
    del model, layers
    gc.collect()
    assert weights and all(w() is None for w in weights)
