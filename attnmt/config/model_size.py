"""How much memory a model's weights take, known before a byte of them is allocated.

:func:`check_size` refuses, in one line that names the key to lower, a model whose float32 weights
would not fit in this machine's memory ("model.hidden_size=10000000 would need about N GB of memory for
its weights"), where building it would end in an allocation error or the out-of-memory
killer. The count is exact: the model is built on torch's meta device, which records shapes and
allocates nothing. That costs about a second the first time (torch loads its reference kernels), so a
cheap upper bound screens every config first and only one that might not fit is counted.
"""

from __future__ import annotations

import dataclasses
import os

from attnmt.errors import UserError

BYTES_PER_WEIGHT = 4  # float32
GB = 10**9


def machine_memory() -> int | None:
    """This machine's physical memory in bytes; None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _int_keys(cfg) -> dict[str, int]:
    """The model config's integer keys that declare a range (layers, widths, heads), with their values."""
    return {f.name: value for f in dataclasses.fields(cfg) if "range" in f.metadata
            and isinstance(value := getattr(cfg, f.name), int) and not isinstance(value, bool)}


def upper_bound(cfg, src_vocab_size: int, tgt_vocab_size: int) -> int:
    """More weights than any of the model types has for these sizes: 16 W^2 per layer (a bidirectional
    LSTM layer has 16 W^2; attention, feed-forward and readout fewer), four layers more for the
    attention and the output, and three embedding-sized matrices per vocabulary; W is the largest size."""
    keys = _int_keys(cfg)
    width = max([1, *keys.values()])
    layers = cfg.enc_layers + cfg.dec_layers + 4
    return 16 * layers * width * width + 3 * (src_vocab_size + tgt_vocab_size) * (width + 1)


def count_parameters(cfg, src_vocab_size: int, tgt_vocab_size: int) -> int:
    """The exact number of weights of the model that ``cfg`` describes, built on the meta device."""
    import torch

    with torch.device("meta"):
        model = type(cfg).model_class.from_config(cfg, src_vocab_size, tgt_vocab_size)
    return sum(p.numel() for p in model.parameters())


def _largest_key(cfg, src_vocab_size: int, tgt_vocab_size: int) -> str | None:
    """The key whose return to its default shrinks the model most (None: no key of the model does)."""
    counts = {}
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    total = count_parameters(cfg, src_vocab_size, tgt_vocab_size)
    for key, value in _int_keys(cfg).items():
        default = defaults[key]
        if default is None or value <= default:
            continue
        try:
            smaller = dataclasses.replace(cfg, **{key: default})
            counts[key] = count_parameters(smaller, src_vocab_size, tgt_vocab_size)
        except (UserError, ValueError):  # the default breaks another rule (d_model % n_heads): not this key
            continue
    key = min(counts, key=counts.get, default=None)
    return key if key is not None and counts[key] < total else None


def _amount(size: int) -> str:
    return f"{size / GB:,.0f} GB" if size >= GB else f"{size / 10**6:,.0f} MB"


def check_size(cfg, src_vocab_size: int, tgt_vocab_size: int, where: str = "config: ") -> None:
    """A UserError naming the key to lower if the weights of the model ``cfg`` describes (a ModelConfig of a
    registered model type) would not fit in this machine's memory."""
    memory = machine_memory()
    if memory is None or upper_bound(cfg, src_vocab_size, tgt_vocab_size) * BYTES_PER_WEIGHT <= memory:
        return
    try:
        weights = count_parameters(cfg, src_vocab_size, tgt_vocab_size)
    except ValueError as e:  # sizes the model refuses (as build_model words it)
        raise UserError(f"{where}model: {e}") from None
    if weights * BYTES_PER_WEIGHT <= memory:
        return
    need = f"would need about {_amount(weights * BYTES_PER_WEIGHT)} of memory for its weights ({weights:,} " \
           "parameters), more than this machine has"
    key = _largest_key(cfg, src_vocab_size, tgt_vocab_size)
    if key is None:
        raise UserError(f"{where}a {cfg.type} model with vocabularies of {src_vocab_size:,} and {tgt_vocab_size:,} "
                        f"words {need}; choose smaller sizes (model.*) or a smaller vocabulary")
    raise UserError(f"{where}model.{key}={getattr(cfg, key)} {need}; choose a smaller model.{key}")
