"""The study config: a YAML file of data, models, seeds, evaluation, heatmaps and alignment sets."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from attnmt.config.schema import config_from_dict
from attnmt.config.typed import apply_overrides, build, check_range
from attnmt.config.yaml_input import parse_yaml, read_yaml
from attnmt.errors import UserError


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
            check_range(f"data.synthetic.{key}", getattr(self, key), 1, None)
        check_range("data.synthetic.short_train", self.short_train, 0, None)
        check_range("data.synthetic.min_len", self.min_len, 3, None)
        check_range("data.synthetic.max_len", self.max_len, self.min_len, None)
        if self.short_train:
            check_range("data.synthetic.short_max_len", self.short_max_len, self.min_len, self.max_len)


@dataclass
class Multi30kLongData:
    """Multi30k with long sentence pairs made by joining consecutive caption pairs.

    Captions are short (about 13 words), so each split is cut into runs of ``min_join`` to
    ``max_join`` consecutive pairs, and each run becomes one pair (sources joined with sources,
    targets with targets, in order). Training uses the single pairs and the joined ones; the test
    buckets are the joined test pairs.
    """

    # The folder of the official raw files ({split}.{lang}[.gz]), as `attnmt data multi30k DEST` writes them;
    # relative to the study file. Required.
    dir: str = ""
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
        check_range("data.multi30k_long.min_join", self.min_join, 1, None)
        check_range("data.multi30k_long.max_join", self.max_join, self.min_join, None)
        check_range("data.multi30k_long.valid", self.valid, 1, None)


@dataclass
class TatoebaLongData:
    """Tatoeba (plus Multi30k) with long test pairs made by joining consecutive held-out sentences.

    Training pairs are Tatoeba's (plus Multi30k's training captions) of at most ``train_max_words``
    source words, with ``train_joined`` more pairs made by joining consecutive training pairs up to
    that length (as Bahdanau et al. trained on sentences of up to 30 or 50 words). Whole groups of
    pairs sharing a sentence are held out (attnmt.data.split); the held-out sentences, in a shuffled
    order, are joined consecutively to target lengths drawn uniformly from ``test_min_words`` to
    ``test_max_words``: a test of short single sentences up to pairs well beyond the training
    length. Naturally long sentences (at least ``natural_min_words``; ``natural_share`` of them,
    and any the held-out draw catches) are kept out of training and the joins and, with the
    Multi30k test captions when given, form a second test set reported on its own.
    """

    # A manythings.org export (English TAB the other language, plain or .gz); relative to the study file. Required.
    tatoeba: str = ""
    # The Multi30k raw files (`attnmt data multi30k DEST`), whose training captions are added; None: Tatoeba only
    multi30k: str | None = None
    reverse_direction: bool = False  # false: English -> the other language; true: the other way
    multi30k_other_lang: str = "fr"  # the Multi30k language paired with English
    train_max_words: int = 40  # training pairs with more source words are dropped (joins stay within it)
    train_joined: int = 30000  # joined training pairs added (at least 10 source words each)
    held_out: int = 6000  # held-out Tatoeba pairs, whole groups: joined into the test pairs
    valid: int = 300  # joined validation pairs of 1..train_max_words words (held out separately)
    test: int = 700  # joined test pairs (fewer if the held-out sentences run out)
    test_min_words: int = 1
    test_max_words: int = 69
    natural_min_words: int = 15  # held-out sentences this long go to the natural test set, not into joins
    # Share of all the naturally long pairs (at least natural_min_words) held out for the natural
    # test set, beyond those the random held-out draw catches (0: only those).
    natural_share: float = 0.5
    natural_multi30k_split: str | None = "test_2016_flickr"  # Multi30k captions added to the natural set
    seed: int = 1

    def __post_init__(self) -> None:
        check_range("data.tatoeba_long.train_max_words", self.train_max_words, 1, None)
        check_range("data.tatoeba_long.train_joined", self.train_joined, 0, None)
        check_range("data.tatoeba_long.held_out", self.held_out, 1, None)
        check_range("data.tatoeba_long.valid", self.valid, 1, None)
        check_range("data.tatoeba_long.test", self.test, 1, None)
        check_range("data.tatoeba_long.test_min_words", self.test_min_words, 1, None)
        check_range("data.tatoeba_long.test_max_words", self.test_max_words, self.test_min_words, None)
        check_range("data.tatoeba_long.natural_min_words", self.natural_min_words, 1, None)
        check_range("data.tatoeba_long.natural_share", self.natural_share, 0.0, 1.0)


@dataclass
class DataSection:
    """Exactly one of the sources of data."""

    synthetic: Optional[SyntheticData] = None
    multi30k_long: Optional[Multi30kLongData] = None
    tatoeba_long: Optional[TatoebaLongData] = None


@dataclass
class ModelEntry:
    """One model of the study: a base attnmt config trained once per seed, or existing folders."""

    name: str = ""  # names the model in the report and its folder; letters, digits, - and _
    config: Optional[str] = None  # an attnmt config YAML to start from (relative to the study file)
    overrides: dict = field(default_factory=dict)  # config values on top, nested like a config file
    model_dirs: list[str] = field(default_factory=list)  # existing trained folders (one per seed): nothing is trained


DECODING_KEYS = {"beam": (1, 100), "length_penalty": (0.0, 10.0), "coverage_penalty": (0.0, 10.0)}


@dataclass
class EvaluationSection:
    """How every model is scored."""

    beam: int = 1  # 1: greedy search
    bleu_tokenize: str = "13a"  # sacreBLEU tokenizer; "none" for already tokenized text (the synthetic language)
    bucket_edges: list[int] = field(default_factory=list)  # source-length buckets [e0, e1), ...; empty: 10 words wide
    bootstrap: int = 1000  # resamples for the 95% intervals (0: none)
    confidence: float = 0.95
    position_width: int = 10  # target positions per group in the accuracy-by-position figure
    checkpoint: str = "best"  # the checkpoint each model is scored with: best (lowest validation loss) or last
    length_penalty: Optional[float] = None  # GNMT alpha for beam search (None: each model's decode.length_penalty)
    coverage_penalty: float = 0.0  # GNMT beta for beam search, for the models with attention (attnmt.decode.search)
    # One model's own decoding, e.g. {seq2seq: {length_penalty: 1.0}}: beam, length_penalty or coverage_penalty
    # in place of the values above (each chosen on validation pairs, as the shared ones are).
    models: dict = field(default_factory=dict)
    # data.tatoeba_long only: this many single held-out sentences of at most test_short_max_words source words
    # are added to the test pairs, taken in order from those the joins left unused (a join to a few words is one
    # sentence that often overshoots, so the shortest bucket is the thinnest). Training and validation pairs
    # stay as they are, so the models trained without them are measured with them.
    test_short: int = 0
    test_short_max_words: int = 9

    def __post_init__(self) -> None:
        for name, settings in self.models.items():
            if not isinstance(settings, dict) or not settings:
                raise UserError(f"config: evaluation.models.{name} must map beam, length_penalty or coverage_penalty "
                                "to a value")
            for key, value in settings.items():
                if key not in DECODING_KEYS:
                    raise UserError(f"config: evaluation.models.{name}.{key} is not a decoding setting; allowed: "
                                    f"{', '.join(DECODING_KEYS)}")
                check_range(f"evaluation.models.{name}.{key}", value, *DECODING_KEYS[key])
        for key, (low, high) in DECODING_KEYS.items():
            if getattr(self, key) is not None:  # length_penalty None: each model's decode.length_penalty
                check_range(f"evaluation.{key}", getattr(self, key), low, high)
        check_range("evaluation.bootstrap", self.bootstrap, 0, None)
        check_range("evaluation.confidence", self.confidence, 0.5, 0.999)
        check_range("evaluation.position_width", self.position_width, 1, None)
        check_range("evaluation.test_short", self.test_short, 0, None)

    def decoding(self, model: str) -> dict:
        """The beam and penalties that ``model`` is decoded with: the shared ones, then its own."""
        return {**{key: getattr(self, key) for key in DECODING_KEYS}, **self.models.get(model, {})}


@dataclass
class HeatmapSection:
    """Attention heatmaps: teacher-forced, word-level attention of chosen test pairs.

    ``heatmaps: null`` (or ``enabled: false``) in a study file draws none."""

    enabled: bool = True
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

    # score the synthetic test split's gold alignments (default: yes, with synthetic data)
    synthetic_test: Optional[bool] = None
    sets: list[GoldSet] = field(default_factory=list)  # further gold sets, e.g. the NAACL 2003 Hansards
    threshold: float = 0.5  # for the thresholded links
    models: list[str] = field(default_factory=list)  # model entries to score; empty: every model with attention

    def __post_init__(self) -> None:
        check_range("alignment.threshold", self.threshold, 0.0, 1.0, inclusive_low=False)


@dataclass
class Study:
    """A whole study (see recipes/synthetic/synthetic.yaml)."""

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
    # Another study file whose trained models this one evaluates: its data, models, seeds and defaults are
    # taken (as with base:) and trained, if missing, in its own folder (runs/study-<its name>); this file
    # changes only how they are scored (evaluation, including the test pairs evaluation.test_short adds,
    # heatmaps, alignment). Absolute once loaded.
    models_from: Optional[str] = None
    path: Optional[str] = None  # where the study was read from (set by load_study, not by the YAML)


def deep_merge(base: dict, top: dict) -> dict:
    """A copy of ``base`` with ``top`` merged in; nested mappings merge, everything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def resolve_path(path: str, base_dir: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()


def model_raw_config(study: Study, entry: ModelEntry) -> dict:
    """The raw config dict of a model entry: study defaults, then its config file, then its overrides."""
    raw = copy.deepcopy(study.defaults)
    if entry.config:
        path = resolve_path(entry.config, Path(study.path or ".").parent)
        if not path.is_file():
            raise UserError(f"model {entry.name!r}: config file not found: {path}")
        try:
            raw = deep_merge(raw, parse_yaml(path.read_text(encoding="utf-8"), f"model {entry.name!r}: {path}") or {})
        except (yaml.YAMLError, UnicodeDecodeError):
            raise UserError(f"model {entry.name!r}: {path} is not valid YAML") from None
    return deep_merge(raw, entry.overrides)


def study_from_dict(raw: dict, path: Path | None = None) -> Study:
    """Validate a raw study dict (as read from YAML)."""
    if "heatmaps" in raw and raw["heatmaps"] is None:
        raw = dict(raw, heatmaps={"enabled": False})
    study = build(Study, raw)
    study.path = str(path) if path is not None else None
    _validate(study)
    return study


def _validate(study: Study) -> None:
    """The checks that span several fields."""
    d = study.data
    if sum(x is not None for x in (d.synthetic, d.multi30k_long, d.tatoeba_long)) != 1:
        raise UserError("config: data must have exactly one of 'synthetic', 'multi30k_long' or 'tatoeba_long'")
    _check_data_locations(d)
    _check_test_short(study)
    check_range("jobs", study.jobs, 1, None)
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
                        ("alignment.models", study.alignment.models), ("evaluation.models", study.evaluation.models)):
        for name in chosen:
            if name not in names:
                raise UserError(f"config: {key}: no model named {name!r}; models: {', '.join(names)}")
    if study.alignment.synthetic_test and d.synthetic is None:
        raise UserError("config: alignment.synthetic_test needs data.synthetic (only it has gold alignments)")
    for k, gold in enumerate(study.alignment.sets):
        if not (gold.name and gold.src and gold.tgt and gold.gold):
            raise UserError(f"config: alignment.sets[{k}] needs name, src, tgt and gold")


