"""From text to token ids and back: the corpora of a config, and the text processors of a model.

A `TextProcessor` bundles a language's tokenizer and vocabulary; a model folder stores one per side
(the same one twice with a joint vocabulary), so that translation needs nothing but the folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnmt.config.schema import DataConfig
from attnmt.data.corpus import filter_pairs, read_parallel, read_tsv
from attnmt.data.tokenize import Tokenizer, load_tokenizer
from attnmt.data.vocab import Vocabulary
from attnmt.errors import UserError


@dataclass
class TextProcessor:
    """A language's tokenizer and vocabulary: text <-> tokens <-> ids."""

    tokenizer: Tokenizer
    vocab: Vocabulary

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.encode(text)

    def ids(self, text: str) -> list[int]:
        return self.vocab.encode(self.tokenizer.encode(text))

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(self.vocab.decode(ids))


@dataclass
class ParallelData:
    """Pairs held in memory, the raw text and the token ids of both sides: validation and test sets
    (training reads a token store, attnmt/data/store.py)."""

    src_text: list[str]
    tgt_text: list[str]
    src_ids: list[list[int]]
    tgt_ids: list[list[int]]

    def __len__(self) -> int:
        return len(self.src_ids)


def read_split(cfg: DataConfig, split: str, dropped: list[int] | None = None) -> list[tuple[str, str]] | None:
    """The (source, target) pairs of `split` ('train', 'valid' or 'test') named in the config. `dropped`: a
    list to collect the pairs with a line over MAX_LINE_BYTES, read as ("", "") (attnmt.data.corpus)."""
    src, tgt = getattr(cfg, f"{split}_src"), getattr(cfg, f"{split}_tgt")
    tsv = getattr(cfg, f"{split}_tsv", None)
    if tsv:
        return read_tsv(tsv, cfg.tsv_src_column, cfg.tsv_tgt_column, dropped)
    if src and tgt:
        return read_parallel(src, tgt, dropped)
    if src or tgt:
        raise UserError(f"config: data.{split}_src and data.{split}_tgt must be given together")
    return None


def load_processors(model_dir: Path) -> tuple[TextProcessor, TextProcessor]:
    """The source and target processors stored in a model folder."""

    def load(name: str) -> TextProcessor:
        return TextProcessor(load_tokenizer(model_dir, name), Vocabulary.load(model_dir / f"{name}.vocab"))

    if (model_dir / "joint.vocab").exists():
        joint = load("joint")
        return joint, joint
    return load("src"), load("tgt")


def encode_pairs(pairs: list[tuple[str, str]], src: TextProcessor, tgt: TextProcessor,
                 max_len: int | None) -> tuple[ParallelData, dict]:
    """Token ids of both sides; with max_len, empty and over-long pairs are dropped and counted."""
    src_ids = [src.ids(s) for s, _ in pairs]
    tgt_ids = [tgt.ids(t) for _, t in pairs]
    keep = list(range(len(pairs)))
    stats = {"total": len(pairs), "kept": len(pairs)}
    if max_len is not None:
        keep, filter_stats = filter_pairs(list(zip(src_ids, tgt_ids)), max_len)
        stats = vars(filter_stats) if not isinstance(filter_stats, dict) else filter_stats
    data = ParallelData(
        [pairs[i][0] for i in keep], [pairs[i][1] for i in keep], [src_ids[i] for i in keep],
        [tgt_ids[i] for i in keep])
    return data, stats
