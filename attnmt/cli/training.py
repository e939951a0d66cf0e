"""The commands that make models: demo, train, prepare, study, average, data."""

from __future__ import annotations

import contextlib
from pathlib import Path

from attnmt.errors import Stopped, UserError


def cmd_demo(args) -> None:
    from attnmt.study.demo import run_demo

    run_demo(args.out, quick=args.quick, overwrite=args.overwrite)


def cmd_train(args) -> None:
    from attnmt.config.schema import load_config
    from attnmt.train.trainer import train

    config = load_config(args.config, args.set)
    model_dir = Path(args.model_dir or Path("models") / config.name)
    if args.checkpoint is not None and args.init_from is None:
        raise UserError("--checkpoint names the checkpoint of --init-from's model; add --init-from MODEL_DIR")
    # train prints the run's lines, its closing summary last
    result = train(config, model_dir, resume=args.resume, overwrite=args.overwrite, init_from=args.init_from,
                   init_checkpoint=args.checkpoint)
    if result.state.stop_reason == "interrupted" and result.signal:  # its summary said how to continue
        raise Stopped(128 + result.signal)


def cmd_prepare(args) -> None:
    from attnmt.config.schema import load_config
    from attnmt.data.store_prepare import prepare
    from attnmt.folder.model_folder import held

    config = load_config(args.config, args.set)
    model_dir = Path(args.model_dir or Path("models") / config.name)
    # MODEL_DIR/store: the folder is locked meanwhile, as a run's; a shared data.store_dir writes no model folder
    with contextlib.nullcontext() if config.data.store_dir else held(model_dir, "attnmt prepare"):
        done = prepare(config, model_dir, workers=args.workers, force=args.force)
    meta = done["meta"]
    corpora = ", ".join(f"{c['name']} {c['kept']:,} of {c['total']:,}" for c in meta["corpora"])
    timing = ", ".join(f"{phase} {s:.1f} s" for phase, s in done["seconds"].items())
    print(f"{done['location']}: {'prepared' if done['prepared'] else 'up to date'}, {meta['pairs']:,} pairs "
          f"({corpora})" + (f"; {timing}" if timing else ""))


def cmd_study(args) -> None:
    from attnmt.study import run_study

    run_study(args.config, out=args.out, retrain=args.retrain, jobs=args.jobs, quiet=args.quiet, overrides=args.set)


def cmd_average(args) -> None:
    from attnmt.decode.translator import model_config
    from attnmt.folder.checkpoint import average_last

    model_dir = Path(args.model)
    model_type = model_config(model_dir).model.type
    out, averaged = average_last(model_dir, last=args.last, name=args.name, model_type=model_type,
                                 overwrite=args.overwrite)
    print(f"{out}: the mean of {', '.join(p.stem for p in averaged)}; use it with --checkpoint {args.name}")


def _data_multi30k(args, dest: str) -> str:
    from attnmt.data.download import download_multi30k

    download_multi30k(Path(dest), from_dir=Path(args.from_dir) if args.from_dir else None, overwrite=args.overwrite)
    return f"multi30k files in {dest}"


def _data_tatoeba(args, pair: str, dest: str) -> str:
    from attnmt.data.download import fetch_tatoeba

    return f"{pair} pairs in {fetch_tatoeba(pair, dest, source=args.from_dir, overwrite=args.overwrite)}"


# dataset -> (how it is fetched, the positional arguments it takes after its name)
DATASETS = {"multi30k": (_data_multi30k, ("DEST",)), "tatoeba": (_data_tatoeba, ("PAIR", "DEST"))}


def cmd_data(args) -> None:
    if args.dataset not in DATASETS:
        raise UserError(f"data: unknown dataset {args.dataset!r}; available: {', '.join(DATASETS)}")
    fetch, names = DATASETS[args.dataset]
    if len(args.args) != len(names):
        raise UserError(f"data {args.dataset} takes {' '.join(names)} (got {' '.join(args.args) or 'nothing'}); "
                        f"e.g. attnmt data {args.dataset} " + ("cmn-eng data/tatoeba" if len(names) == 2
                                                               else "data/multi30k"))
    print(fetch(args, *args.args))


