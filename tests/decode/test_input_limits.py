"""Input is read a line at a time, no line may pass MAX_LINE_BYTES, and translate and evaluate answer an
endless input in bounded memory: a subprocess under an address-space limit (RLIMIT_AS) gets /dev/zero,
an endless line or endless valid lines, and answers with exit 2 and one line (or, translate on valid
lines, keeps writing translations) within seconds."""

from __future__ import annotations

import functools
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.data.chunks import count_lines, decode_chunk, raw_chunks
from attnmt.data.corpus import MAX_LINE_BYTES, read_lines, read_parallel, read_stream, read_tsv
from attnmt.decode.evaluate import MAX_TEST_PAIRS
from attnmt.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
LONG = b"x" * (MAX_LINE_BYTES + 1)


def too_long(name: Path | str, line: int) -> str:
    return (f"{name}:{line} is longer than {MAX_LINE_BYTES:,} bytes, the limit for one line; split it into "
            "sentences, one a line (or check that this is a text file)")


def test_a_line_of_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"a\n" + b"y" * MAX_LINE_BYTES + b"\nb")
    assert [len(line) for line in read_lines(ok)] == [1, MAX_LINE_BYTES, 1]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a\n" + LONG + b"\nb\n")
    with pytest.raises(UserError) as info:
        read_lines(bad)
    assert str(info.value) == too_long(bad, 2)
    with pytest.raises(UserError, match="<stdin>:2 is longer than"):
        read_stream(open(bad, "rb"))


def test_training_readers_drop_long_lines_and_keep_the_pairing(tmp_path: Path) -> None:
    (tmp_path / "a.src").write_bytes(b"one\n" + LONG + b"\nthree\n")
    (tmp_path / "a.tgt").write_bytes(b"eins\nzwei\n" + LONG)
    dropped: list[int] = []
    assert read_parallel(tmp_path / "a.src", tmp_path / "a.tgt", dropped) == [("one", "eins"), ("", ""), ("", "")]
    assert dropped == [1, 2]
    (tmp_path / "a.tsv").write_bytes(b"a\tb\n" + LONG + b"\nc\td\n\n")
    dropped = []
    assert read_tsv(tmp_path / "a.tsv", dropped=dropped) == [("a", "b"), ("", ""), ("c", "d")]
    assert dropped == [1]


@pytest.mark.parametrize("size", [1000, 1 << 20])
def test_chunks_blank_long_lines_inside_a_chunk_and_at_the_end(tmp_path: Path, size: int) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"a\n" + LONG + b"\nb\n" + LONG)
    long: list[int] = []
    lines = [line for line0, data, first in raw_chunks(path, size=size, long=long)
             for line in decode_chunk(data, path, line0, first)]
    assert lines == ["a", "", "b", ""] and long == [1, 3]
    assert count_lines(path, long=[]) == 4
    with pytest.raises(UserError) as info:
        count_lines(path)
    assert str(info.value) == too_long(path, 2)


def test_training_drops_an_over_long_pair_and_says_so_when_it_starts(tiny_corpus: Path, tmp_path: Path,
                                                                       capsys) -> None:
    src = (tiny_corpus / "train.src").read_bytes()
    tgt = (tiny_corpus / "train.tgt").read_bytes()
    (tmp_path / "t.src").write_bytes(src + LONG + b"\n")
    (tmp_path / "t.tgt").write_bytes(tgt + b"a b\n")
    config = tmp_path / "c.yaml"
    config.write_text(f"data:\n  train_src: {tmp_path / 't.src'}\n  train_tgt: {tmp_path / 't.tgt'}\n"
                      "  tokenizer: word\nmodel:\n  emb_size: 8\n  hidden_size: 8\ntrain:\n  max_steps: 1\n"
                      "  progress: false\n  tensorboard: false\n  threads: 1\n", encoding="utf-8")
    assert main(["train", str(config), "--model-dir", str(tmp_path / "m")]) == 0
    pairs = len(src.splitlines())
    start = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("training "))
    assert f"; {pairs:,} training pairs (1 dropped: a line over {MAX_LINE_BYTES:,} bytes), no validation set" in start


