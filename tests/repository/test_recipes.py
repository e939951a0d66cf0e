"""The Multi30k and Chinese recipes run as their READMEs say, at tiny size.

Each test copies the recipe's configs into a temporary repository layout (recipes/NAME/, data/),
fetches the data with `attnmt data` as the README does (Multi30k from ../shared/data, then cut to a
slice of it; Tatoeba from a tiny hand-made file in the site's format), and runs every command of the
README's first code block from that root, with `--set` overrides that make each model tiny and its
training a few updates long. The benchmark commands that write the README's table run once each on
those tiny models, writing their JSON into the temporary folder.
"""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from attnmt.cli import main
from tests.data.test_tatoeba import write_tatoeba

ROOT = Path(__file__).resolve().parents[2]
SHARED_MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not SHARED_MULTI30K.is_dir(),
    reason=f"the Multi30k files are not in {SHARED_MULTI30K} (attnmt data multi30k DIR writes them)")

TINY_TRAINING = ["train.max_steps=6", "train.valid_every=3", "train.save_every=1", "train.batch_tokens=300",
                 "train.threads=1", "train.progress=false", "train.tensorboard=false", "decode.beam=2"]
TINY_MODEL = {
    "transformer": ["model.d_model=16", "model.n_heads=2", "model.ff_size=32", "model.enc_layers=1",
                    "model.dec_layers=1"],
    "rnnsearch": ["model.emb_size=16", "model.hidden_size=16"],
    "seq2seq": ["model.emb_size=16", "model.hidden_size=16"],
}


def readme_commands(recipe: str, block: int = 0) -> list[str]:
    """The commands of the `block`-th bash block of recipes/RECIPE/README.md, continuation lines joined,
    comments dropped."""
    text = (ROOT / "recipes" / recipe / "README.md").read_text(encoding="utf-8")
    code = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)[block]
    code = code.replace("\\\n", " ")
    return [" ".join(line.split("#", 1)[0].split()) for line in code.splitlines() if line.split("#", 1)[0].strip()]


def tiny(config: Path, vocab_size: int, extra: list[str]) -> list[str]:
    model_type = yaml.safe_load(config.read_text(encoding="utf-8"))["model"]["type"]
    sets = TINY_TRAINING + TINY_MODEL[model_type] + [f"data.vocab_size={vocab_size}"] + extra
    return [arg for s in sets for arg in ("--set", s)]


def piped(argv: list[str], line: str, capsys) -> str:
    """`echo LINE | attnmt ARGV` in this process: `main` reads its stdin from a real pipe (the live translate loop,
    as behind `echo`; tests/decode/test_interactive.py runs that loop in a process of its own). Returns stdout."""
    read, write = os.pipe()
    with os.fdopen(write, "w", encoding="utf-8") as writer:
        writer.write(line + "\n")
    stdin = sys.stdin
    with open(read, encoding="utf-8") as sys.stdin:
        try:
            code = main(argv)
        finally:
            sys.stdin = stdin
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    return out


def run_readme(root: Path, commands: list[str], vocab_size: int, extra: list[str], capsys) -> tuple[list[str], str]:
    """Run each README command from `root` through `main`, a piped `echo` with its line on a pipe for stdin.
    Returns the outputs of the piped translations and what the other commands printed."""
    outputs, printed = [], capsys.readouterr().out
    for command in commands:
        echo, _, rest = command.rpartition("|")
        argv = shlex.split(rest)
        assert argv[0] == "attnmt", command
        if argv[1] == "train":
            argv += tiny(root / argv[2], vocab_size, extra)
        if echo:
            outputs.append(piped(argv[1:], shlex.split(echo)[1], capsys).strip())
        else:
            assert main(argv[1:]) == 0, command
            printed += capsys.readouterr().out
    return outputs, printed


def run_benchmark(module: str, argv: list[str], monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [module, *argv])
    assert importlib.import_module(f"benchmarks.{module}").main() == 0


def layout(tmp_path: Path, recipe: str, monkeypatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "recipes" / recipe, root / "recipes" / recipe)
    monkeypatch.chdir(root)
    return root


