"""The study's runs: one attnmt model folder per model and seed, trained when missing, resumed when interrupted."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from attnmt.config.schema import PATH_FIELDS, Config, config_from_dict, config_to_dict
from attnmt.errors import UserError
from attnmt.study.spec import Study, deep_merge, model_raw_config, resolve_path


@dataclass
class Run:
    """One model of one seed: trained by the study into ``model_dir`` (``config`` set) or given."""

    model: str
    seed: int  # for given folders: their position, 1, 2, ...
    model_dir: Path
    config: Config | None  # None: an existing folder, evaluated as it is

    @property
    def label(self) -> str:
        return f"{self.model}-seed{self.seed}"


def plan_runs(study: Study, out: Path, fingerprint: str) -> list[Run]:
    """Every (model, seed) of the study, with the exact config each is trained with: on the splits
    in ``out/data``, whose training fingerprint (StudyData.training_fingerprint) is ``fingerprint``."""
    runs = []
    base_dir = Path(study.path or ".").parent
    for entry in study.models:
        if entry.model_dirs:
            for k, folder in enumerate(entry.model_dirs, start=1):
                model_dir = resolve_path(folder, base_dir)
                if not (model_dir / "config.yaml").is_file():
                    raise UserError(f"model {entry.name!r}: {model_dir} is not an attnmt model folder (no config.yaml)")
                runs.append(Run(entry.name, k, model_dir, None))
            continue
        raw = model_raw_config(study, entry)
        for seed in study.seeds:
            config = config_from_dict(deep_merge(raw, {"train": {"seed": seed}}))
            # The study owns the data: every model reads the study's splits. The data fingerprint in
            # the name makes a changed data set a changed config, so old models are not reused.
            config.name = f"{study.name}-{entry.name}-seed{seed}-data{fingerprint}"
            d = config.data
            d.transforms = [t for t in d.transforms if t.get("name") != "synthetic"]  # the study gives the pairs
            directory = out / "data"
            d.train_src, d.train_tgt = str(directory / "train.src"), str(directory / "train.tgt")
            d.valid_src, d.valid_tgt = str(directory / "valid.src"), str(directory / "valid.tgt")
            d.test_src, d.test_tgt = str(directory / "test.src"), str(directory / "test.tgt")
            d.train_tsv = d.valid_tsv = None
            config.train.progress = False
            runs.append(Run(entry.name, seed, out / "models" / entry.name / f"seed{seed}", config))
    return runs


def _comparable(config: dict) -> dict:
    """A config dict without the settings that do not change what is learnt.

    The data paths are left out too: the output folder may have moved, and the data's identity is
    in the config's name (its fingerprint, see plan_runs).
    """
    config = copy.deepcopy(config)
    for key in ("progress", "tensorboard", "log_every", "threads", "device"):
        config.get("train", {}).pop(key, None)
    for key in PATH_FIELDS:
        config.get("data", {}).pop(key, None)
    return config


def training_status(run: Run) -> Literal["given", "missing", "finished", "interrupted"]:
    """What the model folder of a run holds."""
    if run.config is None:
        return "given"
    log = run.model_dir / "train_log.jsonl"
    if not (run.model_dir / "checkpoints" / "last.pt").is_file() or not log.is_file():
        return "missing"
    events = [json.loads(line).get("event") for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return "finished" if events and events[-1] == "end" else "interrupted"


def ensure_trained(run: Run, retrain: bool = False, quiet: bool = True) -> dict:
    """Train the run unless its folder already holds the same finished model; returns what was done."""
    from attnmt.config.schema import load_config
    from attnmt.train.trainer import train

    status = training_status(run)
    if status == "given":
        return {"action": "given"}
    assert run.config is not None
    if status != "missing" and not retrain:
        saved = config_to_dict(load_config(run.model_dir / "config.yaml"))
        wanted = config_to_dict(run.config)
        if _comparable(saved) != _comparable(wanted):
            key = _first_difference(_comparable(saved), _comparable(wanted))
            raise UserError(f"{run.model_dir} was trained with another config ({key}); delete the folder or run the "
                            "study with --retrain")
        if status == "finished":
            return {"action": "reused"}
    started = time.perf_counter()
    resume = status == "interrupted" and not retrain
    result = train(run.config, run.model_dir, resume=resume, overwrite=retrain or status == "missing", quiet=quiet)
    return {"action": "resumed" if resume else "trained", "seconds": time.perf_counter() - started,
            "steps": result.state.step, "stop_reason": result.state.stop_reason}


def _first_difference(a: dict, b: dict, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            found = _first_difference(x, y, f"{prefix}{key}.")
            if found:
                return found
        elif x != y:
            return f"{prefix}{key}: {x!r} then, {y!r} now"
    return ""


# ================================================================ runs: evaluation
