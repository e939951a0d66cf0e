"""Training with teacher forcing: the loop, validation, checkpoints, resume, early stopping.

A model folder holds everything a run produces and everything translation needs:
  config.yaml, the tokenizers and vocabularies ({src,tgt,joint}.*), checkpoints/{best,last}.pt,
  train_log.jsonl (one JSON object per event) and tensorboard/ (scalars).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.accumulate import accumulate_gradients
from attnmt.checkpoint import keep_checkpoint, load_checkpoint, load_weights, remove_stale_temporaries, save_checkpoint
from attnmt.config import Config, config_to_dict, save_config
from attnmt.data.batching import Batch
from attnmt.data.dataset import ParallelData
from attnmt.data.loading import batch_of, load_data, make_batches
from attnmt.data.vocab import PAD_ID
from attnmt.distributed import World, close_world, init_world
from attnmt.errors import UserError
from attnmt.guidance import alignment_loss, guidance_matrix
from attnmt.models import build_model
from attnmt.optim import EMA, make_optimizer


@dataclass
class TrainState:
    """Where training stands; saved in every checkpoint so that --resume continues exactly."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    best_valid_loss: float = math.inf
    bad_validations: int = 0  # validations since the best one
    best_valid_score: float = -math.inf  # the best validation BLEU / chrF (train.early_stopping_metric)
    elapsed_s: float = 0.0
    tgt_tokens: int = 0
    stop_reason: str = ""


@dataclass
class TrainResult:
    model_dir: Path
    state: TrainState
    history: list[dict] = field(default_factory=list)


def set_threads(threads: int | None) -> None:
    """Use one intra-op thread per available core (oversubscription slows small matrix products)."""
    n = threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, n))


def native_bf16(device: torch.device) -> bool:
    """Whether `device` does bfloat16 arithmetic in hardware (CUDA with bf16; a CPU with AMX or AVX-512-BF16)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return any(getattr(torch.cpu, name, lambda: False)() for name in ("_is_amx_tile_supported",
                                                                      "_is_avx512_bf16_supported"))


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The dtype the forward pass is autocast to under `train.precision`, or None for float32."""
    if precision == "bf16" or (precision == "auto" and native_bf16(device)):
        return torch.bfloat16
    return None


def prepare_model_dir(model_dir: Path, overwrite: bool, resume: bool) -> None:
    if resume:
        if not (model_dir / "checkpoints" / "last.pt").is_file():
            raise UserError(f"--resume: {model_dir} has no checkpoints/last.pt to resume from; train without --resume")
        remove_stale_temporaries(model_dir / "checkpoints")
        return
    if model_dir.exists() and any(p.name != "store" for p in model_dir.iterdir()) and not overwrite:  # store: prepare
        raise UserError(f"model folder {model_dir} exists and is not empty; choose another folder, "
                        "--resume it, or pass --overwrite to replace it")
    if overwrite and model_dir.exists():
        for sub in ("checkpoints",):
            for p in (model_dir / sub).glob("*.pt"):
                p.unlink()
        remove_stale_temporaries(model_dir / "checkpoints")
        (model_dir / "train_log.jsonl").unlink(missing_ok=True)
    model_dir.mkdir(parents=True, exist_ok=True)


def step_loss(trained: nn.Module, batch: Batch, data: ParallelData, config: Config) -> tuple[Tensor, Tensor | None]:
    """The summed translation loss of a batch and, under guided alignment, the summed alignment loss."""
    t = config.train
    guided = t.guided_alignment
    if data.guidance is None or guided.weight == 0:
        logits, _ = trained(batch.src, batch.src_len, batch.tgt_in)
        return nll_loss(logits, batch.tgt_out, t.label_smoothing), None
    chosen = {"layer": -1 if guided.layer is None else guided.layer, "head": guided.head}
    logits, alpha = trained(batch.src, batch.src_len, batch.tgt_in, **(chosen if config.model.type == "transformer"
                                                                         else {}))
    G = guidance_matrix([data.guidance[i] for i in batch.index.tolist()], alpha.size(2), alpha.size(1), alpha.device)
    return nll_loss(logits, batch.tgt_out, t.label_smoothing), alignment_loss(alpha, G)