# The data locations a study must give (no default: the data lives where the user put it), and what goes there.
DATA_LOCATIONS = {
    ("multi30k_long", "dir"): "the folder of the Multi30k raw files (`attnmt data multi30k DEST` writes it)",
    ("tatoeba_long", "tatoeba"): "a manythings.org Tatoeba export (English TAB the other language, plain or .gz)",
}


def _check_data_locations(data: DataSection) -> None:
    for (source, key), what in DATA_LOCATIONS.items():
        section = getattr(data, source)
        if section is not None and not getattr(section, key):
            raise UserError(f"config: data.{source}.{key} is not set; give the path of {what}, relative to the "
                            "study file")


def _check_test_short(study: Study) -> None:
    evaluation, tatoeba = study.evaluation, study.data.tatoeba_long
    if not evaluation.test_short:
        return
    if tatoeba is None:
        raise UserError("config: evaluation.test_short adds held-out single sentences of data.tatoeba_long; "
                        "this study has no data.tatoeba_long, so remove it")
    check_range("evaluation.test_short_max_words", evaluation.test_short_max_words, tatoeba.test_min_words,
                tatoeba.test_max_words)


def read_study_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A study file's mapping, with the study it names as ``base`` (relative to it) merged under it:
    mappings merge key by key, and anything else (a list of models, a number) replaces the base's.
    Paths in the merged study are read relative to the file that is loaded, as if written there."""
    raw = read_yaml(path, "study", f"study config not found: {path}; pass a study YAML (see recipes/synthetic/)")
    if isinstance(raw, dict) and "models_from" in raw:
        return _read_models_from(path, raw, seen)
    if not isinstance(raw, dict) or "base" not in raw:
        return raw
    base = resolve_path(str(raw.pop("base")), path.parent).resolve()
    if base in seen or base == path.resolve():
        raise UserError(f"{path}: base: {base} is already one of this study's bases; remove the loop")
    return deep_merge(read_study_yaml(base, (*seen, path.resolve())), raw)


TRAINING_KEYS = ("base", "data", "models", "seeds", "defaults")  # what a models_from study takes from its owner


def _read_models_from(path: Path, raw: dict, seen: tuple[Path, ...]) -> dict:
    """A ``models_from`` study's mapping: its owner's, with this file's scoring on top (see Study.models_from)."""
    owner = resolve_path(str(raw.pop("models_from")), path.parent).resolve()
    given = [key for key in TRAINING_KEYS if key in raw]
    if given:
        raise UserError(f"{path}: models_from takes {given[0]} from {owner.name}; remove {given[0]} here, or "
                        "drop models_from to train models of this study's own")
    if owner in seen or owner == path.resolve():
        raise UserError(f"{path}: models_from: {owner} is already one of this study's bases; remove the loop")
    owner_raw = read_study_yaml(owner, (*seen, path.resolve()))
    merged = deep_merge(owner_raw, raw)
    # the models belong to the study that trains them: the owner's own owner, if it has one
    merged["models_from"] = owner_raw.get("models_from") or str(owner)
    return merged