def test_a_prepared_store_counts_long_lines_apart_from_empty_ones(tmp_path: Path) -> None:
    from attnmt.config.schema import load_config
    from attnmt.data.store_prepare import prepare

    (tmp_path / "s.txt").write_bytes(b"a b\n\nc d\n" + LONG + b"\ne f\n")
    (tmp_path / "t.txt").write_bytes(b"x y\nz\nw v\nu\nt s\n")
    config = tmp_path / "c.yaml"
    config.write_text(f"data:\n  train_src: {tmp_path / 's.txt'}\n  train_tgt: {tmp_path / 't.txt'}\n"
                      "  tokenizer: word\n", encoding="utf-8")
    done = prepare(load_config(config), tmp_path / "m", workers=1, progress=False)
    (corpus,) = done["meta"]["corpora"]
    assert {k: corpus[k] for k in ("total", "kept", "empty", "too_long", "long_lines")} == {
        "total": 4, "kept": 3, "empty": 1, "too_long": 0, "long_lines": 1}


# --- bounded memory: the real command in a process whose address space is limited -----------------------------


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


@functools.cache
def memory_limit() -> int:
    """The address space of a process that has imported the command line and torch (about 0.7 GB on a CPU
    build, more with CUDA's libraries mapped), plus 1 GiB: a tiny model and a test set of a million short
    lines fit; a whole /dev/zero passes it within a second."""
    code = ("import attnmt.cli, attnmt.decode.translator, attnmt.decode.evaluate, re; "
            "print(re.search(r'VmPeak:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))")
    baseline = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                                  check=True).stdout) << 10
    return baseline + (1 << 30)


def limited(command: str) -> subprocess.Popen:
    """`python -m attnmt` + command (bash: process substitution makes endless inputs) under memory_limit()."""
    limit = memory_limit()

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.Popen(["bash", "-c", f"exec {sys.executable} -m attnmt {command}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=set_limit, env=ENV, cwd=ROOT)


def refused(command: str) -> str:
    proc = limited(command)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out) == (2, ""), err[-2000:]
    (line,) = err.splitlines()
    return line


ENDLESS_LINE = "<(yes 'a b c' | tr -d '\\n')"
ENDLESS_LINES = "<(yes 'a b c')"


@pytest.mark.slow  # the real command in memory-limited processes
@pytest.mark.timeout(300)
def test_translate_refuses_dev_zero_and_an_endless_line_in_bounded_memory(tiny_model: Path) -> None:
    assert refused(f"translate --model {tiny_model} --input /dev/zero") == (
        "attnmt: error: /dev/zero:1 looks binary (NUL byte); give a UTF-8 text file, one sentence a line")
    line = refused(f"translate --model {tiny_model} --input {ENDLESS_LINE}")
    assert line.startswith("attnmt: error: /dev/fd/") and line.endswith(too_long("", 1)), line


@pytest.mark.slow  # the real command in memory-limited processes, reading a million lines
@pytest.mark.timeout(300)
def test_evaluate_refuses_dev_zero_and_endless_lines_in_bounded_memory(tiny_model: Path) -> None:
    assert refused(f"evaluate --model {tiny_model} --src /dev/zero --ref /dev/zero") == (
        "attnmt: error: /dev/zero:1 looks binary (NUL byte); give a UTF-8 text file, one sentence a line")
    line = refused(f"evaluate --model {tiny_model} --src {ENDLESS_LINES} --ref {ENDLESS_LINES}")
    assert f":{MAX_TEST_PAIRS + 1}: the test set passes {MAX_TEST_PAIRS:,} lines, the most evaluate holds" in line


@pytest.mark.slow  # the real command in a memory-limited process
@pytest.mark.timeout(300)
def test_translate_streams_endless_lines_in_bounded_memory(tiny_model: Path) -> None:
    """Translations of an endless input come out a group at a time; the process keeps going (read whole,
    the input would pass the memory limit within seconds: a MemoryError, and no output)."""
    from attnmt.cli.translating import GROUP_LINES

    proc = limited(f"translate --model {tiny_model} --beam 1 --input {ENDLESS_LINES}")
    try:
        for _ in range(3 * GROUP_LINES):
            assert proc.stdout.readline(), proc.stderr.read()[-2000:]
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.communicate()