def nll_loss(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over the real (unpadded) target tokens."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tgt_out.reshape(-1), ignore_index=PAD_ID,
                           reduction="sum", label_smoothing=label_smoothing)


@torch.no_grad()
def validation_loss(model: nn.Module, data: ParallelData, config: Config, device: torch.device) -> float:
    """Mean per-token cross-entropy (no label smoothing) on a whole split."""
    model.eval()
    total, tokens = 0.0, 0
    for indices in make_batches(data, config, shuffle=False, epoch=0):
        batch = batch_of(data, indices, device)
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)
        total += nll_loss(logits, batch.tgt_out).item()
        tokens += batch.n_tgt_tokens
    model.train()
    return total / max(tokens, 1)


def training_summary(model_dir: str | Path) -> dict:
    """What a model folder's train_log.jsonl says of its last training run (resumed parts included).

    Keys, where logged: parameters, train_pairs, device, precision, validations (step, ppl, lr, bleu),
    best_valid_ppl, tgt_tokens_per_s_median (of the log_every reports, the first one, warm-up, left out),
    epochs, steps, stop_reason, wall_s. Empty if the folder has no log.
    """
    log = Path(model_dir) / "train_log.jsonl"
    if not log.is_file():
        return {}
    summary: dict = {"validations": []}
    speeds: list[float] = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        event = record.get("event")
        if event == "start" and not record.get("step"):  # a fresh run (a resumed one starts at its step)
            summary = {"validations": [], **{k: record[k] for k in ("parameters", "train_pairs", "device",
                                                                        "precision") if k in record}}
            speeds = []
        elif event == "train":
            speeds.append(record["tgt_tokens_per_s"])
        elif event == "valid":
            summary["validations"].append({k: record[k] for k in ("step", "ppl", "lr", "bleu") if k in record})
        elif event == "end":
            summary.update(steps=record["step"], stop_reason=record["reason"], wall_s=round(record["elapsed_s"], 1))
            if "epoch" in record:
                summary["epochs"] = record["epoch"]
    if summary["validations"]:
        summary["best_valid_ppl"] = min(v["ppl"] for v in summary["validations"])
    if speeds[1:]:
        summary["tgt_tokens_per_s_median"] = round(statistics.median(speeds[1:]), 1)
    return summary


class RunLog:
    """The machine-readable log (JSON lines), TensorBoard scalars, and nothing global."""

    def __init__(self, model_dir: Path, tensorboard: bool, enabled: bool = True):
        self.path = model_dir / "train_log.jsonl"
        self.enabled = enabled
        self.writer = None
        if tensorboard and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(model_dir / "tensorboard"))
            except ImportError:  # tensorboard is optional
                self.writer = None

    def event(self, kind: str, step: int | None = None, **values) -> dict:
        record = {"event": kind, "time": round(time.time(), 3), **({"step": step} if step is not None else {}), **values}
        if not self.enabled:
            return record
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.writer is not None and step is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    self.writer.add_scalar(f"{kind}/{key}", value, step)
        return record

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@contextmanager
def graceful_stop() -> Iterator[dict]:
    """First SIGINT/SIGTERM asks the loop to stop after the current step (with a checkpoint);
    a second SIGINT stops at once."""
    flag = {"stop": False}
    previous = {}

    def handler(signum, frame):
        if flag["stop"] and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag["stop"] = True

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: no signal handling
        pass
    try:
        yield flag
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)


def make_scheduler(optimizer: torch.optim.Optimizer, config: Config):
    t = config.train
    if t.scheduler == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=t.lr_decay, patience=t.lr_patience,
                                                          min_lr=t.min_lr)
    warmup = t.warmup_steps
    if t.scheduler == "noam":

        def noam(step: int) -> float:
            """Vaswani et al. (2017), eq. 3, scaled so that the peak learning rate is train.lr."""
            step = max(step, 1)
            return min(step ** -0.5, step * warmup ** -1.5) * warmup ** 0.5

        return torch.optim.lr_scheduler.LambdaLR(optimizer, noam)
    if t.scheduler == "cosine":
        floor = min(t.min_lr / t.lr, 1.0)

        def cosine(step: int) -> float:
            """Linear warm-up, then half a cosine from train.lr down to train.min_lr at train.max_steps."""
            if step < warmup:
                return (step + 1) / warmup
            progress = min((step - warmup) / max(t.max_steps - warmup, 1), 1.0)
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, cosine)
    return None


