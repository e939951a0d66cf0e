"""The text of an alignment recipe for any language pair (``attnmt align-prepare``).

From parallel corpora in any of three forms (a TSV, source TAB target; a TSV whose target comes first,
as Tatoeba's English-first files for a pair whose source is not English; two line-aligned files) and a
gold set's two sentence files, :func:`prepare_alignment` writes a folder that the configs of
:mod:`attnmt.align.template` read:

* ``train.tsv.gz``: the training pairs, source TAB target, pretokenized (:mod:`attnmt.data.pretokenize`),
  accents folded with ``fold_accents`` (:func:`attnmt.data.pretokenize.fold_accents`, for text such as the
  Hansards release that spells French in ASCII), and without any pair whose source or target is a gold
  sentence by :func:`match_key` (its letters and digits, lowercased, accents folded): the gold set's text
  never carries guidance, whatever corpus line it also stands on;
* ``gold.SRC`` and ``gold.TGT``: the gold sentences as given (accents folded with ``fold_accents``), which
  the configs add to training without links (a statistical aligner sees the text it aligns, so the models
  do too);
* ``test.SRC`` and ``test.TGT`` (with ``test``): the first pairs of a held-out test corpus, prepared as the
  training pairs are, for BLEU beside the alignment scores (``attnmt align-table --test-src``);
* ``train.SRC-TGT.links`` and ``train.TGT-SRC.links``: eflomal's links of the training pairs,
  symmetrized with grow-diag-final-and, as guided alignment's supervision (0-based Pharaoh, one line per
  pair of train.tsv.gz; the second file turned to (target, source)); ``train.directional.*.links``:
  each direction's own links from the same run;
* ``user_dict.txt`` (with ``user_dict``): a copy of the segmenter's user dictionary, which the configs name;
* ``align.json``: the languages, the pretokenizer (and the user dictionary's copy), the corpora, the counts,
  and the gold lines the pretokenizer would change (:func:`gold_check`).
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError
from attnmt.runtime.safe_write import open_output, write_bytes, write_text

MANIFEST = "align.json"
USER_DICT = "user_dict.txt"  # the copy of align-prepare --user-dict
TEST_LINES = 1000  # the test pairs align-prepare --test writes by default
Pair = tuple[str, str]
Counts = dict[str, int]
_NOT_LETTER_OR_DIGIT = re.compile(r"[\W_]+")  # \w is str.isalnum() and "_"


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


def gold_check(lines: Sequence[str], pretokenize: str, lang: str, show: int = 10,
               user_dict: str | Path | None = None) -> dict:
    """How many gold lines ``pretokenize`` (with a segmenter's ``user_dict``) would change for ``lang``, and the
    first ``show`` of them."""
    from attnmt.data.pretokenize import gold_changes

    changed = gold_changes(lines, pretokenize, lang, user_dict)
    return {"lines": len(lines), "changed": len(changed), "words": _word_counts(lines, changed),
            "first_changed": [{"line": n, "gold": given, "pretokenized": after} for n, given, after in changed[:show]]}


def _spans(words: Sequence[str]) -> set[tuple[int, int]]:
    """Each word as its (start, end) among the line's characters without spaces."""
    spans, start = set(), 0
    for word in words:
        spans.add((start, start + len(word)))
        start += len(word)
    return spans


def _word_counts(lines: Sequence[str], changed: Sequence[tuple[int, str, str]]) -> dict | None:
    """The gold's words, the pretokenized words and the words both have (the same characters at the same place),
    over all lines; None when the pretokenizer changes characters (lowercasing, spelling elisions out)."""
    after = {n: pretokenized for n, _, pretokenized in changed}
    counts = {"gold": 0, "pretokenized": 0, "same": 0}
    for number, line in enumerate(lines, start=1):
        gold, mine = line.split(), after.get(number, line).split()
        if "".join(gold) != "".join(mine):
            return None
        counts["gold"] += len(gold)
        counts["pretokenized"] += len(mine)
        counts["same"] += len(_spans(gold) & _spans(mine))
    return counts


def format_check(check: dict, side: str) -> str:
    """One line of counts, then each listed line: gold and pretokenized."""
    words = check.get("words")
    same = (f"; {words['same']:,} of its {words['pretokenized']:,} words are among the gold's {words['gold']:,}"
            if words and check["changed"] else "")
    out = [f"{side}: the pretokenizer changes {check['changed']} of {check['lines']} gold lines{same}"]
    for c in check["first_changed"]:
        out.append(f"  line {c['line']}: {c['gold']}\n  {' ' * len(str(c['line']))}    -> {c['pretokenized']}")
    return "\n".join(out)


def match_key(text: str) -> str:
    """What the gold check compares: ``text`` lowercased, accents folded, only its letters and digits kept
    (``Oh, oh!`` and ``oh , oh !`` match; ``l'été`` and ``l' ete`` too)."""
    from attnmt.data.pretokenize import fold_accents

    return _NOT_LETTER_OR_DIGIT.sub("", fold_accents(text.lower()))


def gold_keys(gold: Sequence[Pair]) -> tuple[set[str], set[str]]:
    """The :func:`match_key` of each gold source and target sentence; a key with no letter or digit matches
    nothing."""
    return {match_key(s) for s, _ in gold} - {""}, {match_key(t) for _, t in gold} - {""}


def _kept(pairs: Iterable[Pair], src_tok: Callable[[str], str], tgt_tok: Callable[[str], str],
          keys: tuple[set[str], set[str]], counts: Counts) -> Iterator[Pair]:
    """``pairs`` prepared, without empty pairs, pairs with a TAB and pairs whose source or target matches a
    gold sentence (``keys``); ``counts`` counts each as they are read."""
    for src, tgt in pairs:
        counts["read"] += 1
        src, tgt = src_tok(src), tgt_tok(tgt)
        if not src or not tgt or "\t" in src + tgt:
            counts["empty"] += 1
        elif match_key(src) in keys[0] or match_key(tgt) in keys[1]:
            counts["equal_to_gold"] += 1
        else:
            yield src, tgt


def training_pairs(corpora: Sequence[Corpus], src_tok: Callable[[str], str], tgt_tok: Callable[[str], str],
                   gold: Sequence[Pair]) -> tuple[list[Pair], Counts]:
    """The corpora's pairs pretokenized, without empty pairs, pairs with a TAB, and pairs whose source or
    target matches a gold sentence (:func:`match_key`); the counts of each."""
    keys, counts = gold_keys(gold), {"read": 0, "empty": 0, "equal_to_gold": 0}
    kept = [pair for corpus in corpora for pair in _kept(corpus.pairs(), src_tok, tgt_tok, keys, counts)]
    counts["kept"] = len(kept)
    return kept, counts


def held_out_pairs(src: str | Path, tgt: str | Path, lines: int, src_tok: Callable[[str], str],
               tgt_tok: Callable[[str], str], gold: Sequence[Pair]) -> tuple[list[Pair], Counts]:
    """The first ``lines`` pairs of two line-aligned files prepared as :func:`training_pairs` prepares the
    training pairs, and the counts of the lines read to find them."""
    from attnmt.data.corpus import read_parallel

    if lines < 1:
        raise UserError(f"align-prepare --test-lines {lines}: give the number of test pairs to write, 1 or more "
                        f"(default {TEST_LINES})")
    counts = {"read": 0, "empty": 0, "equal_to_gold": 0}
    kept = list(itertools.islice(_kept(read_parallel(src, tgt), src_tok, tgt_tok, gold_keys(gold), counts), lines))
    if not kept:
        raise UserError(f"align-prepare --test {src} {tgt}: no test pairs left of {counts['read']} read (empty, or "
                        "matching a gold sentence); give other test files")
    counts["kept"] = len(kept)
    return kept, counts


def write_links(links, stem: Path, src_lang: str, tgt_lang: str, reverse=None) -> list[Path]:
    """(source, target) links as STEM.SRC-TGT.links and STEM.TGT-SRC.links, the latter turned to (target,
    source); the second holds ``reverse`` instead when given."""
    from attnmt.align.link_sets import format_links

    written = []
    for name, sets in ((f"{src_lang}-{tgt_lang}", links),
                       (f"{tgt_lang}-{src_lang}", ({(j, i) for i, j in a} for a in (reverse or links)))):
        path = Path(f"{stem}.{name}.links")
        write_text(path, "".join(format_links(a) + "\n" for a in sets), overwrite=True)
        written.append(path)
    return written


def read_manifest(data_dir: str | Path) -> dict:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise UserError(f"{path} not found: {data_dir} is not a folder that `attnmt align-prepare` wrote; run it "
                        "first, or give the folder it wrote")
    return json.loads(path.read_text(encoding="utf-8"))


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    write_text(path, "".join(f"{line}\n" for line in lines), overwrite=True)


def _write_gold(path: Path, given: str | Path, fold: bool) -> None:
    """The gold sentence file as given, accents folded when ``fold`` (a character mapping: every line and
    word stays where it was)."""
    from attnmt.data.pretokenize import fold_accents

    if not fold:
        write_bytes(path, Path(given).read_bytes(), overwrite=True)
        return
    with open(given, encoding="utf-8", newline="") as f:
        text = f.read()
    write_text(path, fold_accents(text), overwrite=True, newline="")


def _write_test(out: Path, given: tuple[str | Path, str | Path], held_out: tuple[list[Pair], Counts],
                src_lang: str, tgt_lang: str, say: Callable[[str], None]) -> dict:
    """test.SRC and test.TGT; what align.json says of them."""
    pairs, counts = held_out
    written = [f"test.{src_lang}", f"test.{tgt_lang}"]
    for k, name in enumerate(written):
        _write_lines(out / name, (pair[k] for pair in pairs))
    say(f"{counts['kept']} test pairs, the first of {given[0]} + {given[1]} ({counts['read']} lines read), in "
        f"{out}/{written[0]}, {written[1]}")
    return {"src": str(given[0]), "tgt": str(given[1]), "files": written, "pairs": counts}


def _write_eflomal_links(pairs: Sequence[Pair], out: Path, src_lang: str, tgt_lang: str,
                         say: Callable[[str], None]) -> str:
    from attnmt.align.eflomal import eflomal_align
    from attnmt.align.link_sets import symmetrize

    started = time.perf_counter()
    forward, reverse = eflomal_align([s.lower() for s, _ in pairs], [t.lower() for _, t in pairs])
    write_links(symmetrize(forward, reverse, "grow-diag-final-and"), out / "train", src_lang, tgt_lang)
    write_links(forward, out / "train.directional", src_lang, tgt_lang, reverse=reverse)
    say(f"eflomal's links of the training pairs in {out}/train.{src_lang}-{tgt_lang}.links, "
        f"train.{tgt_lang}-{src_lang}.links (each direction's own: train.directional.*) "
        f"({time.perf_counter() - started:.0f} s)")
    return "eflomal grow-diag-final-and"


def _preparers(pretokenize: str, src_lang: str, tgt_lang: str, fold: bool,
               user_dict: str | Path | None = None) -> list[Callable[[str], str]]:
    """Each side's pretokenizer, followed by fold_accents when ``fold``."""
    from attnmt.data.pretokenize import check_pair, fold_accents, pretokenizer

    check_pair(pretokenize, src_lang, tgt_lang)
    tokenizers = [pretokenizer(pretokenize, src_lang, user_dict), pretokenizer(pretokenize, tgt_lang, user_dict)]
    return [(lambda text, tok=tok: fold_accents(tok(text))) if fold else tok for tok in tokenizers]


def prepare_alignment(src_lang: str, tgt_lang: str, corpora: Sequence[Corpus], gold_src: str | Path,
                      gold_tgt: str | Path, out_dir: str | Path, pretokenize: str = "words",
                      links: bool = True, say: Callable[[str], None] = print, fold_accents: bool = False,
                      test: tuple[str | Path, str | Path] | None = None, test_lines: int = TEST_LINES,
                      user_dict: str | Path | None = None) -> dict:
    """Write the folder the module docstring describes; returns what ``align.json`` holds. ``test``: a
    held-out corpus's two line-aligned files, of which the first ``test_lines`` pairs are written. ``user_dict``:
    the segmenter's user dictionary (a segmenting ``pretokenize``, :mod:`attnmt.data.segment`)."""
    from attnmt.data.corpus import read_parallel
    from attnmt.data.pretokenize import segmenter_hint

    if src_lang == tgt_lang or not src_lang or not tgt_lang:
        raise UserError(f"--src-lang {src_lang!r} and --tgt-lang {tgt_lang!r}: give the two languages of the pair, "
                        "e.g. --src-lang de --tgt-lang en")
    if not corpora:
        raise UserError("align-prepare: no training text; give --tsv FILE, --tsv-swapped FILE or --parallel SRC TGT")
    src_tok, tgt_tok = _preparers(pretokenize, src_lang, tgt_lang, fold_accents, user_dict)
    gold = read_parallel(gold_src, gold_tgt)
    checks = {side: gold_check([p[k] for p in gold], pretokenize, lang, user_dict=user_dict)
              for k, (side, lang) in enumerate((("source", src_lang), ("target", tgt_lang)))}
    for side, check in checks.items():
        say(format_check(check, f"gold {side} ({gold_src if side == 'source' else gold_tgt})"))
    for hint in filter(None, (segmenter_hint(pretokenize, lang) for lang in (src_lang, tgt_lang))):
        say(hint)
    held_out = held_out_pairs(*test, test_lines, src_tok, tgt_tok, gold) if test else None  # before the long part
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pairs, counts = training_pairs(corpora, src_tok, tgt_tok, gold)
    if not pairs:
        raise UserError(f"align-prepare: no training pairs left of {counts['read']} read; check the corpora")
    with open_output(out / "train.tsv.gz", "wb", overwrite=True) as raw, \
            gzip.open(raw, "wt", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)
    _write_gold(out / f"gold.{src_lang}", gold_src, fold_accents)
    _write_gold(out / f"gold.{tgt_lang}", gold_tgt, fold_accents)
    folded = ", accents folded" if fold_accents else ""
    say(f"{counts['kept']} training pairs of {counts['read']} in {out / 'train.tsv.gz'} ({counts['empty']} empty, "
        f"{counts['equal_to_gold']} dropped: source or target matches a gold sentence); the gold sentences in "
        f"{out}/gold.{src_lang}, gold.{tgt_lang}{folded} ({time.perf_counter() - started:.0f} s)")
    if user_dict is not None:  # the configs name the copy: the folder holds everything its models read
        write_bytes(out / USER_DICT, Path(user_dict).read_bytes(), overwrite=True)
    manifest = {"src_lang": src_lang, "tgt_lang": tgt_lang, "pretokenize": pretokenize,
                "user_dict": None if user_dict is None else USER_DICT, "fold_accents": fold_accents,
                "corpora": [c.name() + (" (target first)" if c.swapped else "") for c in corpora],
                "gold_src": str(gold_src), "gold_tgt": str(gold_tgt), "gold_pairs": len(gold), "pairs": counts,
                "gold_check": checks, "test": None, "links": None}
    if held_out:
        manifest["test"] = _write_test(out, test, held_out, src_lang, tgt_lang, say)
    if links:
        manifest["links"] = _write_eflomal_links(pairs, out, src_lang, tgt_lang, say)
    write_text(out / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", overwrite=True)
    return manifest
