"""Configuration: one typed, documented dataclass tree, loaded from YAML.

Every field is documented where it is declared. `load_config` reads a YAML file, applies
`--set section.key=value` overrides and validates everything: an unknown key is an error that
names the closest valid one; a wrong type or an out-of-range value names the key, the value and
what is allowed. Relative paths in a config file are resolved against the file's folder.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import yaml

from attnmt.config.bounds import (
    MAX_COLUMN,
    MAX_COUNT,
    MAX_HEADS,
    MAX_KEPT,
    MAX_LAYERS,
    MAX_SEED,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_VOCAB,
    MAX_WORKERS,
    MIN_VOCAB,
)
from attnmt.config.decoding import DecodeOptions, config_key, from_config, option_fields
from attnmt.config.registry import Registry
from attnmt.config.typed import apply_overrides, build, check_declared, check_range, coerce, ranged
from attnmt.config.yaml_input import read_yaml
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it becomes token ids."""

    train_src: Optional[str] = None  # source side of the training corpus (plain or .gz)
    train_tgt: Optional[str] = None  # target side, line-aligned with train_src
    train_tsv: Optional[str] = None  # alternative: one TSV file, source TAB target
    # The TSV columns (counted from 0) that hold the source and the target, for every *_tsv file.
    # Tatoeba / Anki exports are English TAB other TAB attribution: Chinese -> English reads 1 -> 0.
    tsv_src_column: int = ranged(0, 0, MAX_COLUMN)
    tsv_tgt_column: int = ranged(1, 0, MAX_COLUMN)
    valid_src: Optional[str] = None
    valid_tgt: Optional[str] = None
    valid_tsv: Optional[str] = None
    test_src: Optional[str] = None
    test_tgt: Optional[str] = None
    # Held out of a corpus that comes as one file (attnmt/data/split.py): this many training pairs
    # become the validation / test set when no valid_* / test_* files are given. Pairs that share a
    # sentence (Tatoeba lists several translations of one English sentence) stay in one split, and the
    # choice is fixed by train.seed. The held-out pairs are written to the model folder as
    # valid.src / valid.tgt and test.src / test.tgt (for `attnmt evaluate --src MODEL/test.src ...`).
    valid_size: int = ranged(0, 0, MAX_COUNT)
    test_size: int = ranged(0, 0, MAX_COUNT)
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    tokenizer: Literal["bpe", "unigram", "word"] = "bpe"
    vocab_size: int = ranged(8000, MIN_VOCAB, MAX_VOCAB)  # subword vocabulary size (bpe / unigram)
    joint_vocab: bool = False  # one tokenizer and vocabulary shared by both languages
    lowercase: bool = False  # lowercase both sides before tokenizing (any tokenizer); output stays lowercase
    # How the training text was split into words (attnmt/data/pretokenize.py; align-config writes the one that
    # align-prepare --pretokenize used): training reads the text as it is, and the model folder loaded to translate
    # (translate, align, serve, explore) splits raw input the same way. None: input is read as it is.
    pretokenize: Optional[Literal["words", "hansards", "jieba", "mecab", "none"]] = None
    pretokenize_user_dict: Optional[str] = None  # the segmenter's user dictionary (align-prepare --user-dict)
    max_vocab: Optional[int] = ranged(None, 1, MAX_VOCAB)  # word tokenizer: keep at most this many tokens per side
    min_freq: int = ranged(1, 1, MAX_COUNT)  # word tokenizer: drop rarer tokens (they become <unk>)
    max_len: int = ranged(100, 1, MAX_TOKENS)  # training pairs with a longer side (in tokens) are dropped and counted
    # What is added to the training pairs or attached to them, in order: a list of {name: NAME, ...settings}
    # (attnmt/data/transforms.py): synthetic, joined_pairs, align_text, drop_final_punct, links.
    transforms: list = field(default_factory=list)
    # Several training corpora, mixed by weight (instead of train_src/train_tgt/train_tsv): a list of
    # {name, src, tgt, weight} or {name, tsv, weight}. Each epoch takes round(N * weight / sum of weights)
    # pairs of a corpus (N = all kept pairs): weights proportional to the sizes read each pair once.
    train: Optional[list] = None
    # Training reads a memory-mapped token store (attnmt/data/store.py, `attnmt prepare`), by default
    # MODEL_DIR/store; this names a shared folder for stores instead (one per corpus and tokenizer settings).
    store_dir: Optional[str] = None
    # Sentences per side that the tokenizers (and vocabularies) are trained on, sampled with train.seed;
    # a corpus this size or smaller is used whole.
    tokenizer_sample: int = ranged(1_000_000, 1, MAX_COUNT)
    # processes that encode the corpus into the store (default: the cores)
    workers: Optional[int] = ranged(None, 1, MAX_WORKERS)
    # Training batches from a store are built and shuffled within windows of this many pairs.
    shuffle_window: int = ranged(4_000_000, 1, MAX_COUNT)

    def __post_init__(self) -> None:
        check_declared(self, "data.")
        if self.train is not None:
            self.train = _check_corpora(self)
        if not isinstance(self.transforms, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                              for t in self.transforms):
            raise UserError(f"config: data.transforms must be a list of mappings with a name, e.g. "
                            f"[{{name: drop_final_punct, fraction: 0.3}}], got {self.transforms!r}")
        if self.tsv_src_column == self.tsv_tgt_column:
            raise UserError(f"config: data.tsv_src_column and data.tsv_tgt_column are both {self.tsv_src_column}; "
                            "give two different TSV columns (counted from 0)")
        if self.valid_size and (self.valid_src or self.valid_tgt or self.valid_tsv):
            raise UserError(f"config: data.valid_size={self.valid_size} holds out a validation set, but validation "
                            "files are given too (data.valid_*); use one or the other")
        if self.test_size and (self.test_src or self.test_tgt):
            raise UserError(f"config: data.test_size={self.test_size} holds out a test set, but test files are "
                            "given too (data.test_*); use one or the other")