def checkpoint_payload(model, optimizer, scheduler, state: TrainState, config: Config, src_vocab: int,
                       tgt_vocab: int) -> dict:
    return {
        "model_type": config.model.type,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else {},
        "train_state": asdict(state),
        "rng": torch.get_rng_state(),
        "vocab_sizes": [src_vocab, tgt_vocab],
    }


def train(config: Config, model_dir: str | Path, resume: bool = False, overwrite: bool = False,
          quiet: bool = False) -> TrainResult:
    """Train the model a config describes into `model_dir`."""
    model_dir = Path(model_dir)
    t = config.train
    world = init_world(t.device)
    try:
        device = torch.device(f"cuda:{world.local_rank}" if t.device == "cuda" and world.distributed else t.device)
        if autocast_dtype(t.precision, device) is not None and not native_bf16(device):
            # Emulated bfloat16 is hundreds of times slower, and oneDNN has no bfloat16 LSTM without it.
            raise UserError(f"train.precision=bf16: {device} has no bfloat16 hardware (a CPU needs AMX or "
                            "AVX-512-BF16); use train.precision=fp32, or auto to pick bf16 only where it is native")
        if world.is_main:
            prepare_model_dir(model_dir, overwrite, resume)
            if not resume:  # a resumed run rewrites it once its checkpoint has been checked against it
                save_config(config, model_dir / "config.yaml")
        world.barrier()
        torch.manual_seed(t.seed)
        set_threads(t.threads)
        log = RunLog(model_dir, t.tensorboard and not quiet, enabled=world.is_main)
        try:
            result = _train(config, model_dir, resume, quiet or not world.is_main, device, log, world)
            # No process may close its connections while another still writes its last checkpoint or
            # talks to it: gloo then aborts the other process ("terminate called without an active exception").
            world.barrier()
            return result
        finally:
            log.close()
    finally:
        close_world(world)


