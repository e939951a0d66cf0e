"""Where a bf16 training step's time goes on a CPU, against fp32: the rnn-256 recipe and the Multi30k Transformer.

    python -m benchmarks.bf16_profile [--steps 8] [--rounds 3] [--profile-steps 4] [--threads 1]
        # -> benchmarks/results/bf16_training_profile.json

For each model, a Trainer of the library (attnmt/train/trainer.py) is built on Multi30k de-en (the rnn-256 recipe
of benchmarks/rnn256.py; recipes/multi30k/de_en_transformer.yaml) and the same first ``--steps`` batches are
trained, as the library trains them (forward, backward, gradient clipping, the optimizer step), once in fp32 and
once under ``train.precision: bf16``, in turns over ``--rounds`` rounds, beside the float32 and bfloat16 2048^3
matrix-product rates of the same thread count (same rounds, alternating). Recorded:

* seconds per step of each precision, and of bf16 with every lever of the library in its older form
  (``bf16_older``), per round and their median; all times are CPU seconds of this process (``CLOCK``), which a
  shared machine's other processes do not inflate as they do wall time;
* ``best``: the fastest step of each kind against the highest peak of the run, the least disturbed of each, and
  that share of the peak (a share above 1 stops the script: a count or a rate is wrong);
* each lever against its older form, bf16 steps in turns (``levers_bf16``, the ratio of the times);
* the FLOPs of those steps (torch.utils.flop_counter, forward and backward, counted in fp32: the same
  arithmetic in either precision), hence the achieved GFLOP/s and its share of each peak of the same round;
* a torch.profiler profile of ``--profile-steps`` steps of each precision: the top operators by self CPU time
  with the dtypes they ran in, and the time in the matrix products, the casts (aten::to / _to_copy / copy_),
  the optimizer step and gradient clipping;
* the hardware path (``cpu_isa``: AVX-512-BF16 without AMX here) and whether bf16 is native.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmt.train.cross_entropy import block_rows
from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
# The clock of every time here: the CPU time of this process, not wall time. On a machine shared with other
# processes a wall clock also counts the time slices the others get (their load changed a step's wall time by
# 2x within a minute here); one thread's CPU time counts only what the core spent on this process, for the steps
# and the peaks alike (caches and memory are still shared).
CLOCK = time.process_time
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation",
           "aten::mkldnn_rnn_layer", "aten::mkldnn_rnn_layer_backward", "aten::_fused_rnn_cell", "aten::addmv",
           "aten::mv", "aten::dot", "aten::_scaled_dot_product_flash_attention_for_cpu",
           "aten::_scaled_dot_product_flash_attention_for_cpu_backward", "aten::mkldnn_linear",
           "aten::mkldnn_linear_backward_weights", "aten::mkldnn_linear_backward_input"}
CASTS = {"aten::copy_", "aten::_to_copy", "aten::to", "aten::_to_dtype"}
OPTIMIZER = ("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_foreach_", "aten::_fused_sgd_")


def rnn256_config(data: Path, multi30k: Path):
    from attnmt.config.schema import config_from_dict
    from benchmarks.rnn256 import prepare, recipe

    prepare(multi30k, data)
    raw = recipe(data, 10**6, 1, 128, {})
    raw["train"].update(valid_every=10**6, log_every=10**6)
    return config_from_dict(raw)


def transformer_config(multi30k: Path):
    from attnmt.config.schema import load_config

    sides = [f"data.{split}_{side}={multi30k / f'{name}.{lang}.gz'}"
             for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr"))
             for side, lang in (("src", "de"), ("tgt", "en"))]
    return load_config(ROOT / "recipes" / "multi30k" / "de_en_transformer.yaml",
                       [*sides, "train.valid_every=1000000", "train.log_every=1000000", "train.save_every=1000000",
                        "train.tensorboard=false", "train.progress=false",
                        "train.threads=1"])


def make_trainer(config, model_dir: Path):
    from attnmt.runtime.distributed import World
    from attnmt.train.events import RunLog
    from attnmt.train.trainer import Trainer

    torch.manual_seed(config.train.seed)
    model_dir.mkdir(parents=True)
    trainer = Trainer(config, model_dir, False, True, torch.device("cpu"), RunLog(model_dir, False), World())
    trainer.model.train()
    trainer.started = time.perf_counter()
    return trainer


def train_steps(trainer, steps: list, amp: torch.dtype | None) -> float:
    """CPU seconds of this process (:data:`CLOCK`) for the library's training steps on ``steps`` (each a list of
    inner batches), under ``amp``."""
    trainer.amp = amp
    started = CLOCK()
    for inner in steps:
        if trainer.step(inner) is None:
            raise SystemExit("bf16_profile: a training step's loss was not finite")
    return CLOCK() - started


def _rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape) -> int:
    """One direction of one oneDNN LSTM layer forward: 2 T B G (I + H) (G = 4H gates; input [T, B, I])."""
    return 2 * input_shape[0] * input_shape[1] * w_ih_shape[0] * (w_ih_shape[1] + w_hh_shape[1])


def rnn_flop_mapping() -> dict:
    """FLOP formulas for oneDNN's LSTM layer (nn.LSTM on a CPU), which torch.utils.flop_counter does not count:
    the forward's products, and twice as many in the backward (gradients of the inputs and of the weights)."""
    aten = torch.ops.aten

    def forward(x, w_ih, w_hh, *args, out_shape=None, **kwargs):
        return _rnn_layer_flops(x, w_ih, w_hh)

    def backward(x, w_ih, w_hh, *args, out_shape=None, **kwargs):
        return 2 * _rnn_layer_flops(x, w_ih, w_hh)

    return {aten.mkldnn_rnn_layer: forward, aten.mkldnn_rnn_layer_backward: backward}


