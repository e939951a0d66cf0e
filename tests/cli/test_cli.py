"""The command line: every bad input is one line on stderr, exit code 2, no traceback."""

import gzip
import subprocess
import sys

import pytest

from attnmt.cli import main


def run(capsys, *argv, stdin=None, monkeypatch=None):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code, err, *fragments):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("attnmt: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def config_file(tmp_path, tiny_corpus):
    def make(**data):
        lines = ["data:", "  tokenizer: word"]
        for key, value in data.items():
            lines.append(f"  {key}: {value}")
        lines += ["train:", "  max_steps: 2", "  progress: false", "  tensorboard: false", "  threads: 1"]
        path = tmp_path / "config.yaml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    return make


def test_train_missing_file(capsys, config_file, tmp_path):
    cfg = config_file(train_src=str(tmp_path / "nope.de"), train_tgt=str(tmp_path / "nope.en"))
    code, _, err = run(capsys, "train", str(cfg), "--model-dir", str(tmp_path / "m"))
    assert_user_error(code, err, "nope.de")


def test_train_different_line_counts(capsys, config_file, tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("eins\nzwei\n", encoding="utf-8")
    cfg = config_file(train_src=str(tmp_path / "a.txt"), train_tgt=str(tmp_path / "b.txt"))
    code, _, err = run(capsys, "train", str(cfg), "--model-dir", str(tmp_path / "m"))
    assert_user_error(code, err, "a.txt", "b.txt", "3", "2")


def test_train_invalid_utf8_names_file_and_line(capsys, config_file, tmp_path):
    (tmp_path / "a.txt").write_bytes(b"good\nbad \xff\xfe here\n")
    (tmp_path / "b.txt").write_text("gut\nschlecht\n", encoding="utf-8")
    cfg = config_file(train_src=str(tmp_path / "a.txt"), train_tgt=str(tmp_path / "b.txt"))
    code, _, err = run(capsys, "train", str(cfg), "--model-dir", str(tmp_path / "m"))
    assert_user_error(code, err, "a.txt:2")


def test_train_invalid_utf8_in_gzip(capsys, config_file, tmp_path):
    with gzip.open(tmp_path / "a.txt.gz", "wb") as f:
        f.write(b"ok\n\xc3\x28\n")
    (tmp_path / "b.txt").write_text("gut\nschlecht\n", encoding="utf-8")
    cfg = config_file(train_src=str(tmp_path / "a.txt.gz"), train_tgt=str(tmp_path / "b.txt"))
    code, _, err = run(capsys, "train", str(cfg), "--model-dir", str(tmp_path / "m"))
    assert_user_error(code, err, "a.txt.gz:2")


def test_train_unknown_config_key(capsys, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  learning_rate: 0.1\n", encoding="utf-8")
    code, _, err = run(capsys, "train", str(cfg))
    assert_user_error(code, err, "train.learning_rate")


def test_train_refuses_non_empty_model_dir(capsys, config_file, tiny_corpus, tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "precious.txt").write_text("keep me", encoding="utf-8")
    cfg = config_file(train_src=tiny_corpus / "train.src", train_tgt=tiny_corpus / "train.tgt")
    code, _, err = run(capsys, "train", str(cfg), "--model-dir", str(model_dir))
    assert_user_error(code, err, "--overwrite")
    assert (model_dir / "precious.txt").read_text(encoding="utf-8") == "keep me"


def test_train_then_translate_and_evaluate(capsys, config_file, tiny_corpus, tmp_path):
    cfg = config_file(train_src=tiny_corpus / "train.src", train_tgt=tiny_corpus / "train.tgt")
    model_dir = tmp_path / "m"
    code, out, err = run(capsys, "train", str(cfg), "--model-dir", str(model_dir), "--set", "model.hidden_size=16",
                         "--set", "model.emb_size=8")
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", "--model", str(model_dir), "--src", str(tiny_corpus / "test.src"),
                         "--ref", str(tiny_corpus / "test.tgt"), "--beam", "2", "--tokenize", "none")
    assert code == 0, err
    assert "BLEU = " in out and "chrF = " in out and "nrefs:1" in out and "Source length" in out


def test_translate_input_and_output_files(capsys, tiny_model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n\nd e\n", encoding="utf-8")
    out_path = tmp_path / "out.txt"
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(src), "--output",
                       str(out_path), "--beam", "2")
    assert code == 0, err
    assert len(out_path.read_text(encoding="utf-8").splitlines()) == 3
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(src), "--output",
                       str(out_path))
    assert_user_error(code, err, "out.txt", "--overwrite")


def test_translate_with_worker_processes(capsys, tiny_model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n\nd e\nc a\nb\n", encoding="utf-8")
    outputs = []
    for workers in ("1", "2"):
        code, out, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(src), "--beam", "2",
                             "--workers", workers)
        assert code == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 5


def test_translate_n_best_format(capsys, tiny_model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n", encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(src), "--beam", "3",
                         "--n-best", "3")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and all(line.startswith("0 ||| ") for line in lines)


@pytest.mark.parametrize("args, fragment", [
    (["--beam", "0"], "beam=0"),
    (["--beam", "2", "--n-best", "5"], "n_best=5"),
    (["--workers", "0"], "workers=0"),
])
def test_translate_bad_search_settings(capsys, tiny_model, tmp_path, args, fragment):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(src), *args)
    assert_user_error(code, err, fragment)


def test_translate_bad_inputs(capsys, tiny_model, tmp_path):
    code, _, err = run(capsys, "translate", "--model", str(tmp_path / "missing"), "--input", "x")
    assert_user_error(code, err, "missing")
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"abc\x00\x01\x02")
    code, _, err = run(capsys, "translate", "--model", str(tiny_model), "--input", str(binary))
    assert_user_error(code, err, "bin.dat:1")


def test_corrupted_checkpoint_is_one_line(capsys, tiny_model, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    best = broken / "checkpoints" / "best.pt"
    best.write_bytes(best.read_bytes()[:1000])
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    code, _, err = run(capsys, "translate", "--model", str(broken), "--input", str(src))
    assert_user_error(code, err, "best.pt", "truncated or corrupted")


def test_plot_attention(capsys, tiny_model, tmp_path):
    out = tmp_path / "a.png"
    code, stdout, err = run(capsys, "plot-attention", "--model", str(tiny_model), "a b c", "--out", str(out))
    assert code == 0, err
    assert out.stat().st_size > 1000
    code, _, err = run(capsys, "plot-attention", "--model", str(tiny_model), "a b c", "--out", str(out))
    assert_user_error(code, err, "--overwrite")


def test_demo_refuses_non_empty_output(capsys, tmp_path):
    (tmp_path / "keep.txt").write_text("x", encoding="utf-8")
    code, _, err = run(capsys, "demo", "--out", str(tmp_path))
    assert_user_error(code, err, str(tmp_path), "--overwrite")
    assert (tmp_path / "keep.txt").exists()


def test_real_process_prints_no_traceback(tmp_path):
    """The same as above, through a real `python -m attnmt` process."""
    proc = subprocess.run([sys.executable, "-m", "attnmt", "train", str(tmp_path / "none.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"attnmt: error: config file not found: {tmp_path / 'none.yaml'}; "
                                                "pass the path of a YAML config (see recipes/)"]
