"""Fine-tuning (domain adaptation): a new training run that starts from a trained model.

`attnmt train CONFIG --init-from MODEL_DIR [--checkpoint NAME]` trains CONFIG's data (usually a new
domain's) starting from the weights of MODEL_DIR/checkpoints/NAME.pt, with MODEL_DIR's tokenizers and
vocabularies, which the new corpus is encoded with. The optimizer, the learning-rate schedule, the step
count and the best validation score start fresh. `check_init` refuses, in one line, a config whose model
or tokenizer settings differ from the trained model's (both must be as they were); `copy_processors`
puts the tokenizers into the new model folder, which then translates on its own. `report_coverage` says at
the start which share of the new corpus's tokens the trained vocabularies know, and warns under
`COVERAGE_WARNING` (the rest become <unk>).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch import nn

from attnmt.config.schema import Config, load_config
from attnmt.config.special import UNK_ID
from attnmt.data.store import copy_tokenizers
from attnmt.errors import UserError
from attnmt.folder.checkpoint import checkpoint_path, load_folder_checkpoint, load_weights

# Settings that change no weight's shape or meaning; every other model setting must be as it was.
FREE_MODEL_KEYS = ("dropout", "attention")  # attention: the older alias of decoder + score, compared through them
# The settings that make the tokenizers and vocabularies, and the tokenizers they apply to (None: all).
TOKENIZER_KEYS = {"tokenizer": None, "joint_vocab": None, "lowercase": None, "vocab_size": ("bpe", "unigram"),
                  "max_vocab": ("word",), "min_freq": ("word",)}
COVERAGE_WARNING = 0.95  # a share of the new corpus's tokens known to the trained vocabularies under this is warned of
CHUNK = 1 << 22  # ids counted at a time


@dataclass
class InitFrom:
    """Where a fine-tuning run starts: a trained model folder and one of its checkpoints."""

    model_dir: Path
    checkpoint: str | None = None


def check_init(config: Config, init: InitFrom, model_dir: Path) -> Path:
    """The checkpoint to start from, once the config fits the trained model; else a one-line UserError."""
    folder = init.model_dir
    where = f"--init-from {folder}"
    if not folder.is_dir():
        raise UserError(f"{where}: no such folder; pass a model folder that attnmt train wrote")
    if not (folder / "config.yaml").is_file():
        raise UserError(f"{where}: not an attnmt model folder (no config.yaml); pass a folder that attnmt train wrote")
    if folder.resolve() == model_dir.resolve():
        raise UserError(f"{where}: that is the folder being trained; to continue it use --resume, "
                        "else give the new model its own --model-dir")
    trained = load_config(folder / "config.yaml")
    new, old = dataclasses.asdict(config.model), dataclasses.asdict(trained.model)
    for key in new:
        if key not in FREE_MODEL_KEYS and new[key] != old.get(key):
            raise UserError(f"{where}: model.{key} is {new[key]!r} in this config but {old.get(key)!r} in "
                            f"{folder / 'config.yaml'}; fine-tuning keeps the model's shape: set model.{key}: "
                            f"{old.get(key)} or train from scratch without --init-from")
    for key, applies in TOKENIZER_KEYS.items():
        mine, theirs = getattr(config.data, key), getattr(trained.data, key)
        if mine != theirs and (applies is None or trained.data.tokenizer in applies):
            raise UserError(f"{where}: data.{key} is {mine!r} in this config but {theirs!r} in "
                            f"{folder / 'config.yaml'}; the tokenizers and vocabularies come from {folder}: set "
                            f"data.{key}: {theirs}")
    return checkpoint_path(folder, init.checkpoint)


def copy_processors(init: InitFrom, model_dir: Path) -> None:
    """The trained model's tokenizers and vocabularies into the new model folder."""
    copy_tokenizers(init.model_dir, model_dir)


def init_weights(model: nn.Module, path: Path, model_type: str) -> int:
    """Load the checkpoint's weights into the model; the number of steps they were trained."""
    payload = load_folder_checkpoint(path.parents[1], path, model_type)
    load_weights(model, payload["model"], path)
    return int(payload.get("train_state", {}).get("step", 0))


def vocabulary_coverage(data) -> dict[str, float]:
    """Per side (src, tgt), the share of the training store's tokens that are not <unk>."""
    shares = {}
    for side in ("src", "tgt"):
        total = int(data.meta[f"{side}_tokens"])
        if not total:
            shares[side] = 1.0
            continue
        ids = np.memmap(data.folder / f"{side}.ids", dtype=data.meta["ids_dtype"], mode="r", shape=(total,))
        unknown = sum(int(np.count_nonzero(ids[i:i + CHUNK] == UNK_ID)) for i in range(0, total, CHUNK))
        shares[side] = 1.0 - unknown / total
    return shares


def report_coverage(data, log, quiet: bool) -> None:
    """Say which share of the new corpus's tokens the trained vocabularies cover; warn under COVERAGE_WARNING."""
    shares = vocabulary_coverage(data)
    log.event("vocabulary_coverage", step=0, **shares)
    log.say(f"the trained vocabularies cover {shares['src']:.1%} of the corpus's source tokens and "
            f"{shares['tgt']:.1%} of its target tokens")
    low = [f"{share:.1%} of its {'source' if side == 'src' else 'target'} tokens" for side, share in shares.items()
           if share < COVERAGE_WARNING]
    if low and not quiet:
        print(f"attnmt: warning: the trained model's vocabularies cover only {' and '.join(low)} of this corpus "
              f"(under {COVERAGE_WARNING:.0%}); the rest are trained as <unk>: a model trained on this corpus with "
              "its own tokenizers may translate it better", file=sys.stderr)
