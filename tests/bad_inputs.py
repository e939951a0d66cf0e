"""Every bad input we try, run through the real command line, and what the user sees.

This module produces the table in docs/bad_inputs.md: each case builds its files, calls
`attnmt.cli.main` in-process and records the exit code and the exact stderr line. A few cases call the
Python API or the HTTP API instead (`Case.call`) and record the exception or the response. Nothing in
the table is typed by hand.

    .venv/bin/python -m tests.bad_inputs        # trains a tiny model (~15 s), rewrites docs/bad_inputs.md

tests/cli/test_security.py::test_bad_inputs_table runs the same cases, checks the contract (exit 2 and
one line for a refusal, exit 0 for input that is handled; never a traceback) and that the doc is
current.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import socket
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

DOC = Path(__file__).resolve().parents[1] / "docs" / "bad_inputs.md"


class Workspace:
    """A scratch folder with a tiny trained model and corpus; paths print as placeholders."""

    def __init__(self, root: Path, model: Path, corpus: Path):
        self.root, self.model, self.corpus = root, model, corpus
        root.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self.notes: dict[str, object] = {}  # what a case's condition (`around`) made, for its command and summary

    def file(self, name: str, data: bytes | str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return path

    def folder(self) -> Path:
        self._n += 1
        return self.root / f"out{self._n}"

    def config(self, text: str = "", name: str = "config.yaml", **data: object) -> Path:
        """A training config: `text` as is, or the corpus (or `data` paths) with a 2-step run."""
        if not text:
            data = data or {"train_src": self.corpus / "train.src", "train_tgt": self.corpus / "train.tgt"}
            lines = ["data:", "  tokenizer: word"] + [f"  {k}: {v}" for k, v in data.items()]
            lines += ["model:", "  emb_size: 8", "  hidden_size: 8", "train:", "  max_steps: 2", "  valid_every: 1",
                      "  progress: false", "  tensorboard: false", "  threads: 1"]
            text = "\n".join(lines) + "\n"
        return self.file(name, text)

    def model_with(self, edit: Callable[[Path], None]) -> Path:
        """A copy of the tiny model folder, edited."""
        self._n += 1
        copy = self.root / f"model{self._n}"
        shutil.copytree(self.model, copy)
        edit(copy)
        return copy

    def best(self, data: bytes) -> Path:
        return self.model_with(lambda m: (m / "checkpoints" / "best.pt").write_bytes(data))

    def best_payload(self, change: Callable[[dict], None], checksum: bool = True) -> Path:
        from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint

        def edit(m: Path) -> None:
            path = m / "checkpoints" / "best.pt"
            payload = load_checkpoint(path)
            del payload["format_version"], payload["checksum"]
            change(payload)
            if checksum:
                save_checkpoint(payload, path)
            else:
                torch.save(payload, path)

        return self.model_with(edit)

    def config_yaml(self, old: str, new: str) -> Path:
        def edit(m: Path) -> None:
            text = (m / "config.yaml").read_text(encoding="utf-8")
            assert old in text, old
            (m / "config.yaml").write_text(text.replace(old, new, 1), encoding="utf-8")

        return self.model_with(edit)

    def placeholders(self, text: str) -> str:
        for path, name in sorted([(str(self.root), "<dir>"), (str(self.model), "<model>"),
                                  (str(self.corpus), "<corpus>")], key=lambda p: -len(p[0])):
            text = text.replace(path, name)
        # a process id and a free port differ from run to run
        return re.sub(r"\bport \d+ on\b", "port <port> on", re.sub(r"\(process \d+\)", "(process <pid>)", text))


@dataclass
class Case:
    area: str
    what: str
    argv: Callable[[Workspace], list[str]] | None = None
    code: int | str = 2  # the exit code the contract asks for: 2 refused with one line, 0 handled
    stdin: bytes | None = None
    summary: Callable[[Workspace, str], str] | None = None  # for handled input: what came out
    # a condition the run meets (a full disk, a folder in use), entered before `argv` is built
    around: Callable[[Workspace], contextlib.AbstractContextManager] | None = None
    # instead of the command line: a call of the Python API or the HTTP API, which gives what it answers,
    # (the error's kind or the HTTP status, the line the user sees)
    call: Callable[[Workspace], tuple[int | str, str]] | None = None


@dataclass
class Result:
    case: Case
    code: int
    out: str
    err: str

    def seen(self, ws: Workspace) -> str:
        if self.case.call is not None:
            return ws.placeholders(self.out)
        if self.code == 0 and self.case.summary is not None:
            return self.case.summary(ws, self.out)
        return ws.placeholders(self.err.strip())


# Evil objects for the checkpoint cases: unpickling them would create a marker file.
MARKER = "PWNED"


class Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def evil_zip(ws: Workspace) -> bytes:
    buffer = io.BytesIO()
    torch.save({"format_version": 1, "model_type": "rnnsearch", "model": Evil(ws.root / MARKER)}, buffer)
    return buffer.getvalue()


def evil_raw(ws: Workspace) -> bytes:
    import pickle

    return pickle.dumps({"model": Evil(ws.root / MARKER)}, protocol=2)


def torch_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def flip_a_weight(m: Path) -> None:
    path = m / "checkpoints" / "best.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # the middle of the file is tensor data
    path.write_bytes(bytes(data))


WEIRD = ("héllo wörld 世界 🙂\n"
         "zero\u200bwidth\u200d joiner and \u200fright-to-left\u202e marks \u05e9\u05dc\u05d5\u05dd\n"
         "control \x01\x1b[31m\x7f\x85 characters and a form\x0cfeed\n"
         "\n"
         "  \t  \n"
         "CR LF line\r\n"
         + "x" * 100_000 + "\n"
         "no final newline")


def lines_in_out(ws: Workspace, out: str, source: str = WEIRD) -> str:
    n_in = source.count("\n") + (1 if source and not source.endswith("\n") else 0)
    n_out = len(out.splitlines()) if out else 0
    return f"(exit 0) translated: {n_in} lines in, {n_out} lines out"


def translate(model: Path | str, src: Path, *extra: str) -> list[str]:
    return ["translate", "--model", str(model), "--input", str(src), "--beam", "2", *extra]


def evaluate(ws: Workspace, src: Path, ref: Path, *extra: str) -> list[str]:
    return ["evaluate", "--model", str(ws.model), "--src", str(src), "--ref", str(ref), "--tokenize", "none", *extra]


def in_txt(ws: Workspace) -> Path:
    return ws.file("in.txt", "a b c\n")


def guided_config(ws: Workspace, links: str, model_type: str = "rnnsearch", extra: str = "") -> Path:
    """A 2-step training config guided by the links transform reading ``links`` (a file's text)."""
    n = len((ws.corpus / "train.src").read_text(encoding="utf-8").splitlines())
    path = ws.file("train.links", links if links.count("\n") != 1 else links * n)
    text = ws.config().read_text(encoding="utf-8").replace("model:", f"model:\n  type: {model_type}")
    text = text.replace("data:", f"data:\n  transforms: [{{name: links, path: {path}}}]")
    text += f"  guided_alignment:\n    weight: 1.0\n{extra}"
    return ws.file("guided.yaml", text)


def align(ws: Workspace, *extra: str) -> list[str]:
    return ["align", "--src", str(ws.corpus / "test.src"), "--tgt", str(ws.corpus / "test.tgt"), *extra]


def swapped_target_words(m: Path) -> None:
    """Target ids 4 and 5 exchanged: the same shapes, another vocabulary (its checkpoint's record of it too)."""
    from attnmt.data.store import tokenizer_hash
    from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint

    lines = (m / "tgt.vocab").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4], lines[5] = lines[5], lines[4]
    (m / "tgt.vocab").write_text("".join(lines), encoding="utf-8")
    path = m / "checkpoints" / "best.pt"
    payload = load_checkpoint(path)
    del payload["format_version"], payload["checksum"]
    save_checkpoint({**payload, "tokenizers": tokenizer_hash(m)}, path)


