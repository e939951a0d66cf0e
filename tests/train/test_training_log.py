"""What a person watching training reads (its lines on stdout and in train.log, the progress bar), and a
model folder that a failed run leaves as it found it."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys

import pytest

from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.train.events import RunLog
from attnmt.train.progress import BudgetBar
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def events(model_dir, kind):
    return [r for r in map(json.loads, (model_dir / "train_log.jsonl").open(encoding="utf-8")) if r["event"] == kind]


def logged_lines(model_dir):
    """train.log without the time of day at the start of each line."""
    return [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", line)
            for line in (model_dir / "train.log").read_text(encoding="utf-8").splitlines()]


def test_a_line_per_report_and_validation_on_stdout_and_in_train_log(tiny_corpus, tmp_path, capsys):
    model_dir = tmp_path / "m"
    train(tiny_config(tiny_corpus, max_steps=20, valid_every=10, log_every=5), model_dir)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == "" and "\r" not in out  # no terminal: no bar
    assert logged_lines(model_dir) == lines
    reports = [int(m.group(1)) for m in map(re.compile(r"step (\d+) \| epoch \d+ \| loss ").match, lines) if m]
    assert reports == [5, 10, 15, 20]
    assert all(re.search(r"\| lr 5\.00e-03 \| 0:00:\d\d$", line) for line in lines if line.startswith("step "))
    validations = [line for line in lines if line.startswith("validation at step")]
    valid = events(model_dir, "valid")
    assert [int(v.split()[3]) for v in validations] == [10, 20] == [r["step"] for r in valid]
    for line, record in zip(validations, valid):
        assert (f"loss {record['loss']:.4f} | perplexity {record['ppl']:.2f} | BLEU {record['bleu']:.2f} | "
                f"chrF {record['chrf']:.2f}") in line
    best = min(valid, key=lambda r: r["loss"])
    assert ("the best so far | saved best.pt and last.pt" in validations[0])  # the first is always the best
    start = next(line for line in lines if line.startswith("training rnnsearch"))
    import attnmt

    translator = attnmt.load(model_dir)
    parameters = sum(p.numel() for p in translator.model.parameters())
    assert (f"({parameters:,} parameters)" in start and f"vocabularies {len(translator.src.vocab):,} source, "
            f"{len(translator.tgt.vocab):,} target" in start and "40 for validation" in start)
    assert "cpu, fp32, 1 thread" in start and "budget 20 steps, 100 epochs, whichever ends first" in start
    assert lines[-1].startswith(f"{model_dir}: 20 steps, stopped by max_steps; epoch ")
    assert lines[-1].endswith(f"best validation loss {best['loss']:.4f} (perplexity {best['ppl']:.2f}) at step "
                              f"{best['step']}, in {model_dir}/checkpoints/best.pt")


def test_the_validation_line_names_an_earlier_best(tiny_corpus, tmp_path, capsys):
    # BLEU must rise to count as better; at lr 1e-7 the greedy outputs, so BLEU, stay the same
    config = tiny_config(tiny_corpus, max_steps=20, valid_every=10, lr=1e-7, early_stopping_metric="bleu")
    train(config, tmp_path / "m")
    valid = events(tmp_path / "m", "valid")
    assert valid[1]["bleu"] == valid[0]["bleu"]  # the premise
    second = [line for line in capsys.readouterr().out.splitlines() if line.startswith("validation at step 20")]
    assert second and second[0].endswith(f"| best BLEU {valid[0]['bleu']:.2f} at step 10 | saved last.pt")


def test_an_interrupt_before_any_validation_says_so_and_how_to_continue(tiny_corpus, tmp_path, capsys, monkeypatch):
    event = RunLog.event

    def interrupt_at_step_3(self, kind, step=None, **values):
        if kind == "train" and step == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, caught by the run's handler
        return event(self, kind, step, **values)

    monkeypatch.setattr(RunLog, "event", interrupt_at_step_3)
    model_dir = tmp_path / "m"
    train(tiny_config(tiny_corpus, max_steps=50, valid_every=40, log_every=1), model_dir)
    out, err = capsys.readouterr()
    assert "attnmt: stopping after this step, with a checkpoint to --resume from" in err
    last = out.splitlines()[-1]
    assert last.startswith(f"{model_dir}: 3 steps, interrupted; checkpoints/last.pt holds step 3: continue with "
                           "--resume")
    assert last.endswith("not validated yet") and "inf" not in last
    monkeypatch.setattr(RunLog, "event", event)
    train(tiny_config(tiny_corpus, max_steps=5, valid_every=40), model_dir, resume=True)
    out = capsys.readouterr().out
    assert "resuming from checkpoints/last.pt at step 3 (epoch 1)" in out
    assert "resuming from checkpoints/last.pt at step 3 (epoch 1)" in logged_lines(model_dir)


def test_without_a_validation_set_the_summary_says_what_best_pt_holds(tiny_corpus, tmp_path, capsys):
    config = tiny_config(tiny_corpus, max_steps=4)
    config.data.valid_src = config.data.valid_tgt = None
    train(config, tmp_path / "m")
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith(f"no validation set: {tmp_path / 'm'}/checkpoints/best.pt holds the last weights")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("max_steps, max_time_s, total", [(6, 3600.0, "6/6"), (10**6, 1.0, "/1 s")])
def test_the_bar_counts_toward_the_budget_that_binds(tiny_corpus, tmp_path, monkeypatch, max_steps, max_time_s,
                                                      total):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    config = tiny_config(tiny_corpus, max_steps=max_steps, max_time_s=max_time_s, valid_every=10**6, progress=True)
    train(config, tmp_path / "m", quiet=False)
    drawn = terminal.getvalue()
    assert "\r" in drawn and total in drawn
    assert ("/1000000" in drawn) is False  # never the step budget when the time ends the run first


def test_budget_bar_follows_the_pace():
    bar = BudgetBar(max_steps=1000, max_time_s=60.0, step=0, elapsed_s=0.0, desc="t", file=io.StringIO())
    assert (bar.binding(0, 0.0), bar.total) == ("time", 60.0)  # no pace yet
    bar.update(10, 1.0)  # 0.1 s a step: 1000 steps take 100 s, after 60 s
    assert (bar.unit, bar.total) == ("time", 60.0)
    bar.update(100, 2.0)  # now 1000 steps end at about 20 s
    assert (bar.unit, bar.total, bar.bar.n) == ("steps", 1000, 100)
    assert BudgetBar(50, None, 20, 5.0, "t", file=io.StringIO()).total == 50  # no time budget; a resumed run


def write_corpus(folder, n_src, n_tgt, source):
    folder.mkdir(exist_ok=True)
    src = (source / "train.src").read_text(encoding="utf-8").splitlines(keepends=True)
    tgt = (source / "train.tgt").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "train.src").write_text("".join(src[:n_src]), encoding="utf-8")
    (folder / "train.tgt").write_text("".join(tgt[:n_tgt]), encoding="utf-8")


def config_file(tmp_path, data, valid):
    path = tmp_path / "c.yaml"
    path.write_text("\n".join([
        "data:", f"  train_src: {data / 'train.src'}", f"  train_tgt: {data / 'train.tgt'}",
        f"  valid_src: {valid / 'valid.src'}", f"  valid_tgt: {valid / 'valid.tgt'}", "  tokenizer: word",
        "model:", "  emb_size: 16", "  hidden_size: 16",
        "train:", "  max_steps: 3", "  valid_every: 3", "  valid_bleu_sample: 4", "  tensorboard: true",
        "  threads: 1"]) + "\n", encoding="utf-8")
    return path


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_failed_run_leaves_the_folder_as_it_was_and_the_same_command_then_succeeds(tiny_corpus, tmp_path, capsys):
    data = tmp_path / "data"
    write_corpus(data, 600, 599, tiny_corpus)  # one line short: refused, but only after tokenizers and config
    command = ["train", str(config_file(tmp_path, data, tiny_corpus)), "--model-dir", str(tmp_path / "new")]
    assert main(command) == 2
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert main(command[:-1] + [str(tmp_path / "empty")]) == 2
    assert list((tmp_path / "empty").iterdir()) == []
    capsys.readouterr()

    write_corpus(data, 600, 600, tiny_corpus)
    assert main(command) == 0, capsys.readouterr().err
    assert (tmp_path / "new" / "checkpoints" / "best.pt").is_file()
    before = snapshot(tmp_path / "new")
    write_corpus(data, 600, 599, tiny_corpus)
    assert main(command + ["--overwrite"]) == 2  # replacing a trained model with a run that fails
    assert snapshot(tmp_path / "new") == before and not (tmp_path / "new" / ".replaced").exists()
    write_corpus(data, 600, 600, tiny_corpus)
    assert main(command + ["--overwrite"]) == 0
    assert not (tmp_path / "new" / ".replaced").exists()
    assert len(events(tmp_path / "new", "start")) == 1  # the replaced run's log went with it


def test_a_failed_run_in_a_new_folder_created_nothing(tiny_corpus, tmp_path):
    (tmp_path / "valid.tgt").write_text("x y\n", encoding="utf-8")  # one line for valid.src's 40
    config = tiny_config(tiny_corpus, max_steps=3)
    config.data.valid_tgt = str(tmp_path / "valid.tgt")
    with pytest.raises(UserError, match="valid.tgt"):
        train(config, tmp_path / "a" / "m", quiet=True)
    assert not (tmp_path / "a" / "m").exists()
