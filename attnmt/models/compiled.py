"""A model's decoder step compiled out of Python: torch.compile (inductor; C++ kernels on a CPU) of ``decode_step``.

At batch 1 a decoder step is a few hundred operator calls on a handful of rows (beam 5: five), each too small for
its arithmetic to matter: the time goes to Python and to torch's dispatch around each call
(docs/performance.md, the CTranslate2 comparison). :func:`compile_decoder_step` hands the model's own
``decode_step``, the same modules and weights, to ``torch.compile``, which traces it once into a graph and
generates fused C++ loops for its elementwise work and reductions (layer norms, softmaxes, the attention's masks,
an LSTM cell's gates), calling the matrix products as library kernels. Every model type is served alike, since
only its ``decode_step`` is compiled; the search around it (:mod:`attnmt.decode.search`) is unchanged and keeps
calling the model interface.

Shapes are dynamic (``dynamic=True``): one graph serves every source length, every cache length of the
Transformer's growing key/value cache and every number of rows, so no cache needs preallocating or padding and a
beam reorders the state as before (``index_select`` rows). torch specialises sizes 0 and 1, so a search compiles
a few graphs (the first step with its empty cache, the first beam step with one row): :func:`warm_up` runs them
at load, once per process, and inductor's on-disk cache makes a later process's compilation shorter.

int8 (:func:`attnmt.models.int8.quantize_int8`): torch.compile cannot trace torch.ao's quantized linear layer
(its packed weight is a TorchScript object, which breaks the graph at every layer), so each one is replaced by an
opaque operator, ``attnmt::linear_int8``, that calls the same packed weight with the same kernel
(``quantized::linear_dynamic``): the int8 arithmetic is unchanged and the graph stays whole around it. The layer
hands the operator its weight as an argument, a :class:`PackedInt8` (an opaque reference type of torch.library):
an input of the graph, so the weight lives as long as its layer. Each model compiles its own graphs (its step is a
copy of its class's code, :func:`_own_step`), paid at load.

The compiled step's fused loops add in another order than torch's eager kernels, so log probs differ in the last
bits; the chosen tokens are the same unless two candidates tie to that precision (tests/slow/test_compiled_step.py
compares greedy and beam outputs).
"""

from __future__ import annotations

import copy
import time
import types
from typing import Callable

import torch
from torch import Tensor, nn
from torch._library.opaque_object import register_opaque_type
from torch._opaque_base import OpaqueBase

__all__ = ["PackedInt8", "compile_decoder_step", "is_compiled", "warm_up"]

class PackedInt8(OpaqueBase):
    """torch.ao's packed int8 weight of one linear layer, passed to ``attnmt::linear_int8`` as an opaque reference
    (a graph input: compiled code calls the operator with whichever layer's weight it is given)."""

    def __init__(self, packed) -> None:
        self.packed = packed

    def __deepcopy__(self, memo: dict) -> "PackedInt8":
        return PackedInt8(copy.deepcopy(self.packed, memo))

    def __getstate__(self) -> dict:
        # inductor's on-disk cache keys a graph by pickling its inputs; the weight is an input, not part of the code
        return {"kind": "a packed int8 weight"}


register_opaque_type(PackedInt8, typ="reference")


@torch.library.custom_op("attnmt::linear_int8", mutates_args=())
def linear_int8(x: Tensor, weight: PackedInt8, out_features: int) -> Tensor:
    """torch.ao's dynamic int8 linear layer of ``weight`` (as its forward computes it).

    ``out_features`` is an argument, not read from the weight, so that it is part of the traced graph: inductor's
    on-disk cache keys a compiled graph by its code, and two models whose layers differ in width must not share
    a graph."""
    return torch.ops.quantized.linear_dynamic(x, weight.packed, reduce_range=True).to(x.dtype)


@linear_int8.register_fake
def _(x: Tensor, weight: PackedInt8, out_features: int) -> Tensor:
    return x.new_empty(*x.shape[:-1], out_features)


class _Int8Linear(nn.Module):
    """A quantized dynamic linear layer through attnmt::linear_int8, which torch.compile keeps in one graph."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.weight = PackedInt8(layer._packed_params._packed_params)

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.attnmt.linear_int8(x, self.weight, self.out_features)


def _opaque_int8_layers(model: nn.Module) -> None:
    """Replace every torch.ao dynamic quantized linear layer of ``model`` by an :class:`_Int8Linear` (in place)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, DynamicLinear) and child._packed_params.dtype == torch.qint8:
                setattr(module, child_name, _Int8Linear(child))


def _own_step(model: nn.Module) -> Callable:
    """``model``'s decode_step bound to it, as a function with a code object of its own.

    torch keeps the graphs it compiles for one code object together, up to its recompile_limit (8), and falls back
    to the eager step beyond it; every model of a type shares its class's code, and each compiles about five graphs,
    so a second model (int8 beside float32, or a server's second language pair) would run eager. A copy of the code
    gives each model its own count, with no process-wide setting changed."""
    method = type(model).decode_step
    function = types.FunctionType(method.__code__.replace(), method.__globals__, method.__name__,
                                  method.__defaults__, method.__closure__)
    function.__kwdefaults__ = method.__kwdefaults__
    return function.__get__(model)


def compile_decoder_step(model: nn.Module) -> nn.Module:
    """``model`` (changed in place and returned) with its ``decode_step`` compiled by torch.compile.

    The first calls compile (about a minute on a 2-core CPU; :func:`warm_up` pays it at load); the outputs are
    those of the eager step but for rounding. Decoding only: training and teacher forcing stay eager.
    """
    _opaque_int8_layers(model)
    # an instance attribute shadows the class's method: every caller of model.decode_step gets the compiled one
    model.decode_step = torch.compile(_own_step(model), dynamic=True)
    model.compiled_step = True
    return model


def is_compiled(model: nn.Module) -> bool:
    """Whether ``model``'s decoder step is compiled (:func:`compile_decoder_step`)."""
    return bool(getattr(model, "compiled_step", False))


def warm_up(translate, beam: int) -> float:
    """Compile the graphs a search needs by translating a sentence greedily and with ``beam``; returns the seconds
    it took. ``translate(text, beam)`` is a translator's call. (A source of one piece, sizes torch specialises,
    compiles its own graphs when it first comes.)"""
    start = time.perf_counter()
    for width in sorted({1, beam}):
        translate("a b c d e f g h", width)
    return time.perf_counter() - start
