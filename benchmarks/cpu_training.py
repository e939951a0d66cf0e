"""Training on the CPU: what attnmt's own loss, dropout and guidance matrix save against the plain torch ways.

Three parts of a training step are written for the CPU (attnmt/train/cross_entropy.py, attnmt/models/dropout.py,
attnmt.train.guidance.guidance_matrix). Each is measured against the plain way in the same run, as a ratio (the
machine's speed varies between runs):

* each alone, forward and backward where there is one, median of ``--repeats``: the loss on the score
  matrices of the real-language study's seq2seq (2,000 target tokens x 4,000 pieces) and of the
  alignment recipes' Transformer (3,000 x 10,000); dropout on a Transformer's activations; the guidance
  matrix of a batch of 100 pairs;
* training steps, seconds per step from the training log after the first 50: the study's seq2seq
  (Tatoeba fra-eng; it has no dropout and no guidance, so only the loss differs) and the guided
  alignment Transformer (recipes/alignment_hansards/guided_en_fr.yaml), each trained the plain way, then
  attnmt's. They need ../shared/data/tatoeba and data/align_enfr (`attnmt align-prepare`,
  recipes/alignment_hansards/README.md); a part whose data is absent is skipped, and says so.

    python -m benchmarks.cpu_training          # -> benchmarks/results/cpu_training.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "tatoeba" / "fra-eng.tsv.gz"
ALIGN_DATA = ROOT / "data" / "align_enfr" / "train.en-fr.links"
LOSS_SHAPES = [(2000, 4000, torch.bfloat16), (2000, 4000, torch.float32), (3000, 10000, torch.bfloat16)]


def torch_loss(scores, target, ignore_index, label_smoothing=0.0):
    """The plain way: torch's cross-entropy on an fp32 copy of the scores."""
    return F.cross_entropy(scores.float(), target, ignore_index=ignore_index, reduction="sum",
                           label_smoothing=label_smoothing)


def loop_guidance_matrix(guidance, src_len, tgt_len, device, offset=0, extra_rows=0):
    """The plain way: one indexed assignment per target piece."""
    G = torch.zeros(len(guidance), tgt_len, src_len)
    for b, pair in enumerate(guidance):
        last_row = min(len(pair or []) + extra_rows, tgt_len - 1)
        for t, sources in enumerate(pair or []):
            if sources and t + offset <= last_row:
                G[b, t + offset, sources] = 1.0 / len(sources)
    return G.to(device)


@contextmanager
def plain_torch():
    """attnmt's training with the output layer's logits and torch's cross-entropy on them, nn.Dropout's mask and
    the per-piece guidance matrix."""
    import attnmt.train.loss as loss
    from attnmt.models.dropout import Dropout

    saved = loss.output_loss, loss.cross_entropy_sum, loss.guidance_matrix, Dropout.forward
    loss.output_loss, loss.cross_entropy_sum = unfused_output_loss, torch_loss
    loss.guidance_matrix = loop_guidance_matrix
    Dropout.forward = lambda self, x: F.dropout(x, self.p, self.training)
    try:
        yield
    finally:
        loss.output_loss, loss.cross_entropy_sum, loss.guidance_matrix, Dropout.forward = saved


def unfused_output_loss(trained, features, tgt_out, label_smoothing=0.0):
    """The training loss from the whole [tokens, vocabulary] logits: the output layer, then ``nll_loss`` (which
    reads ``attnmt.train.loss.cross_entropy_sum``)."""
    import attnmt.train.loss as loss

    return loss.nll_loss(getattr(trained, "module", trained).output(features), tgt_out, label_smoothing)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]) * 1000


def _row(what: str, plain_ms: float, attnmt_ms: float) -> dict:
    row = {"what": what, "plain_ms": round(plain_ms, 2), "attnmt_ms": round(attnmt_ms, 2),
           "speedup": round(plain_ms / attnmt_ms, 2)}
    print(json.dumps(row), flush=True)
    return row