def _train(config: Config, model_dir: Path, resume: bool, quiet: bool, device: torch.device, log: RunLog,
           world: World):
    from attnmt.translator import Translator

    t = config.train
    train_data, valid_data, src_proc, tgt_proc = load_data(config, model_dir, resume, log, world)
    model = build_model(config.model, len(src_proc.vocab), len(tgt_proc.vocab)).to(device)
    # DDP averages gradients over processes; the loss below is scaled so that the average equals
    # the gradient of (summed loss / target tokens) over the global batch, as in one process.
    trained = nn.parallel.DistributedDataParallel(model) if world.distributed else model
    # The fused kernel updates every parameter in one pass: 3-4x faster than the default on a CPU.
    optimizer = make_optimizer(model.parameters(), t.optimizer, t.lr, t.weight_decay, t.momentum)
    scheduler = make_scheduler(optimizer, config)
    ema = EMA(model, t.ema_decay) if t.ema_decay else None  # from the initial weights
    state = TrainState()
    ckpt_dir = model_dir / "checkpoints"
    if resume:
        payload = load_checkpoint(ckpt_dir / "last.pt", config.model.type)
        load_weights(model, payload["model"], ckpt_dir / "last.pt")
        try:
            optimizer.load_state_dict(payload["optimizer"])
            if scheduler is not None and payload["scheduler"]:
                scheduler.load_state_dict(payload["scheduler"])
            state = TrainState(**payload["train_state"])
            torch.set_rng_state(payload["rng"])
            if ema is not None and "ema" in payload:
                ema.load_state_dict(payload["ema"])
            elif ema is not None:  # a run that turns EMA on at a resume starts it from the resumed weights
                ema = EMA(model, t.ema_decay)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise UserError(f"checkpoint {ckpt_dir / 'last.pt'} cannot be resumed: its training state is malformed "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}); "
                            "train again without --resume") from None
        # The stop of the previous run (an interrupt) is not this run's: continue unless a limit is reached.
        state.stop_reason = ("max_steps" if state.step >= t.max_steps else "max_epochs" if state.epoch >= t.max_epochs
                             else "early_stopping" if state.bad_validations >= t.early_stopping_patience else "")
        if world.is_main:
            save_config(config, model_dir / "config.yaml")
        log.event("resume", step=state.step, epoch=state.epoch)
    amp = autocast_dtype(t.precision, device)
    n_params = sum(p.numel() for p in model.parameters())
    log.event("start", step=state.step, model=config.model.type, parameters=n_params, train_pairs=len(train_data),
              device=str(device), precision="bf16 autocast" if amp is not None else "fp32",
              config=config_to_dict(config))

    def save(name: str) -> None:
        if not world.is_main:
            return
        payload = checkpoint_payload(model, optimizer, scheduler, state, config, len(src_proc.vocab),
                                     len(tgt_proc.vocab))
        if ema is not None:
            payload["ema"] = ema.state_dict()
            if name == "best":  # the averaged weights that were validated, loadable with --checkpoint ema
                save_checkpoint({"model_type": config.model.type, "model": ema.weights_like(model),
                                 "vocab_sizes": payload["vocab_sizes"], "train_state": payload["train_state"]},
                                ckpt_dir / "ema.pt")
        save_checkpoint(payload, ckpt_dir / f"{name}.pt")
        if name == "last" and t.keep_checkpoints:
            keep_checkpoint(payload, ckpt_dir, state.step, t.keep_checkpoints)

    def validate() -> dict:
        record: dict = {}
        if not world.is_main:
            # Validation runs on the main process only; the others wait for it, then follow the
            # learning-rate decision it broadcasts.
            world.barrier()
            lr = torch.tensor([0.0])
            torch.distributed.broadcast(lr, src=0)
            for group in optimizer.param_groups:
                group["lr"] = float(lr.item())
            return record
        if valid_data is not None:
            with ema.applied(model) if ema is not None else contextlib.nullcontext():  # validate the average
                loss = validation_loss(model, valid_data, config, device)
                record.update(loss=loss, ppl=math.exp(min(loss, 50)))
                if t.valid_bleu_sample:
                    from attnmt.evaluate import corpus_scores

                    n = min(t.valid_bleu_sample, len(valid_data))
                    model.eval()
                    translator = Translator(model, src_proc, tgt_proc, config)
                    hyps = [tr.text for tr in translator.translate(valid_data.src_text[:n], beam=1)]
                    model.train()
                    scores = corpus_scores(hyps, valid_data.tgt_text[:n])
                    record.update(bleu=scores.bleu, chrf=scores.chrf)
            metric = t.early_stopping_metric
            improved = loss < state.best_valid_loss if metric == "loss" else record[metric] > state.best_valid_score
            if improved:
                state.best_valid_loss, state.bad_validations = loss, 0
                if metric != "loss":
                    state.best_valid_score = record[metric]
            else:
                state.bad_validations += 1
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step(loss)
            record["lr"] = optimizer.param_groups[0]["lr"]
            log.event("valid", step=state.step, **record)
            if improved:  # best first: killed in between, the resumed run redoes this validation
                save("best")
            save("last")
        else:
            save("best")
            save("last")
        if world.distributed:
            world.barrier()
            torch.distributed.broadcast(torch.tensor([optimizer.param_groups[0]["lr"]]), src=0)
        return record

    progress = None
    if t.progress and not quiet:
        from tqdm import tqdm

        progress = tqdm(total=t.max_steps, initial=state.step, desc=f"train {config.model.type}", unit="step",
                        dynamic_ncols=True, leave=False)
    history: list[dict] = []
    model.train()
    started = time.perf_counter() - state.elapsed_s
    window_tokens, window_start, window_loss, window_align = 0, time.perf_counter(), 0.0, 0.0
    with graceful_stop() as stop:
        while not state.stop_reason:
            batches = make_batches(train_data, config, shuffle=True, epoch=state.epoch)
            # With N processes a step takes N consecutive batches of the epoch's order, one each; with
            # accumulation accum_steps such groups of N, one after the other.
            per_step = world.size * t.accum_steps
            n_steps = len(batches) // per_step
            for k in range(state.batch_in_epoch // per_step, n_steps):
                inner = [batch_of(train_data, batches[(k * t.accum_steps + j) * world.size + world.rank], device)
                         for j in range(t.accum_steps)]
                optimizer.zero_grad(set_to_none=True)
                step = accumulate_gradients(trained, inner, lambda b: step_loss(trained, b, train_data, config),
                                            world, t.guided_alignment.weight, amp, device.type)
                loss_sum, align_sum, step_tokens, loss = step.loss_sum, step.align_sum, step.tokens, step.loss
                state.batch_in_epoch += per_step
                # Every process must skip together, or the others would wait for its gradients.
                if not step.finite:
                    optimizer.zero_grad(set_to_none=True)
                    log.event("nonfinite_loss", step=state.step, policy=t.nan_policy)
                    kept = (f"the last good checkpoint stays in {ckpt_dir / 'last.pt'}"
                            if (ckpt_dir / "last.pt").is_file() else "no checkpoint was written yet")
                    if t.nan_policy == "stop":
                        raise UserError(f"the training loss became {loss.item()} at step {state.step + 1}; {kept}; "
                                        "lower train.lr or set train.nan_policy=skip")
                    if not quiet:
                        print(f"attnmt: warning: the training loss became {loss.item()} at step {state.step + 1}; "
                              "skipped that batch (train.nan_policy=skip)", file=sys.stderr)
                    continue
                if t.clip_grad_norm:
                    nn.utils.clip_grad_norm_(model.parameters(), t.clip_grad_norm)
                optimizer.step()
                if ema is not None:
                    ema.update(model)
                if scheduler is not None and not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                    scheduler.step()
                state.step += 1
                state.tgt_tokens += int(step_tokens)
                window_tokens += int(step_tokens)
                window_loss += world.sum(loss_sum.item())
                if align_sum is not None:
                    window_align += world.sum(align_sum.item())
                state.elapsed_s = time.perf_counter() - started
                if progress is not None:
                    progress.update(1)
                if state.step % t.log_every == 0:
                    span = time.perf_counter() - window_start
                    extra = {"align_loss": window_align / max(window_tokens, 1)} if train_data.guidance else {}
                    record = log.event("train", step=state.step, loss=window_loss / max(window_tokens, 1),
                                       tgt_tokens_per_s=window_tokens / max(span, 1e-9),
                                       lr=optimizer.param_groups[0]["lr"], epoch=state.epoch, **extra)
                    if progress is not None:
                        progress.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tgt_tokens_per_s']:.0f}")
                    window_tokens, window_start, window_loss, window_align = 0, time.perf_counter(), 0.0, 0.0
                if state.step % t.valid_every == 0:
                    history.append({"step": state.step, **validate()})
                    if state.bad_validations >= t.early_stopping_patience:
                        state.stop_reason = "early_stopping"
                elif t.save_every and state.step % t.save_every == 0:
                    save("last")
                if state.step >= t.max_steps:
                    state.stop_reason = state.stop_reason or "max_steps"
                # Clocks and signals differ between processes: only the main process's count.
                if world.is_main and t.max_time_s is not None and state.elapsed_s >= t.max_time_s:
                    state.stop_reason = state.stop_reason or "max_time"
                if world.is_main and stop["stop"]:
                    state.stop_reason = state.stop_reason or "interrupted"
                if world.distributed and world.agree(bool(state.stop_reason)):
                    state.stop_reason = state.stop_reason or "stopped by the main process"
                if state.stop_reason:
                    break
            else:
                state.epoch += 1
                state.batch_in_epoch = 0
                if state.epoch >= t.max_epochs:
                    state.stop_reason = "max_epochs"
        if world.agree(state.stop_reason == "interrupted"):
            save("last")  # at once (a scheduler's kill may follow), and no validation that --resume would not redo
        elif state.step % t.valid_every != 0 or not history:
            history.append({"step": state.step, **validate()})
    if progress is not None:
        progress.close()
    log.event("end", step=state.step, epoch=state.epoch, reason=state.stop_reason, elapsed_s=state.elapsed_s)
    return TrainResult(model_dir, state, history)