def _register_train(sub) -> None:
    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", help="YAML config (see recipes/)")
    p.add_argument("--model-dir", help="output model folder (default: models/<config name>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.lr=0.0005 (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue from the folder's last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model folder")
    p.add_argument("--init-from", metavar="MODEL_DIR",
                   help="fine-tune: start from this trained model's weights and tokenizers (the config's model "
                        "and tokenizer settings must be the same); optimizer, schedule and best score start fresh")
    p.add_argument("--checkpoint", default=None,
                   help="with --init-from: which of its checkpoints: best (default), last, averaged, stepN or ema")
    p.set_defaults(func=cmd_train)


def register(sub) -> None:
    """Add this module's commands to the `attnmt` parser."""
    p = sub.add_parser("demo", help="train seq2seq and rnnsearch on the built-in language and compare them")
    p.add_argument("--out", default="attnmt-demo", help="output folder (default: attnmt-demo)")
    p.add_argument("--quick", action="store_true", help="a smaller demo: sentences up to 30 words, about 75 s")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    p.set_defaults(func=cmd_demo)
    _register_train(sub)

    p = sub.add_parser("prepare", help="read, tokenize and encode a config's training corpora once into a "
                                       "memory-mapped store that train reuses")
    p.add_argument("config", help="YAML config (see recipes/)")
    p.add_argument("--model-dir", help="model folder whose store/ to write (default: models/<config name>); "
                                       "data.store_dir puts it in a shared folder instead")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set data.vocab_size=16000 (repeatable)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="encoding processes (default: data.workers, else the number of cores)")
    p.add_argument("--force", action="store_true", help="prepare again even if the store is up to date")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("study", help="train, evaluate and report a study (models x seeds) from a study YAML")
    p.add_argument("config", help="study YAML (see recipes/synthetic/ and recipes/bottleneck_enfr/)")
    p.add_argument("--out", help="output folder (default: runs/study-<name>); re-running reuses its models")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a study value, e.g. --set data.tatoeba_long.tatoeba=PATH (a data location "
                        "given here is read from the current folder; repeatable)")
    p.add_argument("--retrain", action="store_true", help="train every model again")
    p.add_argument("--jobs", type=int, help="runs trained at the same time, one thread each (default: the "
                                            "study's jobs, else 1)")
    p.add_argument("--quiet", action="store_true", help="print nothing while it runs (the report is still written)")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("average", help="average the weights of a model's last kept checkpoints "
                                       "(train.keep_checkpoints)")
    p.add_argument("--model", required=True, help="trained model folder")
    p.add_argument("--last", type=int, default=None, help="average the newest N kept checkpoints (default: all kept)")
    p.add_argument("--name", default="averaged", help="write checkpoints/NAME.pt (default: averaged)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoints/NAME.pt")
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("data", help="fetch a public corpus: multi30k DEST, or tatoeba PAIR DEST")
    p.add_argument("dataset", help="multi30k or tatoeba")
    p.add_argument("args", nargs="+", metavar="ARG",
                   help="multi30k: DEST (the folder); tatoeba: PAIR DEST, PAIR as manythings.org/anki names it "
                        "(cmn-eng, fra-eng, deu-eng, ...), written as DEST/PAIR.tsv.gz")
    p.add_argument("--from", dest="from_dir",
                   help="copy a local copy instead of downloading: multi30k, a folder with the official file "
                        "names; tatoeba, the site's PAIR.zip, its LLL.txt, a PAIR.tsv.gz, or a folder holding one")
    p.add_argument("--overwrite", action="store_true", help="replace files that exist in the destination folder")
    p.set_defaults(func=cmd_data)