def parts_alone(repeats: int) -> list[dict]:
    from attnmt.models.dropout import Dropout
    from attnmt.train.cross_entropy import cross_entropy_sum
    from attnmt.train.guidance import guidance_matrix

    rows = []
    for n, vocab, dtype in LOSS_SHAPES:
        scores, target = torch.randn(n, vocab).mul(3).to(dtype), torch.randint(1, vocab, (n,))
        times = [median_ms(lambda fn=fn, s=scores, t=target: fn(s.detach().requires_grad_(), t, 0).backward(), repeats)
                 for fn in (torch_loss, cross_entropy_sum)]
        rows.append(_row(f"loss, {n} tokens x {vocab} pieces, {str(dtype).replace('torch.', '')}", *times))
    dropout = Dropout(0.1).train()
    for shape in ((100, 30, 256), (100, 30, 1024)):
        x = torch.randn(*shape).bfloat16()
        times = [median_ms(lambda fn=fn, v=x: fn(v.detach().requires_grad_()).float().sum().backward(), repeats)
                 for fn in (lambda v: F.dropout(v, 0.1, True), dropout)]
        rows.append(_row(f"dropout 0.1, {'x'.join(map(str, shape))} bf16 activations", *times))
    rng = random.Random(1)
    pairs = [[sorted(rng.sample(range(30), rng.choice((0, 1, 1, 1, 2)))) for _ in range(30)] for _ in range(100)]
    times = [median_ms(lambda fn=fn: fn(pairs, 30, 32, torch.device("cpu"), offset=1), repeats)
             for fn in (loop_guidance_matrix, guidance_matrix)]
    rows.append(_row("guidance matrix, 100 pairs of 30 pieces", *times))
    return rows


def seconds_per_step(model_dir: Path) -> tuple[float, str]:
    """Seconds per step between the first logged step and the last (training log), and the precision."""
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text().splitlines()]
    precision = next(e["precision"] for e in events if e["event"] == "start")
    steps = [e for e in events if e["event"] == "train"]
    return (steps[-1]["time"] - steps[0]["time"]) / (steps[-1]["step"] - steps[0]["step"]), precision


def train_both_ways(config_path: Path, overrides: list[str], work: Path) -> dict:
    """Seconds per step trained the plain way, then attnmt's, from the same config and seed."""
    from attnmt.config.schema import load_config
    from attnmt.train.trainer import train

    overrides = [*overrides, "train.max_time_s=null", "train.threads=1", "train.progress=false",
                 "train.tensorboard=false", "train.valid_every=1000000", "train.log_every=50"]
    result: dict = {}
    for name in ("plain", "attnmt"):
        with plain_torch() if name == "plain" else nullcontext():
            train(load_config(config_path, overrides), work / name, overwrite=True, quiet=True)
        result[f"{name}_s_per_step"], result["precision"] = seconds_per_step(work / name)
        print(name, round(result[f"{name}_s_per_step"], 4), flush=True)
    result["speedup"] = round(result["plain_s_per_step"] / result["attnmt_s_per_step"], 3)
    return result


def seq2seq_steps(steps: int, work: Path) -> dict | str:
    if not TATOEBA.is_file():
        return f"skipped: {TATOEBA} is absent"
    config = work / "seq2seq.yaml"
    config.write_text(f"""name: cpu_training_benchmark
data: {{train_tsv: {TATOEBA}, valid_size: 200, tokenizer: bpe, vocab_size: 4000, joint_vocab: true, max_len: 100}}
model: {{type: seq2seq, reverse_source: true, cell: lstm, emb_size: 256, hidden_size: 256, dropout: 0.0}}
train: {{batch_tokens: 2000, lr: 0.004, valid_bleu_sample: 0, precision: auto}}
""", encoding="utf-8")
    return {"steps": steps, **train_both_ways(config, [f"train.max_steps={steps}"], work / "seq2seq")}


def transformer_steps(steps: int, work: Path) -> dict | str:
    if not ALIGN_DATA.is_file():
        return f"skipped: {ALIGN_DATA} is absent (attnmt align-prepare, recipes/alignment_hansards/README.md)"
    import yaml

    config = ROOT / "recipes" / "alignment_hansards" / "guided_en_fr.yaml"
    transforms = [t for t in yaml.safe_load(config.read_text(encoding="utf-8"))["data"]["transforms"]
                  if t["name"] != "joined_pairs"]  # the recipe's data without its joined pairs
    no_joined = "data.transforms=" + yaml.safe_dump(transforms, default_flow_style=True, width=10 ** 6).strip()
    return {"steps": steps, "config": str(config.relative_to(ROOT)), "guidance_weight": 1.0,
            **train_both_ways(config, [f"train.max_steps={steps}", "train.guided_alignment.weight=1.0", no_joined],
                              work / "transformer")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seq2seq-steps", type=int, default=400)
    parser.add_argument("--transformer-steps", type=int, default=150)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from attnmt.train.trainer import native_bf16

    result: dict = {"native_bf16": native_bf16(torch.device("cpu")), "threads": 1,
                    "parts_alone": parts_alone(args.repeats)}
    with tempfile.TemporaryDirectory() as work:
        result["seq2seq_training"] = seq2seq_steps(args.seq2seq_steps, Path(work))
        result["transformer_training"] = transformer_steps(args.transformer_steps, Path(work))
    print(f"-> {write_result('cpu_training', result, args.out)}")


if __name__ == "__main__":
    main()