def step_flops(trainer, steps: list) -> float:
    """Forward + backward FLOPs of ``steps`` in fp32 (torch.utils.flop_counter, with oneDNN's LSTM layers
    counted by :func:`rnn_flop_mapping`), no update."""
    from torch.utils.flop_counter import FlopCounterMode

    from attnmt.train.loss import step_loss

    total = 0
    for inner in steps:
        for batch in inner:
            with FlopCounterMode(display=False, custom_mapping=rnn_flop_mapping()) as counter:
                loss, _ = step_loss(trainer.trained, batch, trainer.guidance, trainer.config)
                loss.backward()
            total += counter.get_total_flops()
    trainer.model.zero_grad(set_to_none=True)
    return total


def _dtype(event) -> str:
    """The floating dtype an operator ran in (its first floating input), or "" where it had none."""
    for dtype in getattr(event, "input_dtypes", None) or ():
        if dtype in ("float", "c10::BFloat16", "c10::Half", "double"):
            return {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64"}[dtype]
    return ""


def profile_steps(trainer, steps: list, amp: torch.dtype | None, top: int) -> dict:
    """A torch.profiler profile of the library's training steps: top operators and the time per kind."""
    from torch.profiler import ProfilerActivity, profile

    trainer.amp = amp
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for inner in steps:
            trainer.step(inner)
    self_us: dict = defaultdict(float)
    calls: dict = defaultdict(int)
    total_us = 0.0
    for event in prof.events():
        if event.name.startswith("ProfilerStep") or event.is_user_annotation:
            continue
        total_us += event.self_cpu_time_total
        key = (event.name, _dtype(event))
        self_us[key] += event.self_cpu_time_total
        calls[key] += 1
    ranked = sorted(self_us.items(), key=lambda item: -item[1])
    ms = len(steps)

    def share(names) -> float:
        chosen = sum(us for (name, _), us in self_us.items() if names(name))
        return round(chosen / total_us, 4)

    matmul_by_dtype: dict = defaultdict(float)
    for (name, dtype), us in self_us.items():
        if name in MATMULS:
            matmul_by_dtype[dtype or "none"] += us
    return {
        "profiled_steps": len(steps),
        "self_cpu_ms_per_step": round(total_us / 1000 / ms, 2),
        "top_ops": [{"op": name, "dtype": dtype, "self_ms_per_step": round(us / 1000 / ms, 2),
                     "share": round(us / total_us, 4), "calls_per_step": round(calls[(name, dtype)] / ms, 1)}
                    for (name, dtype), us in ranked[:top]],
        "share_matmul": share(lambda n: n in MATMULS),
        "matmul_ms_per_step_by_dtype": {k: round(v / 1000 / ms, 2) for k, v in matmul_by_dtype.items()},
        "share_casts": share(lambda n: n in CASTS),
        "share_optimizer_and_clipping": share(lambda n: n.startswith(OPTIMIZER)),
        "share_lstm_mkldnn": share(lambda n: n.startswith("aten::mkldnn_rnn_layer")),
        "share_cross_entropy_blocks": share(lambda n: n in ("aten::logsumexp", "aten::exp_", "aten::scatter_add_",
                                                            "aten::gather")),
    }


@contextmanager
def slice_cast_per_step():
    """The older form of StackedRNN.input_projection: the weight slice of the decoder's per-step input returned
    in fp32, so that autocast casts it (and its gradient back) at every target position."""
    from attnmt.models.encoders import StackedRNN

    saved = StackedRNN.input_projection

    def older(self, known):
        w_ih = self.rnn.weight_ih_l0
        k = known.size(-1)
        return F.linear(known, w_ih[:, :k], self.rnn.bias_ih_l0), w_ih[:, k:]

    StackedRNN.input_projection = older
    try:
        yield
    finally:
        StackedRNN.input_projection = saved


@contextmanager
def dropout_where():
    """The older form of attnmt's Dropout: ``torch.where(keep, x * scale, 0)`` (the same mask and values)."""
    from attnmt.models.dropout import LEVELS, Dropout, keep_mask

    saved = Dropout.forward

    def older(self, x):
        if not self.training or self.p == 0.0:
            return x
        dropped = round(self.p * LEVELS)
        return torch.where(keep_mask(x.shape, self.p), x * (LEVELS / (LEVELS - dropped)), 0.0)

    Dropout.forward = older
    try:
        yield
    finally:
        Dropout.forward = saved


@contextmanager
def fused_attention_kernel():
    """The older form of MultiHeadAttention.attend in bfloat16 on a CPU: torch's fused kernel when no weights are
    asked for (its math in float32 with dropout or a mask)."""
    import attnmt.models.attention as attention

    saved = attention._explicit_is_faster
    attention._explicit_is_faster = lambda query: False
    try:
        yield
    finally:
        attention._explicit_is_faster = saved


class _OlderCrossEntropy(torch.autograd.Function):
    """The older blocked cross-entropy: logsumexp in the forward pass, the softmax computed again block by block
    in the backward pass (two exponentials of every score)."""

    @staticmethod
    def forward(ctx, scores: Tensor, target: Tensor, ignore_index: int, eps: float) -> Tensor:  # type: ignore[override]
        n, vocab = scores.shape
        rows = block_rows(vocab)
        lse = torch.empty(n, dtype=torch.float32, device=scores.device)
        total = torch.zeros((), dtype=torch.float32, device=scores.device)
        for a in range(0, n, rows):
            z = scores[a:a + rows].float()
            t = target[a:a + rows]
            lse[a:a + rows] = block_lse = torch.logsumexp(z, dim=1)
            nll = block_lse - z.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1)
            if eps:
                nll = (1 - eps) * nll + eps * (block_lse - z.mean(dim=1))
            total += nll.masked_fill(t == ignore_index, 0.0).sum()
        ctx.save_for_backward(scores, target, lse)
        ctx.ignore_index, ctx.eps = ignore_index, eps
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor):  # type: ignore[override]
        scores, target, lse = ctx.saved_tensors
        n, vocab = scores.shape
        rows, eps = block_rows(vocab), ctx.eps
        grad = torch.empty_like(scores)
        for a in range(0, n, rows):
            t = target[a:a + rows]
            p = scores[a:a + rows].float().sub_(lse[a:a + rows, None]).exp_()  # softmax(z_t)
            if eps:
                p.sub_(eps / vocab)
            p.scatter_add_(1, t.clamp(min=0).unsqueeze(1), p.new_full((len(t), 1), -(1 - eps)))
            p.mul_((grad_total * (t != ctx.ignore_index)).unsqueeze(1))
            grad[a:a + rows] = p
        return grad, None, None, None


