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
paths relative to its own folder. The design (model, budget, transforms, guidance, the comments) is the YAML
file recipes/alignment_template/template.yaml, which this module fills in; recipes/alignment_hansards/ holds
the English-French instance.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from attnmt.align.prepare import read_manifest
from attnmt.errors import UserError
from attnmt.runtime.safe_write import write_text

KINDS = ("guided", "unguided", "teacher", "selftrained")
LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "ro": "Romanian", "es": "Spanish",
                  "it": "Italian", "cs": "Czech", "zh": "Chinese", "ja": "Japanese", "sv": "Swedish",
                  "nl": "Dutch", "pt": "Portuguese", "ru": "Russian", "fi": "Finnish", "pl": "Polish"}
# recipes/alignment_template/template.yaml, shipped inside the package as this link to it
TEMPLATE = Path(__file__).with_name("template.yaml")


def read_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The recipe's design: the template's text pieces (recipes/alignment_template/template.yaml)."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _wrap(text: str, width: int = 116) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "".join(f"# {x}\n" for x in lines + [line])


def config_text(kind: str, src: str, tgt: str, data: str, name: str, reverse: bool,
                template: dict[str, Any] | None = None, pretokenize: str = "words",
                user_dict: str | None = None) -> str:
    """One config: ``kind`` of the direction ``src`` -> ``tgt`` (``reverse``: the prepared pair's target is
    its source), reading the folder ``data`` (relative to the config's folder), named ``name``, its text
    split by ``pretokenize`` (with ``user_dict``, a file of that folder): the template's pieces filled in."""
    if kind not in KINDS:
        raise UserError(f"align-config: kind {kind!r} is unknown; allowed: {' | '.join(KINDS)}")
    t = template or read_template()
    values = {"src": src, "tgt": tgt, "data": data, "partner": f"{kind}_{tgt}_{src}.yaml",
              "src_name": LANGUAGE_NAMES.get(src, src), "tgt_name": LANGUAGE_NAMES.get(tgt, tgt)}
    header = _wrap(t["headers"][kind].format(**values) + " " + t["paths"].format(**values))
    transforms = "".join(entry["text"].format(**values) for entry in t["transforms"] if kind in entry["kinds"])
    dictionary = t["user_dict"].format(**values, user_dict_file=user_dict) if user_dict else ""
    data_section = t["data"].format(**values, columns=t["reversed_columns"] if reverse else "",
                                    pretokenize=pretokenize, user_dict=dictionary,
                                    transforms=transforms.rstrip("\n"))
    guided = t["guided_alignment"]["text"] if kind in t["guided_alignment"]["kinds"] else ""
    train = t["train"].format(stop=t["stop"][kind]) + guided
    return f"{header}\nname: {name}\n\n{data_section}\n{t['model']}\n{train}\n{t['decode']}"


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
            texts[out / f"{kind}_{a}_{b}.yaml"] = config_text(kind, a, b, data, f"{name}_{kind}_{a}_{b}", reverse,
                                                              pretokenize=manifest.get("pretokenize", "words"),
                                                              user_dict=manifest.get("user_dict"))
    existing = [p for p in texts if p.exists()]
    if existing and not overwrite:
        raise UserError(f"{existing[0]} exists; choose another --out-dir or pass --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        write_text(path, text, overwrite=overwrite)
    return list(texts)
