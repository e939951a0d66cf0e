"""The "rnn-256" recipe of the peer comparison (../shared/peers), run with attnmt on Multi30k de->en.

    python -m benchmarks.rnn256 [--multi30k ../shared/data/multi30k] [--seconds 240] [--threads 2]
    python -m benchmarks.rnn256 --device cuda --precision bf16 --out benchmarks/results/rnn256_cuda_bf16.json
    python -m benchmarks.rnn256 --reuse models/rnn256_luong --out ...   # decoding of a kept model, no training
    python -m benchmarks.rnn256 --peaks-only --out benchmarks/results/rnn256_luong_feed.json  # peaks again, see below

The recipe of ../shared/peers (OpenNMT-py, fairseq, JoeyNMT): text lowercased with punctuation split
off, word vocabularies of at most 10,000 per side (min frequency 2), a 1-layer bidirectional LSTM
encoder (128 per direction by default, as OpenNMT-py's brnn makes of hidden size 256) and a 1-layer
LSTM decoder with additive attention, embeddings and hidden size 256, batches
of 64 sentences, Adam lr 1e-3, dropout 0.2, gradient norm clipped at 5, a fixed training time; then
test_2016_flickr decoded greedily and with beam 5, batches of 64, at most 80 output tokens, BLEU on
the lowercased tokenized references (sacreBLEU tokenize=none: tokenized BLEU, as the peers report).

Also measured in the same run, so that the throughput can be read against the machine:
* the device's float32 and bfloat16 matrix-product rate (2048^3 on the training thread count; 8192^3 on a GPU),
  each with its path (``matmul_path``): native, or emulated where the hardware has no such arithmetic (bfloat16
  on a CPU without AMX or AVX-512-BF16, :func:`attnmt.train.trainer.native_bf16`; measured on 512^3 products there, as
  one 2048^3 product takes a minute);
* the model's FLOPs per target token of one training step (forward + backward, counted by
  torch.utils.flop_counter on a real batch), hence the achieved FLOP/s and its share of each native peak (no
  share of an emulated rate, which is no peak of the machine; a share above 1 is an error and nothing is
  written);
* decoding speed in sentences/s for batches of 1, 16 and 64 sentences;
* beam 5 also with ``--stopping early`` (a sentence ends when no live hypothesis would win if it ended now);
* on a CPU, all the decoding again with int8 linear layers (``attnmt translate --int8``), and both models
  once more decoded by ``--workers`` processes of one thread each (``attnmt translate --workers 2``).
Writes benchmarks/results/rnn256.json. ``--peaks-only`` measures the two matrix-product rates again on the
machine of the JSON given as ``--out`` (the same CPU model) and records them there as ``peaks_remeasured``; the run's
own peaks stay, each labelled with the path found, and a share of a peak found emulated is removed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch  # noqa: E402

from attnmt.config.schema import config_from_dict  # noqa: E402
from attnmt.decode.evaluate import corpus_scores  # noqa: E402
from benchmarks.common import tokenize_lowercase, write_result

ROOT = Path(__file__).resolve().parents[1]


def prepare(multi30k: Path, out: Path) -> None:
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("de", "en"):
            with gzip.open(multi30k / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = f.read().rstrip("\n").split("\n")
            text = "\n".join(tokenize_lowercase(x) for x in lines) + "\n"
            (out / f"{split}.{lang}").write_text(text, encoding="utf-8")


def recipe(data: Path, seconds: float, threads: int, enc_hidden: int, model: dict, device: str = "cpu",
           precision: str = "fp32") -> dict:
    return {
        "name": "rnn256",
        "data": {"train_src": str(data / "train.de"), "train_tgt": str(data / "train.en"),
                 "valid_src": str(data / "val.de"), "valid_tgt": str(data / "val.en"),
                 "src_lang": "de", "tgt_lang": "en", "tokenizer": "word", "max_vocab": 10000, "min_freq": 2,
                 "max_len": 100},
        "model": {"type": "rnnsearch", "cell": "lstm", "emb_size": 256, "hidden_size": 256,
                  "enc_hidden_size": enc_hidden, "dropout": 0.2, **model},
        "train": {"seed": 1, "batch_size": 64, "lr": 1e-3, "scheduler": "none", "clip_grad_norm": 5.0,
                  "label_smoothing": 0.0, "max_time_s": seconds, "max_steps": 10**6, "valid_every": 250,
                  "valid_bleu_sample": 0, "early_stopping_patience": 10**6, "threads": threads,
                  "tensorboard": False, "progress": False, "device": device, "precision": precision},
        "decode": {"beam": 5, "max_len_cap": 80, "batch_size": 64},
    }


def matmul_rate(dtype: torch.dtype, device: str = "cpu", seconds: float = 2.0, n: int | None = None) -> float:
    """GFLOP/s of an n x n x n matrix product in ``dtype`` (default n = 2048 on a CPU, 8192 on a GPU)."""
    n = n or (8192 if device == "cuda" else 2048)
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a @ b
    sync()
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        a @ b
        count += 1
        if count % 10 == 0:
            sync()
    sync()
    return 2 * n**3 * count / (time.perf_counter() - started) / 1e9


PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16}
EMULATED_N = 512  # an emulated product's size: at its 0.3 GFLOP/s, one 2048^3 product takes about a minute


def matmul_path(name: str, device: str) -> str:
    """"native" where ``device`` does this precision's arithmetic in hardware, else "emulated"."""
    from attnmt.train.trainer import native_bf16

    return "native" if name == "float32" or native_bf16(torch.device(device)) else "emulated"