@contextmanager
def cross_entropy_two_passes():
    """The older blocked cross-entropy (:class:`_OlderCrossEntropy`) in the training loss, on the output layer's
    whole logits (the older form of the output layer too: not fused with the loss)."""
    import attnmt.train.loss as loss
    from benchmarks.cpu_training import unfused_output_loss

    saved = loss.output_loss, loss.cross_entropy_sum
    loss.output_loss = unfused_output_loss
    loss.cross_entropy_sum = lambda scores, target, ignore_index, eps=0.0: _OlderCrossEntropy.apply(
        scores, target, ignore_index, float(eps))
    try:
        yield
    finally:
        loss.output_loss, loss.cross_entropy_sum = saved


# Each lever of the library against its older form, as bf16 steps in turns within a round.
LEVERS = {"slice_cast_once": slice_cast_per_step, "dropout_products": dropout_where,
          "attention_explicit_bf16": fused_attention_kernel, "cross_entropy_one_exp": cross_entropy_two_passes}
# the levers a model's code reaches (the others leave its step as it is)
MODEL_LEVERS = {"rnn256": ("slice_cast_once", "dropout_products", "cross_entropy_one_exp"),
                "transformer": ("dropout_products", "attention_explicit_bf16", "cross_entropy_one_exp")}


def lever_ratios(trainer, steps: list, rounds: int, names: tuple) -> dict:
    """For each lever: the median over rounds of (bf16 step time with the older form) / (with the library's)."""
    ratios: dict = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            with LEVERS[name]():
                old = train_steps(trainer, steps, torch.bfloat16)
            new = train_steps(trainer, steps, torch.bfloat16)
            ratios[name].append(round(old / new, 4))
    print("levers", json.dumps(ratios), flush=True)
    return {name: {"older_over_library_time": round(statistics.median(r), 4), "rounds": r}
            for name, r in ratios.items()}


