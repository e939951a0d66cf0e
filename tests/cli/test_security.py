"""Inputs that cannot hurt: crafted checkpoints run no code, broken ones give one clear line,
configs name the bad key and what is allowed, and every bad input in docs/bad_inputs.md keeps the
command-line contract (exit 2 and one line, or handled; never a traceback)."""

from __future__ import annotations

import builtins
import functools
import io
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnmt.config.schema import load_config
from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_checkpoint, payload_digest
from tests import bad_inputs

ROOT = Path(__file__).resolve().parents[2]


class Gadget:
    """Unpickling this calls `func(*args)`: the classic pickle code-execution payload."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def gadgets(marker: Path) -> dict[str, Gadget]:
    touch = f"touch {marker}"
    return {
        "os.system": Gadget(os.system, touch),
        "builtins.exec": Gadget(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
        "builtins.eval": Gadget(builtins.eval, f"open({str(marker)!r}, 'w')"),
        "subprocess.call": Gadget(subprocess.call, ["touch", str(marker)]),
        "functools.partial": Gadget(functools.partial(os.system, touch)),
        # a payload that unpickles a second payload: nested deserialization must be refused as well
        "pickle.loads": Gadget(pickle.loads, pickle.dumps(Gadget(os.system, touch))),
    }


def model_copy(tiny_model: Path, tmp_path: Path, checkpoint: bytes) -> Path:
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    (model / "checkpoints" / "best.pt").write_bytes(checkpoint)
    return model


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("gadget", list(gadgets(Path("x"))))
def test_crafted_checkpoint_runs_no_code(tmp_path, gadget, protocol):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    payload = {"format_version": 1, "model_type": "rnnsearch", "model": {"w": gadgets(marker)[gadget]}}
    torch.save(payload, path, pickle_protocol=protocol)
    with pytest.raises(UserError, match="was refused: it contains objects other than tensors"):
        load_checkpoint(path)
    assert not marker.exists()


def test_raw_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"model": Gadget(os.system, f"touch {marker}")}))
    with pytest.raises(UserError, match="not a zip archive"):
        load_checkpoint(path)
    assert not marker.exists()


def test_malicious_checkpoint_through_the_real_command(tiny_model, tmp_path):
    """A real `python -m attnmt` process: no code runs, one line on stderr (torch's warnings about
    the pickle protocol included), exit code 2."""
    marker = tmp_path / "PWNED"
    buffer = io.BytesIO()
    torch.save({"format_version": 1, "model_type": "rnnsearch", "model": Gadget(os.system, f"touch {marker}")},
               buffer, pickle_protocol=4)
    model = model_copy(tiny_model, tmp_path, buffer.getvalue())
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "attnmt", "translate", "--model", str(model), "--input", str(src)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    best = model / "checkpoints" / "best.pt"
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()  # protocol 4 pickles also make torch warn: not printed
    assert line.startswith(f"attnmt: error: checkpoint {best} was refused: it contains objects other than tensors "
                           "and plain values (")
    assert line.endswith("); only load checkpoints written by attnmt")
    assert proc.stdout == ""
    assert not marker.exists()


def test_truncated_checkpoints_are_refused_at_any_length(tiny_model, tmp_path):
    data = (tiny_model / "checkpoints" / "best.pt").read_bytes()
    rng = random.Random(7)
    lengths = [0, 1, 2, 4, 22, 100, len(data) - 1, len(data) - 22] + rng.sample(range(len(data)), 12)
    for n in lengths:
        path = tmp_path / f"cut{n}.pt"
        path.write_bytes(data[:n])
        try:
            with pytest.raises(UserError, match=r"^checkpoint .*cut\d+\.pt is truncated or corrupted"):
                load_checkpoint(path)
        finally:
            path.unlink()


def test_flipped_bits_are_caught_or_harmless(tiny_model, tmp_path):
    """A flipped bit anywhere either gives one clear error or (in zip padding, say) changes nothing:
    never different weights loaded silently, never another exception."""
    original = load_checkpoint(tiny_model / "checkpoints" / "best.pt")
    data = (tiny_model / "checkpoints" / "best.pt").read_bytes()
    rng = random.Random(11)
    caught = 0
    for _ in range(24):
        corrupted = bytearray(data)
        corrupted[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path = tmp_path / "flipped.pt"
        path.write_bytes(bytes(corrupted))
        try:
            loaded = load_checkpoint(path)
        except UserError as e:
            assert "flipped.pt" in str(e) and "\n" not in str(e)
            caught += 1
        else:
            assert payload_digest(loaded) == payload_digest(original)
        finally:
            path.unlink()
    assert caught >= 16


def test_foreign_zip_is_refused(tiny_model, tmp_path):
    import zipfile

    path = tmp_path / "foreign.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "not a checkpoint")
    with pytest.raises(UserError, match="foreign.pt is truncated or corrupted"):
        load_checkpoint(path)


# --- configs ---------------------------------------------------------------------------------------

def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text, message", [
    ("trian:\n  lr: 0.1\n", r"unknown key 'trian'; did you mean 'train'\?"),
    ("modle:\n  type: seq2seq\n", r"unknown key 'modle'; did you mean 'model'\?"),
    ("data:\n  train_source: a.txt\n", r"unknown key 'data.train_source'; did you mean 'data.train_src'\?"),
    ("train:\n  nan_polcy: skip\n", r"unknown key 'train.nan_polcy'; did you mean 'train.nan_policy'\?"),
    ("train:\n  xyzzy: 1\n", r"unknown key 'train.xyzzy'; valid keys: seed, batch_tokens, .*save_every"),
])
def test_unknown_keys_name_the_closest_valid_one(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize("text, message", [
    ("train:\n  nan_policy: ignore\n",
     r"train.nan_policy='ignore' has the wrong type or value; allowed: 'skip' \| 'stop'"),
    ("train:\n  save_every: 0\n", r"train.save_every=0 is out of range; allowed: >= 1"),
    ("train:\n  save_every: 2.5\n", r"train.save_every=2.5 has the wrong type or value; allowed: int or null"),
    ("train:\n  valid_every: 0\n", r"train.valid_every=0 is out of range; allowed: >= 1"),
    ("train:\n  lr: 0\n", r"train.lr=0.0 is out of range; allowed: > 0.0"),
    ("train:\n  lr: null\n", r"train.lr=None has the wrong type or value; allowed: float"),
    ("train:\n  lr: [0.1]\n", r"train.lr=\[0.1\] has the wrong type or value; allowed: float"),
    ("train:\n  batch_tokens: true\n", r"train.batch_tokens=True has the wrong type or value; allowed: int"),
    ("train:\n  max_steps: -5\n", r"train.max_steps=-5 is out of range; allowed: >= 1"),
    ("train: 3\n", r"train\.? must be a mapping of keys to values, got 3"),  # "train." today: cosmetic
    ("data:\n  tokenizer: chars\n", r"data.tokenizer='chars' .*allowed: 'bpe' \| 'unigram' \| 'word'"),
    ("data:\n  vocab_size: 4\n", r"data.vocab_size=4 is out of range; allowed: >= 8"),
    ("model:\n  type: transformer\n  d_model: 30\n  n_heads: 4\n",
     r"model.d_model=30 is not divisible by model.n_heads=4"),
    ("decode:\n  beam: 1000\n", r"decode.beam=1000 is out of range; allowed: >= 1 and <= 100"),
])
def test_bad_values_name_the_key_the_value_and_what_is_allowed(tmp_path, text, message):
    with pytest.raises(UserError, match=message) as info:
        load_config(write(tmp_path, text))
    assert str(info.value).startswith(f"{tmp_path / 'c.yaml'}: config: ")


def test_overrides_are_checked_like_the_file(tmp_path):
    # The message names --set, not the file, as the source; `lr` (a part of lr_rate) before lr_patience.
    with pytest.raises(UserError, match=r"^--set train.lr_rate=0.1: unknown key 'train.lr_rate'; did you mean "
                                        r"'train.lr'\?"):
        load_config(write(tmp_path, ""), ["train.lr_rate=0.1"])
    with pytest.raises(UserError, match=r"^--set train.save_every=0: train.save_every=0 is out of range"):
        load_config(write(tmp_path, ""), ["train.save_every=0"])
    with pytest.raises(UserError, match=r"c.yaml: config: unknown key 'train.lr_rate'"):  # from the file: the file
        load_config(write(tmp_path, "train:\n  lr_rate: 0.1\n"), ["train.lr=0.1"])
    assert load_config(write(tmp_path, ""), ["train.save_every=100"]).train.save_every == 100


def test_yaml_cannot_construct_python_objects(tmp_path):
    marker = tmp_path / "PWNED"
    with pytest.raises(UserError, match="uses a YAML tag that attnmt does not accept"):
        load_config(write(tmp_path, f"!!python/object/apply:os.system ['touch {marker}']\n"))
    with pytest.raises(UserError, match="uses a YAML tag that attnmt does not accept"):
        load_config(write(tmp_path, f"train:\n  seed: !!python/object/apply:os.system ['touch {marker}']\n"))
    assert not marker.exists()


# --- the table in docs/bad_inputs.md -------------------------------------------------------------

def test_bad_inputs_table(tiny_model, tiny_corpus, tmp_path):
    ws, results = bad_inputs.run_all(tmp_path / "work", tiny_model, tiny_corpus)
    for r in results:
        where = f"{r.case.area}: {r.case.what}"
        assert "Traceback" not in r.err, where
        assert r.code == r.case.code, (where, r.err)
        if r.code == 2:
            lines = r.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("attnmt: error: "), (where, r.err)
        else:
            assert r.err == "", (where, r.err)
    assert not (ws.root / bad_inputs.MARKER).exists(), "a crafted input ran code"
    table = bad_inputs.render(ws, results)
    assert bad_inputs.DOC.read_text(encoding="utf-8") == table, (
        "docs/bad_inputs.md is out of date; regenerate it with .venv/bin/python -m tests.bad_inputs")
