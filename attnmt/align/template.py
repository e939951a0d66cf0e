"""The alignment recipe's configs for any language pair (``attnmt align-config``).

One template, whose only inputs are the two languages (read from the folder ``attnmt align-prepare``
wrote) and where that folder lies: for each direction of the pair, four configs of one flat YAML each,

* ``guided``: a Transformer whose head 0 of decoder layer 1 is taught eflomal's links of the training
  pairs on the row whose query has read each word (guided alignment, Garg et al. 2019; ``row: shift``,
  Chen et al. 2020), 60 minutes of training;
* ``unguided``: the same without the links (stop it at the guided model's steps with
  ``--set train.max_steps=N`` to compare them);
* ``teacher`` and ``selftrained``: self-training (Zenkel et al. 2020), the unguided recipe without
  joined pairs to 3,200 steps, and a pair taught the teacher's own links (``train.self.*.links``).

Every config adds the gold sentences to the training text 20 times without links and reads its data
paths relative to its own folder. recipes/alignment_hansards/ holds the English-French instance.
"""

from __future__ import annotations

import os
from pathlib import Path

from attnmt.align.prepare import read_manifest
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text

KINDS = ("guided", "unguided", "teacher", "selftrained")
LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "ro": "Romanian", "es": "Spanish",
                  "it": "Italian", "cs": "Czech", "zh": "Chinese", "ja": "Japanese", "sv": "Swedish",
                  "nl": "Dutch", "pt": "Portuguese", "ru": "Russian", "fi": "Finnish", "pl": "Polish"}

_HEADERS = {
    "guided": "The guided pair, {src} -> {tgt}: a Transformer whose head 0 of decoder layer 1 is taught eflomal's "
              "links of the training pairs (guided alignment, Garg et al. 2019) on the row whose query has read "
              "each word (row: shift, Chen et al. 2020); attnmt align reads it there by default. Train it side by "
              "side with {partner}.",
    "unguided": "The unguided pair, {src} -> {tgt}: the guided recipe with the guidance removed and everything else "
                "kept (the same text, joined pairs, gold sentences, batches and seed); its attention is read as it "
                "comes, without any alignment label. To compare it with the guided pair, stop it at the guided "
                "model's steps (--set train.max_steps=N). Train it side by side with {partner}.",
    "teacher": "The self-trained pair's teacher, {src} -> {tgt}: the unguided recipe without the joined pairs, "
               "trained to 3,200 steps. Its own attention, read in agreement with {partner}'s, labels the training "
               "pairs for the first self-trained round.",
    "selftrained": "The self-trained pair, {src} -> {tgt}: the guided recipe, its head taught the links that a "
                   "teacher pair's own attention gives the training pairs (self-training, Zenkel et al. 2020), so "
                   "that no alignment label and no other aligner is used anywhere; train.self.*.links are written "
                   "from the teacher and each round overwrites them. Train it side by side with {partner}.",
}

_MODEL = """model:
  type: transformer
  d_model: 256
  n_heads: 4
  ff_size: 1024
  enc_layers: 3
  dec_layers: 3
  dropout: 0.1
  share_embeddings: true  # one embedding matrix for both languages (joint vocabulary) ...
  tie_embeddings: true    # ... also used as the output layer
"""

_TRAIN = """train:
  seed: 1
  threads: 1              # the two directions train side by side, one core each
  batch_tokens: 3000
{stop}  save_every: 200
  keep_checkpoints: 4     # the last four, for `attnmt average --last 4`
  scheduler: noam         # warm-up to train.lr at warmup_steps, then 1/sqrt(step)
  warmup_steps: 500
  lr: 0.002
  clip_grad_norm: 1.0
  label_smoothing: 0.1
  valid_every: 500
  valid_bleu_sample: 200
  precision: auto         # bf16 autocast where the CPU has AMX or AVX-512-BF16
  log_every: 50
"""

_GUIDED = """  guided_alignment:       # how the links (data.transforms' links entry) supervise the attention
    weight: 1.0
    layer: 1              # one head of the penultimate decoder layer, as Garg et al. 2019
    head: 0
    row: shift            # the first row whose query has read each word
"""


def _wrap(text: str, width: int = 116) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "".join(f"# {x}\n" for x in lines + [line])


