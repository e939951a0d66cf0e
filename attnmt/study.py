"""`attnmt study`: train a set of models over several seeds, measure them, and write a report.

A study config (YAML) names the data, the models (each a base attnmt config, a file and/or inline
overrides, or existing model folders) and the seeds. `run_study` trains every model that is not
trained yet into an output folder (re-running reuses finished models and resumes interrupted
ones), evaluates each model on the test split, and writes

* ``report.html``: one self-contained page (figures embedded as base64 PNG);
* ``results.json``: every number behind the report;
* ``figures/*.png``: the figures on their own, for documents that cite them.

What it measures, per model and seed: BLEU per source-length bucket with a 95% bootstrap
interval (Bahdanau et al. 2014, Figure 2), corpus BLEU and chrF, test perplexity (teacher
forcing), next-token accuracy by target position, and for attention models the alignment error
rate of the word alignments read off the attention (:mod:`attnmt.align`). Over seeds it reports
the mean, the spread (min, max, standard deviation) and a bootstrap interval of the seed mean
that resamples test sentences jointly for all seeds.

Output folder layout::

    data/                       the splits the study trained and tested on
    models/<model>/seed<k>/     attnmt model folders (as `attnmt train` writes them)
    evals/<model>-seed<k>.json  cached evaluations (redone when the model or test set changes)
    figures/  report.html  results.json

Source length is counted in whitespace-separated words of the source text, so that models with
different tokenizers share the same buckets.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import html
import json
import math
import os
import random
import sys
import time
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import numpy as np
import yaml

from attnmt.checkpoint import checkpoint_path
from attnmt.config import PATH_FIELDS, Config, _build, _check_range, _coerce, config_from_dict, config_to_dict
from attnmt.errors import UserError

# ================================================================ the study config


@dataclass
class SyntheticData:
    """The built-in synthetic language (attnmt.data.synthetic), with gold alignments."""

    train: int = 20000  # training pairs, source lengths uniform in [min_len, max_len]
    valid: int = 300  # validation and test pairs, lengths likewise uniform
    test: int = 600
    min_len: int = 4
    max_len: int = 80
    # Extra training pairs of min_len..short_max_len words. Short sentences are where attention first
    # learns to find the word to translate, and they cost little: mixing them in speeds training up a lot.
    short_train: int = 0
    short_max_len: int = 20
    seed: int = 1  # fixes the language (vocabulary, lexicon) and the sentences

    def __post_init__(self) -> None:
        for key in ("train", "valid", "test"):
            _check_range(f"data.synthetic.{key}", getattr(self, key), 1, None)
        _check_range("data.synthetic.short_train", self.short_train, 0, None)
        _check_range("data.synthetic.min_len", self.min_len, 3, None)
        _check_range("data.synthetic.max_len", self.max_len, self.min_len, None)
        if self.short_train:
            _check_range("data.synthetic.short_max_len", self.short_max_len, self.min_len, self.max_len)


@dataclass
class Multi30kLongData:
    """Multi30k with long sentence pairs made by joining consecutive caption pairs.

    Captions are short (about 13 words), so each split is cut into runs of ``min_join`` to
    ``max_join`` consecutive pairs, and each run becomes one pair (sources joined with sources,
    targets with targets, in order). Training uses the single pairs and the joined ones; the test
    buckets are the joined test pairs.
    """

    dir: str = "../../shared/data/multi30k"  # the official raw files ({split}.{lang}[.gz]); relative to the study file
    src_lang: str = "en"
    tgt_lang: str = "fr"
    min_join: int = 2
    max_join: int = 5
    train_single: Optional[int] = None  # single training pairs kept (None: all 29,000)
    train_joined: Optional[int] = None  # joined training pairs kept (None: all, about 29,000 / 3.5)
    valid: int = 200  # joined validation pairs (for checkpoint selection)
    test_split: str = "test_2016_flickr"
    seed: int = 1  # the run lengths of the joins

    def __post_init__(self) -> None:
        _check_range("data.multi30k_long.min_join", self.min_join, 1, None)
        _check_range("data.multi30k_long.max_join", self.max_join, self.min_join, None)
        _check_range("data.multi30k_long.valid", self.valid, 1, None)


@dataclass
class DataSection:
    """Exactly one of the two sources of data."""

    synthetic: Optional[SyntheticData] = None
    multi30k_long: Optional[Multi30kLongData] = None


@dataclass
class ModelEntry:
    """One model of the study: a base attnmt config trained once per seed, or existing folders."""

    name: str = ""  # names the model in the report and its folder; letters, digits, - and _
    config: Optional[str] = None  # an attnmt config YAML to start from (relative to the study file)
    overrides: dict = field(default_factory=dict)  # config values on top, nested like a config file
    model_dirs: list[str] = field(default_factory=list)  # existing trained folders (one per seed): nothing is trained


@dataclass
class EvaluationSection:
    """How every model is scored."""

    beam: int = 1  # 1: greedy search
    bleu_tokenize: str = "13a"  # sacreBLEU tokenizer; "none" for already tokenized text (the synthetic language)
    bucket_edges: list[int] = field(default_factory=list)  # source-length buckets [e0, e1), ...; empty: 10 words wide
    bootstrap: int = 1000  # resamples for the 95% intervals (0: none)
    confidence: float = 0.95
    position_width: int = 10  # target positions per group in the accuracy-by-position figure

    def __post_init__(self) -> None:
        _check_range("evaluation.beam", self.beam, 1, 100)
        _check_range("evaluation.bootstrap", self.bootstrap, 0, None)
        _check_range("evaluation.confidence", self.confidence, 0.5, 0.999)
        _check_range("evaluation.position_width", self.position_width, 1, None)


@dataclass
class HeatmapSection:
    """Attention heatmaps: teacher-forced, word-level attention of chosen test pairs."""

    model: str = ""  # the model entry to draw (its first seed); empty: the first model with attention
    sentences: list[int] = field(default_factory=list)  # 0-based test sentence indices
    lengths: list[int] = field(default_factory=list)  # or the test sentences closest to these source lengths


@dataclass
class GoldSet:
    """A word-aligned test set: tokenized sentences and 1-based gold links (``i-j`` sure, ``ipj`` possible)."""

    name: str = ""
    src: str = ""  # paths relative to the study file
    tgt: str = ""
    gold: str = ""


@dataclass
class AlignmentSection:
    """Alignment error rate of the links read off each attention model (see attnmt.align)."""

    synthetic_test: Optional[bool] = None  # score the synthetic test split's gold alignments (default: yes, with synthetic data)
    sets: list[GoldSet] = field(default_factory=list)  # further gold sets, e.g. the NAACL 2003 Hansards
    threshold: float = 0.5  # for the thresholded links
    models: list[str] = field(default_factory=list)  # model entries to score; empty: every model with attention

    def __post_init__(self) -> None:
        _check_range("alignment.threshold", self.threshold, 0.0, 1.0, inclusive_low=False)


@dataclass
class Study:
    """A whole study (see studies/*.yaml)."""

    name: str = "study"
    description: str = ""  # shown at the top of the report
    data: DataSection = field(default_factory=DataSection)
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    jobs: int = 1  # runs trained at the same time, in processes of one thread each (the CLI's --jobs overrides)
    defaults: dict = field(default_factory=dict)  # config values shared by every model (under each model's own)
    models: list[ModelEntry] = field(default_factory=list)
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)
    heatmaps: HeatmapSection = field(default_factory=HeatmapSection)
    alignment: AlignmentSection = field(default_factory=AlignmentSection)
    path: Optional[str] = None  # where the study was read from (set by load_study, not by the YAML)


def _is_optional_dataclass(tp: Any) -> bool:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1 and dataclasses.is_dataclass(
        args[0])


def _needs_tree(tp: Any) -> bool:
    """Whether a field needs more than attnmt.config._build: lists, free mappings, optional sections."""
    if typing.get_origin(tp) in (list, dict) or tp is dict or _is_optional_dataclass(tp):
        return True
    return dataclasses.is_dataclass(tp) and any(_needs_tree(t) for t in typing.get_type_hints(tp).values())


def _build_value(tp: Any, value: Any, key: str) -> Any:
    """Validate one value against its annotation; dataclasses become instances."""
    if _is_optional_dataclass(tp):
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return None if value is None else _build_tree(inner, value, f"{key}.")
    if dataclasses.is_dataclass(tp):
        return _build_tree(tp, value or {}, f"{key}.")
    if tp is dict or typing.get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise UserError(f"config: {key} must be a mapping of keys to values, got {value!r}")
        return value
    if typing.get_origin(tp) is list:
        if not isinstance(value, list):
            raise UserError(f"config: {key}={value!r} must be a list")
        (item_type,) = typing.get_args(tp)
        return [_build_value(item_type, item, f"{key}[{n}]") for n, item in enumerate(value)]
    return _coerce(key, value, tp)


def _build_tree(cls: type, raw: Any, prefix: str) -> Any:
    """attnmt.config._build extended to lists, free mappings and optional sections.

    The plain keys go through ``_build`` (so unknown keys, types and ranges are reported exactly
    as in model configs); the other fields are built here and set on the result.
    """
    if not isinstance(raw, dict):
        raise UserError(f"config: {prefix.rstrip('.') or 'the top level'} must be a mapping of keys to values, "
                        f"got {raw!r}")
    hints = typing.get_type_hints(cls)
    special = {k: v for k, v in raw.items() if k in hints and _needs_tree(hints[k])}
    node = _build(cls, {k: v for k, v in raw.items() if k not in special}, prefix)
    values = {k: _build_value(hints[k], v, f"{prefix}{k}") for k, v in special.items()}
    return dataclasses.replace(node, **values) if values else node


def deep_merge(base: dict, top: dict) -> dict:
    """A copy of ``base`` with ``top`` merged in; nested mappings merge, everything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _resolve(path: str, base_dir: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()


def model_raw_config(study: Study, entry: ModelEntry) -> dict:
    """The raw config dict of a model entry: study defaults, then its config file, then its overrides."""
    raw = copy.deepcopy(study.defaults)
    if entry.config:
        path = _resolve(entry.config, Path(study.path or ".").parent)
        if not path.is_file():
            raise UserError(f"model {entry.name!r}: config file not found: {path}")
        try:
            raw = deep_merge(raw, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        except yaml.YAMLError:
            raise UserError(f"model {entry.name!r}: {path} is not valid YAML") from None
    return deep_merge(raw, entry.overrides)


def study_from_dict(raw: dict, path: Path | None = None) -> Study:
    """Validate a raw study dict (as read from YAML)."""
    study = _build_tree(Study, raw, "")
    study.path = str(path) if path is not None else None
    _validate(study)
    return study


def _validate(study: Study) -> None:
    """The checks that span several fields."""
    d = study.data
    if (d.synthetic is None) == (d.multi30k_long is None):
        raise UserError("config: data must have exactly one of 'synthetic' or 'multi30k_long'")
    _check_range("jobs", study.jobs, 1, None)
    if not study.models:
        raise UserError("config: models is empty; list at least one model (name plus config and/or overrides)")
    if not study.seeds or len(set(study.seeds)) != len(study.seeds):
        raise UserError(f"config: seeds={study.seeds} must be a non-empty list of distinct integers")
    names = [m.name for m in study.models]
    for k, entry in enumerate(study.models):
        if not entry.name or not all(c.isalnum() or c in "-_" for c in entry.name):
            raise UserError(f"config: models[{k}].name={entry.name!r} must be non-empty letters, digits, '-' or '_'")
        if names.count(entry.name) > 1:
            raise UserError(f"config: two models are named {entry.name!r}; names must be unique")
        if entry.model_dirs and (entry.config or entry.overrides):
            raise UserError(f"config: models[{k}] ({entry.name}) has model_dirs and a config; existing folders are "
                            "evaluated as they are, so give one or the other")
        if not entry.model_dirs:
            try:
                config_from_dict(model_raw_config(study, entry))
            except UserError as e:
                raise UserError(f"models[{k}] ({entry.name}): {e}") from None
    edges = study.evaluation.bucket_edges
    if edges and (len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:]))):
        raise UserError(f"config: evaluation.bucket_edges={edges} must be at least two increasing numbers")
    for key, chosen in (("heatmaps.model", [study.heatmaps.model] if study.heatmaps.model else []),
                        ("alignment.models", study.alignment.models)):
        for name in chosen:
            if name not in names:
                raise UserError(f"config: {key}: no model named {name!r}; models: {', '.join(names)}")
    if study.alignment.synthetic_test and d.synthetic is None:
        raise UserError("config: alignment.synthetic_test needs data.synthetic (only it has gold alignments)")
    for k, gold in enumerate(study.alignment.sets):
        if not (gold.name and gold.src and gold.tgt and gold.gold):
            raise UserError(f"config: alignment.sets[{k}] needs name, src, tgt and gold")


def load_study(path: str | Path) -> Study:
    """Read and validate a study YAML; errors name the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"study config not found: {path}; pass a study YAML (see studies/)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise UserError(f"study {where} is not valid YAML; fix the syntax ({type(e).__name__})") from None
    try:
        study = _build_tree(Study, raw, "")
        study.path = str(path.resolve())
        _validate(study)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return study


# ================================================================ data


@dataclass
class StudyData:
    """The splits of a study, written to ``out/data``, and what the evaluation needs of the test split."""

    directory: Path
    test_src: list[str]
    test_tgt: list[str]
    test_gold: list[Any] | None  # GoldAlignment per test pair (synthetic data only)
    summary: dict  # sizes and length ranges, for the report
    fingerprint: str  # changes whenever any split changes
    # Synthetic data only: for each test pair, a label per target word naming the category of the
    # source word it translates, to show which kinds of words attention aligns well.
    test_labels: list[list[str]] | None = None

    @property
    def test_lengths(self) -> list[int]:
        return [len(s.split()) for s in self.test_src]


def _write_split(directory: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for side, k in (("src", 0), ("tgt", 1)):
        (directory / f"{split}.{side}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")


def _length_summary(pairs: list[tuple[str, str]]) -> dict:
    lengths = [len(s.split()) for s, _ in pairs]
    return {"pairs": len(pairs), "min_words": min(lengths, default=0), "max_words": max(lengths, default=0),
            "mean_words": round(float(np.mean(lengths)), 1) if lengths else 0.0}


def prepare_data(study: Study, out: Path) -> StudyData:
    """Generate or read the study's data and write train/valid/test files to ``out/data``."""
    directory = out / "data"
    labels = None
    if study.data.synthetic is not None:
        splits, gold, labels = _synthetic_splits(study.data.synthetic, directory)
    else:
        base_dir = Path(study.path or ".").parent
        splits, gold = _multi30k_long_splits(study.data.multi30k_long, base_dir), None  # type: ignore[arg-type]
    for split, pairs in splits.items():
        _write_split(directory, split, pairs)
    digest = hashlib.sha256()
    for split in ("train", "valid", "test"):
        for s, t in splits[split]:
            digest.update(f"{s}\t{t}\n".encode())
    summary = {split: _length_summary(pairs) for split, pairs in splits.items()}
    return StudyData(directory, [s for s, _ in splits["test"]], [t for _, t in splits["test"]], gold, summary,
                     digest.hexdigest()[:12], labels)


def _synthetic_splits(cfg: SyntheticData, directory: Path):
    from attnmt.align import GoldAlignment
    from attnmt.data.synthetic import SyntheticLanguage, make_splits, write_corpus

    language = SyntheticLanguage(seed=cfg.seed)
    splits = make_splits(cfg.train, cfg.valid, cfg.test, cfg.min_len, cfg.max_len, seed=cfg.seed, language=language)
    if cfg.short_train:
        # Another sentence stream of the same language; drop what valid or test hold, so they stay unseen.
        held_out = {tuple(p.src) for split in ("valid", "test") for p in splits[split]}
        extra = make_splits(cfg.short_train, 0, 0, cfg.min_len, cfg.short_max_len, seed=cfg.seed + 7919,
                            language=language)["train"]
        train = splits["train"] + [p for p in extra if tuple(p.src) not in held_out]
        random.Random(cfg.seed).shuffle(train)
        splits["train"] = train
    write_corpus(splits["test"], directory, "test")  # also writes test.align (1-based gold links)
    pairs = {name: [(" ".join(p.src), " ".join(p.tgt)) for p in ps] for name, ps in splits.items()}
    # The synthetic language has one link per target word: every gold link is sure.
    gold = [GoldAlignment(frozenset(p.alignment), frozenset(p.alignment)) for p in splits["test"]]
    return pairs, gold, [target_word_labels(p, language) for p in splits["test"]]


def target_word_labels(pair, language) -> list[str]:
    """Per target word: the category of the source word it translates, with "(2nd word)" for the
    second word of a two-word translation (a noun's classifier, a verb's auxiliary)."""
    source_of = dict((j, i) for i, j in pair.alignment)
    labels = []
    for j in range(len(pair.tgt)):
        i = source_of[j]
        category = language.category[pair.src[i]]
        label = category.replace("_", " ")
        if j > 0 and source_of.get(j - 1) == i:
            label += " (2nd word)"
        elif category == "noun":
            start = i - 1  # the noun phrase's first word: skip the adjectives back to the determiner
            while start > 0 and language.category[pair.src[start]] == "adjective":
                start -= 1
            if not language.lexicon[pair.src[start]]:
                label += " (article untranslated)"
        labels.append(label)
    return labels


def _multi30k_file(directory: Path, split: str, lang: str) -> Path:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (directory / name).is_file():
            return directory / name
    raise UserError(f"multi30k: no {split}.{lang}.gz (or {split}.{lang}) in {directory}; point data.multi30k_long.dir "
                    "at a folder with the official raw files (`attnmt data multi30k DEST` fetches them)")


def join_consecutive(pairs: list[tuple[str, str]], min_join: int, max_join: int,
                     rng: random.Random) -> list[tuple[str, str]]:
    """Cut ``pairs`` into runs of ``min_join``..``max_join`` consecutive pairs (lengths drawn from
    ``rng``) and join each run: sources with sources, targets with targets, in order. A last run
    shorter than ``min_join`` is dropped."""
    joined, i = [], 0
    while i + min_join <= len(pairs):
        run = pairs[i: i + rng.randint(min_join, max_join)]
        joined.append((" ".join(s for s, _ in run), " ".join(t for _, t in run)))
        i += len(run)
    return joined


def _multi30k_long_splits(cfg: Multi30kLongData, base_dir: Path) -> dict[str, list[tuple[str, str]]]:
    from attnmt.data.corpus import read_parallel

    directory = _resolve(cfg.dir, base_dir)
    if not directory.is_dir():
        raise UserError(f"multi30k: folder not found: {directory}; set data.multi30k_long.dir (relative to the "
                        "study file) to the folder with the raw files")

    def read(split: str) -> list[tuple[str, str]]:
        return read_parallel(_multi30k_file(directory, split, cfg.src_lang),
                             _multi30k_file(directory, split, cfg.tgt_lang))

    def joined(split_pairs, salt: str) -> list[tuple[str, str]]:
        return join_consecutive(split_pairs, cfg.min_join, cfg.max_join, random.Random(f"{cfg.seed}:{salt}"))

    train_pairs = read("train")
    singles = train_pairs[: cfg.train_single] if cfg.train_single is not None else train_pairs
    long_train = joined(train_pairs, "train")
    if cfg.train_joined is not None:
        long_train = long_train[: cfg.train_joined]
    train = singles + long_train
    random.Random(f"{cfg.seed}:shuffle").shuffle(train)
    return {"train": train, "valid": joined(read("val"), "valid")[: cfg.valid],
            "test": joined(read(cfg.test_split), "test")}


# ================================================================ runs: training


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


def plan_runs(study: Study, out: Path, data: StudyData) -> list[Run]:
    """Every (model, seed) of the study, with the exact config each is trained with."""
    runs = []
    base_dir = Path(study.path or ".").parent
    for entry in study.models:
        if entry.model_dirs:
            for k, folder in enumerate(entry.model_dirs, start=1):
                model_dir = _resolve(folder, base_dir)
                if not (model_dir / "config.yaml").is_file():
                    raise UserError(f"model {entry.name!r}: {model_dir} is not an attnmt model folder (no config.yaml)")
                runs.append(Run(entry.name, k, model_dir, None))
            continue
        raw = model_raw_config(study, entry)
        for seed in study.seeds:
            config = config_from_dict(deep_merge(raw, {"train": {"seed": seed}}))
            # The study owns the data: every model reads the study's splits. The data fingerprint in
            # the name makes a changed data set a changed config, so old models are not reused.
            config.name = f"{study.name}-{entry.name}-seed{seed}-data{data.fingerprint}"
            d = config.data
            d.synthetic = False
            d.train_src, d.train_tgt = str(data.directory / "train.src"), str(data.directory / "train.tgt")
            d.valid_src, d.valid_tgt = str(data.directory / "valid.src"), str(data.directory / "valid.tgt")
            d.test_src, d.test_tgt = str(data.directory / "test.src"), str(data.directory / "test.tgt")
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
    from attnmt.config import load_config
    from attnmt.train import train

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


def _train_log_summary(model_dir: Path) -> dict:
    """Steps, time and stop reason of a model folder's last training run."""
    from attnmt.train import training_summary

    summary = training_summary(model_dir)
    return {"parameters": summary.get("parameters"), "steps": summary.get("steps"),
            "train_seconds": summary.get("wall_s"), "stop_reason": summary.get("stop_reason")}


def _eval_key(run: Run, data: StudyData, study: Study) -> str:
    """Changes whenever the evaluation of a run would change: checkpoint, test data, settings."""
    checkpoint = checkpoint_path(run.model_dir, "best")
    stat = checkpoint.stat()
    settings = {"evaluation": dataclasses.asdict(study.evaluation), "alignment": dataclasses.asdict(study.alignment),
                "checkpoint": [str(checkpoint), stat.st_size, stat.st_mtime_ns], "data": data.fingerprint,
                "version": 2}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def teacher_forced_stats(translator, sources: list[str], targets: list[str], width: int) -> dict:
    """Test perplexity and next-token accuracy by target position, with teacher forcing."""
    import torch
    import torch.nn.functional as F

    from attnmt.data.batching import collate, token_batches
    from attnmt.data.vocab import PAD_ID

    src_ids = [translator.src.ids(s) or [PAD_ID] for s in sources]
    tgt_ids = [translator.tgt.ids(t) for t in targets]
    total_nll, tokens = 0.0, 0
    correct: dict[int, int] = {}
    seen: dict[int, int] = {}
    translator.model.eval()
    with torch.inference_mode():
        for batch_index in token_batches([len(s) for s in src_ids], [len(t) for t in tgt_ids], 4000, shuffle=False,
                                         seed=0, epoch=0):
            batch = collate([(src_ids[k], tgt_ids[k]) for k in batch_index], batch_index).to(translator.device)
            logits, _ = translator.model(batch.src, batch.src_len, batch.tgt_in)
            nll = F.cross_entropy(logits.float().transpose(1, 2), batch.tgt_out, ignore_index=PAD_ID, reduction="none")
            real = batch.tgt_out != PAD_ID
            total_nll += float(nll[real].sum())
            tokens += int(real.sum())
            hit = (logits.argmax(-1) == batch.tgt_out) & real
            for position in range(real.size(1)):
                group = position // width
                seen[group] = seen.get(group, 0) + int(real[:, position].sum())
                correct[group] = correct.get(group, 0) + int(hit[:, position].sum())
    groups = sorted(g for g in seen if seen[g])
    return {
        "loss": total_nll / max(tokens, 1),
        "perplexity": math.exp(min(total_nll / max(tokens, 1), 50.0)),
        "accuracy_by_position": [{"lo": g * width, "hi": (g + 1) * width, "n": seen[g],
                                  "accuracy": correct[g] / seen[g]} for g in groups],
    }


def bucket_edges_for(study: Study, lengths: list[int]) -> list[int]:
    from attnmt.evaluate import length_edges

    edges = list(study.evaluation.bucket_edges) or length_edges(lengths)
    if min(lengths) < edges[0] or max(lengths) >= edges[-1]:
        raise UserError(f"evaluation.bucket_edges {edges} do not cover the test source lengths "
                        f"{min(lengths)}-{max(lengths)}; widen the first or last edge")
    return edges


def gold_sets(study: Study, data: StudyData) -> dict[str, tuple[list[str], list[str], list]]:
    """The gold alignment sets of the study: name -> (sources, targets, gold)."""
    from attnmt.align import read_gold
    from attnmt.data.corpus import read_parallel

    sets = {}
    if study.alignment.synthetic_test is not False and data.test_gold is not None:
        sets["synthetic-test"] = (data.test_src, data.test_tgt, data.test_gold)
    base_dir = Path(study.path or ".").parent
    for g in study.alignment.sets:
        pairs = read_parallel(_resolve(g.src, base_dir), _resolve(g.tgt, base_dir))
        gold = read_gold(_resolve(g.gold, base_dir))
        if len(gold) != len(pairs):
            raise UserError(f"alignment set {g.name}: {len(gold)} gold lines but {len(pairs)} sentence pairs")
        sets[g.name] = ([s for s, _ in pairs], [t for _, t in pairs], gold)
    return sets


def evaluate_run(run: Run, data: StudyData, study: Study, out: Path) -> dict:
    """Everything the report needs from one trained model; cached in ``out/evals``."""
    from attnmt.align import argmax_links, attention_matrices, score_alignments, threshold_links
    from attnmt.evaluate import bleu_by_length, corpus_scores
    from attnmt.translator import load

    cache = out / "evals" / f"{run.label}.json"
    key = _eval_key(run, data, study)
    if cache.is_file():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            return cached
    ev = study.evaluation
    translator = load(run.model_dir)
    started = time.perf_counter()
    hypotheses = [t.text for t in translator.translate(data.test_src, beam=ev.beam)]
    decode_seconds = time.perf_counter() - started
    lengths = data.test_lengths
    buckets = bleu_by_length(lengths, hypotheses, data.test_tgt, edges=bucket_edges_for(study, lengths),
                             tokenize=ev.bleu_tokenize, bootstrap=ev.bootstrap, confidence=ev.confidence, seed=run.seed)
    scores = corpus_scores(hypotheses, data.test_tgt, tokenize=ev.bleu_tokenize)
    result: dict = {
        "key": key, "model": run.model, "seed": run.seed, "model_dir": str(run.model_dir),
        "model_type": translator.model_type, "reverse_source": bool(translator.config.model.reverse_source),
        "training": _train_log_summary(run.model_dir),
        "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
        "buckets": [dataclasses.asdict(b) for b in buckets], "decode_seconds": decode_seconds,
        **teacher_forced_stats(translator, data.test_src, data.test_tgt, ev.position_width),
        "alignment": {}, "hypotheses": hypotheses,
    }
    wanted = study.alignment.models or [m.name for m in study.models]
    if run.model in wanted and translator.model_type != "seq2seq":
        for name, (sources, targets, gold) in gold_sets(study, data).items():
            matrices = attention_matrices(translator, sources, targets)
            argmax = [argmax_links(m.weights) for m in matrices]
            result["alignment"][name] = {
                "argmax": dataclasses.asdict(score_alignments(argmax, gold)),
                "threshold": dataclasses.asdict(score_alignments(
                    [threshold_links(m.weights, study.alignment.threshold) for m in matrices], gold)),
            }
            if name == "synthetic-test" and data.test_labels is not None:
                result["alignment_by_category"] = argmax_accuracy_by_label(argmax, gold, data.test_labels)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return result


def argmax_accuracy_by_label(predicted: list[set], gold: list, labels: list[list[str]]) -> dict[str, dict]:
    """For each target-word label, the share of target words whose argmax link is a sure gold link."""
    counts: dict[str, list[int]] = {}
    for links, g, sentence_labels in zip(predicted, gold, labels):
        for i, j in links:
            c = counts.setdefault(sentence_labels[j], [0, 0])
            c[0] += (i, j) in g.sure
            c[1] += 1
    return {label: {"accuracy": hit / n, "n": n} for label, (hit, n) in sorted(counts.items())}


def _run_job(run: Run, data: StudyData, study: Study, out: Path, retrain: bool, threads: int | None) -> dict:
    """Train (if needed) and evaluate one run; the unit of work of the process pool."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    # CPU time, not only wall time: on a shared machine it is what says how long an idle one would take.
    cpu = time.process_time()
    training = ensure_trained(run, retrain=retrain)
    training["cpu_seconds"] = time.process_time() - cpu
    cpu = time.process_time()
    evaluation = evaluate_run(run, data, study, out)
    return {"training": training, "evaluation": evaluation, "evaluation_cpu_seconds": time.process_time() - cpu}


# ================================================================ aggregation over seeds


def seed_mean_interval(hypotheses: list[list[str]], references: list[str], tokenize: str, n_resamples: int,
                       confidence: float, seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of the mean BLEU over seeds: the same resampled sentences for every seed.

    ``hypotheses`` holds one list per seed, aligned with ``references``. Resampling sentences
    jointly keeps the seeds paired, so the interval reflects the test set's sampling error of the
    seed-averaged score (not the seeds' spread, which the report shows separately).
    """
    from attnmt.evaluate import _bleu_from_statistics, _bleu_metric, _sentence_statistics

    if n_resamples <= 0 or not references:
        return None
    metric = _bleu_metric(tokenize, False)
    sentence_metric = _bleu_metric(tokenize, False, effective_order=True)
    stats = [_sentence_statistics(sentence_metric, hyps, references) for hyps in hypotheses]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(references), size=(n_resamples, len(references)))
    means = [np.mean([_bleu_from_statistics(metric, s[p].sum(axis=0)) for s in stats]) for p in picks]
    tail = 100 * (1 - confidence) / 2
    low, high = np.clip(np.percentile(means, [tail, 100 - tail]), 0.0, 100.0)
    return float(low), float(high)


def _spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "min": float(np.min(values)), "max": float(np.max(values)), "values": [float(v) for v in values]}


def aggregate(study: Study, data: StudyData, evals: list[dict]) -> dict:
    """Per model: mean, spread and interval over seeds of every score."""
    ev = study.evaluation
    lengths = data.test_lengths
    edges = bucket_edges_for(study, lengths)
    models: dict[str, dict] = {}
    for entry in study.models:
        runs = sorted((e for e in evals if e["model"] == entry.name), key=lambda e: e["seed"])
        if not runs:
            continue
        bucket_rows = []
        for k, (lo, hi) in enumerate(zip(edges, edges[1:])):
            members = [i for i, n in enumerate(lengths) if lo <= n < hi]
            if not members:
                continue
            per_seed = [next(b for b in r["buckets"] if b["lo"] == lo) for r in runs]
            interval = seed_mean_interval([[r["hypotheses"][i] for i in members] for r in runs],
                                          [data.test_tgt[i] for i in members], ev.bleu_tokenize, ev.bootstrap,
                                          ev.confidence, seed=k)
            bucket_rows.append({"lo": lo, "hi": hi, "n": len(members), **_spread([b["bleu"] for b in per_seed]),
                                "ci_low": interval[0] if interval else None,
                                "ci_high": interval[1] if interval else None,
                                "seed_intervals": [[b["ci_low"], b["ci_high"]] for b in per_seed]})
        overall = seed_mean_interval([r["hypotheses"] for r in runs], data.test_tgt, ev.bleu_tokenize, ev.bootstrap,
                                     ev.confidence, seed=len(edges))
        positions: dict[int, list[float]] = {}
        for r in runs:
            for p in r["accuracy_by_position"]:
                positions.setdefault(p["lo"], []).append(p["accuracy"])
        alignment: dict[str, dict] = {}
        for r in runs:
            for gold_name, methods in r["alignment"].items():
                for method, scores in methods.items():
                    alignment.setdefault(gold_name, {}).setdefault(method, []).append(scores)
        by_category: dict[str, list[float]] = {}
        for r in runs:
            for label, v in r.get("alignment_by_category", {}).items():
                by_category.setdefault(label, []).append(v["accuracy"])
        models[entry.name] = {
            "model_type": runs[0]["model_type"], "reverse_source": runs[0]["reverse_source"],
            "seeds": [r["seed"] for r in runs],
            "bleu": {**_spread([r["bleu"] for r in runs]), "ci_low": overall[0] if overall else None,
                     "ci_high": overall[1] if overall else None},
            "chrf": _spread([r["chrf"] for r in runs]),
            "perplexity": _spread([r["perplexity"] for r in runs]),
            "buckets": bucket_rows,
            "accuracy_by_position": [{"lo": lo, "hi": lo + ev.position_width, **_spread(v)}
                                     for lo, v in sorted(positions.items())],
            "alignment": {g: {m: {key: _spread([s[key] for s in scores]) for key in ("aer", "precision", "recall")}
                              for m, scores in methods.items()} for g, methods in alignment.items()},
            "alignment_by_category": {label: {**_spread(v), "n": runs[0]["alignment_by_category"][label]["n"]}
                                      for label, v in by_category.items()},
            "training": {key: _spread([r["training"][key] for r in runs])
                         for key in ("steps", "train_seconds") if all(r["training"].get(key) is not None for r in runs)},
        }
    return models


def diagonal_baselines(study: Study, data: StudyData) -> dict[str, dict]:
    """AER of the diagonal (no model) on every gold set of the study."""
    from attnmt.align import diagonal_links, score_alignments

    return {name: dataclasses.asdict(score_alignments(
        [diagonal_links(len(s.split()), len(t.split())) for s, t in zip(sources, targets)], gold))
        for name, (sources, targets, gold) in gold_sets(study, data).items()}


# ================================================================ figures


@contextmanager
def _line_figure(path: Path, height: float, title: str, xlabel: str, ylabel: str) -> Iterator[Any]:
    """A study line plot in the house fonts: yields the axes to draw on, then labels and saves it."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attnmt.viz.heatmap import font_families

    with matplotlib.rc_context({"font.family": font_families()}):
        fig = Figure(figsize=(6.8, height))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        yield ax
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)


def plot_bleu_by_length_seeds(models: dict[str, dict], path: Path, title: str) -> Path:
    """Bahdanau et al. (2014), Figure 2, with seeds: per model the seed mean (line, markers) with its
    bootstrap interval (error bars) and each seed on its own (thin lines)."""
    from attnmt.viz.length import LINESTYLES, MARKERS

    with _line_figure(path, 4.4, title, "Source sentence length (words)", "BLEU") as ax:
        for (name, m), marker, style, color in zip(models.items(), cycle(MARKERS), cycle(LINESTYLES),
                                                   cycle(f"C{k}" for k in range(10))):
            rows = m["buckets"]
            xs = [(r["lo"] + r["hi"] - 1) / 2 for r in rows]
            for s in range(len(m["seeds"])):
                ax.plot(xs, [r["values"][s] for r in rows], color=color, alpha=0.3, linewidth=0.8)
            yerr = None
            if all(r["ci_low"] is not None for r in rows):
                yerr = [[max(0.0, r["mean"] - r["ci_low"]) for r in rows],
                        [max(0.0, r["ci_high"] - r["mean"]) for r in rows]]
            ax.errorbar(xs, [r["mean"] for r in rows], yerr=yerr, marker=marker, linestyle=style, color=color,
                        capsize=3, label=f"{name} ({len(m['seeds'])} seeds)")
        ax.set_ylim(bottom=0)
    return path


def plot_accuracy_by_position(models: dict[str, dict], path: Path, title: str) -> Path:
    """Next-token accuracy (teacher forcing) against target position, seed mean and range per model."""
    from attnmt.viz.length import MARKERS

    with _line_figure(path, 4.0, title, "Target position (tokens of the model's target tokenizer)",
                      "Next-token accuracy, teacher forcing (%)") as ax:
        for (name, m), marker, color in zip(models.items(), cycle(MARKERS), cycle(f"C{k}" for k in range(10))):
            rows = m["accuracy_by_position"]
            xs = [(r["lo"] + r["hi"] - 1) / 2 for r in rows]
            ax.fill_between(xs, [100 * r["min"] for r in rows], [100 * r["max"] for r in rows], color=color, alpha=0.15)
            ax.plot(xs, [100 * r["mean"] for r in rows], marker=marker, color=color, label=name)
        ax.set_ylim(0, 100)
    return path


def choose_heatmap_sentences(study: Study, lengths: list[int]) -> list[int]:
    """The test sentences to draw: given indices, else the ones closest to the given lengths,
    else a short, a medium and the longest one."""
    h = study.heatmaps
    for i in h.sentences:
        if not 0 <= i < len(lengths):
            raise UserError(f"heatmaps.sentences: {i} is not a test sentence index (0 to {len(lengths) - 1})")
    if h.sentences:
        return list(h.sentences)
    targets = h.lengths or [10, (min(lengths) + max(lengths)) // 2, max(lengths)]
    chosen = []
    for target in targets:
        best = min((i for i in range(len(lengths)) if i not in chosen), key=lambda i: (abs(lengths[i] - target), i))
        chosen.append(best)
    return chosen


def draw_heatmaps(study: Study, data: StudyData, runs: list[Run], figures: Path) -> list[dict]:
    """Word-level, teacher-forced attention of the chosen test pairs (the same matrices the alignment reads)."""
    from attnmt.align import argmax_links, attention_matrices, score_alignments
    from attnmt.translator import load
    from attnmt.viz.heatmap import plot_attention

    name = study.heatmaps.model
    for run in runs:
        if (not name and _attention_model(run)) or run.model == name:
            break
    else:
        return []
    translator = load(run.model_dir)
    if translator.model_type == "seq2seq":
        raise UserError(f"heatmaps.model: {run.model} is a seq2seq model, which has no attention; choose another")
    shown = []
    for k, i in enumerate(choose_heatmap_sentences(study, data.test_lengths)):
        (m,) = attention_matrices(translator, [data.test_src[i]], [data.test_tgt[i]])
        path = figures / f"attention_{k + 1}.png"
        title = f"{run.label}: test sentence {i} ({len(m.src_words)} source words)"
        item = {"file": path.name, "sentence": i, "source_words": len(m.src_words), "model": run.label}
        gold = None if data.test_gold is None else data.test_gold[i]
        plot_attention(m.weights, m.src_words, m.tgt_words, path, dpi=110, marks=None if gold is None else gold.sure,
                       title=title if gold is None else title + " — red circles: gold links")
        if gold is not None:
            item["aer"] = score_alignments([argmax_links(m.weights)], [gold]).aer
        shown.append(item)
    return shown


def _attention_model(run: Run) -> bool:
    from attnmt.config import load_config

    return load_config(run.model_dir / "config.yaml").model.type != "seq2seq"


# ================================================================ report


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bleu_cell(r: dict) -> str:
    ci = f" <span class=ci>[{_f(r['ci_low'])}, {_f(r['ci_high'])}]</span>" if r.get("ci_low") is not None else ""
    spread = f" <span class=sp>({_f(r['min'])}–{_f(r['max'])})</span>" if len(r["values"]) > 1 else ""
    return f"<b>{_f(r['mean'])}</b>{ci}{spread}"


def findings(models: dict[str, dict], diagonal: dict[str, dict]) -> list[str]:
    """Plain sentences that state what the numbers show (computed, not written by hand)."""
    lines = []
    for name, m in models.items():
        rows = m["buckets"]
        if len(rows) >= 2:
            first, last = rows[0], rows[-1]
            ratio = last["mean"] / first["mean"] if first["mean"] > 0 else float("nan")
            separated = (first["ci_low"] is not None and last["ci_high"] is not None
                         and last["ci_high"] < first["ci_low"])
            lines.append(f"{name}: BLEU {first['mean']:.1f} on {first['lo']}-{first['hi'] - 1} words, "
                         f"{last['mean']:.1f} on {last['lo']}-{last['hi'] - 1} words "
                         f"({ratio:.0%} of the shortest bucket"
                         f"{'; the intervals do not overlap' if separated else ''}).")
    seq2seq = {m["reverse_source"]: (name, m) for name, m in models.items() if m["model_type"] == "seq2seq"}
    if True in seq2seq and False in seq2seq:
        (fwd, f), (rev, r) = seq2seq[False], seq2seq[True]
        lines.append(f"Reversing the source ({fwd} -> {rev}): test perplexity {f['perplexity']['mean']:.2f} -> "
                     f"{r['perplexity']['mean']:.2f}, BLEU {f['bleu']['mean']:.1f} -> {r['bleu']['mean']:.1f}.")
    for gold_name, base in diagonal.items():
        for name, m in models.items():
            if gold_name in m["alignment"]:
                aer = m["alignment"][gold_name]["argmax"]["aer"]
                lines.append(f"{name} on {gold_name}: AER {aer['mean']:.3f} (seeds {aer['min']:.3f}-{aer['max']:.3f}); "
                             f"the diagonal: {base['aer']:.3f}.")
    return lines


def render_html(study: Study, result: dict, figures: dict[str, Path], heatmaps: list[dict], figure_dir: Path) -> str:
    """The self-contained report page."""
    models = result["models"]
    ci = f"{study.evaluation.confidence:.0%}"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>attnmt study: {html.escape(study.name)}</title><style>",
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.4}",
        "table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}.ci{color:#555}.sp{color:#999}"
        "img{max-width:100%;border:1px solid #eee}code{background:#f6f6f6;padding:1px 3px}",
        "</style></head><body>",
        f"<h1>attnmt study: {html.escape(study.name)}</h1>",
        f"<p>{html.escape(study.description)}</p>" if study.description else "",
        f"<p>Command: <code>{html.escape(result['command'])}</code>. Study config: "
        f"<code>{html.escape(str(study.path))}</code>. Total time {result['seconds']:.0f} s "
        f"(training and evaluation {result['timing']['train_and_evaluate_seconds']:.0f} s, "
        f"{result['timing']['jobs']} parallel job(s); {result['timing']['cpu_seconds_this_time']:.0f} CPU seconds "
        "this time, less when trained models were reused).</p>",
        "<p>Data: " + html.escape(", ".join(
            f"{split} {s['pairs']} pairs, {s['min_words']}-{s['max_words']} source words (mean {s['mean_words']})"
            for split, s in result["data"].items() if isinstance(s, dict) and "pairs" in s)) + ".</p>",
        "<h2>Summary</h2><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in result["findings"]) + "</ul>",
        "<h2>1. BLEU by source length</h2>",
        f"<p>Each cell: the mean over seeds, in brackets its {ci} bootstrap interval "
        f"({study.evaluation.bootstrap} resamples of the bucket's sentences, the same for every seed), in "
        "parentheses the lowest and highest seed. Thin lines in the figure are single seeds. "
        f"Decoding: beam {study.evaluation.beam}; sacreBLEU tokenize={html.escape(study.evaluation.bleu_tokenize)}.</p>",
        f"<img src='{_png(figures['bleu_by_length'])}' alt='BLEU by source length'>",
    ]
    edges = sorted({(r["lo"], r["hi"], r["n"]) for m in models.values() for r in m["buckets"]})
    rows = []
    for lo, hi, n in edges:
        row = [f"{lo}-{hi - 1}", str(n)]
        for m in models.values():
            r = next((r for r in m["buckets"] if r["lo"] == lo), None)
            row.append(_bleu_cell(r) if r else "–")
        rows.append(row)
    rows.append(["all", str(sum(n for _, _, n in edges)), *(_bleu_cell(m["bleu"]) for m in models.values())])
    parts.append(_table(["source words", "n", *models], rows))

    parts.append("<h2>2. Perplexity, BLEU and the reversed source</h2>")
    parts.append("<p>Test perplexity under teacher forcing (per target token, mean ± standard deviation over seeds) "
                 "and corpus BLEU. <code>reverse_source</code> feeds a seq2seq encoder the source backwards "
                 "(Sutskever et al. 2014), which puts the first source words next to the first target words.</p>")
    rows = []
    for name, m in models.items():
        rows.append([html.escape(name), m["model_type"], "yes" if m["reverse_source"] and m["model_type"] == "seq2seq"
                     else "no", f"{_f(m['perplexity']['mean'], 2)} ± {_f(m['perplexity']['std'], 2)}",
                     _bleu_cell(m["bleu"]), f"{_f(m['chrf']['mean'])}",
                     _f(m["training"].get("steps", {}).get("mean"), 0),
                     _f(m["training"].get("train_seconds", {}).get("mean"), 0)])
    parts.append(_table(["model", "type", "reversed", "test perplexity", "BLEU", "chrF", "steps", "train s"], rows))
    parts.append(f"<img src='{_png(figures['accuracy_by_position'])}' alt='accuracy by target position'>")
    parts.append("<p>Next-token accuracy by target position (teacher forcing; band: lowest to highest seed).</p>")

    parts.append("<h2>3. Attention as word alignment</h2>")
    parts.append("<p>Links read off the teacher-forced attention, merged to words (source pieces summed, target "
                 "pieces averaged): <i>argmax</i> links each target word to its most attended source word, "
                 f"<i>threshold</i> keeps every weight ≥ {study.alignment.threshold}. AER = 1 − (|A∩S| + |A∩P|) / "
                 "(|A| + |S|); lower is better. The diagonal baseline needs no model.</p>")
    rows = []
    for gold_name, base in result["diagonal"].items():
        rows.append([html.escape(gold_name), "diagonal (no model)", "–", _f(base["aer"], 3), _f(base["precision"], 3),
                     _f(base["recall"], 3)])
        for name, m in models.items():
            for method, s in m["alignment"].get(gold_name, {}).items():
                rows.append([html.escape(gold_name), html.escape(name), method,
                             f"{_f(s['aer']['mean'], 3)} ({_f(s['aer']['min'], 3)}–{_f(s['aer']['max'], 3)})",
                             _f(s["precision"]["mean"], 3), _f(s["recall"]["mean"], 3)])
    if rows:
        parts.append(_table(["gold set", "model", "links", "AER (seed range)", "precision", "recall"], rows))
    for name, m in models.items():
        if m["alignment_by_category"]:
            parts.append(f"<p>{html.escape(name)}: share of target words whose argmax link is the gold link, by the "
                         "kind of source word they translate (mean over seeds).</p>")
            parts.append(_table(["target words translating a", "n", "argmax = gold"],
                                [[html.escape(label), str(v["n"]), f"{100 * v['mean']:.1f}%"]
                                 for label, v in m["alignment_by_category"].items()]))
    for h in heatmaps:
        aer = f"; AER of this sentence (argmax) {h['aer']:.3f}" if "aer" in h else ""
        parts.append(f"<h3>{html.escape(h['model'])}, test sentence {h['sentence']} ({h['source_words']} words)</h3>"
                     f"<p>Rows: target words of the reference; columns: source words; white = weight 1{aer}.</p>"
                     f"<img src='{_png(figure_dir / h['file'])}' alt='attention heatmap'>")

    parts.append("<h2>4. Runs</h2>")
    rows = [[html.escape(r["label"]), r["action"], _f(r.get("steps"), 0), _f(r.get("train_seconds"), 0),
             html.escape(str(r.get("stop_reason", ""))), _f(r["bleu"]), _f(r["perplexity"], 2),
             html.escape(r["model_dir"])] for r in result["runs"]]
    parts.append(_table(["run", "this time", "steps", "train s", "stopped by", "BLEU", "perplexity", "folder"], rows))
    parts.append("<p>Every number of this page is in results.json next to it.</p></body></html>")
    return "\n".join(parts)


# ================================================================ the study command


@dataclass
class StudyResult:
    out_dir: Path
    report: Path
    results: Path
    summary: dict


def run_cost_rank(run: Run) -> int:
    """0 for runs that train an attention model, 1 for other training, 2 for nothing to train."""
    if run.config is None or training_status(run) == "finished":
        return 2
    return 1 if run.config.model.type == "seq2seq" else 0


def _execute(runs: list[Run], data: StudyData, study: Study, out: Path, retrain: bool, jobs: int,
             say) -> list[dict]:
    """Train and evaluate every run, ``jobs`` at a time (separate processes of one thread each)."""
    outcomes: list[dict | None] = [None] * len(runs)

    def report(k: int, outcome: dict) -> None:
        t, e = outcome["training"], outcome["evaluation"]
        done = t["action"] + (f" in {t['seconds']:.0f} s ({t['steps']} steps)" if "seconds" in t else "")
        say(f"[{sum(o is not None for o in outcomes)}/{len(runs)}] {runs[k].label}: {done}; "
            f"BLEU {e['bleu']:.1f}, perplexity {e['perplexity']:.2f}")

    if jobs <= 1:
        for k, run in enumerate(runs):
            say(f"{run.label}: {training_status(run)} ...")
            outcomes[k] = _run_job(run, data, study, out, retrain, None)
            report(k, outcomes[k])  # type: ignore[arg-type]
        return outcomes  # type: ignore[return-value]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # One thread per process: small recurrent models gain more from parallel runs than from threads.
    for run in runs:
        if run.config is not None and run.config.train.threads is None:
            run.config.train.threads = 1
    # Longest first, so that the last runs to finish are short ones: attention models cost the most.
    order = sorted(range(len(runs)), key=lambda k: run_cost_rank(runs[k]))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_run_job, runs[k], data, study, out, retrain, 1): k for k in order}
        for future in as_completed(futures):
            k = futures[future]
            outcomes[k] = future.result()
            report(k, outcomes[k])  # type: ignore[arg-type]
    return outcomes  # type: ignore[return-value]


def run_study(path: str | Path, out: str | Path | None = None, retrain: bool = False, jobs: int | None = None,
              quiet: bool = False, command: str | None = None) -> StudyResult:
    """Run the study of ``path``: train what is missing, evaluate, write report.html and results.json.

    ``jobs`` (default: the study's ``jobs``) runs are trained and evaluated at the same time.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    study = load_study(path)
    jobs = study.jobs if jobs is None else jobs
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: must be at least 1")
    # Absolute, so that the model configs name their data wherever they are read from.
    out = (Path(out) if out is not None else Path("runs") / f"study-{study.name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(study, out)
    say(f"study {study.name}: data in {data.directory} ({data.summary['train']['pairs']} training pairs, test "
        f"{data.summary['test']['min_words']}-{data.summary['test']['max_words']} words); output {out}")
    bucket_edges_for(study, data.test_lengths)  # fail now, not after training, if the buckets do not fit
    runs = plan_runs(study, out, data)
    gold_sets(study, data)  # likewise for unreadable gold files
    execute_started = time.perf_counter()
    outcomes = _execute(runs, data, study, out, retrain, jobs, say)
    execute_seconds = time.perf_counter() - execute_started

    evals = [o["evaluation"] for o in outcomes]
    models = aggregate(study, data, evals)
    figure_dir = out / "figures"
    figures = {
        "bleu_by_length": plot_bleu_by_length_seeds(models, figure_dir / "bleu_by_length.png",
                                                    f"{study.name}: BLEU by source length"),
        "accuracy_by_position": plot_accuracy_by_position(models, figure_dir / "accuracy_by_position.png",
                                                          f"{study.name}: next-token accuracy by target position"),
    }
    heatmaps = draw_heatmaps(study, data, runs, figure_dir)
    seconds = time.perf_counter() - started
    result = {
        "study": study.name, "config": study.path, "command": command or f"attnmt study {path}",
        "seconds": seconds,
        "timing": {"train_and_evaluate_seconds": execute_seconds, "jobs": jobs,
                   # This process, plus the worker processes when there were any.
                   "cpu_seconds_this_time": time.process_time() - cpu_started + (sum(
                       o["training"]["cpu_seconds"] + o["evaluation_cpu_seconds"] for o in outcomes) if jobs > 1 else 0)},
        "data": {**data.summary, "fingerprint": data.fingerprint, "directory": str(data.directory)},
        "evaluation": dataclasses.asdict(study.evaluation),
        "models": models, "diagonal": diagonal_baselines(study, data),
        "runs": [{"label": r.label, "model": r.model, "seed": r.seed, "model_dir": str(r.model_dir),
                  "action": o["training"]["action"], **o["evaluation"]["training"],
                  "train_cpu_seconds_this_time": o["training"]["cpu_seconds"],
                  "evaluate_cpu_seconds_this_time": o["evaluation_cpu_seconds"],
                  "bleu": o["evaluation"]["bleu"], "perplexity": o["evaluation"]["perplexity"],
                  "decode_seconds": o["evaluation"]["decode_seconds"]} for r, o in zip(runs, outcomes)],
        "heatmaps": heatmaps,
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": sys.version.split()[0]},
    }
    result["findings"] = findings(models, result["diagonal"])
    results_path = out / "results.json"
    results_path.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    report_path = out / "report.html"
    report_path.write_text(render_html(study, result, figures, heatmaps, figure_dir), encoding="utf-8")
    say("\n".join(result["findings"]))
    say(f"report: {report_path}  numbers: {results_path}  ({seconds:.0f} s)")
    return StudyResult(out, report_path, results_path, result)
