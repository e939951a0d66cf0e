"""Fine-tuning (`attnmt train CONFIG --init-from MODEL_DIR`): the trained model's weights and tokenizers,
a fresh optimizer, and a config that does not fit refused in one line."""

from __future__ import annotations

import json
import shlex

import pytest
import torch

import attnmt
from attnmt.cli import main
from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config
from tests.data.test_tatoeba import write_tatoeba
from tests.repository.test_recipes import SHARED_MULTI30K, cut, layout, needs_multi30k, readme_commands, tiny


def valid_losses(model_dir):
    records = map(json.loads, (model_dir / "train_log.jsonl").open(encoding="utf-8"))
    return [r["loss"] for r in records if r["event"] == "valid"]


def new_domain(tiny_corpus, tmp_path):
    """Another corpus: the tiny corpus's first 300 pairs, each side reversed (the same words, another order)."""
    folder = tmp_path / "domain"
    folder.mkdir()
    for name in ("train.src", "train.tgt"):
        lines = (tiny_corpus / name).read_text(encoding="utf-8").splitlines()[:300]
        (folder / name).write_text("".join(" ".join(line.split()[::-1]) + "\n" for line in lines), encoding="utf-8")
    return folder


def test_starts_from_the_trained_weights_and_tokenizers_with_a_fresh_optimizer(tiny_model, tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=1, valid_every=1, optimizer="sgd", lr=1e-9)
    domain = new_domain(tiny_corpus, tmp_path)
    config.data.train_src, config.data.train_tgt = str(domain / "train.src"), str(domain / "train.tgt")
    train(config, tmp_path / "ft", quiet=True, init_from=tiny_model)
    for name in ("src.vocab", "tgt.vocab", "src.json", "tgt.json"):  # the trained model's, not rebuilt
        assert (tmp_path / "ft" / name).read_bytes() == (tiny_model / name).read_bytes(), name
    trained = load_checkpoint(tiny_model / "checkpoints" / "best.pt")["model"]
    tuned = load_checkpoint(tmp_path / "ft" / "checkpoints" / "best.pt")["model"]
    assert all(torch.allclose(tuned[k], trained[k], atol=1e-6) for k in trained)  # one step of lr 1e-9
    # the same weights on the same validation set: the trained model's best validation loss
    assert valid_losses(tmp_path / "ft")[0] == pytest.approx(min(valid_losses(tiny_model)), abs=1e-4)
    assert attnmt.load(tmp_path / "ft").translate(["a b c"])[0].text == attnmt.load(tiny_model).translate(
        ["a b c"])[0].text


def test_a_shared_store_holds_the_ids_of_the_tokenizers_the_run_trains_with(tiny_model, tiny_corpus, tmp_path):
    """data.store_dir shared by a fresh run and a fine-tuning run on one corpus: the fine-tuning run's store
    is encoded with the trained model's tokenizers, a fresh run's with ones trained on the corpus."""
    from attnmt.data.store import StoreData, tokenizer_hash

    config = tiny_config(tiny_corpus, max_steps=1, valid_every=1)
    domain = new_domain(tiny_corpus, tmp_path)
    config.data.train_src, config.data.train_tgt = str(domain / "train.src"), str(domain / "train.tgt")
    config.data.store_dir = str(tmp_path / "stores")
    train(config, tmp_path / "fresh", quiet=True)
    train(config, tmp_path / "tuned", quiet=True, init_from=tiny_model)
    (store,) = (tmp_path / "stores").iterdir()
    assert StoreData(store).meta["tokenizers"] == tokenizer_hash(tiny_model) != tokenizer_hash(tmp_path / "fresh")
    train(config, tmp_path / "again", quiet=True)
    assert StoreData(store).meta["tokenizers"] == tokenizer_hash(tmp_path / "fresh") == tokenizer_hash(
        tmp_path / "again")


def test_the_optimizer_schedule_and_training_state_start_fresh(tiny_model, tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=4, valid_every=2, scheduler="noam", warmup_steps=10)
    result = train(config, tmp_path / "ft", quiet=True, init_from=tiny_model, init_checkpoint="last")
    last = load_checkpoint(tmp_path / "ft" / "checkpoints" / "last.pt")
    assert last["train_state"]["step"] == result.state.step == 4  # not 120 + 4
    assert {int(s["step"]) for s in last["optimizer"]["state"].values()} == {4}  # Adam's own count
    assert last["scheduler"]["last_epoch"] == 4
    # noam after 4 of 10 warm-up steps: lr * min(4 ** -0.5, 4 * 10 ** -1.5) * 10 ** 0.5, as at a first run's step 4
    assert last["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.005 * 4 / 10, rel=1e-6)
    assert last["train_state"]["best_step"] in (2, 4)  # a best of this run, not the trained model's


@pytest.mark.parametrize("change, message", [
    (lambda c: setattr(c.model, "hidden_size", 40), "model.hidden_size is 40 in this config but 48 in"),
    (lambda c: setattr(c.model, "type", "transformer"), "model.type is 'transformer' in this config but 'rnnsearch'"),
    (lambda c: setattr(c.data, "tokenizer", "bpe"), "data.tokenizer is 'bpe' in this config but 'word' in .*; "
                                                    "the tokenizers and vocabularies come from"),
    (lambda c: setattr(c.data, "lowercase", True), "data.lowercase is True in this config but False"),
])
def test_a_config_that_does_not_fit_is_refused_before_anything_is_written(tiny_model, tiny_corpus, tmp_path, change,
                                                                          message):
    config = tiny_config(tiny_corpus, max_steps=2)
    change(config)
    with pytest.raises(UserError, match=message):
        train(config, tmp_path / "ft", quiet=True, init_from=tiny_model)
    assert not (tmp_path / "ft").exists()


def test_a_changed_dropout_is_fine(tiny_model, tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=1, valid_every=1)
    config.model.dropout = 0.3
    assert train(config, tmp_path / "ft", quiet=True, init_from=tiny_model).state.step == 1


def test_the_command_line(tiny_model, tiny_corpus, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("\n".join([
        "data:", f"  train_src: {tiny_corpus / 'train.src'}", f"  train_tgt: {tiny_corpus / 'train.tgt'}",
        "  tokenizer: word", "  max_len: 30",
        "model:", "  emb_size: 32", "  hidden_size: 48", "  dropout: 0.1",
        "train:", "  max_steps: 2", "  tensorboard: false", "  threads: 1"]) + "\n", encoding="utf-8")
    out = tmp_path / "ft"
    assert main(["train", str(config), "--model-dir", str(out), "--checkpoint", "last"]) == 2
    assert "--checkpoint names the checkpoint of --init-from" in capsys.readouterr().err
    assert main(["train", str(config), "--model-dir", str(out), "--init-from", str(tmp_path / "nope")]) == 2
    assert f"--init-from {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err
    assert main(["train", str(config), "--model-dir", str(out), "--init-from", str(tiny_model),
                 "--checkpoint", "step7"]) == 2
    assert "has no checkpoint 'step7'; available: best, last" in capsys.readouterr().err
    assert main(["train", str(config), "--model-dir", str(out), "--init-from", str(tiny_model), "--resume"]) == 2
    assert main(["train", str(config), "--model-dir", str(out), "--init-from", str(tiny_model)]) == 0
    printed = capsys.readouterr().out
    assert f"starting from the weights of {tiny_model / 'checkpoints' / 'best.pt'} (trained 120 steps)" in printed
    assert printed.splitlines()[-1].startswith(f"{out}: 2 steps, stopped by max_steps")


@pytest.mark.timeout(900)
@needs_multi30k
def test_the_recipe_runs_as_its_readme_says(tmp_path, monkeypatch, capsys):
    """recipes/finetune/README.md's commands at tiny size: Multi30k cut to a slice, Tatoeba a hand-made file."""
    root = layout(tmp_path, "finetune", monkeypatch)
    commands = readme_commands("finetune")
    assert commands[:2] == ["attnmt data multi30k data/multi30k", "attnmt data tatoeba deu-eng data/tatoeba"]
    assert main(["data", "multi30k", "data/multi30k", "--from", str(SHARED_MULTI30K)]) == 0
    for path in (root / "data" / "multi30k").glob("*.gz"):
        cut(path, 200 if path.name.startswith("train") else 12)
    pairs = [(f"Tom sees {i} dogs.", f"Tom sieht {i} Hunde.") for i in range(120)]
    assert main(["data", "tatoeba", "deu-eng", "data/tatoeba", "--from",
                 str(write_tatoeba(tmp_path / "deu.txt", pairs))]) == 0
    held_out = ["data.valid_size=10", "data.test_size=10"]
    for command in commands[2:]:
        argv = shlex.split(command)[1:]
        if argv[0] == "train":
            argv += tiny(root / argv[1], 150, held_out if "tatoeba" in argv[1] else [])
        assert main(argv) == 0, (command, capsys.readouterr().err)
    models = root / "models" / "finetune"
    assert (models / "tuned" / "joint.vocab").read_bytes() == (models / "multi30k" / "joint.vocab").read_bytes()
    assert (models / "tuned" / "test.src").read_text() == (models / "scratch" / "test.src").read_text()
    assert "BLEU" in capsys.readouterr().out


def test_fine_tuning_says_how_much_of_the_new_corpus_the_vocabularies_cover(tiny_model, tiny_corpus, tmp_path, capsys):
    config = tiny_config(tiny_corpus, max_steps=1, valid_every=1)
    domain = new_domain(tiny_corpus, tmp_path)
    train(config_with(config, domain), tmp_path / "known", init_from=tiny_model)
    out, err = capsys.readouterr()
    assert "the trained vocabularies cover 100.0% of the corpus's source tokens and 100.0% of its target tokens" in out
    assert "cover only" not in err
    target = (domain / "train.tgt").read_text(encoding="utf-8").splitlines()
    (domain / "train.tgt").write_text("".join(f"{line} neu1 neu2 neu3\n" for line in target), encoding="utf-8")
    train(config_with(config, domain), tmp_path / "new", init_from=tiny_model)
    out, err = capsys.readouterr()
    shares = [r for r in map(json.loads, (tmp_path / "new" / "train_log.jsonl").open(encoding="utf-8"))
              if r["event"] == "vocabulary_coverage"]
    assert shares[0]["src"] == 1.0 and 0.5 < shares[0]["tgt"] < 0.95
    assert (f"attnmt: warning: the trained model's vocabularies cover only {shares[0]['tgt']:.1%} of its target "
            "tokens of this corpus (under 95%); the rest are trained as <unk>: a model trained on this corpus with its "
            "own tokenizers may translate it better") in err.splitlines()


def config_with(config, domain):
    config.data.train_src, config.data.train_tgt = str(domain / "train.src"), str(domain / "train.tgt")
    return config
