"""Checkpoints and tokenizers cannot be mixed up: a checkpoint records the hash of the tokenizers it was
trained with, and a folder whose files differ is refused in one line wherever a model folder is loaded;
tensors of any layout are checksummed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from attnmt.cli import main
from attnmt.data.store import tokenizer_hash
from attnmt.folder.checkpoint import load_checkpoint, save_checkpoint


def copy_of(tiny_model: Path, tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    return model


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    return line


def swap(model: Path, a: str, b: str) -> None:
    (model / a).rename(model / "swap")
    (model / b).rename(model / a)
    (model / "swap").rename(model / b)


def test_checkpoints_record_the_hash_of_their_tokenizers(tiny_model):
    for name in ("best", "last"):
        assert load_checkpoint(tiny_model / "checkpoints" / f"{name}.pt")["tokenizers"] == tokenizer_hash(tiny_model)


@pytest.mark.parametrize("edit", ["swapped", "edited", "emptied sentencepiece model"])
def test_a_folder_whose_tokenizers_differ_is_refused(edit, tiny_model, tmp_path, capsys):
    model = copy_of(tiny_model, tmp_path)
    if edit == "swapped":  # source and target vocabularies exchanged: it translated garbage
        swap(model, "src.vocab", "tgt.vocab")
    elif edit == "edited":
        with (model / "tgt.vocab").open("a", encoding="utf-8") as f:
            f.write("extra\n")
    else:  # a sentencepiece model emptied (a failed copy)
        (model / "src.json").write_text(json.dumps({"kind": "bpe"}), encoding="utf-8")
        (model / "src.model").write_bytes(b"")
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    line = refused(["translate", "--model", str(model), "--input", str(src)], capsys)
    assert line.startswith(f"attnmt: error: {model}: its tokenizer and vocabulary files (")
    assert line.endswith("are not the ones checkpoint best.pt was trained with (swapped, edited, emptied or "
                         "replaced); put the model folder's own files back, or retrain")


def test_a_resume_with_other_tokenizers_is_refused(tiny_model, tmp_path, capsys):
    model = copy_of(tiny_model, tmp_path)
    swap(model, "src.vocab", "tgt.vocab")
    line = refused(["train", str(model / "config.yaml"), "--model-dir", str(model), "--resume"], capsys)
    assert "are not the ones checkpoint last.pt was trained with" in line


@pytest.mark.parametrize("layout", ["expanded", "sparse", "conjugate"])
def test_tensors_of_any_layout_are_checksummed(layout, tmp_path):
    tensor = {"expanded": torch.ones(3).expand(4, 3), "sparse": torch.eye(3).to_sparse(),
              "conjugate": torch.ones(2, dtype=torch.complex64).conj()}[layout]
    path = tmp_path / "c.pt"
    save_checkpoint({"model_type": "rnnsearch", "model": {"w": tensor}}, path)
    loaded = load_checkpoint(path)["model"]["w"]
    assert loaded.layout == torch.strided and loaded.is_contiguous()
    assert torch.equal(loaded, tensor.to_dense() if layout == "sparse" else tensor.resolve_conj())


def test_checkpoint_best_means_best_pt_and_the_default_says_when_it_loads_last(tiny_model, tmp_path, capsys):
    model = copy_of(tiny_model, tmp_path)
    (model / "checkpoints" / "best.pt").unlink()  # a run stopped before its first validation
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    line = refused(["translate", "--model", str(model), "--input", str(src), "--checkpoint", "best"], capsys)
    assert line == f"attnmt: error: {model} has no checkpoint 'best'; available: last"
    assert main(["translate", "--model", str(model), "--input", str(src)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert err.splitlines() == [f"attnmt: note: {model} has no checkpoints/best.pt (written at its first validation); "
                                "using checkpoints/last.pt"]
    assert main(["translate", "--model", str(tiny_model), "--input", str(src)]) == 0  # best.pt there: no note
    assert capsys.readouterr().err == ""


def test_an_empty_sentencepiece_model_is_one_line_without_a_recorded_hash_too(tiny_model, tmp_path, capsys):
    """A checkpoint written before checkpoints recorded their tokenizers: the empty file itself is refused."""
    model = copy_of(tiny_model, tmp_path)
    best = model / "checkpoints" / "best.pt"
    payload = load_checkpoint(best)
    for key in ("format_version", "checksum", "tokenizers"):
        del payload[key]
    save_checkpoint(payload, best)
    (model / "src.json").write_text(json.dumps({"kind": "bpe"}), encoding="utf-8")
    (model / "src.model").write_bytes(b"")
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    assert refused(["translate", "--model", str(model), "--input", str(src)], capsys) == (
        f"attnmt: error: {model / 'src.model'} is empty, not a sentencepiece model; restore it from the model folder "
        "it came from, or retrain the tokenizer")
