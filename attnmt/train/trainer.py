"""Training with teacher forcing: the loop, validation, checkpoints, resume, early stopping.

A model folder holds everything a run produces and everything translation needs:
  config.yaml, the tokenizers and vocabularies ({src,tgt,joint}.*), checkpoints/{best,last}.pt,
  train_log.jsonl (one JSON object per event), train.log (the lines printed while it trains) and
  tensorboard/ (scalars).

`train` sets up the process (devices, torchrun, the model folder, the log) and runs a `Trainer`,
whose `run` is the whole loop in five phases: the epoch's batches, the step, the report, the
validation and the stop. Everything a checkpoint needs to continue exactly is in `TrainState`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
import typing
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.config.schema import Config, config_to_dict, save_config
from attnmt.config.typed import coerce, ranged
from attnmt.data.corpus import MAX_LINE_BYTES
from attnmt.data.loading import batch_of, load_data, training_batches
from attnmt.data.store import tokenizer_hash
from attnmt.errors import UserError
from attnmt.folder.checkpoint import (
    CheckpointWriteError,
    for_translation,
    keep_checkpoint,
    load_weights,
    save_checkpoint,
)
from attnmt.folder.model_folder import open_model_folder
from attnmt.models import build_model
from attnmt.runtime.distributed import World, close_world, init_world
from attnmt.runtime.threads import training_process
from attnmt.train.accumulate import Accumulated, accumulate_gradients
from attnmt.train.events import RunLog, graceful_stop
from attnmt.train.finetune import InitFrom, check_init, copy_processors, init_weights, report_coverage
from attnmt.train.guidance import make_guidance
from attnmt.train.loss import step_loss, validation_loss
from attnmt.train.optim import EMA, make_optimizer
from attnmt.train.progress import BudgetBar, LossTrend, show_bar
from attnmt.train.resume import check_optimizer_state, check_scheduler_state, resume_payload
from attnmt.train.schedulers import make_scheduler, steps_per_update


@dataclass
class TrainState:
    """Where training stands; saved in every checkpoint so that --resume continues exactly."""

    step: int = ranged(0, 0)
    epoch: int = ranged(0, 0)
    batch_in_epoch: int = ranged(0, 0)  # batches of the current epoch already consumed
    best_valid_loss: float = math.inf
    bad_validations: int = ranged(0, 0)  # validations since the best one
    best_valid_score: float = -math.inf  # the best validation BLEU / chrF (train.early_stopping_metric)
    elapsed_s: float = ranged(0.0, 0.0)
    tgt_tokens: int = ranged(0, 0)
    stop_reason: str = ""
    best_step: int | None = ranged(None, 0)  # the step of the best validation so far
    # the step of the last validation: a resumed run that has finished validates no more
    validated_step: int = ranged(-1, -1)

    @classmethod
    def from_checkpoint(cls, raw: Any, path: Path) -> TrainState:
        """The state a checkpoint holds, every field's type and range checked (a best loss or score may be
        infinite, never NaN); anything else is a UserError naming the field."""
        hints, fields = typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        try:
            if not isinstance(raw, dict):
                raise UserError(f"a {type(raw).__name__}, not a mapping")
            for key, value in raw.items():
                if key not in fields:
                    raise UserError(f"unknown field {str(key)[:40]!r}")
                values[key] = coerce(key, value, hints[key])
                declared = fields[key].metadata.get("range")
                if declared is not None and values[key] is not None:
                    declared.check(key, values[key])
                elif isinstance(values[key], float) and math.isnan(values[key]):
                    raise UserError(f"{key}=nan is not a number")
        except UserError as e:
            raise UserError(f"checkpoint {path} cannot be resumed: its training state is malformed "
                            f"({str(e).removeprefix('config: ')[:160]}); train again without --resume") from None
        return cls(**values)


@dataclass
class TrainResult:
    model_dir: Path
    state: TrainState
    history: list[dict] = field(default_factory=list)
    signal: int | None = None  # the signal (SIGINT / SIGTERM) that interrupted the run


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


def checkpoint_payload(model, optimizer, scheduler, state: TrainState, config: Config, src_vocab: int,
                       tgt_vocab: int, tokenizers: str) -> dict:
    """What a checkpoint holds; `tokenizers`: the hash of the model folder's tokenizers (refused when they differ)."""
    return {
        "model_type": config.model.type,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else {},
        "train_state": asdict(state),
        "rng": torch.get_rng_state(),
        "vocab_sizes": [src_vocab, tgt_vocab],
        "tokenizers": tokenizers,
    }