CORPUS_KEYS = ("name", "src", "tgt", "tsv", "weight")


def _check_corpora(cfg: DataConfig) -> list[dict]:
    """data.train as a list of {name, src, tgt | tsv, weight}, each checked and completed."""
    if cfg.train_src or cfg.train_tgt or cfg.train_tsv:
        raise UserError("config: data.train (a list of corpora) and data.train_src/train_tgt/train_tsv are both "
                        "given; put every training corpus into data.train")
    if not isinstance(cfg.train, list) or not cfg.train:
        raise UserError("config: data.train must be a list of corpora, e.g. [{src: a.de, tgt: a.en, weight: 1}]")
    corpora, names = [], set()
    for k, raw in enumerate(cfg.train):
        where = f"data.train[{k}]"
        if not isinstance(raw, dict):
            raise UserError(f"config: {where} must be a mapping with src and tgt (or tsv) and a weight, got {raw!r}")
        unknown = [key for key in raw if key not in CORPUS_KEYS]
        if unknown:
            raise UserError(f"config: unknown key '{where}.{unknown[0]}'; valid keys: {', '.join(CORPUS_KEYS)}")
        entry = {"name": str(raw.get("name", f"corpus{k}")), "src": raw.get("src"), "tgt": raw.get("tgt"),
                 "tsv": raw.get("tsv"), "weight": raw.get("weight", 1.0)}
        if not ((entry["src"] and entry["tgt"] and not entry["tsv"]) or (entry["tsv"] and not entry["src"]
                                                                        and not entry["tgt"])):
            raise UserError(f"config: {where} needs either src and tgt (two line-aligned files) or tsv (one file)")
        for key in ("src", "tgt", "tsv"):
            if entry[key] is not None and not isinstance(entry[key], str):
                raise UserError(f"config: {where}.{key}={entry[key]!r} must be a file path")
        weight = entry["weight"]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
            raise UserError(f"config: {where}.weight={weight!r} must be a number above 0, not NaN or infinite")
        entry["weight"] = float(weight)
        if entry["name"] in names:
            raise UserError(f"config: {where}.name={entry['name']!r} is used twice; give each corpus its own name")
        names.add(entry["name"])
        corpora.append(entry)
    return corpora


