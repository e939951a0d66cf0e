"""Checkpoints: written atomically, read as untrusted input.

A checkpoint holds only tensors and plain Python values, so it loads with
`torch.load(..., weights_only=True)`: a file crafted to run code when unpickled is refused.
It is validated (format version, a SHA-256 checksum of its contents, model type, parameter names
and shapes, finite weights) before use. Tensors are checksummed, and loaded, as dense contiguous
tensors (`dense`), whatever their layout or view. A file without its checksum is refused: every checkpoint
attnmt has written carries one (format version 1 has had it from the start), so its absence means the
file was edited or made by something else, and corruption could not be told from good weights.
Weights with a NaN or an infinity are refused too: they translate every sentence into nothing.

A failed write (a full disk, a folder that cannot be written) is a `CheckpointWriteError`, one line
naming the file: the write goes through attnmt.runtime.safe_write, to a temporary file that is renamed into place
only when complete, so the checkpoint of that name that was there before is untouched.

Only `last.pt` carries the full training state (optimizer, scheduler, RNG, EMA) that `--resume`
needs; `best.pt`, the kept `stepN.pt`, `ema.pt` and averaged checkpoints hold what translating
needs (`for_translation`), about a third of the size with Adam. Checkpoints written with the full
state under another name (as `best.pt` was once) load all the same.

A model folder's checkpoint and its tokenizers load only as the pair they were trained as: every
checkpoint records the hash of the tokenizers and vocabularies of its model folder
(`attnmt.data.store.tokenizer_hash`); `load_folder_checkpoint` is how translation, resume, fine-tuning and
export read a folder's checkpoint, and refuses in one line a folder whose files differ from that record
(swapped, edited, emptied or replaced files would otherwise load and translate garbage) before a tokenizer
is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.data.store import tokenizer_files, tokenizer_hash
from attnmt.errors import UserError
from attnmt.runtime.lock import folder_locked
from attnmt.runtime.safe_write import WriteError, open_output

FORMAT_VERSION = 1
# What translating with a checkpoint needs, and where its weights came from (the step, the scores, the averaged files)
FOR_TRANSLATION = ("model_type", "model", "vocab_sizes", "train_state", "averaged", "tokenizers")


def dense(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor as a plain CPU tensor: sparse layouts made dense, conjugate and negative views resolved,
    expanded or strided views copied into contiguous memory (what its bytes are hashed and copied from)."""
    t = tensor.detach().cpu()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.resolve_conj().resolve_neg().contiguous()


def payload_digest(payload: dict[str, Any]) -> str:
    """SHA-256 over every tensor's bytes, dtype and shape and every plain value, in a fixed order.

    Stored in the checkpoint and checked on load: `torch.load` does not verify the zip's CRCs, so
    without it a flipped bit in the weights would load silently.
    """
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            t = dense(x)
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            if t.numel():
                h.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
        elif isinstance(x, dict):
            h.update(f"D{len(x)}".encode())
            for key in sorted(x, key=repr):
                walk(key)
                walk(x[key])
        elif isinstance(x, (list, tuple)):
            h.update(f"L{len(x)}".encode())
            for item in x:
                walk(item)
        else:
            h.update(f"V{type(x).__name__}:{x!r};".encode())

    walk({k: v for k, v in payload.items() if k != "checksum"})
    return h.hexdigest()