def train(config: Config, model_dir: str | Path, resume: bool = False, overwrite: bool = False,
          quiet: bool = False, init_from: str | Path | None = None,
          init_checkpoint: str | None = None) -> TrainResult:
    """Train the model a config describes into `model_dir`. init_from: a trained model folder to start from
    (its checkpoint `init_checkpoint` and its tokenizers; attnmt/train/finetune.py). A run that fails before its
    first checkpoint leaves `model_dir` as it found it (attnmt/folder/model_folder.py)."""
    model_dir = Path(model_dir)
    t = config.train
    init = InitFrom(Path(init_from), init_checkpoint) if init_from is not None else None
    if init is not None and resume:
        raise UserError("--init-from starts a new run from a trained model, --resume continues this folder's run; "
                        "use one of them")
    init_path = check_init(config, init, model_dir) if init is not None else None
    world = init_world(t.device)
    try:
        device = torch.device(f"cuda:{world.local_rank}" if t.device == "cuda" and world.distributed else t.device)
        if autocast_dtype(t.precision, device) is not None and not native_bf16(device):
            # Emulated bfloat16 is hundreds of times slower, and oneDNN has no bfloat16 LSTM without it.
            raise UserError(f"train.precision=bf16: {device} has no bfloat16 hardware (a CPU needs AMX or "
                            "AVX-512-BF16); use train.precision=fp32, or auto to pick bf16 only where it is native")
        folder = open_model_folder(model_dir, overwrite, resume) if world.is_main else None
        try:
            if world.is_main and not resume:  # a resumed run rewrites it once its checkpoint has been checked
                save_config(config, model_dir / "config.yaml")
                if init is not None:
                    copy_processors(init, model_dir)
            world.barrier()
            torch.manual_seed(t.seed)
            log = RunLog(model_dir, t.tensorboard and not quiet, enabled=world.is_main, console=not quiet)
            try:
                with training_process(t.threads):
                    result = Trainer(config, model_dir, resume, quiet or not world.is_main, device, log, world,
                                     init_path).run()
                # No process may close its connections while another still writes its last checkpoint or
                # talks to it: gloo then aborts the other process ("terminate called without an active exception").
                world.barrier()
                return result
            finally:
                log.close()
        finally:
            if folder is not None:  # without a checkpoint, the folder goes back to how it was
                folder.settle()
    finally:
        close_world(world)


@dataclass
class Window:
    """The training loss and speed since the last report (every train.log_every steps)."""

    tokens: int = 0
    loss: float = 0.0
    align: float = 0.0
    start: float = field(default_factory=time.perf_counter)


