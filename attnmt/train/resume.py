"""What `--resume` reads before it uses it: checkpoints/last.pt, checked against the model folder and the model.

`resume_payload` loads last.pt with every check of attnmt.folder.checkpoint (checksum, weights, the tokenizers the
run was trained with) before the run reads its data. `check_optimizer_state` and `check_scheduler_state`
compare the saved optimizer and scheduler state with the ones the config builds (parameter groups, the
shape and dtype of every per-parameter tensor, finite values) before `load_state_dict`: a state of the
wrong shapes would otherwise reach the fused optimizer kernels, which do not check them. Any mismatch is
one UserError naming the file and the first thing that differs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_folder_checkpoint


def resume_payload(model_dir: Path, model_type: str) -> dict[str, Any]:
    """checkpoints/last.pt of a model folder, checked (attnmt.folder.checkpoint.load_folder_checkpoint)."""
    return load_folder_checkpoint(model_dir, model_dir / "checkpoints" / "last.pt", model_type)


def _refuse(path: Path, what: str) -> UserError:
    return UserError(f"checkpoint {path} cannot be resumed: its {what}; train again without --resume "
                     "(or resume from a copy of the folder whose last.pt is intact)")


def _finite(value: Any) -> bool:
    """Whether a number, a tensor or a sequence of them holds no NaN or infinity (other values: True)."""
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def check_optimizer_state(saved: Any, optimizer: torch.optim.Optimizer, path: Path) -> None:
    """UserError unless `saved` is a state `optimizer` can load: the same parameter groups with the same number
    of parameters, finite hyperparameters, and per parameter tensors of its shape and dtype with finite values."""
    if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict) \
            or not isinstance(saved.get("param_groups"), list):
        raise _refuse(path, "optimizer state is malformed (no state and param_groups)")
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        raise _refuse(path, f"optimizer state has {len(saved['param_groups'])} parameter group(s), the model "
                            f"{len(groups)}")
    params: dict[Any, torch.Tensor] = {}
    for k, (old, new) in enumerate(zip(saved["param_groups"], groups)):
        ids = old.get("params") if isinstance(old, dict) else None
        if not isinstance(ids, list) or len(ids) != len(new["params"]):
            raise _refuse(path, f"optimizer state's parameter group {k} does not hold the model's "
                                f"{len(new['params'])} parameters")
        bad = next((key for key, value in old.items() if key != "params" and not _finite(value)), None)
        if bad is not None:
            raise _refuse(path, f"optimizer's {bad} in parameter group {k} is not finite ({old[bad]})")
        params.update(zip(ids, new["params"]))
    for pid, values in saved["state"].items():
        if pid not in params or not isinstance(values, dict):
            raise _refuse(path, f"optimizer state names a parameter {str(pid)[:20]!r} the model does not have")
        _check_parameter_state(values, params[pid], pid, path)


def _check_parameter_state(values: dict, param: torch.Tensor, pid: Any, path: Path) -> None:
    """One parameter's optimizer state (Adam's moments, SGD's momentum, the step count) against the parameter."""
    for name, value in values.items():
        where = f"optimizer state {name} of parameter {pid}"
        if not _finite(value):
            raise _refuse(path, f"{where} holds NaN or infinite values")
        if not isinstance(value, torch.Tensor) or value.dim() == 0:  # a step count
            continue
        if value.shape != param.shape:
            raise _refuse(path, f"{where} has shape {tuple(value.shape)}, the parameter {tuple(param.shape)}")
        if value.dtype != param.dtype:
            raise _refuse(path, f"{where} is {value.dtype}, the parameter {param.dtype}")


def check_scheduler_state(saved: Any, scheduler: Any, path: Path) -> None:
    """UserError unless `saved` fits the scheduler the config builds: a mapping of its keys, no NaN, a learning
    rate per parameter group, and numbers where it holds numbers."""
    if scheduler is None or not saved:
        return
    own = scheduler.state_dict()
    if not isinstance(saved, dict):
        raise _refuse(path, "scheduler state is malformed (not a mapping)")
    for key, value in saved.items():
        if key not in own:
            raise _refuse(path, f"scheduler state has the key {str(key)[:40]!r}, which this config's "
                                f"{type(scheduler).__name__} does not (was train.scheduler changed?)")
        mine = own[key]
        if isinstance(mine, (int, float)) and not isinstance(mine, bool) and \
                (not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value)):
            raise _refuse(path, f"scheduler's {key} is {str(value)[:40]}, not a number")
        if isinstance(mine, list) and (not isinstance(value, list) or len(value) != len(mine)):
            raise _refuse(path, f"scheduler's {key} does not hold one value per parameter group ({len(mine)})")
        if isinstance(mine, list) and not _finite(value):
            raise _refuse(path, f"scheduler's {key} is not finite ({str(value)[:60]})")
