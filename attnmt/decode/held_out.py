"""A model's held-out sentence pairs: the examples the page offers, and the references its translations of
them are scored against (the explorer's side by side, docs/explore.md).

The pairs are the model folder's test or valid split (test.src / test.tgt, held out by `attnmt train`),
else the config's validation files, else the synthetic language's validation pairs; none when there is no
such data. A reference is known only where the target side exists and has as many lines as the source.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["example_sources", "held_out_pairs", "references"]


def held_out_pairs(translator) -> list[tuple[str, str | None]]:
    """(source, reference) pairs of the model's held-out data, in file order; reference None where unknown."""
    from attnmt.data.corpus import read_lines
    from attnmt.data.transforms import source_of

    cfg = translator.config.data
    folder = translator.model_dir
    candidates = [(folder / f"{split}.src", folder / f"{split}.tgt") for split in ("test", "valid")] if folder else []
    if cfg.valid_src:
        candidates.append((Path(cfg.valid_src), Path(cfg.valid_tgt) if cfg.valid_tgt else None))
    for src, tgt in candidates:
        if src.is_file():
            sources = read_lines(src)
            targets = read_lines(tgt) if tgt is not None and tgt.is_file() else []
            known = len(targets) == len(sources)
            pairs = [(s.strip(), targets[k].strip() if known else None) for k, s in enumerate(sources) if s.strip()]
            if pairs:
                return pairs
            break
    source = source_of(cfg)
    if source is None:
        return []
    return [(s.strip(), t.strip()) for s, t in source.valid_pairs(translator.config.train.seed) or [] if s.strip()]


def example_sources(translator, n: int = 5) -> list[str]:
    """``n`` source sentences spread over the model's held-out data (:func:`held_out_pairs`)."""
    lines = [src for src, _ in held_out_pairs(translator)]
    if not lines:
        return []
    step = max(len(lines) // n, 1)
    return lines[step // 2::step][:n]


def references(translator) -> dict[str, str]:
    """The reference of each held-out source sentence whose reference is known (the first, for a repeated one)."""
    found: dict[str, str] = {}
    for src, ref in held_out_pairs(translator):
        if ref is not None:
            found.setdefault(src, ref)
    return found