class Trainer:
    """One training run: build, restore, step, validate, save and stop; `run` is the loop."""

    def __init__(self, config: Config, model_dir: Path, resume: bool, quiet: bool, device: torch.device,
                 log: RunLog, world: World, init_path: Path | None = None):
        self.config, self.t, self.model_dir, self.ckpt_dir = config, config.train, model_dir, model_dir / "checkpoints"
        self.quiet, self.device, self.log, self.world = quiet, device, log, world
        t = self.t
        reuse = resume or init_path is not None  # the tokenizers in model_dir: its own, or copied from init_from
        log.say(f"{model_dir}: reading the corpus and {'loading' if reuse else 'training'} the tokenizers")
        resumed = resume_payload(model_dir, config.model.type) if resume else None  # checked before the data
        self.train_data, self.valid_data, self.src_proc, self.tgt_proc = load_data(
            config, model_dir, resume, log, world, tokenizers=model_dir if init_path is not None else None)
        self.tokenizers = tokenizer_hash(model_dir)  # recorded in every checkpoint
        # guided alignment: the training pairs' word links as the loss asks for them (None: unguided)
        self.guidance = make_guidance(config, self.train_data, self.src_proc, self.tgt_proc, log)
        self.model = build_model(config.model, len(self.src_proc.vocab), len(self.tgt_proc.vocab))
        if init_path is not None:  # before the EMA copies the weights
            log.event("init", step=0, init_from=str(init_path),
                      trained_steps=init_weights(self.model, init_path, config.model.type))
            report_coverage(self.train_data, log, quiet)  # the new corpus's tokens the trained vocabularies know
        self.model.to(device)
        # DDP averages gradients over processes; the loss is scaled so that the average equals the
        # gradient of (summed loss / target tokens) over the global batch, as in one process.
        self.trained = nn.parallel.DistributedDataParallel(self.model) if world.distributed else self.model
        self.optimizer = make_optimizer(self.model.parameters(), t.optimizer, t.lr, t.weight_decay, t.momentum)
        self.state, self.history = TrainState(), []
        self.scheduler = make_scheduler(self.optimizer, config, self.elapsed_s)
        self.ema = EMA(self.model, t.ema_decay) if t.ema_decay else None  # from the initial weights
        self.amp = autocast_dtype(t.precision, device)
        self.trend = LossTrend()  # warns when the reported training loss keeps rising
        self.saved_step: int | None = None  # the step checkpoints/last.pt holds, once this run has written or read it
        if resume:
            self.restore(resumed)
            self.saved_step = self.state.step
        log.event("start", step=self.state.step, model=config.model.type,
                  parameters=sum(p.numel() for p in self.model.parameters()), train_pairs=len(self.train_data),
                  long_lines=self.train_data.long_lines, line_limit=MAX_LINE_BYTES,
                  valid_pairs=len(self.valid_data) if self.valid_data is not None else 0,
                  src_vocab=len(self.src_proc.vocab), tgt_vocab=len(self.tgt_proc.vocab),
                  joint_vocab=self.src_proc is self.tgt_proc, device=str(device),
                  precision="bf16 autocast" if self.amp is not None else "fp32",
                  threads=torch.get_num_threads() if device.type == "cpu" else None, model_dir=str(model_dir),
                  init_from=str(init_path) if init_path is not None else None, config=config_to_dict(config))

    def run(self) -> TrainResult:
        """The loop: until a stop reason, take the epoch's steps, report, validate, and ask whether to stop."""
        t, state = self.t, self.state
        self.model.train()
        self.started, self.window = time.perf_counter() - state.elapsed_s, Window()
        with graceful_stop(notice=not self.quiet) as signals, self.progress_bar() as progress:
            while not state.stop_reason:
                for inner in self.epoch_steps():  # 1. the epoch's batches, from where a resumed run stopped
                    step = self.step(inner)  # 2. forward, backward and one update (None: a skipped step)
                    if step is None:
                        continue
                    self.report(step, progress)  # 3. the loss and speed, every log_every steps
                    if state.step % t.valid_every == 0:  # 4. validate and save, or only save
                        self.validate()
                    elif t.save_every and state.step % t.save_every == 0:
                        self.save("last")
                    state.stop_reason = self.stop_reason(signals)  # 5. a limit, early stopping or a signal
                    if state.stop_reason:
                        break
                else:
                    state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                    if state.epoch >= t.max_epochs:
                        state.stop_reason = "max_epochs"
            if self.world.agree(state.stop_reason == "interrupted"):
                self.save("last")  # at once (a kill may follow), and no validation that --resume would not redo
            elif state.validated_step != state.step:
                self.validate()
        self.log.event("end", step=state.step, epoch=state.epoch, reason=state.stop_reason, elapsed_s=state.elapsed_s,
                       model_dir=str(self.model_dir), validated=self.valid_data is not None, **self.best())
        return TrainResult(self.model_dir, state, self.history, signals["signal"] if state.stop_reason else None)

    def best(self) -> dict:
        """The best validation so far, by train.early_stopping_metric, for the log; {} before the first."""
        state, metric = self.state, self.t.early_stopping_metric
        value = state.best_valid_loss if metric == "loss" else state.best_valid_score
        if not math.isfinite(value):
            return {}
        return {"best_metric": metric, "best_value": value, "best_step": state.best_step}

    def elapsed_s(self) -> float:
        """The training time so far, the same in every process (their mean), for a wall-time schedule."""
        return self.world.sum(self.state.elapsed_s) / self.world.size

    def epoch_steps(self) -> Iterator[list]:
        """Each remaining step's batches: with N processes a step takes N consecutive batches of the
        epoch's order, one each; with accumulation accum_steps such groups, one after the other."""
        t, world = self.t, self.world
        batches = training_batches(self.train_data, self.config, epoch=self.state.epoch)
        per_step = world.size * t.accum_steps
        for k in range(self.state.batch_in_epoch // per_step, len(batches) // per_step):
            yield [batch_of(self.train_data, batches[(k * t.accum_steps + j) * world.size + world.rank], self.device)
                   for j in range(t.accum_steps)]

    def step(self, inner: list) -> Accumulated | None:
        """One update from the step's batches; None if its loss was not finite and it was skipped."""
        t, state = self.t, self.state
        self.optimizer.zero_grad(set_to_none=True)
        step = accumulate_gradients(self.trained, inner,
                                    lambda b: step_loss(self.trained, b, self.guidance, self.config),
                                    self.world, t.guided_alignment.weight, self.amp, self.device.type)
        state.batch_in_epoch += self.world.size * t.accum_steps
        if not step.finite:  # every process skips together, or the others would wait for its gradients
            self.skip_nonfinite(step.loss)
            return None
        if t.clip_grad_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_grad_norm)
        self.optimizer.step()
        if self.ema is not None:
            self.ema.update(self.model)
        if steps_per_update(self.scheduler):
            self.scheduler.step()
        state.step += 1
        state.tgt_tokens += int(step.tokens)
        state.elapsed_s = time.perf_counter() - self.started
        return step

    def skip_nonfinite(self, loss: torch.Tensor) -> None:
        """train.nan_policy: stop with one clear line, or skip the batch with a warning."""
        self.optimizer.zero_grad(set_to_none=True)
        self.log.event("nonfinite_loss", step=self.state.step, policy=self.t.nan_policy)
        at = f"the training loss became {loss.item()} at step {self.state.step + 1}"
        if self.t.nan_policy == "stop":
            kept = (f"the last good checkpoint stays in {self.ckpt_dir / 'last.pt'}"
                    if (self.ckpt_dir / "last.pt").is_file() else "no checkpoint was written yet")
            raise UserError(f"{at}; {kept}; lower train.lr or set train.nan_policy=skip")
        if not self.quiet:
            print(f"attnmt: warning: {at}; skipped that batch (train.nan_policy=skip)", file=sys.stderr)

    def report(self, step: Accumulated, progress) -> None:
        """Add the step to the window; every log_every steps, log the window's loss and speed."""
        w, state = self.window, self.state
        w.tokens += int(step.tokens)
        w.loss += self.world.sum(step.loss_sum.item())
        if step.align_sum is not None:
            w.align += self.world.sum(step.align_sum.item())
        if state.step % self.t.log_every:
            if progress is not None:
                progress.update(state.step, state.elapsed_s)
            return
        extra = {"align_loss": w.align / max(w.tokens, 1)} if self.guidance is not None else {}
        record = self.log.event("train", step=state.step, loss=w.loss / max(w.tokens, 1),
                                tgt_tokens_per_s=w.tokens / max(time.perf_counter() - w.start, 1e-9),
                                lr=self.optimizer.param_groups[0]["lr"], epoch=state.epoch,
                                elapsed_s=round(state.elapsed_s, 3), **extra)
        if progress is not None:
            progress.update(state.step, state.elapsed_s, loss=f"{record['loss']:.3f}")
        if (warning := self.trend.update(record["loss"], state.step)) is not None and not self.quiet:
            print(f"attnmt: warning: {warning}", file=sys.stderr)
        self.window = Window()

    def stop_reason(self, signals: dict) -> str:
        """Why to stop after this step, or "". Clocks and signals differ between processes: only the
        main process's count, and every process stops when it does."""
        t, state, world = self.t, self.state, self.world
        reason = ("early_stopping" if state.bad_validations >= t.early_stopping_patience
                  else "max_steps" if state.step >= t.max_steps
                  else "max_time" if world.is_main and t.max_time_s is not None and state.elapsed_s >= t.max_time_s
                  else "interrupted" if world.is_main and signals["stop"] else "")
        if world.distributed and world.agree(bool(reason)):
            reason = reason or "stopped by the main process"
        return reason

    def validate(self) -> dict:
        """Validation loss (and BLEU / chrF on a sample), the best-so-far bookkeeping, the scheduler's
        plateau step, and the checkpoints. Runs on the main process; the others wait and follow its
        learning rate."""
        world, state = self.world, self.state
        record: dict = {}
        state.validated_step = state.step  # before the checkpoints that hold it
        if not world.is_main:
            world.barrier()
            lr = torch.tensor([0.0])
            torch.distributed.broadcast(lr, src=0)
            for group in self.optimizer.param_groups:
                group["lr"] = float(lr.item())
        elif self.valid_data is None:
            self.save("best")
            self.save("last")
        else:
            record = self.measure_validation()
            improved = self.track_best(record)
            if not steps_per_update(self.scheduler) and self.scheduler is not None:
                self.scheduler.step(record["loss"])
            record["lr"] = self.optimizer.param_groups[0]["lr"]
            self.log.event("valid", step=state.step, **record, **self.best(),
                           saved=["best", "last"] if improved else ["last"])
            if improved:  # best first: killed in between, the resumed run redoes this validation
                self.save("best")
            self.save("last")
        if world.distributed and world.is_main:
            world.barrier()
            torch.distributed.broadcast(torch.tensor([self.optimizer.param_groups[0]["lr"]]), src=0)
        self.history.append({"step": state.step, **record})
        return record

    def measure_validation(self) -> dict:
        """Loss and perplexity on the validation split; BLEU and chrF of greedy translations of a sample."""
        from attnmt.decode.evaluate import corpus_scores
        from attnmt.decode.translator import Translator

        t, model, data = self.t, self.model, self.valid_data
        with self.ema.applied(model) if self.ema is not None else contextlib.nullcontext():  # validate the average
            loss = validation_loss(model, data, self.config, self.device)
            record = {"loss": loss, "ppl": math.exp(min(loss, 50))}
            if t.valid_bleu_sample:
                n = min(t.valid_bleu_sample, len(data))
                model.eval()
                translator = Translator(model, self.src_proc, self.tgt_proc, self.config)
                hyps = [tr.text for tr in translator.translate(data.src_text[:n], beam=1)]
                model.train()
                scores = corpus_scores(hyps, data.tgt_text[:n])
                record.update(bleu=scores.bleu, chrf=scores.chrf)
        return record

    def track_best(self, record: dict) -> bool:
        """Whether this validation is the best so far by train.early_stopping_metric; counts the others."""
        state, metric = self.state, self.t.early_stopping_metric
        loss = record["loss"]
        improved = loss < state.best_valid_loss if metric == "loss" else record[metric] > state.best_valid_score
        if improved:
            state.best_valid_loss, state.bad_validations, state.best_step = loss, 0, state.step
            if metric != "loss":
                state.best_valid_score = record[metric]
        else:
            state.bad_validations += 1
        return improved

    def save(self, name: str) -> None:
        """checkpoints/NAME.pt (main process only); with EMA, the averaged weights as ema.pt beside best. A
        failed write (a full disk) stops the run with one line that says which checkpoint to resume from."""
        if not self.world.is_main:
            return
        try:
            self.write_checkpoints(name)
        except CheckpointWriteError as e:
            safe = (f"checkpoints/last.pt holds step {self.saved_step:,}: continue from it with --resume once the "
                    "checkpoint can be written" if self.saved_step is not None
                    else "no checkpoint of this run was written yet")
            raise UserError(f"cannot write checkpoint {e.path}: {e.reason}; no checkpoint was replaced by a partial "
                            f"file; {safe} (free some space, or make {e.path.parent} writable)") from None
        if name == "last":
            self.saved_step = self.state.step

    def write_checkpoints(self, name: str) -> None:
        payload = checkpoint_payload(self.model, self.optimizer, self.scheduler, self.state, self.config,
                                     len(self.src_proc.vocab), len(self.tgt_proc.vocab), self.tokenizers)
        if self.ema is not None:
            payload["ema"] = self.ema.state_dict()
            if name == "best":  # the averaged weights that were validated, loadable with --checkpoint ema
                save_checkpoint(for_translation({**payload, "model": self.ema.weights_like(self.model)}),
                                self.ckpt_dir / "ema.pt")
        # last.pt: everything --resume needs; best.pt: what translating needs, without the optimizer's state
        save_checkpoint(payload if name == "last" else for_translation(payload), self.ckpt_dir / f"{name}.pt")
        if name == "last" and self.t.keep_checkpoints:
            keep_checkpoint(payload, self.ckpt_dir, self.state.step, self.t.keep_checkpoints)

    def restore(self, payload: dict) -> None:
        """Continue from checkpoints/last.pt (`payload`): weights, optimizer, scheduler, EMA, state and RNG, the
        optimizer's and scheduler's state checked against the model first (attnmt/train/resume.py)."""
        t, path = self.t, self.ckpt_dir / "last.pt"
        load_weights(self.model, payload["model"], path)
        try:
            check_optimizer_state(payload["optimizer"], self.optimizer, path)
            check_scheduler_state(payload["scheduler"], self.scheduler, path)
            self.optimizer.load_state_dict(payload["optimizer"])
            if self.scheduler is not None and payload["scheduler"]:
                self.scheduler.load_state_dict(payload["scheduler"])
            self.state = TrainState.from_checkpoint(payload["train_state"], path)
            torch.set_rng_state(payload["rng"])
            if self.ema is not None and "ema" in payload:
                self.ema.load_state_dict(payload["ema"])
            elif self.ema is not None:  # a run that turns EMA on at a resume starts it from the resumed weights
                self.ema = EMA(self.model, t.ema_decay)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise UserError(f"checkpoint {path} cannot be resumed: its training state is malformed "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}); "
                            "train again without --resume") from None
        state = self.state  # the previous run's stop (an interrupt) is not this run's, unless a limit is reached
        state.stop_reason = ("max_steps" if state.step >= t.max_steps else "max_epochs" if state.epoch >= t.max_epochs
                             else "early_stopping" if state.bad_validations >= t.early_stopping_patience else "")
        if self.world.is_main:
            save_config(self.config, self.model_dir / "config.yaml")
        self.log.event("resume", step=state.step, epoch=state.epoch)

    @contextlib.contextmanager
    def progress_bar(self):
        """On a terminal: a bar over the budget that binds (steps or seconds), with the log's lines above it."""
        if not show_bar(self.t.progress, self.quiet) or self.log.text is None:
            yield None
            return
        bar = BudgetBar(self.t.max_steps, self.t.max_time_s, self.state.step, self.state.elapsed_s,
                        desc=f"train {self.config.model.type}")
        self.log.text.bar = bar
        try:
            yield bar
        finally:
            self.log.text.bar = None
            bar.close()