# Data locations that --set may give: a relative path there is read from the current folder, not the study's.
SET_PATHS = {("data", source, key) for source, key in DATA_LOCATIONS} | {("data", "tatoeba_long", "multi30k")}


def _set_values(raw: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    """``raw`` with ``section.key=value`` strings applied (attnmt.config.typed.apply_overrides); a data location
    given so is made absolute from the current folder."""
    raw = apply_overrides(copy.deepcopy(raw), list(overrides))
    for section, source, key in SET_PATHS:
        node = raw.get(section, {}).get(source) if isinstance(raw.get(section), dict) else None
        given = any(item.split("=", 1)[0].strip() == f"{section}.{source}.{key}" for item in overrides)
        if given and isinstance(node, dict) and isinstance(node.get(key), str) and node[key]:
            node[key] = str(Path(node[key]).expanduser().resolve())
    return raw


def load_study(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Study:
    """Read and validate a study YAML, with ``overrides`` (``section.key=value``, as ``--set`` gives them)
    on top; errors name the file and the key."""
    path = Path(path)
    raw = read_study_yaml(path)
    if overrides:
        if not isinstance(raw, dict):
            raise UserError(f"{path}: a study file is a mapping of data, models, seeds, ...; this one is not")
        if raw.get("models_from"):
            raise UserError(f"{path}: --set does not reach the study whose models this one measures "
                            f"({Path(raw['models_from']).name}); set the values in the files instead")
        raw = _set_values(raw, overrides)
    try:
        return study_from_dict(raw, path.resolve())
    except UserError as e:
        raise UserError(f"{path}: {e}") from None


# ================================================================ data