def matmul_peak(dtype: torch.dtype, seconds: float, n: int = 2048) -> float:
    """GFLOP/s of n x n x n products in ``dtype`` over ``seconds`` of this process's CPU time (:data:`CLOCK`)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    count, started = 0, CLOCK()
    while CLOCK() - started < seconds:
        a @ b
        count += 1
    return 2 * n**3 * count / (CLOCK() - started) / 1e9


def measure_model(name: str, config, model_dir: Path, args) -> dict:
    trainer = make_trainer(config, model_dir)
    batches = iter(trainer.epoch_steps())
    warmup = [next(batches) for _ in range(2)]
    steps = [next(batches) for _ in range(args.steps)]
    flops = step_flops(trainer, steps)
    tokens = sum(b.n_tgt_tokens for inner in steps for b in inner)
    for amp in (None, torch.bfloat16):  # oneDNN builds its primitives (and torch its fused state) on first use
        train_steps(trainer, warmup, amp)
    rounds = []
    for _ in range(args.rounds):
        row = {"fp32_peak_gflops": matmul_peak(torch.float32, args.peak_seconds),
               "bf16_peak_gflops": matmul_peak(torch.bfloat16, args.peak_seconds),
               "fp32_s_per_step": train_steps(trainer, steps, None) / len(steps),
               "bf16_s_per_step": train_steps(trainer, steps, torch.bfloat16) / len(steps)}
        with ExitStack() as older:  # every lever of this model in its older form: the bf16 step before them
            for lever in MODEL_LEVERS[name]:
                older.enter_context(LEVERS[lever]())
            row["bf16_older_s_per_step"] = train_steps(trainer, steps, torch.bfloat16) / len(steps)
        for p in ("fp32", "bf16", "bf16_older"):
            row[f"{p}_gflops"] = flops / len(steps) / row[f"{p}_s_per_step"] / 1e9
            row[f"{p}_share_of_own_peak"] = row[f"{p}_gflops"] / row[f"{p[:4]}_peak_gflops"]
        row["fp32_over_bf16_time"] = row["fp32_s_per_step"] / row["bf16_s_per_step"]
        row["bf16_older_over_bf16_time"] = row["bf16_older_s_per_step"] / row["bf16_s_per_step"]
        rounds.append({k: round(v, 4) for k, v in row.items()})
        print(name, json.dumps(rounds[-1]), flush=True)

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 4)

    # On a shared machine both a peak and a step time are slowed by whatever else runs at that moment: the best of
    # each over the run (the fastest step, the highest peak) are the least disturbed, and their ratio the share.
    peaks = {p: max(r[f"{p}_peak_gflops"] for r in rounds) for p in ("fp32", "bf16")}
    best = {"fp32_peak_gflops": round(peaks["fp32"], 1), "bf16_peak_gflops": round(peaks["bf16"], 1)}
    for p in ("fp32", "bf16", "bf16_older"):
        seconds = min(r[f"{p}_s_per_step"] for r in rounds)
        gflops = flops / len(steps) / seconds / 1e9
        share = gflops / peaks[p[:4]]
        if share > 1:
            raise SystemExit(f"bf16_profile: {name} {p} reached {share:.2f} times its peak: a FLOP count or a rate "
                             "is wrong (nothing written)")
        best.update({f"{p}_s_per_step": round(seconds, 4), f"{p}_gflops": round(gflops, 1),
                     f"{p}_share_of_peak": round(share, 4)})
    result = {
        "model": config.model.type,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "steps_timed": len(steps),
        "tgt_tokens_per_step": round(tokens / len(steps), 1),
        "gflop_per_step": round(flops / len(steps) / 1e9, 3),
        "rounds": rounds,
        "median": {k: median(k) for k in rounds[0]},
        "best": best,
    }
    if args.lever_rounds:
        result["levers_bf16"] = lever_ratios(trainer, steps, args.lever_rounds, MODEL_LEVERS[name])
    if args.profile_steps:
        for p, amp in (("fp32", None), ("bf16", torch.bfloat16)):
            result[f"profile_{p}"] = profile_steps(trainer, steps[: args.profile_steps], amp, args.top)
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", default=str(MULTI30K))
    parser.add_argument("--models", nargs="+", default=["rnn256", "transformer"], choices=["rnn256", "transformer"])
    parser.add_argument("--steps", type=int, default=8, help="training steps timed per precision and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-steps", type=int, default=4, help="steps profiled per precision (0: none)")
    parser.add_argument("--peak-seconds", type=float, default=1.5)
    parser.add_argument("--lever-rounds", type=int, default=3, help="rounds of each lever against its older form")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="default benchmarks/results/bf16_training_profile.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from attnmt.train.trainer import native_bf16

    multi30k = Path(args.multi30k)
    result: dict = {"threads": args.threads, "native_bf16": native_bf16(torch.device("cpu")),
                    "mkldnn_bf16": torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                    "hardware_path": ("AMX" if torch.cpu._is_amx_tile_supported() else
                                      "AVX-512-BF16, no AMX" if torch.cpu._is_avx512_bf16_supported() else
                                      "no native bf16"),
                    "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            work = Path(tmp) / name
            work.mkdir()
            if name == "rnn256":
                data = work / "data"
                data.mkdir()
                config = rnn256_config(data, multi30k)
            else:
                config = transformer_config(multi30k)
            result["models"][name] = measure_model(name, config, work / "model", args)
    print(f"-> {write_result('bf16_training_profile', result, args.out)}")


if __name__ == "__main__":
    main()