def cut(path: Path, lines: int) -> None:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        kept = [next(f) for _ in range(lines)]
    path.chmod(0o644)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(kept)


@pytest.mark.slow  # every command of the recipe's README on the real corpus
@pytest.mark.timeout(900)
@needs_multi30k
def test_the_multi30k_recipe_runs_as_its_readme_says(tmp_path, monkeypatch, capsys):
    root = layout(tmp_path, "multi30k", monkeypatch)
    commands = readme_commands("multi30k")
    assert commands[0] == "attnmt data multi30k data/multi30k"
    assert main(["data", "multi30k", "data/multi30k", "--from", str(SHARED_MULTI30K)]) == 0  # checksums verified
    for path in (root / "data" / "multi30k").glob("*.gz"):  # then a slice, for tiny training
        cut(path, 200 if path.name.startswith("train") else 12)

    piped, printed = run_readme(root, commands[1:], vocab_size=300, extra=[], capsys=capsys)
    assert len(piped) == 1 and piped[0]  # a tiny model says something, in one line
    assert (root / "models" / "multi30k_de_en_transformer" / "checkpoints" / "averaged.pt").is_file()
    assert "BLEU" in printed

    # every config the README names is in the recipe, and every config of the recipe trains
    named = set(re.findall(r"recipes/multi30k/(\w+\.yaml)", (ROOT / "recipes/multi30k/README.md").read_text("utf-8")))
    assert named == {p.name for p in (ROOT / "recipes" / "multi30k").glob("*.yaml")}
    for config in sorted(named - {"de_en_rnnsearch_luong.yaml", "de_en_transformer.yaml"}):
        path = root / "recipes" / "multi30k" / config
        assert main(["train", str(path.relative_to(root)), *tiny(path, 300, [])]) == 0, config

    # the table's benchmark, as its first command writes it
    benchmark = readme_commands("multi30k", block=1)[0]
    assert benchmark.startswith("python -m benchmarks.translation recipes/multi30k/de_en_rnnsearch_luong.yaml")
    out = tmp_path / "result.json"
    config = root / "recipes" / "multi30k" / "de_en_rnnsearch_luong.yaml"
    run_benchmark("translation", [*shlex.split(benchmark)[3:], "--out", str(out), "--beams", "1",
                                  *tiny(config, 300, [])], monkeypatch)
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["training"]["steps"] == 6 and result["evaluation"]["beam1"]["sentences"] == 12


def test_the_chinese_recipe_runs_as_its_readme_says(tmp_path, monkeypatch, capsys):
    root = layout(tmp_path, "chinese", monkeypatch)
    commands = readme_commands("chinese")
    assert commands[0].startswith("attnmt data tatoeba cmn-eng data/tatoeba")
    cmn = write_tatoeba(tmp_path / "cmn.txt")  # the site's cmn.txt, as a tiny hand-made file
    assert main(["data", "tatoeba", "cmn-eng", "data/tatoeba", "--from", str(cmn)]) == 0
    assert (root / "data" / "tatoeba" / "cmn-eng.tsv.gz").is_file()

    piped, _ = run_readme(root, commands[1:], vocab_size=120, extra=["data.valid_size=4", "data.test_size=4",
                                                                   "train.valid_bleu_sample=0"], capsys=capsys)
    assert len(piped) == 2 and all(piped)
    assert re.search(r"[\u4e00-\u9fff]", piped[1])  # English -> Chinese says something in Chinese
    assert (root / "woaini.png").stat().st_size > 0
    named = set(re.findall(r"recipes/chinese/(\w+\.yaml)", (ROOT / "recipes/chinese/README.md").read_text("utf-8")))
    assert named == {p.name for p in (ROOT / "recipes" / "chinese").glob("*.yaml")}

    # the benchmark that measures the punctuation columns of the table
    out = tmp_path / "zh.json"
    run_benchmark("chinese", ["--model", "900 s=models/tatoeba_zh_en_rnnsearch", "--out", str(out)], monkeypatch)
    measured = json.loads(out.read_text(encoding="utf-8"))["models"]["900 s"]["test"]
    assert measured["sources_changed_by_removal"] == 4  # every tiny test source ends in 。 or ！
    capsys.readouterr()