DEFAULT_MODEL_TYPE = "rnnsearch"
# model.type -> the config class of that model type. Each model type declares its keys in its own subclass of
# ModelConfig, beside its code (attnmt/models/), and `attnmt.models.register_model` enters it here.
MODEL_CONFIGS = Registry("model type", "model.type", builtins="attnmt.models")


@dataclass
class ModelConfig:
    """The architecture: the keys every model type reads. A model type's own keys are in its subclass
    (attnmt.models: Seq2SeqConfig, RNNSearchConfig, TransformerConfig); the `model` section of a config
    is built as the class registered for its `type`. Names follow the papers."""

    type: str = DEFAULT_MODEL_TYPE  # a name in attnmt.models.MODELS: seq2seq | rnnsearch | transformer
    enc_layers: int = ranged(1, 1, MAX_LAYERS)
    dec_layers: int = ranged(1, 1, MAX_LAYERS)
    dropout: float = ranged(0.2, 0.0, 0.99)
    tie_embeddings: bool = False  # share the target embedding matrix with the output layer

    @classmethod
    def of(cls, type: str = DEFAULT_MODEL_TYPE, **keys) -> ModelConfig:  # noqa: A002 (the config key's name)
        """The config class that MODEL_CONFIGS registers for ``type``, built from ``keys`` (its keys, its
        checks); a key that type does not read is refused in one line, naming the types that read it."""
        chosen = MODEL_CONFIGS.lookup(type)
        reads = {f.name for f in dataclasses.fields(chosen)}
        for key in keys:
            if key not in reads:
                _refuse("model.", key, type)
        return chosen(type=type, **keys)

    def __post_init__(self) -> None:
        check_declared(self, "model.")  # the keys of the model type's own class too

    @classmethod
    def from_raw(cls, raw, prefix: str = "model.") -> ModelConfig:
        """The config class of ``raw``'s type, built from ``raw`` (typed.build calls this for a section).

        A key that this type does not read is refused, naming the types that do read it; one left at its
        default is dropped (a model folder's config.yaml of an older attnmt lists every model key)."""
        if not isinstance(raw, dict):
            return build(cls, raw, prefix)  # the one-line "must be a mapping" error
        name = coerce(f"{prefix}type", raw.get("type", DEFAULT_MODEL_TYPE), str)
        chosen = MODEL_CONFIGS.lookup(name)
        reads = {f.name for f in dataclasses.fields(chosen)}
        kept = {}
        for key, value in raw.items():
            readers = _readers(key)
            if key in reads or not readers:
                kept[key] = value  # an unknown key: build names the closest one
            elif any(value != f.default for f in readers.values()):
                _refuse(prefix, key, name)
        return build(chosen, kept, prefix)


def _readers(key: str) -> dict[str, dataclasses.Field]:
    """The model types whose config class has the key ``key``, with that field."""
    return {name: f for name, cls in MODEL_CONFIGS.items() for f in dataclasses.fields(cls) if f.name == key}


def _refuse(prefix: str, key: str, model_type: str) -> None:
    readers = _readers(key)
    if not readers:
        raise UserError(f"config: unknown key '{prefix}{key}'; valid keys: "
                        f"{', '.join(f.name for f in dataclasses.fields(MODEL_CONFIGS.lookup(model_type)))}")
    raise UserError(f"config: {prefix}{key} applies to {' and '.join(readers)}, not {model_type}: remove it")


def _default_model() -> ModelConfig:
    return MODEL_CONFIGS.lookup(DEFAULT_MODEL_TYPE)()


@dataclass
class GuidedAlignmentConfig:
    """Guided alignment training (attnmt/train/guidance.py; Garg et al. 2019): word links supervise the attention."""

    # On when the training data carries word links: data.transforms [{name: links, path: FILE}].
    weight: float = ranged(0.2, 0.0, 100.0)  # lambda: the alignment loss's weight beside the translation loss
    # Transformer only: the cross-attention that is supervised (layer counted from 0, -1 the last; a head
    # index, or null for the heads' average). RNN models have one attention and leave both null.
    layer: Optional[int] = ranged(None, -MAX_LAYERS, MAX_LAYERS - 1)
    head: Optional[int] = ranged(None, 0, MAX_HEADS - 1)
    # Which attention row carries y_t's links: "predict" (the row that predicts y_t) or "shift" (the first
    # row whose query has read y_t); `attnmt align --method` reads a guided model the same way by default.
    row: Literal["predict", "shift"] = "predict"
    # Supervise (and read) the attention of an extra decoder pass without the causal mask, in which every
    # position sees the whole target (Garg et al. 2019's full target context; Transformer only).
    full_context: bool = False

    def __post_init__(self) -> None:
        check_declared(self, "train.guided_alignment.")


