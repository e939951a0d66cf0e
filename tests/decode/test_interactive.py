"""The live translate loop (attnmt.decode.interactive): a terminal line by line, a pipe in groups of the lines ready."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys

import pytest

from attnmt.decode.interactive import in_groups, is_live, live_lines, ready_groups
from attnmt.decode.translator import Translator
from attnmt.errors import UserError
from tests.cli.test_cli import assert_user_error, run

LINES = ["a b c", "d e", "", "c a b d", "e"]


def batch_output(capsys, model, tmp_path, *args):
    source = tmp_path / "batch.txt"
    source.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(model), "--input", str(source), "--beam", "2", *args)
    assert code == 0, err
    return out.splitlines()


def test_a_pipe_gets_each_translation_before_it_sends_the_next_line(capsys, tiny_model, tmp_path):
    expected = batch_output(capsys, tiny_model, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered, as usual
    proc = subprocess.Popen([sys.executable, "-m", "attnmt", "translate", "--model", str(tiny_model), "--beam", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        for line, translation in zip(LINES, expected):
            proc.stdin.write(line.encode("utf-8") + b"\n")
            proc.stdin.flush()
            # the pipe stays open: only a flushed answer can arrive (the timeout guards against a hang)
            assert select.select([proc.stdout], [], [], 120)[0], f"no answer to {line!r} while stdin is open"
            assert proc.stdout.readline().decode("utf-8").rstrip("\n") == translation
        proc.stdin.close()  # Ctrl-D
        assert proc.wait(timeout=120) == 0
        assert proc.stdout.read() == b"" and b"Traceback" not in proc.stderr.read()
    finally:
        proc.kill() if proc.poll() is None else None


def test_a_pipe_written_at_once_gives_the_file_translations(capsys, tiny_model, tmp_path, monkeypatch):
    expected = batch_output(capsys, tiny_model, tmp_path)
    read, write = os.pipe()
    os.write(write, "".join(line + "\n" for line in LINES).encode("utf-8"))
    os.close(write)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(read, "rb")))
    code, out, err = run(capsys, "translate", "--model", str(tiny_model), "--beam", "2")
    assert code == 0, err
    assert out.splitlines() == expected


def test_a_group_takes_the_lines_ready_up_to_its_size():
    read, write = os.pipe()
    with os.fdopen(read, "rb", buffering=0) as stream, os.fdopen(write, "wb", buffering=0) as writer:
        groups = ready_groups(stream, 3)
        writer.write(b"one\n")
        assert next(groups) == ["one"]  # a slow writer's line is not held back for more
        writer.write(b"two\nthree\nfour\nfive\nsix\nseven\nhalf")  # already in the pipe: read together
        assert next(groups) == ["two", "three", "four"]
        assert next(groups) == ["five", "six", "seven"]
        writer.write(b" done\n")
        assert next(groups) == ["half done"]
        writer.write(b"last, no line end")
        writer.close()
        assert list(groups) == [["last, no line end"]]


def test_ready_lines_are_checked_like_a_file(tmp_path):
    def groups(data: bytes) -> list[list[str]]:
        path = tmp_path / "input"
        path.write_bytes(data)
        with path.open("rb") as f:
            return list(ready_groups(f, 2))

    assert groups(b"\xef\xbb\xbfone\r\ntwo\x01\nthree") == [["one", "two "], ["three"]]
    with pytest.raises(UserError, match=r"<stdin>:2 is not valid UTF-8 \(byte 0xff at byte column 3\)"):
        groups(b"ok\nab\xff\n")
    with pytest.raises(UserError, match="<stdin>:3 looks binary"):
        groups(b"a\nb\nc\x00\n")
    with pytest.raises(UserError, match="gzip"):
        groups(b"\x1f\x8b\x08\x00")
    limit = 1 << 20
    assert groups(b"a\n" + b"x" * limit + b"\n") == [["a", "x" * limit]]
    for tail in (b"\n", b""):  # a finished line, and one that never ends
        with pytest.raises(UserError, match="<stdin>:2 is longer than 1,048,576 bytes"):
            groups(b"a\n" + b"x" * (limit + 1) + tail)


def calls_of_translate(monkeypatch) -> list[int]:
    """The number of sentences of each Translator.translate call."""
    sizes, translate = [], Translator.translate

    def counted(self, sentences, *args, **kwargs):
        sizes.append(len(sentences))
        return translate(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", counted)
    return sizes


def test_a_terminal_is_line_by_line_and_a_pipe_in_groups(capsys, tiny_model, monkeypatch):
    pty = pytest.importorskip("pty")
    data = "".join(line + "\n" for line in LINES).encode("utf-8")
    master, slave = pty.openpty()
    os.write(master, data + b"\x04")  # typed ahead, then Ctrl-D
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(slave, "rb")))
    sizes = calls_of_translate(monkeypatch)
    code, terminal, err = run(capsys, "translate", "--model", str(tiny_model), "--beam", "2")
    os.close(master)
    assert code == 0, err
    assert sizes == [1] * len(LINES)
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(read, "rb")))
    sizes.clear()
    code, piped, err = run(capsys, "translate", "--model", str(tiny_model), "--beam", "2")
    assert code == 0, err
    assert sizes == [len(LINES)] and piped == terminal


def test_groups_are_handled_as_soon_as_their_last_line_is_read():
    events = []

    def lines():
        for i in range(5):
            events.append(f"read {i}")
            yield str(i)

    assert in_groups(lines(), 2, lambda group, first: events.append(f"handle {first}:{group}")) == 5
    assert events == ["read 0", "read 1", "handle 0:['0', '1']", "read 2", "read 3", "handle 2:['2', '3']", "read 4",
                      "handle 4:['4']"]
    with pytest.raises(UserError, match="buffer=0"):
        in_groups(iter(LINES), 0, lambda group, first: None)


@pytest.mark.parametrize("buffer", ["1", "2", "4"])
def test_buffer_gives_the_batch_translations_and_n_best_numbering(capsys, tiny_model, tmp_path, monkeypatch, buffer):
    expected = batch_output(capsys, tiny_model, tmp_path, "--n-best", "2")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(l + "\n" for l in LINES).encode())))
    code, out, err = run(capsys, "translate", "--model", str(tiny_model), "--beam", "2", "--n-best", "2",
                         "--buffer", buffer)
    assert code == 0, err
    # The same numbering and hypotheses; the scores of sentences decoded in other batches may differ in the
    # last printed digit (padding changes the shapes of the batch's matrix products).
    got = [line.rsplit(" ||| ", 1) for line in out.splitlines()]
    want = [line.rsplit(" ||| ", 1) for line in expected]
    assert [g[0] for g in got] == [w[0] for w in want]
    assert [float(g[1]) for g in got] == pytest.approx([float(w[1]) for w in want], abs=2e-4)


def test_live_lines_are_checked_like_a_file():
    assert list(live_lines(io.BytesIO(b"\xef\xbb\xbfone\r\ntwo\x01\nthree"))) == ["one", "two ", "three"]
    with pytest.raises(UserError, match=r"<stdin>:2 is not valid UTF-8 \(byte 0xff at byte column 3\)"):
        list(live_lines(io.BytesIO(b"ok\nab\xff\n")))
    with pytest.raises(UserError, match="<stdin>:3 looks binary"):
        list(live_lines(io.BytesIO(b"a\nb\nc\x00\n")))
    with pytest.raises(UserError, match="gzip"):
        list(live_lines(io.BytesIO(b"\x1f\x8b\x08\x00")))


def test_a_regular_file_is_not_live(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("x\n", encoding="utf-8")
    with path.open("rb") as f:
        assert not is_live(f)
    assert not is_live(io.BytesIO(b""))


def test_bad_buffer(capsys, tiny_model, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b\n")))
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--buffer", "0")
    assert_user_error(code, err, "buffer=0")


class InterruptedStdin(io.BytesIO):
    """Two lines, then Ctrl-C while the loop waits for the third."""

    def readline(self, size=-1):
        line = super().readline(size)
        if not line:
            raise KeyboardInterrupt
        return line


def test_ctrl_c_keeps_the_output_file_of_a_live_session(capsys, tiny_model, tmp_path, monkeypatch):
    out = tmp_path / "session.txt"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(InterruptedStdin(b"a b c\nd e\n")))
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--buffer", "1", "--output", str(out))
    assert code == 130 and err == "attnmt: interrupted\n"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2  # what was translated before Ctrl-C
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.txt"]


@pytest.mark.slow  # the benchmark end to end: two translate processes per round, about 7 s
def test_the_piped_input_benchmark_runs_at_tiny_size(tiny_model, tiny_corpus, tmp_path):
    import json

    from benchmarks.piped_input import main as benchmark

    out = tmp_path / "piped.json"
    assert benchmark(["--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"), "--lines", "6",
                      "--rounds", "2", "--beam", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["lines"] == 6 and result["same_lines"] == {"pipe": 1.0}
    assert len(result["seconds"]["file"]) == len(result["seconds"]["pipe"]) == 2 and result["pipe_over_file"] > 0
