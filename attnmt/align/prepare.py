"""The text of an alignment recipe for any language pair (``attnmt align-prepare``).

From parallel corpora in any of three forms (a TSV, source TAB target; a TSV whose target comes first,
as Tatoeba's English-first files for a pair whose source is not English; two line-aligned files) and a
gold set's two sentence files, :func:`prepare_alignment` writes a folder that the configs of
:mod:`attnmt.align.template` read:

* ``train.tsv.gz``: the training pairs, source TAB target, pretokenized (:mod:`attnmt.data.pretokenize`)
  and without any pair whose source or target equals a gold sentence (ignoring case and spacing): the
  gold set's text never carries guidance, whatever corpus line it also stands on;
* ``gold.SRC`` and ``gold.TGT``: the gold sentences as given, which the configs add to training
  without links (a statistical aligner sees the text it aligns, so the models do too);
* ``train.SRC-TGT.links`` and ``train.TGT-SRC.links``: eflomal's links of the training pairs,
  symmetrized with grow-diag-final-and, as guided alignment's supervision (0-based Pharaoh, one line per
  pair of train.tsv.gz; the second file turned to (target, source)); ``train.directional.*.links``:
  each direction's own links from the same run;
* ``align.json``: the languages, the corpora, the counts, and the gold lines the pretokenizer would
  change (:func:`gold_check`).
"""

from __future__ import annotations

import gzip
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError

MANIFEST = "align.json"
Pair = tuple[str, str]


@dataclass
class Corpus:
    """One parallel corpus: ``tsv`` (source TAB target, or target TAB source when ``swapped``), or
    ``src`` and ``tgt``, two line-aligned files (plain or .gz)."""

    tsv: str | None = None
    swapped: bool = False
    src: str | None = None
    tgt: str | None = None

    def name(self) -> str:
        return self.tsv or f"{self.src} + {self.tgt}"

    def pairs(self) -> list[Pair]:
        from attnmt.data.corpus import read_parallel, read_tsv

        if self.tsv:
            return read_tsv(self.tsv, 1, 0) if self.swapped else read_tsv(self.tsv, 0, 1)
        return read_parallel(self.src, self.tgt)


def gold_check(lines: Sequence[str], pretokenize: str, lang: str, show: int = 10) -> dict:
    """How many gold lines ``pretokenize`` would change for ``lang``, and the first ``show`` of them."""
    from attnmt.data.pretokenize import gold_changes

    changed = gold_changes(lines, pretokenize, lang)
    return {"lines": len(lines), "changed": len(changed),
            "first_changed": [{"line": n, "gold": given, "pretokenized": after} for n, given, after in changed[:show]]}


def format_check(check: dict, side: str) -> str:
    """One line of counts, then each listed line: gold and pretokenized."""
    out = [f"{side}: the pretokenizer changes {check['changed']} of {check['lines']} gold lines"]
    for c in check["first_changed"]:
        out.append(f"  line {c['line']}: {c['gold']}\n  {' ' * len(str(c['line']))}    -> {c['pretokenized']}")
    return "\n".join(out)


def _same(text: str) -> str:
    return " ".join(text.split()).lower()


def training_pairs(corpora: Sequence[Corpus], src_tok: Callable[[str], str], tgt_tok: Callable[[str], str],
                   gold: Sequence[Pair]) -> tuple[list[Pair], dict]:
    """The corpora's pairs pretokenized, without empty pairs, pairs with a TAB, and pairs whose source or
    target equals a gold sentence; the counts of each."""
    gold_src, gold_tgt = {_same(s) for s, _ in gold}, {_same(t) for _, t in gold}
    kept: list[Pair] = []
    counts = {"read": 0, "empty": 0, "equal_to_gold": 0}
    for corpus in corpora:
        for src, tgt in corpus.pairs():
            counts["read"] += 1
            src, tgt = src_tok(src), tgt_tok(tgt)
            if not src or not tgt or "\t" in src + tgt:
                counts["empty"] += 1
            elif _same(src) in gold_src or _same(tgt) in gold_tgt:
                counts["equal_to_gold"] += 1
            else:
                kept.append((src, tgt))
    counts["kept"] = len(kept)
    return kept, counts