@dataclass
class TrainConfig:
    """Optimisation, validation and stopping."""

    seed: int = ranged(1, 0, MAX_SEED)
    batch_tokens: int = ranged(4096, 1, MAX_COUNT)  # token budget of a batch (padded, over the larger side)
    # if set: batches of this many sentences instead of a token budget
    batch_size: Optional[int] = ranged(None, 1, MAX_COUNT)
    max_steps: int = ranged(100000, 1, MAX_STEPS)
    max_epochs: int = ranged(100, 1, MAX_STEPS)
    # stop after this much wall time (a checkpoint is written)
    max_time_s: Optional[float] = ranged(None, 0.0, 1e9, above=True)
    # adam; adamw: decoupled weight decay (Loshchilov & Hutter 2019); sgd: with momentum (attnmt/train/optim.py)
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    lr: float = ranged(1e-3, 0.0, 10.0, above=True)
    weight_decay: float = ranged(0.0, 0.0, 10.0)  # adam and sgd: L2 added to the gradient; adamw: w <- w - lr * wd * w
    momentum: float = ranged(0.0, 0.0, 0.999)  # sgd only
    accum_steps: int = ranged(1, 1, MAX_COUNT)  # batches per update (gradient accumulation, attnmt/train/accumulate.py)
    # d: keep ema <- d * ema + (1 - d) * w, validate it, write checkpoints/ema.pt
    ema_decay: Optional[float] = ranged(None, 0.0, 1.0, above=True, below=True)
    # plateau: decay on a validation-loss plateau; noam: warm-up then 1/sqrt(step) (Vaswani et al.);
    # cosine: warm-up then a cosine decay to min_lr at max_steps; budget: warm-up then a straight line to min_lr
    # at the end of the budget (max_steps, or max_time_s when that ends first); none: constant
    scheduler: str = "plateau"  # a name in attnmt.train.schedulers.SCHEDULERS: plateau | noam | cosine | budget | none
    lr_decay: float = ranged(0.5, 0.0, 1.0, above=True, below=True)  # plateau: multiply the learning rate by this ...
    # ... after more than this many validations without improvement (torch's rule)
    lr_patience: int = ranged(3, 0, MAX_STEPS)
    min_lr: float = ranged(1e-5, 0.0, 10.0)
    warmup_steps: int = ranged(4000, 0, MAX_STEPS)  # noam, cosine and budget: steps of linear warm-up
    clip_grad_norm: float = ranged(5.0, 0.0, None)  # rescale the gradient to at most this L2 norm (0: off)
    label_smoothing: float = ranged(0.0, 0.0, 0.99)
    # steps between validations (each writes checkpoints/last.pt, and best.pt if better)
    valid_every: int = ranged(500, 1, MAX_STEPS)
    # also write checkpoints/last.pt every this many steps, between validations,
    # so that a killed run loses at most this many steps on --resume (null: only at validations)
    save_every: Optional[int] = ranged(None, 1, MAX_STEPS)
    # also keep the weights of the last N writes of last.pt as checkpoints/step<N>.pt,
    # for `attnmt average` (checkpoint averaging; 0: keep none)
    keep_checkpoints: int = ranged(0, 0, MAX_KEPT)
    valid_bleu_sample: int = ranged(200, 0, MAX_COUNT)  # sentences of the validation set decoded for BLEU (0: none)
    early_stopping_patience: int = ranged(10, 1, MAX_STEPS)  # validations without improvement of early_stopping_metric
    # what "improvement" means for early stopping and best.pt: a lower validation loss, or a higher BLEU /
    # chrF on the valid_bleu_sample sentences (greedy)
    early_stopping_metric: Literal["loss", "bleu", "chrf"] = "loss"
    log_every: int = ranged(50, 1, MAX_STEPS)
    threads: Optional[int] = ranged(None, 1, MAX_WORKERS)  # torch intra-op threads (default: physical cores)
    device: str = "cpu"
    # Arithmetic of the forward pass and loss. bf16: bfloat16 autocast, float32 master weights and
    # optimizer state. auto: bf16 where the device does it natively (CUDA with bf16, or a CPU with AMX or
    # AVX-512-BF16), else fp32. bf16 on a CPU without either is refused (emulated, it is hundreds of times
    # slower than fp32).
    precision: Literal["fp32", "bf16", "auto"] = "fp32"
    nan_policy: Literal["skip", "stop"] = "stop"  # on a NaN / infinite loss
    progress: bool = True  # show a progress bar
    tensorboard: bool = True
    guided_alignment: GuidedAlignmentConfig = field(default_factory=GuidedAlignmentConfig)

    def __post_init__(self) -> None:
        from attnmt.train.schedulers import SCHEDULERS

        check_declared(self, "train.")
        least = getattr(SCHEDULERS.lookup(self.scheduler), "min_warmup_steps", 0)  # noam divides by it
        if self.warmup_steps < least:
            raise UserError(f"config: train.warmup_steps={self.warmup_steps} is out of range for train.scheduler "
                            f"{self.scheduler}; allowed: >= {least} (e.g. 4000)")
        if self.momentum and self.optimizer != "sgd":
            raise UserError(f"config: train.momentum={self.momentum} applies to train.optimizer sgd, not "
                            f"{self.optimizer}; remove it or set train.optimizer: sgd")
        if self.early_stopping_metric != "loss" and not self.valid_bleu_sample:
            raise UserError(f"config: train.early_stopping_metric={self.early_stopping_metric} needs the validation "
                            "sentences decoded: set train.valid_bleu_sample > 0, or use loss")