def swapped_vocabularies(m: Path) -> None:
    (m / "src.vocab").rename(m / "was_src.vocab")
    (m / "tgt.vocab").rename(m / "src.vocab")
    (m / "was_src.vocab").rename(m / "tgt.vocab")


def emptied_sentencepiece_model(m: Path) -> None:
    (m / "src.json").write_text('{"kind": "bpe"}', encoding="utf-8")
    (m / "src.model").write_bytes(b"")


def expanded_weight(payload: dict) -> None:
    """A weight stored as an expanded view (stride 0), as `Tensor.expand` makes it."""
    name = next(n for n, t in payload["model"].items() if t.dim() == 1)
    payload["model"][name] = payload["model"][name][:1].expand(payload["model"][name].shape[0])


def long_line(ws: Workspace, n: int = 600) -> Path:
    return ws.file("long.txt", "a b\n" + " ".join(["word"] * n) + "\n")


def over_a_mebibyte(ws: Workspace, name: str = "huge.txt") -> Path:
    """Line 2 is one byte over the longest line a reader accepts (attnmt.data.corpus.MAX_LINE_BYTES, 1 MiB)."""
    return ws.file(name, b"a b\n" + b"w" * ((1 << 20) + 1) + b"\nc d\n")


def nan_weights(payload: dict) -> None:
    payload["model"] = {name: torch.full_like(t, float("nan")) for name, t in payload["model"].items()}


def some_not_finite(payload: dict) -> None:
    weight = payload["model"][sorted(payload["model"])[0]]
    weight.view(-1)[:2] = torch.tensor([float("nan"), float("inf")])


@contextlib.contextmanager
def full_disk():
    """Every binary write (a checkpoint's) goes to /dev/full: the kernel's own ENOSPC, when the file is flushed."""
    import os
    from unittest import mock

    real = os.fdopen

    def fdopen(fd, mode="r", *args, **kwargs):
        if mode != "wb":
            return real(fd, mode, *args, **kwargs)
        os.close(fd)
        return open("/dev/full", "wb")  # noqa: SIM115

    with mock.patch("attnmt.runtime.safe_write.os.fdopen", fdopen):
        yield


@contextlib.contextmanager
def full_disk_for_text():
    """Every text write (a translation's temporary file) goes to /dev/full: the kernel's ENOSPC at flush."""
    from unittest import mock

    real = os.fdopen

    def fdopen(fd, mode="r", *args, **kwargs):
        if mode != "w":
            return real(fd, mode, *args, **kwargs)
        os.close(fd)
        return open("/dev/full", "w", *args, **kwargs)  # noqa: SIM115

    with mock.patch("attnmt.runtime.safe_write.os.fdopen", fdopen):
        yield