def write_links(links, stem: Path, src_lang: str, tgt_lang: str, reverse=None) -> list[Path]:
    """(source, target) links as STEM.SRC-TGT.links and STEM.TGT-SRC.links, the latter turned to (target,
    source); the second holds ``reverse`` instead when given."""
    from attnmt.align.links import format_links

    written = []
    for name, sets in ((f"{src_lang}-{tgt_lang}", links),
                       (f"{tgt_lang}-{src_lang}", ({(j, i) for i, j in a} for a in (reverse or links)))):
        path = Path(f"{stem}.{name}.links")
        path.write_text("".join(format_links(a) + "\n" for a in sets), encoding="utf-8")
        written.append(path)
    return written


def read_manifest(data_dir: str | Path) -> dict:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise UserError(f"{path} not found: {data_dir} is not a folder that `attnmt align-prepare` wrote; run it "
                        "first, or give the folder it wrote")
    return json.loads(path.read_text(encoding="utf-8"))


def prepare_alignment(src_lang: str, tgt_lang: str, corpora: Sequence[Corpus], gold_src: str | Path,
                      gold_tgt: str | Path, out_dir: str | Path, pretokenize: str = "words",
                      links: bool = True, say: Callable[[str], None] = print) -> dict:
    """Write the folder the module docstring describes; returns what ``align.json`` holds."""
    from attnmt.data.corpus import read_parallel
    from attnmt.data.pretokenize import pretokenizer

    if src_lang == tgt_lang or not src_lang or not tgt_lang:
        raise UserError(f"--src-lang {src_lang!r} and --tgt-lang {tgt_lang!r}: give the two languages of the pair, "
                        "e.g. --src-lang de --tgt-lang en")
    if not corpora:
        raise UserError("align-prepare: no training text; give --tsv FILE, --tsv-swapped FILE or --parallel SRC TGT")
    src_tok, tgt_tok = pretokenizer(pretokenize, src_lang), pretokenizer(pretokenize, tgt_lang)
    gold = read_parallel(gold_src, gold_tgt)
    checks = {side: gold_check([p[k] for p in gold], pretokenize, lang)
              for k, (side, lang) in enumerate((("source", src_lang), ("target", tgt_lang)))}
    for side, check in checks.items():
        say(format_check(check, f"gold {side} ({gold_src if side == 'source' else gold_tgt})"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pairs, counts = training_pairs(corpora, src_tok, tgt_tok, gold)
    if not pairs:
        raise UserError(f"align-prepare: no training pairs left of {counts['read']} read; check the corpora")
    with gzip.open(out / "train.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)
    shutil.copyfile(gold_src, out / f"gold.{src_lang}")
    shutil.copyfile(gold_tgt, out / f"gold.{tgt_lang}")
    say(f"{counts['kept']} training pairs of {counts['read']} in {out / 'train.tsv.gz'} ({counts['empty']} empty, "
        f"{counts['equal_to_gold']} dropped: source or target equal to a gold sentence); the gold sentences in "
        f"{out}/gold.{src_lang}, gold.{tgt_lang} ({time.perf_counter() - started:.0f} s)")
    manifest = {"src_lang": src_lang, "tgt_lang": tgt_lang, "pretokenize": pretokenize,
                "corpora": [c.name() + (" (target first)" if c.swapped else "") for c in corpora],
                "gold_src": str(gold_src), "gold_tgt": str(gold_tgt), "gold_pairs": len(gold), "pairs": counts,
                "gold_check": checks, "links": None}
    if links:
        from attnmt.align.eflomal import eflomal_align
        from attnmt.align.links import symmetrize

        started = time.perf_counter()
        forward, reverse = eflomal_align([s.lower() for s, _ in pairs], [t.lower() for _, t in pairs])
        write_links(symmetrize(forward, reverse, "grow-diag-final-and"), out / "train", src_lang, tgt_lang)
        write_links(forward, out / "train.directional", src_lang, tgt_lang, reverse=reverse)
        manifest["links"] = "eflomal grow-diag-final-and"
        say(f"eflomal's links of the training pairs in {out}/train.{src_lang}-{tgt_lang}.links, "
            f"train.{tgt_lang}-{src_lang}.links (each direction's own: train.directional.*) "
            f"({time.perf_counter() - started:.0f} s)")
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest
