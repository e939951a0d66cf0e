"""torchrun with two CPU processes (gloo) equals one process over the same global batch."""

import json
import subprocess
import sys

import pytest
import torch
import yaml

from attnmt.config.schema import config_to_dict
from attnmt.data.dataset import load_processors
from attnmt.data.loading import batch_of, training_batches
from attnmt.data.store import StoreData
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.models import build_model
from attnmt.train.loss import nll_loss
from tests.conftest import tiny_config

STEPS = 3


@pytest.mark.slow  # three training processes (torchrun's two and one alone)
def test_two_processes_equal_one_over_the_global_batch(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, max_steps=STEPS, valid_every=100, valid_bleu_sample=0)
    config.model.dropout = 0.0
    config.train.log_every = 1  # each process draws its own dropout masks; compare the arithmetic only
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)), encoding="utf-8")
    model_dir = tmp_path / "ddp"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
         "-m", "attnmt", "train", str(path), "--model-dir", str(model_dir)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = load_checkpoint(model_dir / "checkpoints" / "last.pt")
    assert ddp["train_state"]["step"] == STEPS
    records = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    logged = [r["loss"] for r in records if r["event"] == "train"]

    # The same steps in one process: batch k*2 and k*2+1 of the epoch's order, together.
    src, tgt = load_processors(model_dir)
    data = StoreData(model_dir / "store")
    batches = list(training_batches(data, config, epoch=0))
    torch.manual_seed(config.train.seed)
    model = build_model(config.model, len(src.vocab), len(tgt.vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.train.lr)
    losses = []
    for k in range(STEPS):
        batch = batch_of(data, batches[2 * k] + batches[2 * k + 1], torch.device("cpu"))
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)
        loss = nll_loss(logits, batch.tgt_out) / batch.n_tgt_tokens
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip_grad_norm)
        optimizer.step()
    for name, tensor in model.state_dict().items():
        # Summation order differs between the two runs; Adam's first steps amplify that float noise a little.
        torch.testing.assert_close(ddp["model"][name], tensor, atol=1e-5, rtol=1e-4, msg=name)
    assert logged == pytest.approx(losses, rel=1e-5)
