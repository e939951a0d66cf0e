"""Public corpora for the recipes: Multi30k with checksums, and a Tatoeba pair file of manythings.org.

The files are the gzip-compressed raw text of ``data/task1/raw/`` in the public
``multi30k/dataset`` repository (Elliott et al. 2016): ``{train,val,test_2016_flickr}.{en,de,fr,cs}.gz``.
Their SHA-256 sums were taken from copies of commit a3d2e0d26b56; every file, downloaded or
copied, is checked against them, so a truncated download or a different release is an error
rather than a silently different benchmark.

Tatoeba's sentence pairs, as manythings.org/anki exports them for one language and English
(``cmn-eng.zip`` holding ``cmn.txt``: ``English TAB other language TAB attribution``), are updated
there from time to time, so they have no checksum: the file is checked to be tab-separated text and
written unchanged, gzip-compressed, as ``DEST/<pair>.tsv.gz``, where the recipes' configs read it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO
from zipfile import BadZipFile, ZipFile

from tqdm import tqdm

from attnmt.errors import UserError

__all__ = ["MULTI30K_LANGUAGES", "MULTI30K_SHA256", "MULTI30K_SPLITS", "MULTI30K_URL", "TATOEBA_URL",
           "download_multi30k", "fetch_tatoeba"]

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")
MULTI30K_SHA256: dict[str, str] = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}

TATOEBA_URL = "https://www.manythings.org/anki/{pair}.zip"
_TATOEBA_PAIR = re.compile(r"^([a-z]{3})-eng$")

_CHUNK = 1 << 16
_TIMEOUT_S = 60


def download_multi30k(
    dest: str | Path,
    from_dir: str | Path | None = None,
    progress: bool = True,
    overwrite: bool = False,
    languages: Sequence[str] = MULTI30K_LANGUAGES,
) -> list[Path]:
    """Put the Multi30k task-1 raw files for ``languages`` into ``dest`` and return their paths.

    Without ``from_dir`` the files are downloaded (with a progress bar when ``progress``); with it
    they are copied from that folder, which must hold them under the official names. Every file is
    checked against :data:`MULTI30K_SHA256`. A file already in ``dest`` is kept when its checksum
    matches and is an error otherwise, unless ``overwrite`` is set. Raises UserError for missing
    source files (all listed), a checksum mismatch (the file named) or a network failure.
    """
    unknown = sorted(set(languages) - set(MULTI30K_LANGUAGES))
    if unknown or not languages:
        raise UserError(
            f"Multi30k has no language(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(MULTI30K_LANGUAGES)}"
        )
    names = [f"{s}.{lang}.gz" for s in MULTI30K_SPLITS for lang in MULTI30K_LANGUAGES if lang in languages]
    dest = Path(dest)
    source = Path(from_dir) if from_dir is not None else None
    if source is not None:
        _check_present(source, names)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {dest}: {e.strerror or e}; choose another folder") from None

    paths = []
    for name in names:
        target = dest / name
        paths.append(target)
        if target.exists() and not overwrite:
            if _sha256_file(target) != MULTI30K_SHA256[name]:
                raise UserError(
                    f"{target} already exists with a different checksum than the official "
                    f"{name}; delete it or pass overwrite to replace it"
                )
            continue  # already there and correct: downloading again would change nothing
        if source is not None:
            _copy_verified(source / name, target, name)
        else:
            _download_verified(MULTI30K_URL.format(name=name), target, name, progress)
    return paths


def _check_present(source: Path, names: Iterable[str]) -> None:
    if not source.is_dir():
        raise UserError(f"--from folder {source} does not exist; give the folder with the Multi30k .gz files")
    missing = [n for n in names if not (source / n).is_file()]
    if missing:
        raise UserError(
            f"{source} lacks {len(missing)} Multi30k file(s): {', '.join(missing)}; "
            "copy them there under these names (from data/task1/raw/ of multi30k/dataset)"
        )


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(path: Path | str, name: str, got: str) -> UserError:
    return UserError(
        f"checksum mismatch for {path}: SHA-256 {got[:12]}... is not that of the official {name} "
        f"({MULTI30K_SHA256[name][:12]}...); get the unchanged file from multi30k/dataset"
    )


def _copy_verified(src: Path, target: Path, name: str) -> None:
    """Copy through a temporary file so that ``target`` only ever appears complete and checked."""
    got = _sha256_file(src)
    if got != MULTI30K_SHA256[name]:
        raise _mismatch(src, name, got)
    part = target.with_name(target.name + ".part")
    shutil.copyfile(src, part)
    os.replace(part, target)


def _download_verified(url: str, target: Path, name: str, progress: bool) -> None:
    part = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response, part.open("wb") as out:
            got = _stream(response, out, name, progress)
    except (urllib.error.URLError, OSError) as e:  # HTTPError, timeouts and resets are OSErrors
        part.unlink(missing_ok=True)
        reason = getattr(e, "reason", None) or e
        raise UserError(
            f"could not download {url} ({reason}); fetch the files elsewhere and use --from DIR"
        ) from None
    if got != MULTI30K_SHA256[name]:
        part.unlink(missing_ok=True)
        raise _mismatch(url, name, got)
    os.replace(part, target)


def _stream(response: BinaryIO, out: BinaryIO, name: str, progress: bool) -> str:
    """Copy ``response`` to ``out`` in chunks, hashing on the way; returns the SHA-256."""
    total = getattr(response, "length", None)
    digest = hashlib.sha256()
    with tqdm(total=total, unit="B", unit_scale=True, desc=name, disable=not progress, leave=False) as bar:
        for chunk in iter(lambda: response.read(_CHUNK), b""):
            digest.update(chunk)
            out.write(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


# --- Tatoeba ------------------------------------------------------------------------------------------------------


def fetch_tatoeba(pair: str, dest: str | Path, source: str | Path | None = None, overwrite: bool = False,
                  progress: bool = True) -> Path:
    """Write manythings.org's Tatoeba file for ``pair`` (``cmn-eng``, ``fra-eng``, ...) to ``DEST/<pair>.tsv.gz``.

    ``source`` is a local copy: the site's ``<pair>.zip``, its ``<lang>.txt``, a ``.tsv.gz`` (copied
    as it is), or a folder holding one of them under those names; without it the zip is downloaded.
    The text must be tab-separated (English, then the other language). An existing target is an
    error unless ``overwrite``. Returns the path written; raises UserError naming what is wrong.
    """
    m = _TATOEBA_PAIR.match(pair)
    if not m:
        raise UserError(f"Tatoeba pair {pair!r} is not of the form LLL-eng; use manythings.org's name, "
                        "e.g. cmn-eng, fra-eng or deu-eng")
    lang = m.group(1)
    dest = Path(dest)
    target = dest / f"{pair}.tsv.gz"
    if target.exists() and not overwrite:
        raise UserError(f"{target} already exists; pass --overwrite to replace it")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {dest}: {e.strerror or e}; choose another folder") from None
    part = target.with_name(target.name + ".part")
    try:
        if source is None:
            zipped = dest / f"{pair}.zip.part"
            try:
                _download_tatoeba(TATOEBA_URL.format(pair=pair), zipped, pair, progress)
                url = TATOEBA_URL.format(pair=pair)
                _write_gzip(_text_from_zip(zipped, lang, shown=url), part, shown=f"{lang}.txt of {url}")
            finally:
                zipped.unlink(missing_ok=True)
        else:
            _from_local(_local_tatoeba(Path(source), pair, lang), lang, part)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def _local_tatoeba(source: Path, pair: str, lang: str) -> Path:
    """The file of a local copy: ``source`` itself, or the first of the site's names found in that folder."""
    if source.is_file():
        return source
    if not source.is_dir():
        raise UserError(f"--from {source} does not exist; give manythings.org's {pair}.zip, its {lang}.txt "
                        "or a .tsv.gz of it, or a folder holding one")
    names = [f"{pair}.tsv.gz", f"{lang}.txt", f"{pair}.zip", f"{pair}.tsv", f"{pair}.txt"]
    for name in names:
        if (source / name).is_file():
            return source / name
    raise UserError(f"{source} holds none of {', '.join(names)}; download {TATOEBA_URL.format(pair=pair)} there")


