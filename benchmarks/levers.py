"""What each kept decoding speed-up is worth: in-process A/B against its older form.

    python -m benchmarks.levers [--model models/rnn256_luong] [--rounds 4] [--sentences 500]

One process decodes the first sentences of test_2016_flickr (rnn-256 recipe, `--int8`, beam 5, batches of 64,
one thread, as a `--workers` process runs) with everything on, then with one lever put back to its older form,
alternating round by round; the machine's drift between rounds cancels in the median of each round's ratio.
A lever worth a few percent drowns in this machine's noise on the whole decoding time, so the time spent inside
the lever's function (either form) is clocked too. The levers that can be switched off from outside:

* ``sigmoid_attention``: the additive score as 2 v^T sigmoid(2x) - sum(v), against v^T tanh(x);
* ``chunked_selection``: the best words of each row from 64-word chunk maxima, against torch's top-k / max.

Also counts decoder rows for both stopping rules. Writes benchmarks/results/levers.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch  # noqa: E402

import attnmt.decode.search as search  # noqa: E402
import attnmt.models.attention as attention  # noqa: E402
from attnmt.decode.translator import load  # noqa: E402
from benchmarks.common import write_result
from benchmarks.rnn256 import prepare

ROOT = Path(__file__).resolve().parents[1]


def tanh_scores(query_term, projected_keys, v):
    """The older score: v^T tanh(W_s s + W_h h) with torch's tanh."""
    return torch.matmul((query_term.unsqueeze(1) + projected_keys).tanh_(), v)


def torch_selection(x, k):
    """The older selection: torch's max (k == 1) or top-k over whole rows."""
    return x.max(dim=1) if k == 1 else x.topk(k, dim=1)


def decoder_rows(translator, sources: list[str]) -> dict[str, int]:
    """Decoder rows (hypothesis steps) that beam 5 computes with exact and with early stopping."""
    rows = {}
    decode_step = translator.model.decode_step
    for stopping in ("exact", "early"):
        count = [0]

        def counting(y_prev, state, enc, count=count):
            count[0] += y_prev.numel()
            return decode_step(y_prev, state, enc)

        translator.model.decode_step = counting
        translator.translate(sources, beam=5, batch_size=64, batch_tokens=10**6, stopping=stopping)
        rows[stopping] = count[0]
    translator.model.decode_step = decode_step
    return rows


def lever_summary(times: dict[str, list[float]], inside: dict[tuple[str, str], list[float]],
                  outputs: dict[str, list[str]]) -> dict[str, dict]:
    """Per lever: the decoding time without it against all on (median over rounds), the time inside its
    function in both forms, and how many translations stay the same."""
    base = times["all on"]
    levers = {}
    for name, values in times.items():
        if name == "all on":
            continue
        lever = name.removesuffix(" off")
        older_inside, newer_inside = (statistics.median(inside[(v, lever)]) for v in (name, "all on"))
        levers[lever] = {
            "older_form_s": statistics.median(values),
            "slowdown_median_of_rounds": round(statistics.median(v / b for v, b in zip(values, base)), 3),
            "inside_function_s": {"older": round(older_inside, 3), "newer": round(newer_inside, 3)},
            "inside_saving_share_of_all_on": round((older_inside - newer_inside) / statistics.median(base), 3),
            "same_translations": sum(a == b for a, b in zip(outputs[name], outputs["all on"])),
        }
    return levers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "rnn256_luong"))
    parser.add_argument("--multi30k", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/levers.json)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prepare(Path(args.multi30k), Path(tmp))
        sources = (Path(tmp) / "test_2016_flickr.de").read_text(encoding="utf-8").splitlines()[: args.sentences]
    torch.set_num_threads(1)
    current = load(args.model, checkpoint="last", int8=True)
    new_scores, new_selection = attention._additive_scores, search._best_per_row
    inside: dict[tuple[str, str], list[float]] = {}  # (variant, lever) -> seconds inside the lever's function

    def clocked(fn, key):
        def run(*args):
            started = time.perf_counter()
            result = fn(*args)
            inside[key][-1] += time.perf_counter() - started
            return result
        return run

    def setting(name, scores=new_scores, selection=new_selection):
        def run():
            for lever in ("sigmoid_attention", "chunked_selection"):
                inside.setdefault((name, lever), []).append(0.0)
            attention._additive_scores = clocked(scores, (name, "sigmoid_attention"))
            search._best_per_row = clocked(selection, (name, "chunked_selection"))
            return current.translate(sources, beam=5, batch_size=64, batch_tokens=10**6)
        return run

    variants = {"all on": setting("all on"), "sigmoid_attention off": setting("sigmoid_attention off", tanh_scores),
                "chunked_selection off": setting("chunked_selection off", selection=torch_selection)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    outputs = {}
    for _ in range(args.rounds):
        for name, run in variants.items():
            started = time.perf_counter()
            outputs[name] = [t.text for t in run()]
            times[name].append(round(time.perf_counter() - started, 3))
        print("; ".join(f"{name} {values[-1]:.2f} s" for name, values in times.items()), flush=True)
    attention._additive_scores, search._best_per_row = new_scores, new_selection  # everything back on

    rows = decoder_rows(current, sources)
    base = times["all on"]
    levers = lever_summary(times, inside, outputs)
    payload = {"model": args.model, "sentences": len(sources), "beam": 5, "int8": True, "threads": 1,
               "rounds": args.rounds, "all_on_s": statistics.median(base), "times_s": times, "levers": levers,
               "decoder_rows": rows}
    path = write_result("levers", payload, args.out)
    for name, lever in levers.items():
        print(f"{name}: decoding takes {lever['slowdown_median_of_rounds']}x as long without it; inside the "
              f"function {lever['inside_function_s']['older']} s -> {lever['inside_function_s']['newer']} s "
              f"({lever['inside_saving_share_of_all_on']:.1%} of the decoding time); "
              f"{lever['same_translations']}/{len(sources)} same translations")
    print(f"decoder rows: {rows}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
