"""The explorer as one file: `attnmt explore MODEL_DIR... --export FILE.html` (docs/explore.md).

:func:`build_export` translates the sentences with every model and keeps their explore records
(:mod:`attnmt.decode.steps`), what-if re-decodings and references included, with the numbers rounded to what
a picture needs; :func:`export_page` turns that data into one self-contained HTML file: the page of
``attnmt serve`` (static/index.html) with its stylesheets and scripts inlined and the data embedded as
``<script type="application/json" id="attnmt-export">``, which tells the page to make no request at all. It
opens from a file:// URL, offline, and can be mailed or linked from the docs.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from attnmt.decode.held_out import example_sources, references
from attnmt.decode.steps import MAX_TOP_K, explore, model_info, pin_outcomes, what_if
from attnmt.decode.translator import MAX_SOURCE_TOKENS, Translator
from attnmt.errors import UserError
from attnmt.runtime.safe_write import check_output, write_text
from attnmt.serve.engine import parse_model_spec

__all__ = ["EXPORT_FORMAT", "MAX_SENTENCES", "PAGE_DECIMALS", "build_export", "export_page", "length_examples",
           "load_named", "run_export"]

EXPORT_FORMAT = "attnmt-explore-export/2"
STATIC_DIR = Path(__file__).parents[1] / "serve" / "static"  # the live page of attnmt serve
MAX_SENTENCES = 50  # a page of explore records grows with every sentence, model and what-if
PAGE_DECIMALS = 3  # a heatmap cell or a bar shows no finer difference; the page prints 3 decimals at most
# One sentence decoded at a time, in many small steps: more threads wait on each other more than they help
# (the demo's export takes about 4 times the CPU time in 2 threads as in 1, and longer).
EXPORT_THREADS = 1
# The steps whose Edit attention outcomes an export holds: each step is a batched search of all its pins, so
# holding every step would multiply the export's searches by the length of each output.
PIN_STEPS = 2
COMPRESS_OVER = 256 * 1024  # characters of JSON from which the page embeds it gzip-compressed (about 15 times smaller)
_STYLESHEET = re.compile(r'<link\b[^>]*\brel="stylesheet"[^>]*\bhref="/static/([\w.-]+\.css)"[^>]*>')
_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="/static/([\w.-]+\.js)"[^>]*>\s*</script>')
# In a <script> element's text "<!--", "<script" and "</script" change how the HTML parser reads on: the
# embedded JSON has none of "<", ">" or "&" outside its strings, and inside them they are written \u003c etc.
_HTML_SENSITIVE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def length_examples(translator: Translator, n: int = 6) -> list[str]:
    """``n`` held-out source sentences (:func:`attnmt.decode.held_out.example_sources`) of spread lengths,
    shortest first: the set in which a learner watches a fixed-vector model fall behind as sentences grow."""
    pool = sorted(set(example_sources(translator, n=400)), key=lambda s: (len(translator.src.tokens(s)), s))
    if len(pool) <= n:
        return pool
    return [pool[round(k * (len(pool) - 1) / (n - 1))] for k in range(n)] if n > 1 else pool[:1]


def build_export(translators: Mapping[str, Translator], sentences: Sequence[str], beam: int | None = None,
                 top_k: int = 10, alternatives: int = 2, known: Mapping[str, str] | None = None,
                 progress: bool = False, neighbours: int = 5, pin_steps: int | None = PIN_STEPS) -> dict[str, Any]:
    """Every sentence explored by every model (name -> translator), with ``alternatives`` what-if re-decodings
    per step (0: none), each output scored against the sentence's reference in ``known`` (source -> reference)
    where there is one, with ``neighbours`` nearest held-out decoder states per step, and the Edit attention
    outcomes (:func:`attnmt.decode.steps.pin_outcomes`) of the first ``pin_steps`` steps (None: every step; 0:
    none) in the record's ``pins``. Numbers are rounded to
    :data:`PAGE_DECIMALS`. ``progress``: a bar on a terminal."""
    if not sentences:
        raise UserError("explore: no sentences to export; give at least one")
    if len(sentences) > MAX_SENTENCES:
        raise UserError(f"explore: {len(sentences)} sentences; an exported page holds at most {MAX_SENTENCES}")
    known = known or {}
    entries = []
    with _bar(len(sentences) * len(translators), progress) as bar:
        for number, sentence in enumerate(sentences, 1):
            records = {}
            for name, translator in translators.items():
                try:
                    record = explore(translator, sentence, beam=beam, top_k=top_k, name=name,
                                     reference=known.get(sentence.strip()), neighbours=neighbours)
                    if alternatives:
                        record["alternatives"] = what_if(translator, record, alternatives, beam=beam)
                    if pin_steps != 0:
                        record["pins"] = pin_outcomes(translator, record, beam=beam, max_steps=pin_steps)
                except UserError as e:
                    raise UserError(f"explore: sentence {number} ({_short(sentence)}), model {name}: {e}") from None
                records[name] = _compact(record)
                bar.update(1)
            entries.append({"source": sentence, "source_words": len(sentence.split()),
                            "reference": known.get(sentence.strip()), "records": records})
    return {"format": EXPORT_FORMAT, "models": [model_info(t, name) for name, t in translators.items()],
            "sentences": entries}


def _bar(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="explore", unit="record", dynamic_ncols=True, leave=False,
                disable=not enabled or not sys.stderr.isatty(), file=sys.stderr)


def _short(sentence: str, n: int = 40) -> str:
    return repr(sentence if len(sentence) <= n else sentence[:n - 1] + "\u2026")


def _compact(value: Any) -> Any:
    """``value`` with every float rounded to PAGE_DECIMALS, and written as an int where that is all it is."""
    if isinstance(value, float):
        rounded = round(value, PAGE_DECIMALS)
        return int(rounded) if rounded.is_integer() else rounded
    if isinstance(value, dict):
        return {key: _compact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_compact(item) for item in value]
    return value


def export_page(data: dict[str, Any], static_dir: Path = STATIC_DIR, compress: bool | None = None) -> str:
    """The page with its assets inlined and ``data`` embedded: one HTML file that needs no server.

    ``compress``: embed the data's JSON gzip-compressed, as a base64 string (``data-encoding="gzip+base64"``,
    which the page decompresses with the browser's DecompressionStream); None: when the JSON is longer than
    COMPRESS_OVER characters."""
    page = (static_dir / "index.html").read_text(encoding="utf-8")

    def stylesheet(match: re.Match) -> str:
        return "<style>\n" + _asset(static_dir, match.group(1)).replace("</style", "<\\/style") + "\n</style>"

    scripts: list[str] = []

    def script(match: re.Match) -> str:
        scripts.append("<script>\n" + _asset(static_dir, match.group(1)).replace("</script", "<\\/script")
                       + "\n</script>")
        return ""

    page = _SCRIPT.sub(script, _STYLESHEET.sub(stylesheet, page))
    if "</head>" not in page or "</body>" not in page:
        raise ValueError("static/index.html has no </head> or </body> to put the data and scripts before")
    page = page.replace("</head>", _embedded(data, compress) + "</head>", 1)
    head, _, tail = page.rpartition("</body>")
    return head + "\n".join(scripts) + "\n</body>" + tail


def _embedded(data: dict[str, Any], compress: bool | None) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if compress or (compress is None and len(text) > COMPRESS_OVER):
        packed = base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")
        return f'<script type="application/json" id="attnmt-export" data-encoding="gzip+base64">"{packed}"</script>\n'
    payload = re.sub("[<>&]", lambda m: _HTML_SENSITIVE[m.group(0)], text)
    return f'<script type="application/json" id="attnmt-export">{payload}</script>\n'


def _asset(static_dir: Path, name: str) -> str:
    path = static_dir / name
    if not path.is_file():
        raise ValueError(f"static/index.html refers to /static/{name}, which does not exist")
    return path.read_text(encoding="utf-8")


def load_named(specs: Sequence[str], checkpoint: str | None = None,
               threads: int | None = None) -> dict[str, Translator]:
    """The model folders ``[NAME=]DIR`` loaded, by name (a folder's own name when none is given); ``threads``:
    torch's (None: as it is)."""
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
    translators = {name: load(directory, checkpoint=checkpoint, threads=threads) for name, directory in named.items()}
    for translator in translators.values():
        translator.max_src_tokens = MAX_SOURCE_TOKENS
    return translators


def _sentence_lines(path: str | Path) -> list[tuple[int, str]]:
    """The non-blank lines of a --sentences file, with their line numbers; a UserError in one line that
    names the file."""
    from attnmt.data.corpus import read_lines

    try:
        lines = [(number, line.strip()) for number, line in enumerate(read_lines(path), 1) if line.strip()]
    except UserError as e:
        raise UserError(f"explore: --sentences: {e}") from None
    if not lines:
        raise UserError(f"explore: --sentences {path} has no sentences (its lines are blank); write one source "
                        "sentence a line")
    if len(lines) > MAX_SENTENCES:
        raise UserError(f"explore: --sentences {path} has {len(lines)} sentences, and a page holds at most "
                        f"{MAX_SENTENCES}; split the file and export each part")
    return lines


def _check_lengths(path: str | Path, lines: list[tuple[int, str]], translators: Mapping[str, Translator]) -> None:
    for number, line in lines:
        for name, translator in translators.items():
            n = len(translator.src.tokens(line))
            if n > translator.max_src_tokens:
                raise UserError(f"explore: --sentences {path} line {number}: {n} tokens, more than the "
                                f"{translator.max_src_tokens} model {name} reads; split it into shorter sentences")


def run_export(model_specs: Sequence[str], export: str | None = None, json_path: str | None = None,
               sentences: str | None = None, checkpoint: str | None = None, beam: int | None = None, top_k: int = 10,
               alternatives: int = 2, examples: int = 6, overwrite: bool = False) -> list[Path]:
    """`attnmt explore`: load the models (``[NAME=]DIR``), explore the sentences, write the page and/or JSON.
    Torch decodes in EXPORT_THREADS threads."""
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
    lines = _sentence_lines(sentences) if sentences is not None else None
    translators = load_named(model_specs, checkpoint, threads=EXPORT_THREADS)
    if lines is not None:
        _check_lengths(sentences, lines, translators)
        texts = [line for _, line in lines]
    else:
        texts = length_examples(next(iter(translators.values())), examples)
    known: dict[str, str] = {}
    for translator in reversed(list(translators.values())):  # the first model's held-out data wins
        known.update(references(translator))
    data = build_export(translators, texts, beam=beam, top_k=top_k, alternatives=alternatives, known=known,
                        progress=True)
    if export is not None:
        write_text(export, export_page(data), overwrite=overwrite)
    if json_path is not None:
        write_text(json_path, json.dumps(data, ensure_ascii=False), overwrite=overwrite)
    return outputs