def measure_peaks(device: str) -> dict:
    """Each precision's matrix-product rate (GFLOP/s), its path (native or emulated) and its product size."""
    paths = {name: matmul_path(name, device) for name in PRECISIONS}
    sizes = {name: (8192 if device == "cuda" else 2048) if paths[name] == "native" else EMULATED_N
             for name in PRECISIONS}
    rates = {name: round(matmul_rate(dtype, device, n=sizes[name]), 1) for name, dtype in PRECISIONS.items()}
    return {"matmul_peak_gflops": rates, "matmul_path": paths, "matmul_size": sizes}


def shares_of_peak(achieved: float | None, peaks: dict) -> dict:
    """``share_of_<precision>_peak`` for each native precision (None when ``achieved`` is); a share above 1 is a
    SystemExit (:func:`check_share`)."""
    shares = {}
    for name, path in peaks["matmul_path"].items():
        if path == "native":
            share = None if achieved is None else round(achieved / peaks["matmul_peak_gflops"][name], 4)
            shares[f"share_of_{name}_peak"] = check_share(share, name)
    return shares


def check_share(share: float | None, name: str) -> float | None:
    """``share``, unless it is above 1: then a SystemExit, as a FLOP count or a rate is wrong; nothing is written."""
    if share is not None and share > 1:
        raise SystemExit(f"rnn256: the achieved rate is {share:.2f} times the {name} matrix-product rate; a share of "
                         "a peak cannot exceed 1: check the FLOP count and the peak measurement (nothing written)")
    return share


def remeasure_peaks(path: Path, device: str) -> dict:
    """``--peaks-only``: the peaks of the run recorded in ``path`` measured again (same CPU model), labelled with
    their paths; a share of an emulated peak removed, a native one kept (the run's own measurement)."""
    from benchmarks.common import command_line, machine_info

    if not path.is_file():
        raise SystemExit(f"rnn256: --peaks-only rewrites a result of this script; {path} does not exist")
    result = json.loads(path.read_text(encoding="utf-8"))
    machine = machine_info()
    recorded = result["machine"]
    if machine["cpu"] != recorded["cpu"] or recorded.get("cpu_isa", machine["cpu_isa"]) != machine["cpu_isa"]:
        raise SystemExit(f"rnn256: {path} ran on {recorded['cpu']} {recorded.get('cpu_isa', '')}, this is "
                         f"{machine['cpu']} {machine['cpu_isa']}; remeasure its peaks on that machine")
    again = measure_peaks(device)
    result["matmul_path"] = again["matmul_path"]
    for name, found in again["matmul_path"].items():
        if found == "native":
            check_share(result.get(f"share_of_{name}_peak"), name)
        else:
            result.pop(f"share_of_{name}_peak", None)
    result["peaks_remeasured"] = {"command": command_line(), "machine": machine, **again}
    return result


