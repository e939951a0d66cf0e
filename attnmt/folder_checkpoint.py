"""A model folder's checkpoint and its tokenizers, loaded only as the pair they were trained as.

Every checkpoint records the hash of the tokenizers and vocabularies of its model folder
(`attnmt.data.store.tokenizer_hash`); `load_folder_checkpoint` is how translation, resume, fine-tuning and
export read a folder's checkpoint, and refuses in one line a folder whose files differ from that record
(swapped, edited, emptied or replaced files would otherwise load and translate garbage) before a tokenizer
is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnmt.checkpoint import load_checkpoint
from attnmt.data.store import tokenizer_files, tokenizer_hash
from attnmt.errors import UserError


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
