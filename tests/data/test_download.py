"""`attnmt data`: Multi30k (--from a local folder, checksums, no overwriting, network errors) and Tatoeba files."""

from __future__ import annotations

import gzip
import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.data.download import MULTI30K_SHA256, download_multi30k, fetch_tatoeba
from attnmt.errors import UserError

MULTI30K = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "multi30k"
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


# --- Tatoeba ------------------------------------------------------------------------------------------------------

# manythings.org's layout: a BOM, English TAB Chinese TAB attribution, an empty last line.
TATOEBA_TEXT = "\ufeffHi.\t嗨。\tCC-BY 2.0 (France) #1 & #2\nRun.\t你用跑的。\tCC-BY 2.0 (France) #3 & #4\n\n"


def _zip(path: Path, members: dict[str, str]) -> Path:
    from zipfile import ZipFile

    with ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


@pytest.mark.parametrize("layout", ["txt", "zip", "tsv.gz", "folder"])
def test_tatoeba_from_a_local_copy_is_written_unchanged(tmp_path: Path, layout: str) -> None:
    if layout == "txt":
        source = tmp_path / "cmn.txt"
        source.write_text(TATOEBA_TEXT, encoding="utf-8")
    elif layout == "zip":
        source = _zip(tmp_path / "cmn-eng.zip", {"cmn.txt": TATOEBA_TEXT, "_about.txt": "about"})
    elif layout == "tsv.gz":
        source = tmp_path / "mine.tsv.gz"
        source.write_bytes(gzip.compress(TATOEBA_TEXT.encode("utf-8")))
    else:
        source = tmp_path / "downloads"
        source.mkdir()
        _zip(source / "cmn-eng.zip", {"cmn.txt": TATOEBA_TEXT})
    path = fetch_tatoeba("cmn-eng", tmp_path / "data" / "tatoeba", source=source)
    assert path == tmp_path / "data" / "tatoeba" / "cmn-eng.tsv.gz"
    assert gzip.decompress(path.read_bytes()).decode("utf-8") == TATOEBA_TEXT
    assert [p.name for p in path.parent.iterdir()] == ["cmn-eng.tsv.gz"]  # no .part left


def test_tatoeba_command_line_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "fra.txt"
    source.write_text("Go.\tVa !\n", encoding="utf-8")
    dest = tmp_path / "tatoeba"
    assert main(["data", "tatoeba", "fra-eng", str(dest), "--from", str(source)]) == 0
    assert gzip.decompress((dest / "fra-eng.tsv.gz").read_bytes()) == b"Go.\tVa !\n"
    assert main(["data", "tatoeba", "fra-eng", str(dest), "--from", str(source)]) == 2  # not replaced ...
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert main(["data", "tatoeba", "fra-eng", str(dest), "--from", str(source), "--overwrite"]) == 0  # unless asked
    for argv, message in [
        (["data", "tatoeba", str(dest)], "data tatoeba takes PAIR DEST"),
        (["data", "tatoeba", "french", str(dest)], "is not of the form LLL-eng"),
        (["data", "wikipedia", str(dest)], "unknown dataset 'wikipedia'; available: multi30k, tatoeba"),
        (["data", "tatoeba", "deu-eng", str(dest), "--from", str(tmp_path / "none")], "does not exist"),
        (["data", "tatoeba", "deu-eng", str(dest), "--from", str(tmp_path)], "holds none of deu-eng.tsv.gz, deu.txt"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_tatoeba_refuses_what_is_not_a_pair_file(tmp_path: Path) -> None:
    page = tmp_path / "cmn.txt"
    page.write_text("<html>Please use a browser</html>\n", encoding="utf-8")
    with pytest.raises(UserError, match="first line has no TAB"):
        fetch_tatoeba("cmn-eng", tmp_path / "out", source=page)
    with pytest.raises(UserError, match="holds no cmn.txt .it holds fra.txt"):
        fetch_tatoeba("cmn-eng", tmp_path / "out", source=_zip(tmp_path / "x.zip", {"fra.txt": TATOEBA_TEXT}))
    assert not (tmp_path / "out" / "cmn-eng.tsv.gz").exists()


def test_tatoeba_download_sends_a_browser_agent_and_unzips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zipped = _zip(tmp_path / "site.zip", {"cmn.txt": TATOEBA_TEXT}).read_bytes()
    requests = []

    def fake_urlopen(request: urllib.request.Request, timeout: float) -> io.BytesIO:
        requests.append(request)
        return io.BytesIO(zipped)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    path = fetch_tatoeba("cmn-eng", tmp_path / "dest", progress=False)
    assert requests[0].full_url == "https://www.manythings.org/anki/cmn-eng.zip"
    assert "Mozilla" in requests[0].get_header("User-agent")
    assert gzip.decompress(path.read_bytes()).decode("utf-8") == TATOEBA_TEXT
    assert [p.name for p in (tmp_path / "dest").iterdir()] == ["cmn-eng.tsv.gz"]

    monkeypatch.setattr(urllib.request, "urlopen", lambda request, timeout: io.BytesIO(b"<html>blocked</html>"))
    with pytest.raises(UserError, match="not a zip file.*--from"):
        fetch_tatoeba("fra-eng", tmp_path / "dest", progress=False)
    assert [p.name for p in (tmp_path / "dest").iterdir()] == ["cmn-eng.tsv.gz"]