@contextlib.contextmanager
def fifo_with_reader(ws: Workspace):
    """ws.root/pipe, a FIFO with a reader on its other end (what it reads goes to ws.notes["read"])."""
    fifo = ws.root / "pipe"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: ws.notes.__setitem__("read", fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        yield
    finally:
        reader.join(timeout=60)


def through_the_fifo(ws: Workspace, out: str) -> str:
    n = len(ws.notes.get("read", b"").splitlines())
    kind = "still a FIFO" if stat.S_ISFIFO(os.lstat(ws.root / "pipe").st_mode) else "REPLACED"
    return f"(exit 0) {n} line(s) read at the other end of the FIFO, which is {kind}"


def link_to_file(ws: Workspace) -> Path:
    link = ws.root / "latest.txt"
    link.symlink_to(ws.file("release-1.txt", "old\n"))
    return link


def through_the_link(ws: Workspace, out: str) -> str:
    link = ws.root / "latest.txt"
    lines = len((ws.root / "release-1.txt").read_text(encoding="utf-8").splitlines())
    kept = "still a link" if link.is_symlink() else "REPLACED by a file"
    return f"(exit 0) {lines} line(s) written to the link's target; the link is {kept}"


@contextlib.contextmanager
def folder_in_use(ws: Workspace):
    """A copy of the model whose lock another run holds (ws.notes["locked"])."""
    from attnmt.runtime.lock import lock_folder

    ws.notes["locked"] = ws.model_with(lambda m: None)
    lock = lock_folder(ws.notes["locked"], "attnmt train")
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def port_in_use(ws: Workspace):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ws.notes["port"] = taken.getsockname()[1]
        yield


def killed_before_its_first_checkpoint(ws: Workspace) -> Path:
    """What a run killed (SIGKILL) before its first checkpoint leaves: its config, tokenizers and logs."""
    folder = ws.folder()
    folder.mkdir()
    shutil.copy(ws.config(), folder / "config.yaml")
    for name in ("src.vocab", "tgt.vocab", "train_log.jsonl"):
        shutil.copy(ws.model / name, folder / name)
    return folder


def malformed_state(m: Path) -> None:
    from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint

    path = m / "checkpoints" / "last.pt"
    payload = load_checkpoint(path)
    del payload["format_version"], payload["checksum"]
    payload["train_state"]["step"] = -5
    save_checkpoint(payload, path)


def optimizer_state(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """An edit of last.pt's optimizer state for the first parameter (checksum intact)."""
    def edit(m: Path) -> None:
        from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint

        path = m / "checkpoints" / "last.pt"
        payload = load_checkpoint(path)
        del payload["format_version"], payload["checksum"]
        change(payload["optimizer"]["state"][0])
        save_checkpoint(payload, path)

    return edit


def lol_bomb(levels: int, width: int) -> str:
    """Aliases to aliases: ``width ** levels`` values once expanded, in a few hundred bytes (flow style)."""
    anchors = [f"&l0 [{', '.join(['lol'] * width)}]"]
    anchors += [f"&l{k} [{', '.join([f'*l{k - 1}'] * width)}]" for k in range(1, levels)]
    return "[" + ", ".join(anchors) + "]"


def python_api(call: Callable[[object], object]) -> Callable[[Workspace], tuple[str, str]]:
    """A case of the Python API: ``call`` on the translator of ``attnmt.load``; what a refusal says, as the last
    line of its traceback."""
    def run(ws: Workspace) -> tuple[str, str]:
        import attnmt
        from attnmt.errors import UserError

        try:
            call(attnmt.load(ws.model))
        except UserError as e:
            return "UserError", f"{type(e).__module__}.{type(e).__name__}: {e}"
        return "returned", "(no error)"

    return run


def http_post(path: str, body: dict) -> Callable[[Workspace], tuple[int, str]]:
    """A case of the HTTP API: ``body`` POSTed to ``path`` of the app serving the tiny model (attnmt serve's
    default limits); the status and the response."""
    def run(ws: Workspace) -> tuple[int, str]:
        import warnings

        with warnings.catch_warnings():  # newer Starlette warns, on import, that its TestClient will leave httpx
            warnings.simplefilter("ignore")
            from fastapi.testclient import TestClient
        from attnmt.serve import create_app

        with TestClient(create_app({"m": ws.model})) as client:
            r = client.post(path, json=body)
        return r.status_code, f"HTTP {r.status_code} {r.text}"

    return run


def started(ws: Workspace, out: str) -> str:
    """What the start-of-training line says of the training pairs."""
    line = next(line for line in out.splitlines() if line.startswith("training "))
    return "(exit 0) trained: " + next(part for part in line.split("; ") if "training pairs" in part)


CASES: list[Case] = [
    # --- configs --------------------------------------------------------------------------------
    Case("config", "config file does not exist", lambda ws: ["train", str(ws.root / "none.yaml")]),
    Case("config", "not valid YAML", lambda ws: ["train", str(ws.config("train: [1, 2\n"))]),
    Case("config", "binary file as config", lambda ws: ["train", str(ws.file("bin.yaml", b"\x00\xff\xfe\x01"))]),
    Case("config", "YAML tag that would run code (`!!python/object/apply:os.system`)",
         lambda ws: ["train", str(ws.config(f"!!python/object/apply:os.system ['touch {ws.root / MARKER}']\n"))]),
    Case("config", "a list instead of a mapping", lambda ws: ["train", str(ws.config("- a\n- b\n"))]),
    Case("config", "misspelt section", lambda ws: ["train", str(ws.config("trian:\n  lr: 0.1\n"))]),
    Case("config", "unknown key", lambda ws: ["train", str(ws.config("train:\n  learning_rate: 0.1\n"))]),
    Case("config", "wrong type", lambda ws: ["train", str(ws.config("train:\n  batch_tokens: lots\n"))]),
    Case("config", "value not among the allowed ones",
         lambda ws: ["train", str(ws.config("train:\n  nan_policy: ignore\n"))]),
    Case("config", "out of range", lambda ws: ["train", str(ws.config("model:\n  dropout: 1.5\n"))]),
    Case("config", "`train.save_every: 0`", lambda ws: ["train", str(ws.config("train:\n  save_every: 0\n"))]),
    Case("config", "`lr: 5e-4` is accepted as a number (YAML 1.1 reads it as a string); here the data is missing",
         lambda ws: ["train", str(ws.config("train:\n  lr: 5e-4\n")), "--model-dir", str(ws.folder())]),
    Case("config", "`--set` without `=`", lambda ws: ["train", str(ws.config()), "--set", "train.lr"]),
    Case("config", "`--set` of an unknown key", lambda ws: ["train", str(ws.config()), "--set", "train.lr_rate=0.1"]),
    Case("config", "`--set` of a value out of range", lambda ws: ["train", str(ws.config()), "--set",
                                                                  "train.save_every=0"]),
    Case("config", "`train.lr: .nan`", lambda ws: ["train", str(ws.config("train:\n  lr: .nan\n"))]),
    Case("config", "`train.clip_grad_norm: .nan` (names the key, not the learning rate)",
         lambda ws: ["train", str(ws.config("train:\n  clip_grad_norm: .nan\n"))]),
    Case("config", "`train.label_smoothing: .nan`",
         lambda ws: ["train", str(ws.config("train:\n  label_smoothing: .nan\n"))]),
    Case("config", "`--set model.dropout=.inf`", lambda ws: ["train", str(ws.config()), "--set", "model.dropout=.inf"]),
    Case("config", "`train.warmup_steps: -1` with the noam schedule",
         lambda ws: ["train", str(ws.config("train:\n  scheduler: noam\n  warmup_steps: -1\n"))]),
    Case("config", "`train.warmup_steps: 0` with the noam schedule (its rate divides by it)",
         lambda ws: ["train", str(ws.config("train:\n  scheduler: noam\n  warmup_steps: 0\n"))]),
    Case("config", "`train.seed: 2**70`", lambda ws: ["train", str(ws.config(f"train:\n  seed: {2**70}\n"))]),
    Case("config", "`train.log_every: 0`", lambda ws: ["train", str(ws.config("train:\n  log_every: 0\n"))]),
    Case("config", "`model.hidden_size: 10000000`",
         lambda ws: ["train", str(ws.config("model:\n  hidden_size: 10000000\n"))]),
    Case("config", "`model.emb_size: 100000000`",
         lambda ws: ["train", str(ws.config("model:\n  emb_size: 100000000\n"))]),
    Case("config", "a `data.train` corpus of weight `.inf`",
         lambda ws: ["train", str(ws.config("data:\n  train: [{src: a.de, tgt: a.en, weight: .inf}]\n"))]),
    Case("command line", "a word where a number belongs (`--beam five`)",
         lambda ws: translate(ws.model, in_txt(ws), "--beam", "five")),
    Case("command line", "a required option left out (`evaluate` without `--ref`)",
         lambda ws: ["evaluate", "--model", str(ws.model), "--src", str(in_txt(ws))]),
    Case("command line", "`attnmt export` of an RNN model (CTranslate2 runs Transformers only)",
         lambda ws: ["export", str(ws.model), "--out", str(ws.folder())]),
    # --- training data ---------------------------------------------------------------------------
    Case("train data", "no training data in the config",
         lambda ws: ["train", str(ws.config("train:\n  max_steps: 2\n")), "--model-dir", str(ws.folder())]),
    Case("train data", "relative path to a missing file (resolved against the config's folder)",
         lambda ws: ["train", str(ws.config(name="configs/c.yaml", train_src="../data/missing.src",
                                            train_tgt="../data/missing.tgt")), "--model-dir", str(ws.folder())]),
    Case("train data", "only `train_src`, no `train_tgt`",
         lambda ws: ["train", str(ws.config(train_src=ws.corpus / "train.src")), "--model-dir", str(ws.folder())]),
    Case("train data", "source and target differ in line count",
         lambda ws: ["train", str(ws.config(train_src=ws.file("a.src", "one\ntwo\nthree\n"),
                                            train_tgt=ws.file("a.tgt", "eins\nzwei\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "invalid UTF-8 on line 2",
         lambda ws: ["train", str(ws.config(train_src=ws.file("b.src", b"good\nbad \xff\xfe here\n"),
                                            train_tgt=ws.file("b.tgt", "gut\nschlecht\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "binary file (NUL byte)",
         lambda ws: ["train", str(ws.config(train_src=ws.file("c.src", b"ok\n\x7fELF\x02\x01\x00\x00"),
                                            train_tgt=ws.file("c.tgt", "ok\nok\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "UTF-16 file",
         lambda ws: ["train", str(ws.config(train_src=ws.file("d.src", "eins\nzwei\n".encode("utf-16")),
                                            train_tgt=ws.file("d.tgt", "one\ntwo\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "gzip data in a file not named .gz",
         lambda ws: ["train", str(ws.config(train_src=ws.file("e.src", __import__("gzip").compress(b"a\n")),
                                            train_tgt=ws.file("e.tgt", "a\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "broken .gz file",
         lambda ws: ["train", str(ws.config(train_src=ws.file("f.src.gz", b"\x1f\x8b\x08\x00broken"),
                                            train_tgt=ws.file("f.tgt", "a\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "a folder where a file should be",
         lambda ws: ["train", str(ws.config(train_src=ws.root, train_tgt=ws.corpus / "train.tgt")),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "empty files",
         lambda ws: ["train", str(ws.config(train_src=ws.file("g.src", ""), train_tgt=ws.file("g.tgt", ""))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "TSV line with one column",
         lambda ws: ["train", str(ws.config(train_tsv=ws.file("h.tsv", "a\tb\nonly one column\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "Unicode, zero-width and RTL marks, control characters, empty and 100,000-character lines",
         lambda ws: ["train", str(ws.config(train_src=ws.file("w.src", WEIRD + "\n" + "a b c\n" * 20),
                                            train_tgt=ws.file("w.tgt", WEIRD + "\n" + "x y z\n" * 20))),
                     "--model-dir", str(ws.folder())],
         code=0,  # the summary is the last line train prints
         summary=lambda ws, out: "(exit 0) trained: " + out.strip().splitlines()[-1].split(": ", 1)[1].split(";")[0]),
    Case("train data", "a source line over 1 MiB: the pair is dropped and counted in the start line",
         lambda ws: ["train", str(ws.config(train_src=ws.file("l.src", (ws.corpus / "train.src").read_bytes()
                                                                + b"w" * ((1 << 20) + 1) + b"\n"),
                                            train_tgt=ws.file("l.tgt", (ws.corpus / "train.tgt").read_bytes()
                                                              + b"x y\n"))),
                     "--model-dir", str(ws.folder())], code=0, summary=started),
    Case("train data", "the loss becomes NaN (`--set train.lr=1.0e+20`)",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(ws.folder()), "--set", "train.lr=1.0e+20"]),
    Case("train data", "`attnmt prepare`: a `data.train` corpus with src but no tgt",
         lambda ws: ["prepare", str(ws.config("data:\n  train:\n    - {src: a.de, weight: 2}\n")),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "`attnmt prepare`: invalid UTF-8 in line 3 of a corpus",
         lambda ws: ["prepare", str(ws.config(train_src=ws.file("u.src", b"a\nb\nc\xe9\n"),
                                              train_tgt=ws.file("u.tgt", "x\ny\nz\n"))),
                     "--model-dir", str(ws.folder())]),
    Case("train data", "an unknown data transform",
         lambda ws: ["train", str(ws.config(f"data:\n  train_tsv: {ws.corpus}/x.tsv\n  transforms:\n"
                                            "    - {name: join_pairs, count: 100}\n")),
                     "--model-dir", str(ws.folder())]),
    # --- model folders ---------------------------------------------------------------------------
    Case("model folder", "train into a non-empty folder without `--overwrite`",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(ws.model)]),
    Case("model folder", "`train --model-dir` names a file",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(ws.file("a-file.txt", "x"))]),
    Case("model folder", "`train --model-dir` inside a file", lambda ws: ["train", str(ws.config()), "--model-dir",
                                                                          str(ws.file("a-file.txt", "x") / "m")]),
    Case("model folder", "`attnmt prepare --model-dir` names a file",
         lambda ws: ["prepare", str(ws.config()), "--model-dir", str(ws.file("a-file.txt", "x"))]),
    Case("model folder", "`attnmt demo --out` names a file",
         lambda ws: ["demo", "--quick", "--out", str(ws.file("a-file.txt", "x"))]),
    Case("model folder", "`attnmt study --out` names a file",
         lambda ws: ["study", str(DOC.parents[1] / "recipes" / "synthetic" / "synthetic.yaml"), "--out",
                     str(ws.file("a-file.txt", "x"))]),
    Case("model folder", "`--resume` a folder without a checkpoint",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(ws.folder()), "--resume"]),
    Case("model folder", "`--model` folder does not exist (a typo)",
         lambda ws: translate((ws.root / "zoo" / "de_en_rnnsearch").mkdir(parents=True, exist_ok=True)
                              or ws.root / "zoo" / "de_en_rnnsaerch", in_txt(ws))),
    Case("model folder", "not a model folder",
         lambda ws: translate(ws.file("notes/todo.txt", "x").parent, in_txt(ws))),
    Case("model folder", "vocabulary file missing",
         lambda ws: translate(ws.model_with(lambda m: (m / "src.vocab").unlink()), in_txt(ws))),
    # --- checkpoints -----------------------------------------------------------------------------
    Case("checkpoint", "empty file", lambda ws: translate(ws.best(b""), in_txt(ws))),
    Case("checkpoint", "truncated to half", lambda ws: translate(
        ws.best((data := (ws.model / "checkpoints" / "best.pt").read_bytes())[:len(data) // 2]), in_txt(ws))),
    Case("checkpoint", "random bytes", lambda ws: translate(ws.best(bytes(range(256)) * 64), in_txt(ws))),
    Case("checkpoint", "one flipped bit in the weights",
         lambda ws: translate(ws.model_with(flip_a_weight), in_txt(ws))),
    Case("checkpoint", "checksum entry removed, every weight NaN",
         lambda ws: translate(ws.best_payload(lambda p: (p.update(format_version=1), nan_weights(p)), checksum=False),
                              in_txt(ws))),
    Case("checkpoint", "a NaN and an infinity in the weights, under a checksum that matches (a diverged run)",
         lambda ws: translate(ws.best_payload(some_not_finite), in_txt(ws))),
    Case("checkpoint", "the disk is full when training writes its first checkpoint (ENOSPC)",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(ws.folder())], around=lambda ws: full_disk()),
    Case("checkpoint", "malicious pickle in a torch zip (`__reduce__` → `os.system`)",
         lambda ws: translate(ws.best(evil_zip(ws)), in_txt(ws))),
    Case("checkpoint", "malicious raw pickle", lambda ws: translate(ws.best(evil_raw(ws)), in_txt(ws))),
    Case("checkpoint", "malicious `last.pt` given to `train --resume`",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--resume", "--model-dir", str(ws.model_with(
             lambda m: (m / "checkpoints" / "last.pt").write_bytes(evil_zip(ws))))]),
    Case("checkpoint", "a torch file holding only a tensor",
         lambda ws: translate(ws.best(torch_bytes(torch.zeros(3))), in_txt(ws))),
    Case("checkpoint", "a dict without model weights",
         lambda ws: translate(ws.best(torch_bytes({"weights": torch.zeros(3)})), in_txt(ws))),
    Case("checkpoint", "another format version",
         lambda ws: translate(ws.best_payload(lambda p: p.update(format_version=99), checksum=False), in_txt(ws))),
    Case("checkpoint", "model type differs from config.yaml",
         lambda ws: translate(ws.config_yaml("type: rnnsearch", "type: seq2seq"), in_txt(ws))),
    Case("checkpoint", "shapes differ from config.yaml",
         lambda ws: translate(ws.config_yaml("hidden_size: 48", "hidden_size: 40"), in_txt(ws))),
    Case("checkpoint", "weights of another architecture under the right name",
         lambda ws: translate(ws.best_payload(lambda p: p["model"].pop(sorted(p["model"])[0])), in_txt(ws))),
    Case("checkpoint", "`--checkpoint` names one the folder does not have",
         lambda ws: translate(ws.model, in_txt(ws), "--checkpoint", "averaged")),
    Case("checkpoint", "`--checkpoint` is a path", lambda ws: translate(ws.model, in_txt(ws), "--checkpoint", "../x")),
    Case("checkpoint", "`average` a folder that kept no step checkpoints", lambda ws: ["average", "--model",
                                                                                      str(ws.model)]),
    # --- translate -------------------------------------------------------------------------------
    Case("translate", "input file does not exist", lambda ws: translate(ws.model, ws.root / "missing.txt")),
    Case("translate", "input is a folder", lambda ws: translate(ws.model, ws.root)),
    Case("translate", "binary input", lambda ws: translate(ws.model, ws.file("bin.dat", b"abc\x00\x01\x02"))),
    Case("translate", "invalid UTF-8 on line 3",
         lambda ws: translate(ws.model, ws.file("l1.txt", b"a\nb\n\xc3\x28\n"))),
    Case("translate", "binary data on stdin", lambda ws: ["translate", "--model", str(ws.model)],
         stdin=b"\x89PNG\r\n\x1a\n\x00\x00"),
    Case("translate", "a 600-word line", lambda ws: translate(ws.model, long_line(ws))),
    Case("translate", "a line over 1 MiB (1,048,577 bytes)", lambda ws: translate(ws.model, over_a_mebibyte(ws))),
    Case("translate", "`--input /dev/zero` (endless NUL bytes; read a line at a time, never whole)",
         lambda ws: translate(ws.model, Path("/dev/zero"))),
    Case("translate", "output file exists",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(ws.file("exists.txt", "keep me\n")))),
    Case("translate", "`--beam 0`", lambda ws: translate(ws.model, in_txt(ws), "--beam", "0")),
    Case("translate", "`--n-best` larger than the beam", lambda ws: translate(ws.model, in_txt(ws), "--n-best", "5")),
    Case("translate", "Unicode, zero-width and RTL marks, control characters, empty and 100,000-character lines",
         lambda ws: translate(ws.model, ws.file("weird.txt", WEIRD)), code=0, summary=lines_in_out),
    Case("translate", "empty input", lambda ws: translate(ws.model, ws.file("empty.txt", "")), code=0,
         summary=lambda ws, out: lines_in_out(ws, out, "")),
    Case("translate", "`--sample --top-p 1.5`",
         lambda ws: translate(ws.model, in_txt(ws), "--sample", "--top-p", "1.5")),
    Case("translate", "`--sample --temperature 0`",
         lambda ws: translate(ws.model, in_txt(ws), "--sample", "--temperature", "0")),
    Case("translate", "`--sample --temperature 1e-300`",
         lambda ws: translate(ws.model, in_txt(ws), "--sample", "--temperature", "1e-300")),
    Case("translate", "`--sample --seed 2**70`",
         lambda ws: translate(ws.model, in_txt(ws), "--sample", "--seed", str(2**70))),
    Case("translate", "`--sample --top-k -1`", lambda ws: translate(ws.model, in_txt(ws), "--sample", "--top-k", "-1")),
    Case("translate", "`--top-k` without `--sample`", lambda ws: translate(ws.model, in_txt(ws), "--top-k", "5")),
    Case("translate", "`--sample` with a beam (`--beam 2`)", lambda ws: translate(ws.model, in_txt(ws), "--sample")),
    Case("translate", "`--min-len 20 --max-len 10`",
         lambda ws: translate(ws.model, in_txt(ws), "--min-len", "20", "--max-len", "10")),
    Case("translate", "`--no-repeat-ngram -1`", lambda ws: translate(ws.model, in_txt(ws), "--no-repeat-ngram", "-1")),
    Case("translate", "`--length-penalty nan`", lambda ws: translate(ws.model, in_txt(ws), "--length-penalty", "nan")),
    Case("translate", "`--coverage-penalty inf`",
         lambda ws: translate(ws.model, in_txt(ws), "--coverage-penalty", "inf")),
    Case("translate", "`--min-len 2**70`", lambda ws: translate(ws.model, in_txt(ws), "--min-len", str(2**70))),
    Case("translate", "`--max-len 2**70`", lambda ws: translate(ws.model, in_txt(ws), "--max-len", str(2**70))),
    Case("translate", "`--workers 2**70`", lambda ws: translate(ws.model, in_txt(ws), "--workers", str(2**70))),
    Case("ensemble", "`--ensemble-weights 1 nan`",
         lambda ws: translate(ws.model, in_txt(ws), "--model", str(ws.model), "--ensemble-weights", "1", "nan")),
    Case("align", "`--threshold nan`", lambda ws: align(ws, "--model", str(ws.model), "--threshold", "nan")),
    Case("evaluate", "`--bootstrap 2**70`",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--bootstrap", str(2**70))),
    Case("serve", "`--max-wait-ms nan`", lambda ws: ["serve", "--model", str(ws.model), "--max-wait-ms", "nan"]),
    Case("serve", "`--threads 0`", lambda ws: ["serve", "--model", str(ws.model), "--threads", "0"]),
    Case("config", "`train.optimizer: adamax`", lambda ws: ["train", str(ws.config("train:\n  optimizer: adamax\n"))]),
    Case("config", "`train.weight_decay: -0.1`",
         lambda ws: ["train", str(ws.config("train:\n  optimizer: adamw\n  weight_decay: -0.1\n"))]),
    Case("config", "`train.momentum: 0.9` with Adam",
         lambda ws: ["train", str(ws.config("train:\n  momentum: 0.9\n"))]),
    Case("config", "`train.momentum: 1.5`",
         lambda ws: ["train", str(ws.config("train:\n  optimizer: sgd\n  momentum: 1.5\n"))]),
    Case("config", "`train.accum_steps: 0`", lambda ws: ["train", str(ws.config("train:\n  accum_steps: 0\n"))]),
    Case("config", "`train.ema_decay: 1.0`", lambda ws: ["train", str(ws.config("train:\n  ema_decay: 1.0\n"))]),
    Case("config", "`train.early_stopping_metric: ter`",
         lambda ws: ["train", str(ws.config("train:\n  early_stopping_metric: ter\n"))]),
    Case("config", "`train.early_stopping_metric: bleu` with `valid_bleu_sample: 0`",
         lambda ws: ["train", str(ws.config("train:\n  early_stopping_metric: bleu\n  valid_bleu_sample: 0\n"))]),
    Case("checkpoint", "`--checkpoint ema` of a model trained without `train.ema_decay`",
         lambda ws: translate(ws.model, in_txt(ws), "--checkpoint", "ema")),
    Case("translate", "`--buffer 0`", lambda ws: ["translate", "--model", str(ws.model), "--buffer", "0"],
         stdin=b"a b\n"),
    Case("translate", "live loop (`--buffer 1`): invalid UTF-8 on line 2 of stdin",
         lambda ws: ["translate", "--model", str(ws.model), "--buffer", "1"], stdin=b"a b\nc \xff d\n"),
    Case("ensemble", "one of the `--model` folders is missing",
         lambda ws: translate(ws.model, in_txt(ws), "--model", str(ws.root / "missing"))),
    Case("ensemble", "models with different target vocabularies",
         lambda ws: translate(ws.model, in_txt(ws), "--model", str(ws.model_with(swapped_target_words)))),
    Case("ensemble", "`--ensemble-weights` count differs from the models'",
         lambda ws: translate(ws.model, in_txt(ws), "--model", str(ws.model), "--ensemble-weights", "1")),
    Case("config", "`decode.min_len` above `decode.max_len_cap`",
         lambda ws: ["train", str(ws.config("decode:\n  min_len: 20\n  max_len_cap: 10\n"))]),
    # --- evaluate --------------------------------------------------------------------------------
    Case("evaluate", "source and reference differ in line count",
         lambda ws: evaluate(ws, ws.file("s.txt", "a\nb\n"), ws.file("r.txt", "a\n"))),
    Case("evaluate", "empty test set", lambda ws: evaluate(ws, ws.file("s0.txt", ""), ws.file("r0.txt", ""))),
    Case("evaluate", "a 600-word line in the source",
         lambda ws: evaluate(ws, long_line(ws), ws.file("r2.txt", "a\nb\n"))),
    Case("evaluate", "a reference line over 1 MiB",
         lambda ws: evaluate(ws, ws.file("s3.txt", "a\nb\nc\n"), over_a_mebibyte(ws, "r3.txt"))),
    Case("evaluate", "`--json /dev/full --overwrite`: the disk is full (ENOSPC) when the report is written",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--json", "/dev/full",
                             "--overwrite")),
    Case("evaluate", "`--src /dev/zero --ref /dev/zero`",
         lambda ws: evaluate(ws, Path("/dev/zero"), Path("/dev/zero"))),
    Case("evaluate", "a test set of 1,000,001 lines (evaluate holds a test set in memory to score it)",
         lambda ws: evaluate(ws, ws.file("s4.txt", "a\n" * 1_000_001), ws.file("r4.txt", "a\n" * 1_000_001))),
    Case("evaluate", "--length-edges that leave sources out",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--length-unit", "words",
                             "--length-edges", "2", "3")),
    Case("evaluate", "--length-edges not increasing",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--length-edges", "10", "5")),
    Case("evaluate", "unknown BLEU tokenizer",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--tokenize", "nope")),
    Case("evaluate", "`--output` hypotheses file exists",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--output",
                             str(ws.file("hyps.txt", "keep me\n")))),
    Case("evaluate", "`--n-best` without `--output`",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--n-best", "2")),
    Case("evaluate", "`--json` report exists",
         lambda ws: evaluate(ws, ws.corpus / "test.src", ws.corpus / "test.tgt", "--json",
                             str(ws.file("report.json", "{}")))),
    # --- serve (refused before anything listens) --------------------------------------------------
    Case("serve", "`--max-queue-sentences` below `--max-texts`",
         lambda ws: ["serve", "--model", str(ws.model), "--max-queue-sentences", "8"]),
    Case("serve", "`--max-batch-cost 0`", lambda ws: ["serve", "--model", str(ws.model), "--max-batch-cost", "0"]),
    # --- explore ---------------------------------------------------------------------------------
    Case("explore", "neither `--export` nor `--json`", lambda ws: ["explore", str(ws.model)]),
    Case("explore", "`--sentences` file does not exist",
         lambda ws: ["explore", str(ws.model), "--export", str(ws.root / "e.html"), "--sentences",
                     str(ws.root / "none.txt")]),
    Case("explore", "two models of one name", lambda ws: ["explore", f"m={ws.model}", f"m={ws.model}", "--export",
                                                          str(ws.root / "e.html")]),
    Case("explore", "`--top-k 0`", lambda ws: ["explore", str(ws.model), "--export", str(ws.root / "e.html"),
                                               "--top-k", "0"]),
    # --- plot-attention --------------------------------------------------------------------------
    Case("plot-attention", "empty sentence",
         lambda ws: ["plot-attention", "--model", str(ws.model), "  ", "--out", str(ws.root / "a.png")]),
    Case("plot-attention", "picture exists",
         lambda ws: ["plot-attention", "--model", str(ws.model), "a b", "--out", str(ws.file("b.png", b"png"))]),
    Case("plot-attention", "a sentence of 60,000 words (about what one command-line argument holds)",
         lambda ws: ["plot-attention", "--model", str(ws.model), "w " * 60_000, "--out", str(ws.root / "c.png")]),
    # --- the input gate, outside the command line (attnmt/decode/inputs.py) ------------------------------
    Case("Python API", '`attnmt.load(DIR).translate("w " * 100_000)`: one sentence of 100,000 words',
         code="UserError", call=python_api(lambda t: t.translate("w " * 100_000))),
    Case("Python API", "`translate(...)` of a sentence over 1 MiB", code="UserError",
         call=python_api(lambda t: t.translate(["a b", "w" * ((1 << 20) + 1)]))),
    Case("Python API", "`translate(..., prefix=...)` with a prefix of 600 words", code="UserError",
         call=python_api(lambda t: t.translate("a b", prefix="w " * 600))),
    Case("server", "`POST /translate` with 150,000 texts", code=422,
         call=http_post("/translate", {"texts": ["a"] * 150_000})),
    Case("server", "`POST /translate` with 150,000 texts of one space each (counted before any is validated)",
         code=422, call=http_post("/translate", {"texts": [" "] * 150_000})),
    Case("guided alignment", "a link past the end of its sentence pair",
         lambda ws: ["train", str(guided_config(ws, "0-0 0-40\n")), "--model-dir", str(ws.folder())]),
    Case("guided alignment", "a link in Arabic-Indic digits (`١-0`)",
         lambda ws: ["train", str(guided_config(ws, "0-0 ١-0\n")), "--model-dir", str(ws.folder())]),
    Case("align", "a gold link in Arabic-Indic digits (`١-1`)",
         lambda ws: align(ws, "--baseline", "diagonal", "--gold", str(ws.file("gold.txt", "1-1 ١-1\n" * 40)))),
    Case("guided alignment", "a link that is not i-j",
         lambda ws: ["train", str(guided_config(ws, "0-0 1:1\n")), "--model-dir", str(ws.folder())]),
    Case("guided alignment", "links file shorter than the corpus",
         lambda ws: ["train", str(guided_config(ws, "0-0\n0-0\n")), "--model-dir", str(ws.folder())]),
    Case("guided alignment", "links for a seq2seq model (no attention)",
         lambda ws: ["train", str(guided_config(ws, "0-0\n", "seq2seq")), "--model-dir", str(ws.folder())]),
    Case("guided alignment", "a head for an rnnsearch model",
         lambda ws: ["train", str(guided_config(ws, "0-0\n", extra="    head: 0\n")), "--model-dir",
                     str(ws.folder())]),
    Case("guided alignment", "a row that is neither predict nor shift",
         lambda ws: ["train", str(guided_config(ws, "0-0\n", extra="    row: next\n")), "--model-dir",
                     str(ws.folder())]),
    Case("align", "`--symmetrize` without `--reverse-model`",
         lambda ws: align(ws, "--model", str(ws.model), "--symmetrize", "union")),
    Case("align", "`--head` for an rnnsearch model", lambda ws: align(ws, "--model", str(ws.model), "--head", "0")),
    Case("align", "links file to write exists",
         lambda ws: align(ws, "--baseline", "diagonal", "--out", str(ws.file("links.txt", "0-0\n")))),
    Case("align", "a target line over 1 MiB",
         lambda ws: ["align", "--src", str(ws.file("a3.src", "a b\nc\nd\n")), "--tgt",
                     str(over_a_mebibyte(ws, "a3.tgt")), "--baseline", "diagonal"]),
    Case("align", "a 600-word line, aligned with a model",
         lambda ws: ["align", "--src", str(long_line(ws)), "--tgt", str(ws.file("a4.tgt", "a b\nc\n")),
                     "--model", str(ws.model)]),
    Case("align-prepare", "`--test-lines 0`",
         lambda ws: ["align-prepare", "--src-lang", "en", "--tgt-lang", "fr",
                     "--parallel", str(ws.corpus / "train.src"), str(ws.corpus / "train.tgt"),
                     "--gold-src", str(ws.corpus / "test.src"), "--gold-tgt", str(ws.corpus / "test.tgt"),
                     "--test", str(ws.corpus / "test.src"), str(ws.corpus / "test.tgt"),
                     "--test-lines", "0", "--no-links", "--out-dir", str(ws.folder())]),
    Case("align-table", "`--test-src` without `--test-tgt`",
         lambda ws: ["align-table", "--src", str(ws.corpus / "test.src"), "--tgt", str(ws.corpus / "test.tgt"),
                     "--gold", str(ws.file("gold2.txt", "1-1\n" * 40)), "--model", f"m={ws.model}",
                     "--test-src", str(ws.corpus / "test.src")]),
    Case("translate", "`--alignments --symmetrize` without `--reverse-model`",
         lambda ws: translate(ws.model, in_txt(ws), "--alignments", "--symmetrize", "intersection")),
    # --- output files (attnmt/runtime/safe_write.py) ------------------------------------------------------
    Case("output file", "`--output` a symbolic link to a file that does not exist",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(
             (ws.root / "dangling.txt").symlink_to(ws.root / "gone" / "out.txt") or ws.root / "dangling.txt"))),
    Case("output file", "`--output` a symbolic link to a file, with `--overwrite`: written through to the target",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(link_to_file(ws)), "--overwrite"), code=0,
         summary=through_the_link),
    Case("output file", "`--output` a FIFO (no `--overwrite` needed: nothing is replaced)",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(ws.root / "pipe")), code=0,
         around=fifo_with_reader, summary=through_the_fifo),
    Case("output file", "`--output` a symbolic link to `/dev/full`: the device is written to, not replaced",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(
             (ws.root / "full").symlink_to("/dev/full") or ws.root / "full"))),
    Case("output file", "`--output FILE --overwrite` and the disk fills up (ENOSPC) while it is written",
         lambda ws: translate(ws.model, in_txt(ws), "--output", str(ws.file("kept.txt", "old\n")), "--overwrite"),
         around=lambda ws: full_disk_for_text()),
    Case("output file", "`--output` a folder", lambda ws: translate(ws.model, in_txt(ws), "--output", str(ws.root),
                                                                   "--overwrite")),
    # --- config bounds (attnmt/config/yaml_input.py) -----------------------------------------------------
    Case("config", "`name: ../x` (a model name that is a path)",
         lambda ws: ["train", str(ws.config("name: ../x\n"))]),
    Case("config", "an alias bomb (the billion laughs, 9 levels of 9) in `data.transforms`",
         lambda ws: ["train", str(ws.config(f"data:\n  transforms: {lol_bomb(9, 9)}\n"))]),
    Case("config", "the same alias bomb given through `--set`",
         lambda ws: ["train", str(ws.config()), "--set", f"data.transforms={lol_bomb(9, 9)}"]),
    Case("config", "lists nested 10,000 deep", lambda ws: ["train", str(ws.config(
        "data:\n  transforms: " + "[" * 10_000 + "]" * 10_000 + "\n"))]),
    Case("config", "a 2 MiB config", lambda ws: ["train", str(ws.config("# padding\n" * 210_000))]),
    # --- model folders in use (attnmt/runtime/lock.py) --------------------------------------------
    Case("model folder", "`train --resume` of a folder that another run is training",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--model-dir", str(ws.notes["locked"]), "--resume"],
         around=folder_in_use),
    Case("model folder", "`average` of a folder that a run is training",
         lambda ws: ["average", "--model", str(ws.notes["locked"])], around=folder_in_use),
    Case("model folder", "`train` a folder whose run was killed before its first checkpoint (no `--overwrite`)",
         lambda ws: ["train", str(ws.config()), "--model-dir", str(killed_before_its_first_checkpoint(ws))], code=0,
         summary=started),
    Case("checkpoint", "`--resume` a `last.pt` whose `train_state.step` is -5 (checksum intact)",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--resume", "--model-dir",
                     str(ws.model_with(malformed_state))]),
    Case("checkpoint", "`--resume` a `last.pt` whose optimizer state has the wrong shapes (checksum intact)",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--resume", "--model-dir", str(ws.model_with(
             optimizer_state(lambda s: s.update(exp_avg=torch.zeros(7, 3)))))]),
    Case("checkpoint", "`--resume` a `last.pt` whose optimizer state holds a NaN (checksum intact)",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--resume", "--model-dir", str(ws.model_with(
             optimizer_state(lambda s: s["exp_avg_sq"].view(-1).__setitem__(0, float("nan")))))]),
    Case("checkpoint", "`--checkpoint best` of a folder without `best.pt` (a run stopped before its first validation)",
         lambda ws: translate(ws.model_with(lambda m: (m / "checkpoints" / "best.pt").unlink()), in_txt(ws),
                              "--checkpoint", "best")),
    # --- checkpoints and tokenizers (attnmt.folder.checkpoint) -----------------------------------
    Case("model folder", "source and target vocabularies swapped",
         lambda ws: translate(ws.model_with(swapped_vocabularies), in_txt(ws))),
    Case("model folder", "an empty sentencepiece model (`src.model` of 0 bytes)",
         lambda ws: translate(ws.model_with(emptied_sentencepiece_model), in_txt(ws))),
    Case("model folder", "`train --resume` with the vocabularies swapped",
         lambda ws: ["train", str(ws.model / "config.yaml"), "--resume", "--model-dir",
                     str(ws.model_with(swapped_vocabularies))]),
    Case("checkpoint", "a weight saved as an expanded view (checksummed as dense, contiguous bytes)",
         lambda ws: translate(ws.best_payload(expanded_weight), ws.file("three.txt", "a b\nc\nd e\n")), code=0,
         summary=lambda ws, out: lines_in_out(ws, out, "a b\nc\nd e\n")),
    Case("serve", "`--port` in use by another program",
         lambda ws: ["serve", "--model", str(ws.model), "--port", str(ws.notes["port"])], around=port_in_use),
]


def run_case(case: Case, ws: Workspace) -> Result:
    from attnmt.cli import main

    if case.call is not None:
        code, said = case.call(ws)
        return Result(case, code, said, "")
    out, err = io.StringIO(), io.StringIO()
    stdin = sys.stdin
    if case.stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin))
    try:
        with case.around(ws) if case.around else contextlib.nullcontext():
            argv = case.argv(ws)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = _call(main, argv)
    finally:
        sys.stdin = stdin
    return Result(case, code, out.getvalue(), err.getvalue())


def _call(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse refuses the command line before main's own handling
        return e.code


def run_all(root: Path, model: Path, corpus: Path) -> tuple[Workspace, list[Result]]:
    ws = Workspace(root, model, corpus)
    return ws, [run_case(case, ws) for case in CASES]


def render(ws: Workspace, results: list[Result]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "# Bad inputs and what the user sees",
        "",
        "Every row is a real run: `tests/bad_inputs.py` builds the input, calls the command line",
        "(`attnmt.cli.main`) and records the exit code and the exact line on stderr. Regenerate with",
        "`.venv/bin/python -m tests.bad_inputs`; `tests/cli/test_security.py::test_bad_inputs_table` fails",
        "when this file is out of date. `<dir>` is a scratch folder, `<model>` a tiny trained model",
        "folder, `<corpus>` its training corpus.",
        "",
        "The contract: a refused input exits with code 2 and one line on stderr that names the file",
        "(and line) and says what to do; input that can be handled is handled (exit 0). Never a",
        "traceback, never a hang. A crafted checkpoint or config never runs code.",
        "",
        "Rows of the Python API and the HTTP API show the exception a call raises (its traceback's last",
        "line) and the response a request gets. Every sentence comes in through one input gate",
        "(`attnmt/decode/inputs.py`): at most 1 MiB and 512 tokens a sentence, and on the server",
        "`--max-texts` sentences of `--max-text-chars` characters a request; each refused in one line",
        "before the work that grows with it.",
        "",
        "Nothing the user had is lost. A regular output file is replaced atomically (a temporary file beside",
        "it, renamed over it) and only with `--overwrite`; a FIFO, a character device or `/dev/stdout` is",
        "written to and never replaced; a symbolic link is written through to its target, and a link to a",
        "file that does not exist is refused; a failed write leaves the old file whole and no temporary file",
        "(`attnmt/runtime/safe_write.py`). One process at a time writes a model folder (`attnmt/runtime/lock.py`).",
        "Configs and `--set` values are read within bounds: at most 1 MiB, 64 levels of nesting and 100,000",
        "values once YAML aliases are expanded (`attnmt/config/yaml_input.py`).",
        "",
        "| Area | Bad input | Exit | What the user sees |",
        "|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.case.area} | {cell(r.case.what)} | {r.code} | {cell(r.seen(ws))} |")
    return "\n".join(lines) + "\n"


def _tiny_model(root: Path) -> tuple[Path, Path]:
    """The corpus and model of the tests' session fixtures (tests/conftest.py), built here."""
    from attnmt.data.synthetic_corpus import make_splits, write_corpus
    from attnmt.train.trainer import train
    from tests.conftest import tiny_config

    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for name, pairs in make_splits(600, 40, 40, min_len=3, max_len=10, seed=5).items():
        write_corpus(pairs, corpus, name)
    model = root / "models" / "rnnsearch"
    train(tiny_config(corpus), model, quiet=True)
    return corpus, model


def main() -> None:
    import tempfile

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        corpus, model = _tiny_model(Path(tmp))
        ws, results = run_all(Path(tmp) / "work", model, corpus)
        DOC.write_text(render(ws, results), encoding="utf-8")
    bad = [r for r in results if r.code != r.case.code]
    print(f"{DOC}: {len(results)} cases" + (f"; {len(bad)} break the contract" if bad else ""))


if __name__ == "__main__":
    main()
