"""Word segmenters for languages written without spaces between words: Chinese and Japanese.

A word-alignment gold set of such a language is segmented into words (the Penn Chinese Treebank's
``印 尼 重申 反对``), and raw text has no spaces to split at. Two segmenters made for these languages
are registered in :data:`SEGMENTERS`, each an optional extra of attnmt:

* ``jieba`` (Chinese, ``pip install 'attnmt[zh]'``): jieba's dictionary and its most probable path through
  it, without jieba's HMM guesses of new words (HMM off fits the Penn Chinese Treebank convention of the
  NIST 2002 gold set of DeNero & Macherey better: it changes 140 of its 150 lines, against 143 with the HMM, and
  82% of its words are the gold's, against 79%); unknown names fall apart into characters, as that gold writes
  them;
* ``mecab`` (Japanese, ``pip install 'attnmt[ja]'``): MeCab with the UniDic dictionary of unidic-lite
  (fugashi), UniDic's short units (``私 たち は``).

:func:`cutter` loads one, with an optional user dictionary (``--user-dict FILE``; jieba's format, one
word a line, optionally followed by a frequency and a part-of-speech tag): jieba reads it as it reads
its own dictionary, so a listed word is kept whole, and a frequency of 0 removes a word (``我爱你 0``
splits 我爱你); mecab keeps each listed word whole and segments the text between them. A segmenter is
deterministic: the same text, dictionary and user dictionary give the same words. jieba's dictionary takes
most of a second to load (from the cache jieba keeps in the temporary folder), once per process and user
dictionary.

:func:`script_runs` finds what a segmenter cuts: runs of the language's script (Han characters; for
Japanese, kana too); digits, Latin letters and punctuation are left to the ``words`` rules of
:mod:`attnmt.data.pretokenize`. :func:`unspaced` writes segmented text back as the language writes it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError

__all__ = ["SEGMENTERS", "Segmenter", "cutter", "language", "script_runs", "segmenter_for", "unspaced"]

_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"  # 々 〇 and the ideographs
_KANA = "\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # hiragana, katakana (ー), half-width katakana
# Characters of the scripts written without spaces, and the punctuation and full-width forms around them
_UNSPACED_CHAR = f"[{_HAN}{_KANA}\u3000-\u303f\uff00-\uffef]"
_SPACE_BESIDE_UNSPACED = re.compile(rf"(?<={_UNSPACED_CHAR})[ \t]+|[ \t]+(?={_UNSPACED_CHAR})")


@dataclass(frozen=True)
class Segmenter:
    """A segmenter: the language it segments, the characters it cuts, what to install for it."""

    name: str
    language: str  # the language code it segments (language() of the pair's code)
    language_name: str
    script: str  # a character class: the runs of these characters are cut into words
    packages: str  # what it imports, named in the error when missing
    extra: str  # attnmt's optional extra that installs them

    def install_hint(self) -> str:
        return f"pip install 'attnmt[{self.extra}]'"


SEGMENTERS = {
    "jieba": Segmenter("jieba", "zh", "Chinese", _HAN, "jieba", "zh"),
    "mecab": Segmenter("mecab", "ja", "Japanese", _HAN + _KANA, "fugashi unidic-lite", "ja"),
}
# The codes a language goes by (ISO 639-1, 639-3, 639-2/B), each as language() returns it
_CODES = {"zh": "zh", "cmn": "zh", "zho": "zh", "chi": "zh", "ja": "ja", "jpn": "ja"}


def language(code: str) -> str:
    """``code`` as the segmenters know it: lowercase, without a region or script (``zh-CN``, ``zh_Hans`` -> zh),
    ISO 639-3 and 639-2 codes of Chinese and Japanese as their two letters (cmn -> zh, jpn -> ja)."""
    base = re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]
    return _CODES.get(base, base)


def segmenter_for(lang: str) -> Segmenter | None:
    """The segmenter of the language ``lang`` (any of its codes), None for a language written with spaces."""
    return next((s for s in SEGMENTERS.values() if s.language == language(lang)), None)


def unspaced(text: str) -> str:
    """``text`` without the spaces beside a character of a script written without them (Han, kana, their
    punctuation and full-width forms): segmented text as the language writes it (``印 尼 重申`` -> ``印尼重申``,
    ``APEC 会议`` -> ``APEC会议``); spaces between other words stay."""
    return _SPACE_BESIDE_UNSPACED.sub("", text).strip()


def script_runs(text: str, segmenter: Segmenter) -> list[tuple[str, bool]]:
    """``text`` as consecutive runs, each with whether it is of the segmenter's script (to be cut into words)."""
    return [(run, k % 2 == 1) for k, run in enumerate(re.split(f"([{segmenter.script}]+)", text)) if run]


