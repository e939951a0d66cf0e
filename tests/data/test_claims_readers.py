"""The corpus readers accept what they promise to accept, and return what the file holds.

tests/data/test_properties.py shows that no input crashes a reader; a reader that refused every file
with a UserError would pass it. Here valid files must be read, and the lines must be the ones the
test wrote, cleaned by the documented rule (written out again below, not taken from the reader).
"""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.data.corpus import read_lines, read_parallel, read_tsv

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def documented_cleaning(line: str) -> str:
    """read_lines' docstring: control characters other than TAB become spaces (line and paragraph
    separators too: they would end the line in other tools)."""
    return "".join(" " if (unicodedata.category(c) in ("Cc", "Zl", "Zp") and c != "\t") else c for c in line)


def test_plain_gzip_bom_and_crlf_files_are_read(tmp_path):
    import gzip

    (tmp_path / "a.txt").write_bytes("\ufeffein Haus\r\nzwei\x07Häuser\n\ndrei\n".encode("utf-8"))
    assert read_lines(tmp_path / "a.txt") == ["ein Haus", "zwei Häuser", "", "drei"]
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("un\ndeux")
    assert read_lines(tmp_path / "b.txt.gz") == ["un", "deux"]
    (tmp_path / "en").write_text("a house\nhouses\n", encoding="utf-8")
    (tmp_path / "de").write_text("ein Haus\nHäuser\n", encoding="utf-8")
    assert read_parallel(tmp_path / "en", tmp_path / "de") == [("a house", "ein Haus"), ("houses", "Häuser")]


def test_tatoeba_style_tsv_is_read(tmp_path):
    path = tmp_path / "deu-eng.tsv"
    path.write_bytes("\ufeffGo.\tGeh.\tCC-BY 2.0 (France) Attribution\nHi.\tHallo!\textra\n\n\n".encode("utf-8"))
    assert read_tsv(path) == [("Go.", "Geh."), ("Hi.", "Hallo!")]
    assert read_tsv(path, src_col=1, tgt_col=0) == [("Geh.", "Go."), ("Hallo!", "Hi.")]


# every code point but surrogates, NUL (a binary file, refused by design), LF (the line end) and the BOM
line_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\n\ufeff"), max_size=40)


@FAST
@given(lines=st.lists(line_text, max_size=8), final_newline=st.booleans())
def test_any_utf8_text_without_nul_is_read_line_for_line(tmp_path_factory, lines, final_newline):
    path = tmp_path_factory.mktemp("r") / "in.txt"
    text = "".join(line + "\n" for line in lines)
    if not final_newline and lines and lines[-1]:
        text = text[:-1]  # the last line unterminated
    path.write_bytes(text.encode("utf-8"))
    expected = [documented_cleaning(line[:-1] if line.endswith("\r") else line) for line in lines]
    assert read_lines(path) == expected


field = st.text(st.characters(categories=["L", "N", "P"], exclude_characters="\ufeff"), min_size=1, max_size=15)


@FAST
@given(rows=st.lists(st.tuples(field, field), min_size=1, max_size=8))
def test_any_two_column_tsv_is_read_pair_for_pair(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("t") / "in.tsv"
    path.write_bytes("".join(f"{s}\t{t}\n" for s, t in rows).encode("utf-8"))
    assert read_tsv(path) == [(documented_cleaning(s), documented_cleaning(t)) for s, t in rows]
