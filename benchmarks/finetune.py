"""Fine-tuning as domain adaptation, measured (recipes/finetune/README.md).

A small Transformer trained on Multi30k German -> English (image captions) for --base-s seconds is
continued on Tatoeba deu-eng (short everyday sentences) for --tune-s seconds (`--init-from`), against
the same model trained on Tatoeba from scratch for the same --tune-s seconds. The three models are
scored on both test sets (greedy decoding, sacreBLEU's BLEU and chrF): Multi30k's test_2016_flickr and
the 1,000 Tatoeba pairs that the config holds out (data.test_size, the same for both Tatoeba runs).

    nice .venv/bin/python -m benchmarks.finetune --multi30k ../shared/data/multi30k \\
        --tatoeba ../shared/data/tatoeba/deu-eng.tsv.gz --work runs/finetune

writes benchmarks/results/finetune.json and docs/img/finetune_bleu.png (`--figure-from JSON` draws only the
figure). One thread throughout (train.threads: 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_result  # noqa: E402

RECIPE = ROOT / "recipes" / "finetune"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k",
                        help="folder with Multi30k's train, val and test_2016_flickr .de.gz / .en.gz")
    parser.add_argument("--tatoeba", help="deu-eng.tsv.gz (manythings.org's Tatoeba export)")
    parser.add_argument("--work", default="runs/finetune", help="folder for the three models (replaced)")
    parser.add_argument("--base-s", type=float, default=300, help="seconds of training on Multi30k")
    parser.add_argument("--tune-s", type=float, default=240, help="seconds of training on Tatoeba, both ways")
    parser.add_argument("--out", default=None, help="result JSON (default: benchmarks/results/finetune.json)")
    parser.add_argument("--figure-from", metavar="JSON", help="only draw docs/img/finetune_bleu.png from a result")
    args = parser.parse_args()
    if not args.figure_from and not (args.multi30k and args.tatoeba):
        parser.error("--multi30k and --tatoeba are needed (or --figure-from JSON)")
    return args


def train_run(config_name: str, overrides: list[str], model_dir: Path, init_from: Path | None = None) -> dict:
    from attnmt.config.schema import load_config
    from attnmt.train.trainer import train

    config = load_config(RECIPE / config_name, overrides + ["train.progress=false"])
    result = train(config, model_dir, overwrite=True, init_from=init_from)
    state = result.state
    return {"config": f"recipes/finetune/{config_name}", "init_from": init_from.name if init_from else None,
            "steps": state.step, "train_s": round(state.elapsed_s, 1), "stopped_by": state.stop_reason,
            "best_step": state.best_step, "best_valid_loss": round(state.best_valid_loss, 4)}


def scores(model_dir: Path, tests: dict[str, tuple[list[str], list[str]]]) -> dict:
    import attnmt
    from attnmt.decode.evaluate import corpus_scores

    translator = attnmt.load(model_dir)
    out = {}
    for name, (src, ref) in tests.items():
        hyps = [t.text for t in translator.translate(src, beam=1)]
        s = corpus_scores(hyps, ref)
        out[name] = {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2), "sentences": len(src)}
    out["signature"] = s.bleu_signature
    return out


FIGURE = ROOT / "docs" / "img" / "finetune_bleu.png"
LABELS = {"multi30k": "general\n(Multi30k)", "tatoeba_finetuned": "fine-tuned\n(then Tatoeba)",
          "tatoeba_scratch": "from scratch\n(Tatoeba)"}


def plot(runs: dict, path: Path = FIGURE) -> Path:
    """BLEU of each model on both test sets, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=120)
    for k, (test, title) in enumerate((("multi30k_test_2016_flickr", "Multi30k test"),
                                       ("tatoeba_held_out_test", "Tatoeba test"))):
        values = [run["scores"][test]["bleu"] for run in runs.values()]
        xs = [i + (k - 0.5) * 0.38 for i in range(len(runs))]
        bars = ax.bar(xs, values, width=0.36, label=title)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(runs)), [LABELS.get(name, name) for name in runs])
    ax.set_ylabel("BLEU (greedy)")
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> int:
    args = parse_args()
    if args.figure_from:
        import json

        print(plot(json.loads(Path(args.figure_from).read_text(encoding="utf-8"))["runs"]))
        return 0
    from attnmt.data.corpus import read_lines

    multi30k, work = Path(args.multi30k).resolve(), Path(args.work)
    m30k = [f"data.{key}={multi30k / name}" for key, name in (
        ("train_src", "train.de.gz"), ("train_tgt", "train.en.gz"), ("valid_src", "val.de.gz"),
        ("valid_tgt", "val.en.gz"))] + [f"train.max_time_s={args.base_s}"]
    tatoeba = [f"data.train_tsv={Path(args.tatoeba).resolve()}", f"train.max_time_s={args.tune_s}"]
    runs = {"multi30k": train_run("multi30k_de_en.yaml", m30k, work / "multi30k")}
    runs["tatoeba_finetuned"] = train_run("tatoeba_de_en.yaml", tatoeba, work / "tatoeba_finetuned",
                                          init_from=work / "multi30k")
    runs["tatoeba_scratch"] = train_run("tatoeba_de_en.yaml", tatoeba, work / "tatoeba_scratch")
    held = [read_lines(work / "tatoeba_finetuned" / f"test.{side}") for side in ("src", "tgt")]
    assert held == [read_lines(work / "tatoeba_scratch" / f"test.{side}") for side in ("src", "tgt")]
    tests = {"multi30k_test_2016_flickr": (read_lines(multi30k / "test_2016_flickr.de.gz"),
                                           read_lines(multi30k / "test_2016_flickr.en.gz")),
             "tatoeba_held_out_test": (held[0], held[1])}
    for name, run in runs.items():
        run["scores"] = scores(work / name, tests)
    path = write_result("finetune", {"decoding": "greedy", "threads": 1, "base_s": args.base_s,
                                     "tune_s": args.tune_s, "runs": runs}, args.out)
    print(path, plot(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