class CheckpointWriteError(UserError):
    """A checkpoint could not be written (`reason`: the system's words, e.g. No space left on device); the
    file of that name, if there was one, is untouched."""

    def __init__(self, path: Path, reason: str):
        self.path, self.reason = path, reason
        kept = (f"{path.name} there still holds its previous contents" if path.is_file()
                else "nothing was written in its place")
        super().__init__(f"cannot write checkpoint {path}: {reason}; {kept} (the write goes to a temporary file "
                         "first); free some space or choose a folder that can be written")


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    """Write the checkpoint by attnmt.runtime.safe_write (a temporary file, fsynced, then renamed): a crash
    never leaves a
    half-written checkpoint under the real name. A failed write (a full disk, a folder that cannot be written)
    is a `CheckpointWriteError`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckpointWriteError(path, e.strerror or str(e)) from None
    payload = {"format_version": FORMAT_VERSION, **payload}
    payload["checksum"] = payload_digest(payload)
    try:
        with open_output(path, "wb", overwrite=True) as f:
            torch.save(payload, f)
    except WriteError as e:
        raise CheckpointWriteError(path, e.reason) from None


def load_checkpoint(path: Path, model_type: str | None = None) -> dict[str, Any]:
    """Load and check a checkpoint; any problem is a one-line UserError naming the file."""
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}; train a model first (attnmt train CONFIG)")
    if not zipfile.is_zipfile(path):  # torch.save always writes a zip archive
        raise UserError(f"checkpoint {path} is truncated or corrupted, or not an attnmt checkpoint (not a zip "
                        "archive); use another checkpoint (best.pt / last.pt) or retrain")
    try:
        with warnings.catch_warnings():  # torch warns on stderr about odd pickles: keep errors one line
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [line.strip() for line in str(e).splitlines()]
        detail = next((line for line in lines if "GLOBAL" in line or line.startswith("Unsupported")), "")
        raise UserError(f"checkpoint {path} was refused: it contains objects other than tensors and plain "
                        f"values{f' ({detail[:120]})' if detail else ''}; only load checkpoints written by "
                        "attnmt") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError, KeyError) as e:
        raise UserError(f"checkpoint {path} is truncated or corrupted ({type(e).__name__}); "
                        "use another checkpoint (best.pt / last.pt) or retrain") from None
    if not isinstance(payload, dict) or "model" not in payload:
        raise UserError(f"checkpoint {path} is not an attnmt checkpoint (no model weights)")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise UserError(f"checkpoint {path} has format version {version!r}; this attnmt reads version "
                        f"{FORMAT_VERSION}")
    if "checksum" not in payload:
        raise UserError(f"checkpoint {path} has no checksum, so damage to it could not be detected; every "
                        "checkpoint attnmt writes has one: use another checkpoint (best.pt / last.pt) or retrain")
    if payload["checksum"] != payload_digest(payload):
        raise UserError(f"checkpoint {path} is corrupted (its checksum does not match its contents); "
                        "use another checkpoint (best.pt / last.pt) or retrain")
    if isinstance(payload["model"], dict):
        payload["model"] = {k: dense(v) if isinstance(v, torch.Tensor) else v for k, v in payload["model"].items()}
    _check_finite(payload["model"], path)
    if model_type is not None and payload.get("model_type") != model_type:
        raise UserError(f"checkpoint {path} holds a {payload.get('model_type')!r} model, but the config says "
                        f"{model_type!r}")
    return payload


def _check_finite(weights: Any, path: Path) -> None:
    """UserError when a floating-point weight holds a NaN or an infinity (a diverged run's weights)."""
    if not isinstance(weights, dict):
        return  # load_weights refuses it
    for name, tensor in weights.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise UserError(f"checkpoint {path}: {name} holds {bad:,} NaN or infinite value(s) of {tensor.numel():,}; "
                            "the run that wrote it diverged: use another checkpoint (--checkpoint last, stepN) or "
                            "retrain with a lower train.lr")


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


def kept_checkpoints(directory: Path) -> list[Path]:
    """The step checkpoints (`step<N>.pt`) that `train.keep_checkpoints` kept, oldest first."""
    found = [(int(p.stem[4:]), p) for p in directory.glob("step*.pt") if p.stem[4:].isascii() and p.stem[4:].isdigit()]
    return [p for _, p in sorted(found)]


def for_translation(payload: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint to ship: the weights and what translating needs (:data:`FOR_TRANSLATION`), without the
    optimizer, scheduler, RNG and EMA state that only resuming a training run uses."""
    return {k: payload[k] for k in FOR_TRANSLATION if k in payload}


def keep_checkpoint(payload: dict[str, Any], directory: Path, step: int, keep: int) -> None:
    """Write the weights of this step as `step<N>.pt` and delete all but the newest `keep` of them."""
    save_checkpoint(for_translation(payload), directory / f"step{step}.pt")
    for old in kept_checkpoints(directory)[:-keep]:
        old.unlink(missing_ok=True)


def checkpoint_path(model_dir: Path, name: str | None = None) -> Path:
    """`checkpoints/<name>.pt` of a model folder; a missing one is a UserError that lists the folder's checkpoints.
    No name (the default): best.pt, or last.pt when the folder has no best.pt yet, which a line on stderr says."""
    if name is None:
        best, last = model_dir / "checkpoints" / "best.pt", model_dir / "checkpoints" / "last.pt"
        if not best.is_file() and last.is_file():
            print(f"attnmt: note: {model_dir} has no checkpoints/best.pt (written at its first validation); "
                  "using checkpoints/last.pt", file=sys.stderr)
            return last
        name = "best"
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise UserError(f"checkpoint name {name!r} is not valid; pass a name such as best, last, averaged or step3000")
    directory = model_dir / "checkpoints"
    path = directory / f"{name}.pt"
    if not path.is_file():
        available = sorted(p.stem for p in directory.glob("*.pt")) if directory.is_dir() else []
        hint = " (an ema checkpoint is written by training with train.ema_decay)" if name == "ema" else ""
        raise UserError(f"{model_dir} has no checkpoint {name!r}; "
                        + (f"available: {', '.join(available)}{hint}" if available
                           else "it has no checkpoints: train a model first (attnmt train CONFIG)"))
    return path


def average_checkpoints(paths: list[Path], model_type: str | None = None) -> dict[str, Any]:
    """The element-wise mean of the weights of several checkpoints of one model (Vaswani et al. 2017, sec. 6.1:
    "averaging the last 5 checkpoints"), as a checkpoint payload that `load` reads like any other."""
    if not paths:
        raise UserError("no checkpoints to average; train with train.keep_checkpoints=N (N >= 2) to keep them")
    payloads = [load_checkpoint(p, model_type) for p in paths]
    first, first_path = payloads[0]["model"], paths[0]
    total = {name: tensor.double() if tensor.is_floating_point() else tensor.clone() for name, tensor in first.items()}
    for payload, path in zip(payloads[1:], paths[1:]):
        weights = payload["model"]
        if set(weights) != set(first) or any(weights[n].shape != first[n].shape for n in first):
            raise UserError(f"checkpoint {path} holds a different model than {first_path}; average checkpoints "
                            "of one training run only")
        for name, tensor in weights.items():
            if tensor.is_floating_point():
                total[name] += tensor.double()
    averaged = {name: (t / len(paths)).to(first[name].dtype) if t.is_floating_point() else t
                for name, t in total.items()}
    last = payloads[-1]
    return {"model_type": last["model_type"], "model": averaged, "vocab_sizes": last.get("vocab_sizes"),
            "averaged": [str(p.name) for p in paths], "train_state": last.get("train_state", {}),
            **({"tokenizers": last["tokenizers"]} if "tokenizers" in last else {})}


def average_last(model_dir: Path, last: int | None = None, name: str = "averaged", model_type: str | None = None,
                 overwrite: bool = False) -> tuple[Path, list[Path]]:
    """Average the newest `last` kept step checkpoints of a model folder (all of them if None) into
    `checkpoints/<name>.pt`; returns that path and the checkpoints averaged. The folder is locked meanwhile
    (attnmt.runtime.lock): a training run of it must end first."""
    with folder_locked(model_dir, "attnmt average") if model_dir.is_dir() else contextlib.nullcontext():
        return _average_last(model_dir, last, name, model_type, overwrite)


def _average_last(model_dir: Path, last: int | None, name: str, model_type: str | None,
                  overwrite: bool) -> tuple[Path, list[Path]]:
    directory = model_dir / "checkpoints"
    kept = kept_checkpoints(directory)
    if last is not None and last < 1:
        raise UserError(f"average: --last {last} must be at least 1")
    if len(kept) < 2 or (last is not None and last > len(kept)):
        raise UserError(f"average: {directory} keeps {len(kept)} step checkpoint(s)"
                        + (f", fewer than --last {last}" if last is not None and last > len(kept) else "")
                        + "; train with train.keep_checkpoints=N (N >= 2) to keep them")
    if name in ("best", "last") or name.startswith("step"):
        raise UserError(f"average: the name {name!r} belongs to training's own checkpoints; choose another "
                        "(default: averaged)")
    out = directory / f"{name}.pt"
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists; choose another --name or pass --overwrite")
    chosen = kept[-last:] if last else kept
    save_checkpoint(average_checkpoints(chosen, model_type), out)
    return out, chosen


def load_folder_checkpoint(model_dir: Path, path: Path, model_type: str | None = None) -> dict[str, Any]:
    """A checkpoint of a model folder, checked (`load_checkpoint`) and checked against the folder's tokenizers."""
    payload = load_checkpoint(path, model_type)
    check_tokenizers(payload, model_dir, path)
    return payload


def check_tokenizers(payload: dict[str, Any], model_dir: Path, path: Path) -> None:
    """UserError unless the folder's tokenizers and vocabularies are the ones the checkpoint was trained with
    (the hash `attnmt.data.store.tokenizer_hash` recorded in it): files swapped, edited, emptied or replaced
    would translate garbage. A checkpoint that records no hash (written before they did) is not checked."""
    recorded = payload.get("tokenizers")
    if recorded is None or recorded == tokenizer_hash(model_dir):
        return
    names = ", ".join(p.name for p in tokenizer_files(model_dir)) or "none"
    raise UserError(f"{model_dir}: its tokenizer and vocabulary files ({names}) are not the ones checkpoint "
                    f"{path.name} was trained with (swapped, edited, emptied or replaced); put the model folder's "
                    "own files back, or retrain")
