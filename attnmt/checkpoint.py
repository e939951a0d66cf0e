"""Checkpoints: written atomically, read as untrusted input.

A checkpoint holds only tensors and plain Python values, so it loads with
`torch.load(..., weights_only=True)`: a file crafted to run code when unpickled is refused.
It is validated (format version, model type, parameter names and shapes) before use.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.errors import UserError

FORMAT_VERSION = 1


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    """Write to a temporary file, flush and fsync, then rename: a crash never leaves a half-written
    checkpoint under the real name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format_version": FORMAT_VERSION, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, model_type: str | None = None) -> dict[str, Any]:
    """Load and check a checkpoint; any problem is a one-line UserError naming the file."""
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}; train a model first (attnmt train CONFIG)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unsafe content"
        raise UserError(f"checkpoint {path} was refused: it contains objects other than tensors and plain "
                        f"values ({first[:120]}); only load checkpoints written by attnmt") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        raise UserError(f"checkpoint {path} is truncated or corrupted ({type(e).__name__}); "
                        "use another checkpoint (best.pt / last.pt) or retrain") from None
    if not isinstance(payload, dict) or "model" not in payload:
        raise UserError(f"checkpoint {path} is not an attnmt checkpoint (no model weights)")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise UserError(f"checkpoint {path} has format version {version!r}; this attnmt reads version "
                        f"{FORMAT_VERSION}")
    if model_type is not None and payload.get("model_type") != model_type:
        raise UserError(f"checkpoint {path} holds a {payload.get('model_type')!r} model, but the config says "
                        f"{model_type!r}")
    return payload


def load_weights(model: nn.Module, state: dict[str, Any], path: Path) -> None:
    """Copy weights into a model after checking every name and shape."""
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserError(f"checkpoint {path}: the model weights are malformed")
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise UserError(f"checkpoint {path} does not match the model of its config ({what}); "
                        "was it written by a different config?")
    for name, tensor in state.items():
        if tensor.shape != own[name].shape:
            raise UserError(f"checkpoint {path}: {name} has shape {tuple(tensor.shape)}, the config's model "
                            f"needs {tuple(own[name].shape)}")
    model.load_state_dict(state)
