"""The explorer as one file: `attnmt explore MODEL_DIR... --export FILE.html` (docs/explore.md).

:func:`build_export` translates the sentences with every model and keeps their explore records
(:mod:`attnmt.decode.steps`), what-if re-decodings included; :func:`export_page` turns that data into one
self-contained HTML file: the page of ``attnmt serve`` (static/index.html) with its stylesheets and
scripts inlined and the data embedded as ``<script type="application/json" id="attnmt-export">``, which
tells the page to make no request at all. It opens from a file:// URL, offline, and can be mailed or
linked from the docs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from attnmt.decode.steps import MAX_TOP_K, explore, model_info, what_if
from attnmt.decode.translator import MAX_SOURCE_TOKENS, Translator
from attnmt.errors import UserError
from attnmt.runtime.safe_write import check_output, write_text
from attnmt.serve.engine import example_sources, parse_model_spec

__all__ = ["EXPORT_FORMAT", "MAX_SENTENCES", "build_export", "export_page", "length_examples", "load_named",
           "read_sentences", "run_export"]

EXPORT_FORMAT = "attnmt-explore-export/1"
STATIC_DIR = Path(__file__).parents[1] / "serve" / "static"  # the live page of attnmt serve
MAX_SENTENCES = 50  # a page of explore records grows with every sentence, model and what-if
_STYLESHEET = re.compile(r'<link\b[^>]*\brel="stylesheet"[^>]*\bhref="/static/([\w.-]+\.css)"[^>]*>')
_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="/static/([\w.-]+\.js)"[^>]*>\s*</script>')


def length_examples(translator: Translator, n: int = 6) -> list[str]:
    """``n`` held-out source sentences (:func:`attnmt.serve.engine.example_sources`) of spread lengths, shortest
    first: the set in which a learner watches a fixed-vector model fall behind as sentences grow."""
    pool = sorted(set(example_sources(translator, n=400)), key=lambda s: (len(translator.src.tokens(s)), s))
    if len(pool) <= n:
        return pool
    return [pool[round(k * (len(pool) - 1) / (n - 1))] for k in range(n)] if n > 1 else pool[:1]


def build_export(translators: Mapping[str, Translator], sentences: Sequence[str], beam: int | None = None,
                 top_k: int = 10, alternatives: int = 2) -> dict[str, Any]:
    """Every sentence explored by every model (name -> translator), with ``alternatives`` what-if re-decodings
    per step (0: none)."""
    if not sentences:
        raise UserError("explore: no sentences to export; give --sentences FILE (one sentence a line)")
    if len(sentences) > MAX_SENTENCES:
        raise UserError(f"explore: {len(sentences)} sentences; an exported page holds at most {MAX_SENTENCES}")
    entries = []
    for number, sentence in enumerate(sentences, 1):
        records = {}
        for name, translator in translators.items():
            try:
                record = explore(translator, sentence, beam=beam, top_k=top_k, name=name)
                if alternatives:
                    record["alternatives"] = what_if(translator, record, alternatives, beam=beam, top_k=top_k)
            except UserError as e:
                raise UserError(f"explore: sentence {number} ({sentence[:40]!r}), model {name}: {e}") from None
            records[name] = record
        entries.append({"source": sentence, "source_words": len(sentence.split()), "records": records})
    return {"format": EXPORT_FORMAT, "models": [model_info(t, name) for name, t in translators.items()],
            "sentences": entries}


def export_page(data: dict[str, Any], static_dir: Path = STATIC_DIR) -> str:
    """The page with its assets inlined and ``data`` embedded: one HTML file that needs no server."""
    page = (static_dir / "index.html").read_text(encoding="utf-8")

    def stylesheet(match: re.Match) -> str:
        return "<style>\n" + _asset(static_dir, match.group(1)).replace("</style", "<\\/style") + "\n</style>"

    scripts: list[str] = []

    def script(match: re.Match) -> str:
        scripts.append("<script>\n" + _asset(static_dir, match.group(1)).replace("</script", "<\\/script")
                       + "\n</script>")
        return ""

    page = _SCRIPT.sub(script, _STYLESHEET.sub(stylesheet, page))
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    embedded = f'<script type="application/json" id="attnmt-export">{payload}</script>\n'
    if "</head>" not in page or "</body>" not in page:
        raise ValueError("static/index.html has no </head> or </body> to put the data and scripts before")
    page = page.replace("</head>", embedded + "</head>", 1)
    head, _, tail = page.rpartition("</body>")
    return head + "\n".join(scripts) + "\n</body>" + tail


def _asset(static_dir: Path, name: str) -> str:
    path = static_dir / name
    if not path.is_file():
        raise ValueError(f"static/index.html refers to /static/{name}, which does not exist")
    return path.read_text(encoding="utf-8")


def load_named(specs: Sequence[str], checkpoint: str | None = None) -> dict[str, Translator]:
    """The model folders ``[NAME=]DIR`` loaded, by name (a folder's own name when none is given)."""
    from attnmt.decode.translator import load

    if not specs:
        raise UserError("explore: no model; give one model folder, or two to compare (DIR or NAME=DIR)")
    named: dict[str, Path] = {}
    for spec in specs:
        try:
            name, directory = parse_model_spec(spec)
        except UserError:
            raise UserError(f"explore: cannot name the model folder {spec!r} after itself; give it as NAME={spec} "
                            "with a NAME of letters, digits, '.', '_' or '-'") from None
        if name in named:
            raise UserError(f"explore: two models are named {name!r}; name them NAME=DIR")
        named[name] = directory
    translators = {name: load(directory, checkpoint=checkpoint) for name, directory in named.items()}
    for translator in translators.values():
        translator.max_src_tokens = MAX_SOURCE_TOKENS
    return translators


def read_sentences(path: str | Path) -> list[str]:
    """The non-blank lines of a UTF-8 file; a UserError naming the file when it cannot be read."""
    from attnmt.data.corpus import read_lines

    return [line.strip() for line in read_lines(path) if line.strip()]


def run_export(model_specs: Sequence[str], export: str | None = None, json_path: str | None = None,
               sentences: str | None = None, checkpoint: str | None = None, beam: int | None = None, top_k: int = 10,
               alternatives: int = 2, examples: int = 6, overwrite: bool = False) -> list[Path]:
    """`attnmt explore`: load the models (``[NAME=]DIR``), explore the sentences, write the page and/or JSON."""
    if export is None and json_path is None:
        raise UserError("explore: nothing to write; pass --export FILE.html (a page to open or share) or --json FILE")
    if alternatives < 0 or examples < 1:
        raise UserError("explore: --what-if is 0 (none) or more, --examples 1 or more")
    if not 1 <= top_k <= MAX_TOP_K:
        raise UserError(f"explore: --top-k {top_k} is out of range; allowed: 1 to {MAX_TOP_K}")
    if beam is not None and not 1 <= beam <= 100:
        raise UserError(f"explore: --beam {beam} is out of range; allowed: 1 to 100")
    outputs = [Path(p) for p in (export, json_path) if p is not None]
    for path in outputs:
        try:
            check_output(path, overwrite)
        except UserError as e:
            raise UserError(f"explore: {e}") from None
    texts = read_sentences(sentences) if sentences is not None else None
    translators = load_named(model_specs, checkpoint)
    if texts is None:
        texts = length_examples(next(iter(translators.values())), examples)
    data = build_export(translators, texts, beam=beam, top_k=top_k, alternatives=alternatives)
    if export is not None:
        write_text(export, export_page(data), overwrite=overwrite)
    if json_path is not None:
        write_text(json_path, json.dumps(data, ensure_ascii=False), overwrite=overwrite)
    return outputs
