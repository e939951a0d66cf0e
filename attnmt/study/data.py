"""The study's data: its splits written once into the output folder (synthetic or joined real pairs)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.data.augment import join_run
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text
from attnmt.study.spec import Multi30kLongData, Study, SyntheticData, TatoebaLongData, resolve_path


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
    # Further test sets measured like the test split but reported on their own (name -> sources,
    # references), e.g. the naturally long sentences of a corpus beside its joined test pairs.
    extra_tests: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    # The splits the models train on are those of this fingerprint: the data without the test pairs that
    # evaluation.test_short adds (the same as ``fingerprint`` when it adds none).
    training_fingerprint: str = ""

    @property
    def test_lengths(self) -> list[int]:
        return [len(s.split()) for s in self.test_src]


def _write_split(directory: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for side, k in (("src", 0), ("tgt", 1)):
        write_text(directory / f"{split}.{side}", "".join(p[k] + "\n" for p in pairs), overwrite=True)


def _length_summary(pairs: list[tuple[str, str]]) -> dict:
    lengths = [len(s.split()) for s, _ in pairs]
    return {"pairs": len(pairs), "min_words": min(lengths, default=0), "max_words": max(lengths, default=0),
            "mean_words": round(float(np.mean(lengths)), 1) if lengths else 0.0}


def _fingerprint(splits: dict[str, list[tuple[str, str]]]) -> str:
    extra = [split for split in splits if split not in ("train", "valid", "test")]
    digest = hashlib.sha256()
    for split in ("train", "valid", "test", *extra):
        for s, t in splits[split]:
            digest.update(f"{s}\t{t}\n".encode())
    return digest.hexdigest()[:12]


def prepare_data(study: Study, out: Path) -> StudyData:
    """Generate or read the study's data and write train/valid/test files to ``out/data``, with the test
    pairs that ``evaluation.test_short`` adds."""
    directory = out / "data"
    labels = None
    base_dir = Path(study.path or ".").parent
    if study.data.synthetic is not None:
        splits, gold, labels = _synthetic_splits(study.data.synthetic, directory)
    elif study.data.tatoeba_long is not None:
        cfg = study.data.tatoeba_long
        splits, unused = tatoeba_long_data(cfg, base_dir)
        gold = None
    else:
        splits, gold = _multi30k_long_splits(study.data.multi30k_long, base_dir), None  # type: ignore[arg-type]
    training_fingerprint = _fingerprint(splits)
    if study.evaluation.test_short:
        splits["test"] = splits["test"] + short_singles(unused, splits["test"], study.evaluation.test_short,
                                                        cfg.test_min_words, study.evaluation.test_short_max_words)
    for split, pairs in splits.items():
        _write_split(directory, split, pairs)
    extra = [split for split in splits if split not in ("train", "valid", "test")]
    summary = {split: _length_summary(pairs) for split, pairs in splits.items()}
    return StudyData(directory, [s for s, _ in splits["test"]], [t for _, t in splits["test"]], gold, summary,
                     _fingerprint(splits), labels,
                     {split: ([s for s, _ in splits[split]], [t for _, t in splits[split]]) for split in extra},
                     training_fingerprint)


def _synthetic_splits(cfg: SyntheticData, directory: Path):
    from attnmt.align import GoldAlignment
    from attnmt.data.synthetic import SyntheticLanguage
    from attnmt.data.synthetic_corpus import make_splits, write_corpus

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
        joined.append(join_run(run))
        i += len(run)
    return joined


def _multi30k_long_splits(cfg: Multi30kLongData, base_dir: Path) -> dict[str, list[tuple[str, str]]]:
    from attnmt.data.corpus import read_parallel

    directory = resolve_path(cfg.dir, base_dir) if cfg.dir else None
    if directory is None or not directory.is_dir():
        raise UserError(f"data.multi30k_long.dir: folder not found: {directory or '(not set)'}; set it (relative "
                        "to the study file) to the folder with the raw files (`attnmt data multi30k DEST` writes it)")

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


def _words(sentence: str) -> int:
    return len(sentence.split())


def join_to_lengths(pairs: list[tuple[str, str]], targets: list[int]) -> list[tuple[str, str]]:
    """Join consecutive ``pairs`` into one pair per target length: pairs are taken in order, each
    once, until the joined source has at least that many words (so a target of a few words is
    usually one sentence). Stops when the pairs run out."""
    return _join_counting(pairs, targets)[0]


def _join_counting(pairs: list[tuple[str, str]], targets: list[int]) -> tuple[list[tuple[str, str]], int]:
    """:func:`join_to_lengths`, and how many of ``pairs`` (from the start) it used."""
    joined, i = [], 0
    for target in targets:
        run: list[tuple[str, str]] = []
        words = 0
        while i < len(pairs) and words < target:
            run.append(pairs[i])
            words += _words(pairs[i][0])
            i += 1
        if words < target:
            break
        joined.append(join_run(run))
    return joined, i


def short_singles(unused: list[tuple[str, str]], taken: list[tuple[str, str]], count: int,
                  min_words: int, max_words: int) -> list[tuple[str, str]]:
    """Up to ``count`` of the ``unused`` pairs, in order, of ``min_words`` to ``max_words`` source
    words, each source once and none that is already a source in ``taken``."""
    seen = {s for s, _ in taken}
    chosen = []
    for s, t in unused:
        if len(chosen) == count:
            break
        if min_words <= _words(s) <= max_words and s not in seen:
            seen.add(s)
            chosen.append((s, t))
    return chosen


def _test_pairs(pool: list[tuple[str, str]], cfg: TatoebaLongData,
                rng: random.Random) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The test pairs: ``pool`` joined to lengths drawn from ``rng``; and the pairs of ``pool`` the joins left."""
    test, used = _join_counting(pool, [rng.randint(cfg.test_min_words, cfg.test_max_words) for _ in range(cfg.test)])
    return [p for p in test if _words(p[0]) <= cfg.test_max_words], pool[used:]


