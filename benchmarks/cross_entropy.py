"""The training loss on the CPU: torch's cross-entropy against attnmt's blocked one (attnmt.cross_entropy).

Two measurements, each as a ratio within one run (the machine's speed varies between runs):

* the loss alone, forward and backward, on the score matrices of the real-language study's seq2seq
  (2,000 target tokens x a 4,000-piece vocabulary, bf16 and fp32) and of the alignment recipes'
  Transformer (3,000 x 10,000, bf16), median of ``--repeats``;
* training steps of the study's seq2seq (256-wide LSTM, BPE 4,000 joint, batches of 2,000 tokens,
  bf16 autocast where the CPU has it) on Tatoeba fra-eng, ``--steps`` steps with each loss, seconds per
  step from the training log after the first 50. Needs ../shared/data/tatoeba (skipped, and said so,
  without it).

    python -m benchmarks.cross_entropy          # -> benchmarks/results/cross_entropy.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "tatoeba" / "fra-eng.tsv.gz"
SHAPES = [(2000, 4000, torch.bfloat16), (2000, 4000, torch.float32), (3000, 10000, torch.bfloat16)]


def torch_loss(scores, target, ignore_index, label_smoothing=0.0):
    """What attnmt.loss computed before the blocked loss: torch's cross-entropy on an fp32 copy."""
    return F.cross_entropy(scores.float(), target, ignore_index=ignore_index, reduction="sum",
                           label_smoothing=label_smoothing)


def time_loss(fn, scores, target, repeats: int) -> float:
    """Median milliseconds of one forward and backward pass of ``fn``."""
    times = []
    for _ in range(repeats + 1):
        s = scores.detach().requires_grad_()
        start = time.perf_counter()
        fn(s, target, 0).backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]) * 1000


def loss_alone(repeats: int) -> list[dict]:
    from attnmt.cross_entropy import cross_entropy_sum

    rows = []
    for n, vocab, dtype in SHAPES:
        scores = torch.randn(n, vocab).mul(3).to(dtype)
        target = torch.randint(1, vocab, (n,))
        torch_ms = time_loss(torch_loss, scores, target, repeats)
        blocked_ms = time_loss(cross_entropy_sum, scores, target, repeats)
        rows.append({"tokens": n, "vocab": vocab, "dtype": str(dtype).replace("torch.", ""),
                     "torch_ms": round(torch_ms, 2), "blocked_ms": round(blocked_ms, 2),
                     "speedup": round(torch_ms / blocked_ms, 2)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def seconds_per_step(model_dir: Path) -> tuple[float, str]:
    """Seconds per step between the first logged step and the last (training log), and the precision."""
    events = [json.loads(line) for line in (model_dir / "train_log.jsonl").read_text().splitlines()]
    precision = next(e["precision"] for e in events if e["event"] == "start")
    steps = [e for e in events if e["event"] == "train"]
    first, last = steps[0], steps[-1]
    return (last["time"] - first["time"]) / (last["step"] - first["step"]), precision


def train_steps(steps: int, work: Path) -> dict:
    """The study's seq2seq trained ``steps`` steps with torch's loss, then with the blocked one."""
    import attnmt.loss
    from attnmt.config import load_config
    from attnmt.cross_entropy import cross_entropy_sum
    from attnmt.train import train

    config_path = work / "seq2seq.yaml"
    config_path.write_text(f"""name: cross_entropy_benchmark
data: {{train_tsv: {TATOEBA}, valid_size: 200, tokenizer: bpe, vocab_size: 4000, joint_vocab: true, max_len: 100}}
model: {{type: seq2seq, reverse_source: true, cell: lstm, emb_size: 256, hidden_size: 256, dropout: 0.0}}
train: {{batch_tokens: 2000, lr: 0.004, max_steps: {steps}, valid_every: 1000000, valid_bleu_sample: 0,
        precision: auto, threads: 1, progress: false, tensorboard: false, log_every: 50}}
""", encoding="utf-8")
    result = {}
    for name, loss in (("torch", torch_loss), ("blocked", cross_entropy_sum)):
        attnmt.loss.cross_entropy_sum = loss  # the one name nll_loss calls
        model_dir = work / name
        train(load_config(config_path), model_dir, overwrite=True, quiet=True)
        result[f"{name}_s_per_step"], result["precision"] = seconds_per_step(model_dir)
        print(name, round(result[f"{name}_s_per_step"], 4), flush=True)
    attnmt.loss.cross_entropy_sum = cross_entropy_sum
    result["speedup"] = round(result["torch_s_per_step"] / result["blocked_s_per_step"], 3)
    result["steps"] = steps
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from attnmt.train import native_bf16

    result: dict = {"native_bf16": native_bf16(torch.device("cpu")), "threads": args.threads,
                    "loss_alone": loss_alone(args.repeats)}
    if TATOEBA.is_file():
        with tempfile.TemporaryDirectory() as work:
            result["seq2seq_training"] = train_steps(args.steps, Path(work))
    else:
        result["seq2seq_training"] = f"skipped: {TATOEBA} is absent"
    print(f"-> {write_result('cross_entropy', result, args.out)}")


if __name__ == "__main__":
    main()
