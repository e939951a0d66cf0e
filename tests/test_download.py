"""Multi30k download: --from a local folder, checksums, no overwriting, network errors."""

from __future__ import annotations

import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from attnmt.data.download import MULTI30K_SHA256, download_multi30k
from attnmt.errors import UserError

MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not MULTI30K.is_dir(), reason="the real Multi30k files in ../shared/data/multi30k are not present"
)


def test_checksum_table_is_complete() -> None:
    assert len(MULTI30K_SHA256) == 12
    assert all(len(h) == 64 for h in MULTI30K_SHA256.values())


def test_from_dir_lists_missing_files(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.en.gz").write_bytes(b"x")
    with pytest.raises(UserError) as e:
        download_multi30k(tmp_path / "dest", from_dir=source, languages=["en", "de"])
    message = str(e.value)
    assert "lacks 5 Multi30k file(s)" in message
    assert "train.de.gz" in message and "test_2016_flickr.en.gz" in message
    assert "train.en.gz," not in message


def test_from_dir_checksum_mismatch_names_file(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in MULTI30K_SHA256:
        (source / name).write_bytes(b"not the real file")
    with pytest.raises(UserError, match=r"checksum mismatch for .*train\.en\.gz"):
        download_multi30k(tmp_path / "dest", from_dir=source, progress=False)
    assert not (tmp_path / "dest" / "train.en.gz").exists()


def test_unknown_language(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no language"):
        download_multi30k(tmp_path, from_dir=tmp_path, languages=["xx"])


def test_network_error_suggests_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(UserError, match=r"could not download .*train\.en\.gz.*--from DIR"):
        download_multi30k(tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []  # no partial files left behind


def test_download_checksum_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"an HTML error page"))
    with pytest.raises(UserError, match=r"checksum mismatch for https://\S+/train\.en\.gz"):
        download_multi30k(tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


@needs_multi30k
def test_download_with_correct_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    urls: list[str] = []

    def fake_urlopen(url: str, timeout: float) -> io.BytesIO:
        urls.append(url)
        return io.BytesIO((MULTI30K / url.rsplit("/", 1)[1]).read_bytes())

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    paths = download_multi30k(tmp_path, progress=False, languages=["en", "de"])
    assert [p.name for p in paths] == [
        f"{s}.{lang}.gz" for s in ("train", "val", "test_2016_flickr") for lang in ("en", "de")
    ]
    assert all(u.startswith("https://raw.githubusercontent.com/multi30k/dataset/") for u in urls)
    assert all(p.read_bytes() == (MULTI30K / p.name).read_bytes() for p in paths)


@needs_multi30k
def test_from_dir_with_the_real_files(tmp_path: Path) -> None:
    dest = tmp_path / "multi30k"
    paths = download_multi30k(dest, from_dir=MULTI30K, progress=False)
    assert len(paths) == 12 and all(p.is_file() for p in paths)
    assert sorted(p.name for p in dest.iterdir()) == sorted(MULTI30K_SHA256)
    # a second run keeps the verified files
    assert download_multi30k(dest, from_dir=MULTI30K, progress=False) == paths


@needs_multi30k
def test_existing_different_file_is_not_overwritten(tmp_path: Path) -> None:
    dest = tmp_path / "multi30k"
    dest.mkdir()
    (dest / "val.en.gz").write_bytes(b"my own file")
    with pytest.raises(UserError, match=r"val\.en\.gz already exists"):
        download_multi30k(dest, from_dir=MULTI30K, progress=False, languages=["en"])
    assert (dest / "val.en.gz").read_bytes() == b"my own file"
    download_multi30k(dest, from_dir=MULTI30K, progress=False, languages=["en"], overwrite=True)
    assert (dest / "val.en.gz").read_bytes() == (MULTI30K / "val.en.gz").read_bytes()