def cutter(name: str, user_dict: str | Path | None = None) -> Callable[[str], list[str]]:
    """The segmenter ``name``, loaded (with its ``user_dict``), as a function of a run of its script to its
    words; a UserError naming the extra to install when its packages are missing."""
    if name not in SEGMENTERS:
        raise UserError(f"segmenter {name!r} is unknown; allowed: {' | '.join(SEGMENTERS)}")
    path = str(Path(user_dict).expanduser()) if user_dict is not None else None
    entries = _read_user_dict(path) if path is not None else []
    return _jieba(path) if name == "jieba" else _mecab(entries)


def _missing(name: str, error: ImportError) -> UserError:
    s = SEGMENTERS[name]
    return UserError(f"the {name} pretokenizer segments {s.language_name} with {s.packages}, and "
                     f"{error.name or s.packages} is not installed; {s.install_hint()}")


def _read_user_dict(path: str) -> list[str]:
    """The words of a user dictionary (the first field of each line), checked: a readable UTF-8 text file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--user-dict {path}: no such file; give a text file of one word a line") from None
    except UnicodeDecodeError:
        raise UserError(f"--user-dict {path} is not UTF-8 text; save it as UTF-8, one word a line") from None
    except OSError as e:
        raise UserError(f"--user-dict {path}: cannot read it ({e.strerror or e}); check the file") from None
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def _jieba(user_dict: str | None) -> Callable[[str], list[str]]:
    try:
        import jieba  # noqa: F401 (imported here, so that a missing jieba is the error, not a cached tokenizer)
    except ImportError as e:
        raise _missing("jieba", e) from None
    stat = Path(user_dict).stat() if user_dict is not None else None
    return _jieba_cut(user_dict, stat and (stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _jieba_cut(user_dict: str | None, version: tuple[int, int] | None) -> Callable[[str], list[str]]:
    """jieba with ``user_dict``, loaded once per version of the file (its dictionary takes most of a second)."""
    import jieba

    logging.getLogger("jieba").setLevel(logging.WARNING)  # not its "Building prefix dict ..." on every load
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    if user_dict is not None:
        try:
            tokenizer.load_userdict(user_dict)
        except ValueError as e:  # jieba's "invalid dictionary entry in FILE at Line N: ..."
            raise UserError(f"--user-dict {user_dict}: {e}; write one word a line, optionally followed by a "
                            "frequency and a part-of-speech tag (jieba's format)") from None
    return lambda run: list(tokenizer.cut(run, HMM=False))


def _mecab(keep: list[str]) -> Callable[[str], list[str]]:
    try:
        import fugashi
        import unidic_lite
    except ImportError as e:
        raise _missing("mecab", e) from None
    dicdir = unidic_lite.DICDIR  # unidic-lite's UniDic, named: the same words whatever other dictionary is installed
    tagger = fugashi.Tagger(f'-r "{Path(dicdir) / "mecabrc"}" -d "{dicdir}"')
    whole = re.compile("(" + "|".join(map(re.escape, sorted(set(keep), key=len, reverse=True))) + ")") if keep \
        else None

    def cut(run: str) -> list[str]:
        parts = whole.split(run) if whole else [run]  # the user's words at odd places, kept whole
        return [w for k, part in enumerate(parts) if part
                for w in ([part] if k % 2 else [word.surface for word in tagger(part)])]

    return cut