def rewrite_peaks(out: str | None, device: str) -> int:
    """``--peaks-only``: :func:`remeasure_peaks` of the JSON ``out``, written back to it."""
    if not out:
        raise SystemExit("rnn256: --peaks-only rewrites the result JSON that --out names; add --out")
    result = remeasure_peaks(Path(out), device)
    Path(out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result["peaks_remeasured"], indent=1))
    return 0


def flops_per_target_token(translator, data: Path) -> float:
    """Forward + backward FLOPs of one training step on the first 64 training pairs, per target token."""
    from torch.utils.flop_counter import FlopCounterMode

    from attnmt.data.batching import collate
    from attnmt.train.loss import nll_loss

    src = (data / "train.de").read_text(encoding="utf-8").splitlines()[:64]
    tgt = (data / "train.en").read_text(encoding="utf-8").splitlines()[:64]
    examples = [(translator.src.ids(s), translator.tgt.ids(t)) for s, t in zip(src, tgt)]
    batch = collate(examples, list(range(len(examples)))).to(translator.device)
    model = translator.model.train()
    with FlopCounterMode(display=False) as counter:
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)
        nll_loss(logits, batch.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    model.eval()
    return counter.get_total_flops() / batch.n_tgt_tokens


def measure_decoding(translator, sources: list[str], references: list[str], label: str,
                     workers: int = 1) -> tuple[dict, dict]:
    """Decoding time and BLEU of the test set (greedy, beam 5 with both stopping rules; batches of 64), and
    greedy sentences/s.

    ``workers`` > 1: the batches are decoded by that many processes of one thread each (--workers)."""
    decoding = {}
    batches = dict(batch_tokens=10**6, workers=workers)
    for beam, stopping in ((1, "exact"), (5, "exact"), (5, "early")):
        started = time.perf_counter()
        hyps = [t.text for t in translator.translate(sources, beam=beam, batch_size=64, stopping=stopping, **batches)]
        seconds = time.perf_counter() - started
        scores = corpus_scores(hyps, references, tokenize="none")
        key = f"beam{beam}" + ("_early" if stopping == "early" else "")  # --stopping early
        decoding[key] = {"decode_s": round(seconds, 2), "bleu_tok_none": round(scores.bleu, 2),
                         "signature": scores.bleu_signature}
        print(f"{label} {key}: {seconds:.1f} s, BLEU (tokenized, lowercased) {scores.bleu:.2f}", flush=True)
    sentences_per_s = {}
    for size in (1, 16, 64):
        subset = sources[: 200 if size == 1 else 1000]
        started = time.perf_counter()
        translator.translate(subset, beam=1, batch_size=size, **batches)
        sentences_per_s[f"greedy_batch{size}"] = round(len(subset) / (time.perf_counter() - started), 1)
    return decoding, sentences_per_s


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--seconds", type=float, default=240.0, help="training wall time")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--enc-hidden", type=int, default=128,
                        help="encoder LSTM size per direction (128: OpenNMT-py's brnn with hidden_size 256)")
    parser.add_argument("--model", action="append", default=[], metavar="KEY=VALUE",
                        help="a model setting to change, e.g. decoder=luong (YAML value)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"], help="train.precision")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/rnn256.json)")
    parser.add_argument("--keep-model", help="copy the trained model folder here (default: dropped)")
    parser.add_argument("--workers", type=int, default=2,
                        help="also decode with this many worker processes of one thread each (attnmt translate "
                             "--workers; on a CPU; 1: skip)")
    parser.add_argument("--peaks-only", action="store_true",
                        help="only measure the matrix-product rates again, into the existing JSON --out names")
    parser.add_argument("--reuse", metavar="MODEL_DIR",
                        help="do not train: measure a model folder kept by an earlier run (--keep-model); the "
                             "training numbers are that run's")
    return parser.parse_args()


