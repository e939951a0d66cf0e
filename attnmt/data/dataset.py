"""From text to token ids and back: the corpora of a config, and the text processors of a model.

A `TextProcessor` bundles a language's tokenizer and vocabulary; a model folder stores one per side
(the same one twice with a joint vocabulary), so that translation needs nothing but the folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnmt.config import DataConfig
from attnmt.data.corpus import filter_pairs, read_parallel, read_tsv
from attnmt.data.tokenize import Tokenizer, load_tokenizer, train_tokenizer
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
    """A split of a corpus: the raw text and the token ids of both sides."""

    src_text: list[str]
    tgt_text: list[str]
    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    # Per pair, the corpus lines it is made of (attnmt/data/transforms.py, Origin), or None for every pair
    origins: list | None = None
    # The training corpus's word links by line (the links transform), read by guided alignment
    links: list | None = None
    long_lines: int = 0  # training pairs dropped for a line over attnmt.data.corpus.MAX_LINE_BYTES

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


def build_processors(cfg: DataConfig, pairs: list[tuple[str, str]],
                     model_dir: Path) -> tuple[TextProcessor, TextProcessor]:
    """Train the tokenizers and build the vocabularies on the training pairs; store them in model_dir."""
    src_texts = [s for s, _ in pairs]
    tgt_texts = [t for _, t in pairs]

    def make(texts: list[str], name: str) -> TextProcessor:
        tokenizer = train_tokenizer(cfg.tokenizer, texts, cfg.vocab_size, model_dir, name, lowercase=cfg.lowercase)
        vocab = Vocabulary.build((tokenizer.encode(t) for t in texts), max_size=cfg.max_vocab, min_freq=cfg.min_freq)
        vocab.save(model_dir / f"{name}.vocab")
        return TextProcessor(tokenizer, vocab)

    if cfg.joint_vocab:
        joint = make(src_texts + tgt_texts, "joint")
        return joint, joint
    return make(src_texts, "src"), make(tgt_texts, "tgt")


def load_processors(model_dir: Path) -> tuple[TextProcessor, TextProcessor]:
    """The source and target processors stored in a model folder."""

    def load(name: str) -> TextProcessor:
        return TextProcessor(load_tokenizer(model_dir, name), Vocabulary.load(model_dir / f"{name}.vocab"))

    if (model_dir / "joint.vocab").exists():
        joint = load("joint")
        return joint, joint
    return load("src"), load("tgt")


def encode_pairs(pairs: list[tuple[str, str]], src: TextProcessor, tgt: TextProcessor,
                 max_len: int | None, origins: list | None = None) -> tuple[ParallelData, dict]:
    """Token ids of both sides; with max_len, empty and over-long pairs are dropped and counted.
    ``origins`` (one per pair) are kept for the pairs kept."""
    src_ids = [src.ids(s) for s, _ in pairs]
    tgt_ids = [tgt.ids(t) for _, t in pairs]
    keep = list(range(len(pairs)))
    stats = {"total": len(pairs), "kept": len(pairs)}
    if max_len is not None:
        keep, filter_stats = filter_pairs(list(zip(src_ids, tgt_ids)), max_len)
        stats = vars(filter_stats) if not isinstance(filter_stats, dict) else filter_stats
    data = ParallelData(
        [pairs[i][0] for i in keep], [pairs[i][1] for i in keep], [src_ids[i] for i in keep],
        [tgt_ids[i] for i in keep], origins=[origins[i] for i in keep] if origins is not None else None,
    )
    return data, stats