def tatoeba_long_splits(cfg: TatoebaLongData, base_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """train, valid, test (joined held-out sentences) and natural (naturally long held-out
    sentences plus the Multi30k test captions); see :class:`TatoebaLongData`."""
    return tatoeba_long_data(cfg, base_dir)[0]


def tatoeba_long_data(cfg: TatoebaLongData,
                      base_dir: Path) -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str]]]:
    """:func:`tatoeba_long_splits`, and the held-out pairs (in order) that no test pair joined: where
    evaluation.test_short takes its single sentences from."""
    from attnmt.data.corpus import read_parallel, read_tsv
    from attnmt.data.split import split_held_out
    from attnmt.data.tokenize import normalize_whitespace

    path = resolve_path(cfg.tatoeba, base_dir) if cfg.tatoeba else None
    if path is None or not path.is_file():
        raise UserError(f"data.tatoeba_long.tatoeba: file not found: {path or '(not set)'}; set it (relative to the "
                        "study file) to a manythings.org export (English TAB other language, plain or .gz)")
    flip = (lambda ps: [(t, s) for s, t in ps]) if cfg.reverse_direction else (lambda ps: list(ps))
    pairs = flip(read_tsv(path, 0, 1))
    rng = random.Random(cfg.seed)
    # A share of the naturally long sources, with every pair that shares either of their sentences.
    def key(sentence: str) -> str:
        return normalize_whitespace(sentence).casefold()

    long_sources = sorted({key(s) for s, _ in pairs if _words(s) >= cfg.natural_min_words})
    chosen = set(rng.sample(long_sources, round(cfg.natural_share * len(long_sources))))
    chosen_targets = {key(t) for s, t in pairs if key(s) in chosen}
    out = [key(s) in chosen or key(t) in chosen_targets for s, t in pairs]
    # (A short pair that shares a long one's translation is dropped: in neither training nor test.)
    natural = [p for p, o in zip(pairs, out) if o and _words(p[0]) >= cfg.natural_min_words]
    pairs = [p for p, o in zip(pairs, out) if not o]
    # Whole groups of pairs that share a sentence: no held-out sentence occurs in training.
    train, valid_pool, held = split_held_out(pairs, 3 * cfg.valid, cfg.held_out, cfg.seed)
    natural += [p for p in held if _words(p[0]) >= cfg.natural_min_words]
    pool = [p for p in held if _words(p[0]) < cfg.natural_min_words]
    rng.shuffle(pool)
    test, unused = _test_pairs(pool, cfg, rng)
    rng.shuffle(valid_pool)
    valid = join_to_lengths(valid_pool, [rng.randint(1, cfg.train_max_words) for _ in range(cfg.valid)])
    valid = [p for p in valid if _words(p[0]) <= cfg.train_max_words]
    train = [p for p in train if _words(p[0]) <= cfg.train_max_words]
    if cfg.multi30k is not None:
        directory = resolve_path(cfg.multi30k, base_dir)
        langs = ("en", cfg.multi30k_other_lang)
        src_lang, tgt_lang = langs[::-1] if cfg.reverse_direction else langs

        def read(split: str) -> list[tuple[str, str]]:
            return read_parallel(_multi30k_file(directory, split, src_lang), _multi30k_file(directory, split, tgt_lang))

        train += [p for p in read("train") if _words(p[0]) <= cfg.train_max_words]
        if cfg.natural_multi30k_split:
            natural += read(cfg.natural_multi30k_split)
    shuffled = list(train)
    rng.shuffle(shuffled)
    joined = join_to_lengths(shuffled, [rng.randint(min(10, cfg.train_max_words), cfg.train_max_words)
                                        for _ in range(cfg.train_joined)])
    train += [p for p in joined if _words(p[0]) <= cfg.train_max_words]
    rng.shuffle(train)
    if not test:
        raise UserError(f"tatoeba: no test pair could be made from {len(pool)} held-out sentences; raise "
                        "data.tatoeba_long.held_out")
    splits = {"train": train, "valid": valid, "test": test}
    if natural:
        splits["natural"] = natural
    return splits, unused