def _from_local(path: Path, lang: str, part: Path) -> None:
    if path.suffix == ".zip":
        _write_gzip(_text_from_zip(path, lang, shown=str(path)), part, shown=f"{lang}.txt of {path}")
    elif path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as f:
                _check_tab_separated(f.read(_CHUNK), str(path))
        except (OSError, EOFError) as e:
            raise UserError(f"{path} is not a readable gzip file ({e}); give the .zip or .txt instead") from None
        shutil.copyfile(path, part)
    else:
        _write_gzip(path.read_bytes(), part, shown=str(path))


def _text_from_zip(path: Path, lang: str, shown: str) -> bytes:
    member = f"{lang}.txt"
    try:
        with ZipFile(path) as z:
            if member not in z.namelist():
                raise UserError(f"{shown} holds no {member} (it holds {', '.join(z.namelist()) or 'nothing'}); "
                                "is it manythings.org's file for this pair?")
            return z.read(member)
    except BadZipFile:
        raise UserError(f"{shown} is not a zip file; the site may have sent a web page: download it in a "
                        "browser and pass it with --from") from None


def _check_tab_separated(head: bytes, shown: str) -> None:
    first = head.decode("utf-8-sig", errors="replace").lstrip("\n").split("\n", 1)[0]
    if "\t" not in first:
        raise UserError(f"{shown} is not a Tatoeba pair file: its first line has no TAB "
                        f"({first[:60]!r}); expected English TAB the other language")


def _write_gzip(data: bytes, part: Path, shown: str) -> None:
    _check_tab_separated(data[:_CHUNK], shown)
    with gzip.open(part, "wb") as f:
        f.write(data)


def _download_tatoeba(url: str, target: Path, name: str, progress: bool) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "Mozilla/5.0 (attnmt data)"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response, target.open("wb") as out:
            _stream(response, out, name, progress)
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        raise UserError(f"could not download {url} ({reason}); download it in a browser and pass it with "
                        "--from FILE") from None
