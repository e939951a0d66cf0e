"""What docs/chinese.md shows of trained zh->en models: sample translations, the final-punctuation
effect, and the attention figures.

    python -m benchmarks.chinese --model "900 s=models/zh_900" --model "2700 s=models/zh_2700" \
        [--figures docs/img] [--out benchmarks/results/tatoeba_zh_en.json]

For each model folder (trained with recipes/chinese/zh_en_rnnsearch.yaml, which holds its test pairs
out into the folder): the translations of the sample sentences below (beam from the config); the
held-out test set scored as it is and with each source's final punctuation removed (sacreBLEU 13a,
beam from the config), with the number of outputs that say one word twice in a row. With --figures,
the attention heatmaps of the last model: 我爱你。, 我爱你 and a longer held-out test sentence. Test
BLEU, chrF and training curves come from benchmarks/translation.py (tatoeba_zh_en_<time>.json).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from attnmt.data.augment import strip_final_punctuation  # noqa: E402
from attnmt.data.corpus import read_parallel  # noqa: E402
from attnmt.decode.evaluate import corpus_scores  # noqa: E402
from attnmt.decode.translator import load  # noqa: E402
from benchmarks.common import write_result

SAMPLES = ["我爱你", "我爱你。", "我爱您。", "你好。", "谢谢你。", "我想喝茶。", "我不知道。",
           "他是我的朋友。", "今天天气很好。", "我明天要去北京。", "他每天早上七点起床。",
           "这本书是我昨天在书店买的。"]
LONG = "我已经告诉汤姆他不能去玛丽的聚会了。"  # line 930 of the held-out test.src (train.seed 1)
REPEAT = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


def repeats(outputs: list[str]) -> int:
    """How many outputs say one word twice in a row ("love love")."""
    return sum(bool(REPEAT.search(o)) for o in outputs)


def measure(model_dir: Path) -> dict:
    translator = load(model_dir)
    pairs = read_parallel(model_dir / "test.src", model_dir / "test.tgt")
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    stripped = [strip_final_punctuation(s) for s in sources]
    test = {}
    for name, inputs in (("as_is", sources), ("final_punctuation_removed", stripped)):
        outputs = [t.text for t in translator.translate(inputs)]
        test[name] = {"bleu": round(corpus_scores(outputs, references).bleu, 2), "word_repeated": repeats(outputs)}
    test["sources_changed_by_removal"] = sum(a != b for a, b in zip(sources, stripped))
    samples = [{"zh": s, "en": t.text, "src_tokens": t.src_tokens}
               for s, t in zip(SAMPLES, translator.translate(SAMPLES))]
    return {"model_dir": str(model_dir), "beam": translator.config.decode.beam, "test": test, "samples": samples}


def figures(model_dir: Path, out_dir: Path) -> dict:
    from attnmt.viz.heatmap import plot_attention

    translator = load(model_dir)
    made = {}
    shown = (("zh_woaini.png", "我爱你。"), ("zh_woaini_nopunct.png", "我爱你"), ("zh_long.png", LONG))
    for name, sentence in shown:
        tr = translator.translate([sentence])[0]
        plot_attention(tr.attention, tr.src_tokens, tr.tgt_tokens + ["</s>"], out_dir / name, title=tr.text)
        made[str(out_dir / name)] = {"source": sentence, "translation": tr.text, "model_dir": str(model_dir)}
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, metavar="LABEL=DIR",
                        help="a trained zh->en model folder and its label (repeat; the last one draws the figures)")
    parser.add_argument("--figures", help="write the attention heatmaps into this folder")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/tatoeba_zh_en.json)")
    args = parser.parse_args()
    models = dict(m.split("=", 1) for m in args.model)
    result = {"models": {label: measure(Path(d)) for label, d in models.items()}}
    for label, r in result["models"].items():
        t = r["test"]
        print(f"{label}: test BLEU {t['as_is']['bleu']} ({t['as_is']['word_repeated']} outputs repeat a word); "
              f"final punctuation removed: {t['final_punctuation_removed']['bleu']} "
              f"({t['final_punctuation_removed']['word_repeated']})")
        for s in r["samples"]:
            print(f"  {s['zh']}  ->  {s['en']}")
    if args.figures:
        last = list(result["models"].values())[-1]
        result["figures"] = figures(Path(last["model_dir"]), Path(args.figures))
    path = write_result("tatoeba_zh_en", result, args.out)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