def _check_decode(self) -> None:
    check_declared(self, "decode.")
    check_range("decode.min_len", self.min_len, 0, self.max_len_cap)


def _decode_section() -> type:
    """The config's decode section: the decoding options that have a config key (attnmt.config.decoding), with
    their defaults, ranges and help, under their keys; ``options(**given)`` gives the DecodeOptions they set."""
    types = typing.get_type_hints(DecodeOptions)
    fields = [(config_key(f), types[f.name], field(default=f.default, metadata=f.metadata))
              for f in option_fields("config")]
    return dataclasses.make_dataclass("DecodeConfig", fields, namespace={
        "__module__": __name__, "__post_init__": _check_decode, "options": from_config,
        "__doc__": "Decoding settings used by validation, `translate`, `evaluate` and the server unless a call, a "
                   "flag or a request gives its own: the decoding options of attnmt.config.decoding that have a "
                   "config key."})


DecodeConfig = _decode_section()


@dataclass
class Config:
    """A whole training run."""

    name: str = "model"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self) -> None:
        check_model_name(self.name)


def check_model_name(name: str) -> None:
    """A model's name is one path component (train writes models/NAME): no separator, not . or .., not hidden."""
    if not name or name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0") \
            or len(name.encode("utf-8", "replace")) > 255:
        raise UserError(f"config: name={name!r} is not a folder name (train writes models/NAME); use one name "
                        "without / or \\, not starting with a dot, e.g. name: de-en-base")


PATH_FIELDS = {"train_src", "train_tgt", "train_tsv", "valid_src", "valid_tgt", "valid_tsv", "test_src", "test_tgt",
               "pretokenize_user_dict"}
# The keys of data.transforms entries that name files, resolved like the data paths (attnmt/data/transforms.py
# names every file setting so).
TRANSFORM_PATH_KEYS = ("src", "tgt", "path")