def config_text(kind: str, src: str, tgt: str, data: str, name: str, reverse: bool) -> str:
    """One config: ``kind`` of the direction ``src`` -> ``tgt`` (``reverse``: the prepared pair's target is
    its source), reading the folder ``data`` (relative to the config's folder), named ``name``."""
    if kind not in KINDS:
        raise UserError(f"align-config: kind {kind!r} is unknown; allowed: {' | '.join(KINDS)}")
    partner = f"{kind}_{tgt}_{src}.yaml"
    names = {"src": LANGUAGE_NAMES.get(src, src), "tgt": LANGUAGE_NAMES.get(tgt, tgt), "partner": partner}
    header = _wrap(_HEADERS[kind].format(**names) + f" Relative paths are resolved against this file's folder: "
                   f"{data}/ is what `attnmt align-prepare` writes.")
    columns = ("  tsv_src_column: 1       # the TSV is the prepared pair's source TAB target\n"
               "  tsv_tgt_column: 0\n") if reverse else ""
    transforms = ""
    if kind in ("guided", "unguided"):
        shifted = " with their links shifted into place" if kind == "guided" else ""
        transforms += (f"    # 20,000 more pairs, each joining 2 or 3 random training pairs{shifted}: longer inputs\n"
                       "    # than most sentences of the training text\n"
                       "    - {name: joined_pairs, count: 20000, max_parts: 3}\n")
    transforms += ("    # the gold set's sentences without their links, 20 times: the text the pair is scored on,\n"
                   "    # as a statistical aligner sees it; they never carry guidance\n"
                   f"    - {{name: align_text, src: {data}/gold.{src}, tgt: {data}/gold.{tgt}, copies: 20}}\n")
    if kind == "guided":
        transforms += ("    # eflomal's grow-diag-final-and links of the training pairs (never of the gold set)\n"
                       f"    - {{name: links, path: {data}/train.{src}-{tgt}.links}}\n")
    if kind == "selftrained":
        transforms += ("    # the teacher's links of the training pairs (never of the gold set)\n"
                       f"    - {{name: links, path: {data}/train.self.{src}-{tgt}.links}}\n")
    stop = {"guided": "  max_time_s: 3600        # 60 minutes of wall time\n",
            "unguided": "  max_time_s: 3600        # 60 minutes of wall time\n"}.get(
        kind, "  max_steps: 3200        # no time limit: the steps end the run\n")
    data_section = (f"data:\n  train_tsv: {data}/train.tsv.gz   # what align-prepare wrote, pretokenized as the "
                    "gold is\n"
                    "  valid_size: 1000        # whole groups of pairs sharing a sentence, chosen with train.seed\n"
                    "  test_size: 1000         # written to the model folder as valid.* / test.*\n"
                    f"{columns}  src_lang: {src}\n  tgt_lang: {tgt}\n"
                    "  lowercase: true\n  tokenizer: bpe\n  vocab_size: 10000\n  joint_vocab: true\n  max_len: 60\n"
                    "  transforms:             # run in this order (docs/guide.md, Data transforms)\n" + transforms)
    train = _TRAIN.format(stop=stop) + (_GUIDED if kind in ("guided", "selftrained") else "")
    return f"{header}\nname: {name}\n\n{data_section}\n{_MODEL}\n{train}\ndecode:\n  beam: 5\n"


def write_configs(data_dir: str | Path, out_dir: str | Path, name: str, kinds=KINDS,
                  overwrite: bool = False) -> list[Path]:
    """The configs of ``kinds`` for both directions of the pair prepared in ``data_dir``, written to
    ``out_dir`` as KIND_SRC_TGT.yaml and named NAME_KIND_SRC_TGT (the model folder's default name)."""
    manifest = read_manifest(data_dir)
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    out = Path(out_dir)
    data = Path(os.path.relpath(Path(data_dir).resolve(), out.resolve())).as_posix()
    texts = {}
    for kind in kinds:
        for a, b, reverse in ((src, tgt, False), (tgt, src, True)):
            texts[out / f"{kind}_{a}_{b}.yaml"] = config_text(kind, a, b, data, f"{name}_{kind}_{a}_{b}", reverse)
    existing = [p for p in texts if p.exists()]
    if existing and not overwrite:
        raise UserError(f"{existing[0]} exists; choose another --out-dir or pass --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        write_text(path, text, overwrite=overwrite)
    return list(texts)
