"""``attnmt export --format ctranslate2``: a trained Transformer as a CTranslate2 model folder.

Written on CTranslate2's converter API (``ctranslate2.converters.Converter``, ``TransformerSpec``): every weight
of :class:`attnmt.models.transformer.Transformer` goes to its place in the spec: pre-norm layers with a final
LayerNorm (epsilon 1e-5, torch's), embeddings scaled by sqrt(d_model), the self-attention's Q, K, V fused into one
matrix and the cross-attention's K, V into another, and a tied or shared embedding written to each place that
uses it. The positions are written as a table computed by :func:`attnmt.models.transformer.sinusoidal_encoding`
itself (interleaved sin/cos, where CTranslate2's own encoding puts the halves side by side), one row per
position up to :data:`MAX_POSITIONS`. The attention CTranslate2 returns (``return_attention``) is set to the one
attnmt reads: the guided head of a guided model (its layer's heads reordered so that head comes first, the one
CTranslate2 returns), otherwise the last layer's heads averaged.

The folder also holds the model folder's config.yaml, vocabularies and tokenizers (sentencepiece models),
so that attnmt tokenizes and detokenizes as the model was trained, and ``attnmt_export.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from attnmt.config.schema import is_guided
from attnmt.data.dataset import load_processors
from attnmt.decode.translation import model_config
from attnmt.errors import UserError
from attnmt.export import EXPORT_FILE, QUANTIZATIONS, require_ctranslate2
from attnmt.folder.checkpoint import checkpoint_path, load_folder_checkpoint
from attnmt.models.transformer import sinusoidal_encoding
from attnmt.runtime.safe_write import output_folder, refuse_file_in_the_way, write_text

MAX_POSITIONS = 1024  # rows of the position table: the longest source or output the exported model reads
# what attnmt needs beside the weights: the config and each side's vocabulary and tokenizer
CARRIED = ("config.yaml", *(f"{side}.{ext}" for side in ("src", "tgt", "joint") for ext in ("vocab", "json", "model")))


def attention_choice(config) -> tuple[int, int | None]:
    """(decoder layer, head or None for the heads' average) that the export returns as its attention."""
    n = config.model.dec_layers
    if is_guided(config):
        guided = config.train.guided_alignment
        layer = (-1 if guided.layer is None else guided.layer) % n
        return layer, guided.head
    return n - 1, None


def export_ctranslate2(model_dir: str | Path, out: str | Path, quantization: str = "float32",
                       checkpoint: str | None = None, overwrite: bool = False) -> Path:
    """Write ``model_dir``'s Transformer as a CTranslate2 model to ``out``; returns ``out``."""
    model_dir, out = Path(model_dir), Path(out)
    config = model_config(model_dir)
    if config.model.type != "transformer":
        raise UserError(f"export: {model_dir} holds a {config.model.type!r} model and CTranslate2 runs no RNNs; "
                        "decode it with attnmt's own int8 decoding instead (attnmt translate --int8)")
    ctranslate2 = require_ctranslate2()
    if quantization not in QUANTIZATIONS:
        raise UserError(f"export: --quantization {quantization} is unknown; allowed: {', '.join(QUANTIZATIONS)}")
    refuse_file_in_the_way(out, "export folder")
    if out.resolve() == model_dir.resolve() or model_dir.resolve() in out.resolve().parents:
        raise UserError(f"export: --out {out} is inside the model folder {model_dir}; choose a folder of its own")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"export: {out} exists and is not empty; choose another folder or pass --overwrite")
    path = checkpoint_path(model_dir, checkpoint)
    weights = load_folder_checkpoint(model_dir, path, config.model.type)["model"]
    src, tgt = load_processors(model_dir)
    layer, head = attention_choice(config)
    converter = _Converter(weights, config.model, list(src.vocab.tokens), list(tgt.vocab.tokens), layer, head,
                           ctranslate2)
    record = {"format": "ctranslate2", "ctranslate2": ctranslate2.__version__, "quantization": quantization,
              "checkpoint": path.stem, "attention_layer": layer, "attention_head": head,
              "max_positions": MAX_POSITIONS, "parameters": _parameters(weights)}
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_folder(out) as folder:  # complete, or the folder there before: never half an export
        converter.convert(str(folder), quantization=quantization, force=True)
        for name in CARRIED:
            if (model_dir / name).is_file():
                shutil.copy2(model_dir / name, folder / name)
        write_text(folder / EXPORT_FILE, json.dumps(record, indent=2) + "\n", overwrite=True)
    return out


def _parameters(weights: dict) -> int:
    """Trained parameters in a state dict, a tied or shared matrix counted once."""
    seen = {v.data_ptr(): v.numel() for v in weights.values()}
    return sum(seen.values())