def config_from_dict(raw: dict, base_dir: Path | None = None) -> Config:
    """Validate a plain dict (as read from YAML) into a Config; resolve relative data paths."""
    config = build(Config, raw, "")
    if base_dir is not None:
        for name in PATH_FIELDS:
            value = getattr(config.data, name)
            if value is not None and not Path(value).expanduser().is_absolute():
                setattr(config.data, name, str((base_dir / Path(value).expanduser()).resolve()))
        for entry in config.data.train or []:
            for key in ("src", "tgt", "tsv"):
                if entry[key] is not None and not Path(entry[key]).expanduser().is_absolute():
                    entry[key] = str((base_dir / Path(entry[key]).expanduser()).resolve())
        if config.data.store_dir is not None and not Path(config.data.store_dir).expanduser().is_absolute():
            config.data.store_dir = str((base_dir / Path(config.data.store_dir).expanduser()).resolve())
        for entry in config.data.transforms:
            for key in TRANSFORM_PATH_KEYS:
                value = entry.get(key)
                if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
                    entry[key] = str((base_dir / Path(value).expanduser()).resolve())
    _check_guidance(config)
    _check_model_size(config)
    return config


def _check_model_size(config: Config) -> None:
    """The model's weights fit in this machine's memory, with the vocabulary size that the data keys set (the
    real one is checked again when the model is built)."""
    from attnmt.config.model_size import check_size

    data = config.data
    vocab = data.vocab_size if data.tokenizer != "word" else data.max_vocab or MIN_VOCAB
    check_size(config.model, vocab, vocab)


def is_guided(config: Config) -> bool:
    """Whether the model trains (or was trained) with guided alignment: its data carries word links
    (the data transform {name: links, path: FILE})."""
    return any(isinstance(entry, dict) and entry.get("name") == "links" for entry in config.data.transforms)


def _check_guidance(config: Config) -> None:
    guided = config.train.guided_alignment
    if not is_guided(config):
        return
    model = type(config.model).model_class  # its capabilities (has_attention, ...), set by register_model
    if not model.has_attention:
        raise UserError(f"config: train.guided_alignment supervises attention, and a {config.model.type} model has "
                        "none; use model.type rnnsearch or transformer, or remove the links transform")
    if guided.full_context and not model.has_full_context:
        raise UserError(f"config: train.guided_alignment.full_context needs a decoder that can see the whole target "
                        f"at once; a {config.model.type} model reads it left to right: use model.type transformer, "
                        "or set full_context: false")
    if not model.has_heads and (guided.layer is not None or guided.head is not None):
        raise UserError(f"config: train.guided_alignment.layer / head choose a Transformer cross-attention head; an "
                        f"{config.model.type} model has one attention: remove them")
    if guided.layer is not None and not -config.model.dec_layers <= guided.layer < config.model.dec_layers:
        raise UserError(f"config: train.guided_alignment.layer={guided.layer} is out of range for "
                        f"{config.model.dec_layers} decoder layers; allowed: {-config.model.dec_layers} to "
                        f"{config.model.dec_layers - 1}")
    if guided.head is not None and guided.head >= config.model.n_heads:
        raise UserError(f"config: train.guided_alignment.head={guided.head} is out of range for "
                        f"{config.model.n_heads} heads; allowed: 0 to {config.model.n_heads - 1}")


def config_to_dict(config: Config) -> dict:
    return dataclasses.asdict(config)


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read, override and validate a YAML config file."""
    path = Path(path)
    raw = read_yaml(path)
    raw = apply_overrides(raw, overrides or [])
    try:
        return config_from_dict(raw, base_dir=path.resolve().parent)
    except UserError as e:
        raise UserError(_blame(str(e), path, overrides or [])) from None


def _blame(message: str, path: Path, overrides: list[str]) -> str:
    """The message, prefixed with where its key came from: the `--set` that gave it, else the config file."""
    subject = message.split(";")[0]  # what is wrong, before any suggestion of what to write instead
    for item in reversed(overrides):
        key = item.split("=", 1)[0].strip()
        if f"unknown key '{key}'" in subject or re.search(rf"(?<![\w.]){re.escape(key)}=", subject):
            return f"--set {item}: {message.removeprefix('config: ')}"
    return f"{path}: {message}"


def save_config(config: Config, path: Path) -> None:
    """The config as YAML, written by attnmt.runtime.safe_write (replacing the file there)."""
    write_text(path, yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True), overwrite=True)