def decoding_rows(translator, model_dir: Path, sources: list[str], references: list[str], device: str,
                  workers: int) -> dict:
    """The model decoding the test set in float32; on a CPU also with int8 linear layers (as `attnmt
    translate --int8` loads it) and, with ``workers`` > 1, both again in worker processes."""
    from attnmt.decode.translator import load

    decoding, sentences_per_s = measure_decoding(translator, sources, references, "float32")
    rows = {"decoding": decoding, "sentences_per_s": sentences_per_s}
    if device != "cpu":
        return rows
    int8 = load(model_dir, checkpoint="last", int8=True)
    rows["decoding_int8"], rows["sentences_per_s_int8"] = measure_decoding(int8, sources, references, "int8")
    if workers > 1:  # the same models again, decoded by worker processes
        for name, model in (("float32", translator), ("int8", int8)):
            label = f"{name}_workers{workers}"
            rows[f"decoding_{label}"], rows[f"sentences_per_s_{label}"] = measure_decoding(
                model, sources, references, label, workers)
    return rows


def main() -> int:
    args = parse_args()
    import yaml

    model = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.model)}
    torch.set_num_threads(args.threads)
    if args.peaks_only:
        return rewrite_peaks(args.out, args.device)
    peaks = measure_peaks(args.device)
    print(f"matrix products on {args.device} ({args.threads} CPU threads): {peaks} GFLOP/s", flush=True)

    from attnmt.decode.translator import load, model_config
    from attnmt.train.events import training_summary
    from attnmt.train.trainer import train

    with tempfile.TemporaryDirectory() as tmp:
        data, model_dir = Path(tmp) / "data", Path(tmp) / "model"
        data.mkdir()
        prepare(Path(args.multi30k), data)
        if args.reuse:  # measure a model this script trained before (--keep-model), without training
            model_dir = Path(args.reuse)
            config = model_config(model_dir)
        else:
            config = config_from_dict(recipe(data, args.seconds, args.threads, args.enc_hidden, model, args.device,
                                             args.precision))
            train(config, model_dir, quiet=True)
            if args.keep_model:
                shutil.copytree(model_dir, args.keep_model, dirs_exist_ok=True)
        summary = training_summary(model_dir)
        median_speed, path = summary.get("tgt_tokens_per_s_median", 0.0), summary["precision"]
        translator = load(model_dir, checkpoint="last", device=args.device)
        torch.set_num_threads(args.threads)
        flops = flops_per_target_token(translator, data)
        sources = (data / "test_2016_flickr.de").read_text(encoding="utf-8").splitlines()
        references = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
        decodings = decoding_rows(translator, model_dir, sources, references, args.device, args.workers)
        parameters = sum(p.numel() for p in translator.model.parameters())
    achieved = median_speed * flops / 1e9
    # A reused model trained at another time, against another peak (this machine's speed wanders): the
    # share of the peak is that run's, in its own JSON.
    shares = shares_of_peak(None if args.reuse else achieved, peaks)
    payload = {
        "recipe": "rnn-256 of ../shared/peers (see this script's docstring)",
        "model": {"enc_hidden_size_per_direction": config.model.enc_hidden_size,
                  "hidden_size": config.model.hidden_size,
                  "emb_size": config.model.emb_size, "decoder": config.model.decoder, "score": config.model.score,
                  "input_feeding": config.model.input_feeding},
        "training": {"seconds": config.train.max_time_s, "threads": config.train.threads, "steps": summary["steps"],
                     "epochs": summary.get("epochs"), "parameters": parameters, "reused": args.reuse,
                     "tgt_tokens_per_s_median": round(median_speed), "device": args.device, "path": path},
        "flops_per_tgt_token": round(flops),
        "achieved_gflops": round(achieved, 1),
        **peaks,
        **shares,
        **decodings,
    }
    path = write_result("rnn256", payload, args.out)
    print(json.dumps(payload, indent=1))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