def _Converter(weights: dict, model, src_tokens: list[str], tgt_tokens: list[str], layer: int, head: int | None,
               ctranslate2):
    """A ``ctranslate2.converters.Converter`` whose spec holds ``weights`` (an attnmt Transformer's state dict)."""
    from ctranslate2.converters.converter import Converter
    from ctranslate2.specs import transformer_spec

    class AttnmtConverter(Converter):
        def _load(self):
            spec = transformer_spec.TransformerSpec.from_config(
                (model.enc_layers, model.dec_layers), model.n_heads, pre_norm=True,
                alignment_layer=layer, alignment_heads=1 if head is not None else model.n_heads)
            spec.config.layer_norm_epsilon = 1e-5
            w = {k: v.float().numpy() for k, v in _heads_first(weights, layer, head, model.n_heads).items()}
            _set_transformer(spec, w, model.d_model)
            spec.register_source_vocabulary(src_tokens)
            spec.register_target_vocabulary(tgt_tokens)
            return spec

    return AttnmtConverter()


def _heads_first(weights: dict, layer: int, head: int | None, n_heads: int) -> dict:
    """``weights`` with decoder ``layer``'s cross-attention heads reordered so that ``head`` comes first (the
    one CTranslate2 returns with alignment_heads 1); the model computes the same function."""
    if not head:
        return weights
    order = [head] + [h for h in range(n_heads) if h != head]
    p = f"decoder.{layer}.cross_attn."
    d = weights[p + "W_q.weight"].shape[0]
    rows = torch.arange(d).view(n_heads, d // n_heads)[order].flatten()
    out = dict(weights)
    for name in ("W_q", "W_k", "W_v"):
        out[p + name + ".weight"] = weights[p + name + ".weight"][rows]
        if p + name + ".bias" in weights:
            out[p + name + ".bias"] = weights[p + name + ".bias"][rows]
    out[p + "W_o.weight"] = weights[p + "W_o.weight"][:, rows]
    return out


def _set_transformer(spec, w: dict[str, np.ndarray], d_model: int) -> None:
    table = sinusoidal_encoding(torch.arange(MAX_POSITIONS), d_model).numpy()
    spec.encoder.embeddings[0].weight = w["src_embed.weight"]
    spec.encoder.position_encodings.encodings = table
    spec.encoder.scale_embeddings = True
    _set_norm(spec.encoder.layer_norm, w, "enc_ln")
    for i, layer in enumerate(spec.encoder.layer):
        p = f"encoder.{i}."
        _set_norm(layer.self_attention.layer_norm, w, p + "ln_1")
        _fuse(layer.self_attention.linear[0], w, [p + "self_attn.W_q", p + "self_attn.W_k", p + "self_attn.W_v"])
        _set_linear(layer.self_attention.linear[1], w, p + "self_attn.W_o")
        _set_ffn(layer.ffn, w, p)
    dec = spec.decoder
    dec.embeddings.weight = w["tgt_embed.weight"]
    dec.position_encodings.encodings = table
    dec.scale_embeddings = True
    _set_norm(dec.layer_norm, w, "dec_ln")
    _set_linear(dec.projection, w, "output")
    for i, layer in enumerate(dec.layer):
        p = f"decoder.{i}."
        _set_norm(layer.self_attention.layer_norm, w, p + "ln_1")
        _fuse(layer.self_attention.linear[0], w, [p + "self_attn.W_q", p + "self_attn.W_k", p + "self_attn.W_v"])
        _set_linear(layer.self_attention.linear[1], w, p + "self_attn.W_o")
        _set_norm(layer.attention.layer_norm, w, p + "ln_2")
        _set_linear(layer.attention.linear[0], w, p + "cross_attn.W_q")
        _fuse(layer.attention.linear[1], w, [p + "cross_attn.W_k", p + "cross_attn.W_v"])
        _set_linear(layer.attention.linear[2], w, p + "cross_attn.W_o")
        _set_ffn(layer.ffn, w, p, norm="ln_3")


def _set_ffn(spec, w, p: str, norm: str = "ln_2") -> None:
    _set_norm(spec.layer_norm, w, p + norm)
    _set_linear(spec.linear_0, w, p + "ffn.W_1")
    _set_linear(spec.linear_1, w, p + "ffn.W_2")


def _set_norm(spec, w, name: str) -> None:
    spec.gamma, spec.beta = w[name + ".weight"], w[name + ".bias"]


def _set_linear(spec, w, name: str) -> None:
    spec.weight = w[name + ".weight"]
    if name + ".bias" in w:
        spec.bias = w[name + ".bias"]


def _fuse(spec, w, names: list[str]) -> None:
    spec.weight = np.concatenate([w[n + ".weight"] for n in names])
    if all(n + ".bias" in w for n in names):
        spec.bias = np.concatenate([w[n + ".bias"] for n in names])
