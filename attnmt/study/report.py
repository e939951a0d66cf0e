"""The study report: findings and one self-contained HTML page."""

from __future__ import annotations

import base64
import html
import math
import string
from pathlib import Path

from attnmt.models.registry import model_class
from attnmt.study.spec import Study


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bleu_cell(r: dict) -> str:
    ci = f" <span class=ci>[{_f(r['ci_low'])}, {_f(r['ci_high'])}]</span>" if r.get("ci_low") is not None else ""
    spread = f" <span class=sp>({_f(r['min'])}–{_f(r['max'])})</span>" if len(r["values"]) > 1 else ""
    return f"<b>{_f(r['mean'])}</b>{ci}{spread}"


def _attends(m: dict) -> bool:
    """Whether a measured model's type has attention (asked of the registered model class)."""
    return model_class(m["model_type"]).has_attention


def findings(models: dict[str, dict], diagonal: dict[str, dict]) -> list[str]:
    """Plain sentences that state what the numbers show (computed, not written by hand)."""
    lines = []
    for name, m in models.items():
        rows = m["buckets"]
        if len(rows) >= 2:
            first, last = rows[0], rows[-1]
            ratio = last["mean"] / first["mean"] if first["mean"] > 0 else float("nan")
            separated = (first["ci_low"] is not None and last["ci_high"] is not None
                         and last["ci_high"] < first["ci_low"])
            lines.append(f"{name}: BLEU {first['mean']:.1f} on {first['lo']}-{first['hi'] - 1} words, "
                         f"{last['mean']:.1f} on {last['lo']}-{last['hi'] - 1} words "
                         f"({ratio:.0%} of the shortest bucket"
                         f"{'; the intervals do not overlap' if separated else ''}).")
    seq2seq = {m["reverse_source"]: (name, m) for name, m in models.items() if not _attends(m)}
    # The bottleneck's test: does the fixed-vector model's longest bucket lie apart from each attention model's?
    for fixed_name, fixed in [seq2seq.get(True) or seq2seq[False]] if seq2seq else []:
        for name, m in models.items():
            if not _attends(m) or not (fixed["buckets"] and m["buckets"]):
                continue
            a, b = fixed["buckets"][-1], m["buckets"][-1]
            if None in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"]) or a["lo"] != b["lo"]:
                continue
            apart = a["ci_high"] < b["ci_low"] or b["ci_high"] < a["ci_low"]
            lines.append(f"Longest bucket ({a['lo']}-{a['hi'] - 1} words): {fixed_name} "
                         f"[{a['ci_low']:.1f}, {a['ci_high']:.1f}], {name} [{b['ci_low']:.1f}, {b['ci_high']:.1f}]: "
                         f"the intervals {'do not overlap' if apart else 'overlap'}.")
    if True in seq2seq and False in seq2seq:
        (fwd, f), (rev, r) = seq2seq[False], seq2seq[True]
        lines.append(f"Reversing the source ({fwd} -> {rev}): test perplexity {f['perplexity']['mean']:.2f} -> "
                     f"{r['perplexity']['mean']:.2f}, BLEU {f['bleu']['mean']:.1f} -> {r['bleu']['mean']:.1f}.")
    for gold_name, base in diagonal.items():
        for name, m in models.items():
            if gold_name in m["alignment"]:
                aer = m["alignment"][gold_name]["argmax"]["aer"]
                lines.append(f"{name} on {gold_name}: AER {aer['mean']:.3f} (seeds {aer['min']:.3f}-{aer['max']:.3f}); "
                             f"the diagonal: {base['aer']:.3f}.")
    return lines


def render_html(study: Study, result: dict, figures: dict[str, Path], heatmaps: list[dict], figure_dir: Path) -> str:
    """The self-contained report page: the page template (report.html, package data) filled with its sections."""
    template = string.Template((Path(__file__).with_name("report.html")).read_text(encoding="utf-8"))
    sections = [_summary(study, result), _bleu_section(study, result, figures), _extra_tests(result["models"]),
                _perplexity_section(result["models"], figures), _alignment_section(study, result, heatmaps, figure_dir),
                _runs_section(result)]
    return template.substitute(title=html.escape(study.name), body="\n".join(p for part in sections for p in part))


def _summary(study: Study, result: dict) -> list[str]:
    t = result["timing"]
    return [
        f"<h1>attnmt study: {html.escape(study.name)}</h1>",
        f"<p>{html.escape(study.description)}</p>" if study.description else "",
        f"<p>Command: <code>{html.escape(result['command'])}</code>. Study config: "
        f"<code>{html.escape(str(study.path))}</code>. Total time {result['seconds']:.0f} s "
        f"(training and evaluation {t['train_and_evaluate_seconds']:.0f} s, "
        f"{t['jobs']} parallel job(s); {t['cpu_seconds_this_time']:.0f} CPU seconds "
        "this time, less when trained models were reused).</p>",
        "<p>Data: " + html.escape(", ".join(
            f"{split} {s['pairs']} pairs, {s['min_words']}-{s['max_words']} source words (mean {s['mean_words']})"
            for split, s in result["data"].items() if isinstance(s, dict) and "pairs" in s)) + ".</p>",
        "<h2>Summary</h2><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in result["findings"]) + "</ul>",
    ]


def _bucket_rows(shown: dict[str, dict]) -> list[list[str]]:
    """One row per source-length bucket and a row for all, one BLEU cell per model."""
    edges = sorted({(r["lo"], r["hi"], r["n"]) for x in shown.values() for r in x["buckets"]})
    rows = []
    for lo, hi, n in edges:
        row = [f"{lo}-{hi - 1}", str(n)]
        for x in shown.values():
            r = next((r for r in x["buckets"] if r["lo"] == lo), None)
            row.append(_bleu_cell(r) if r else "–")
        rows.append(row)
    rows.append(["all", str(sum(n for _, _, n in edges)), *(_bleu_cell(x["bleu"]) for x in shown.values())])
    return rows


def _own_decoding(ev) -> str:
    """The models decoded with settings of their own (evaluation.models), as text for the report."""
    own = [f"{name}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in settings.items())
           for name, settings in ev.models.items()]
    return f" ({html.escape('; '.join(own))})" if own else ""


def _bleu_section(study: Study, result: dict, figures: dict[str, Path]) -> list[str]:
    ev, models = study.evaluation, result["models"]
    return [
        "<h2>1. BLEU by source length</h2>",
        f"<p>Each cell: the mean over seeds, in brackets its {ev.confidence:.0%} bootstrap interval "
        f"({ev.bootstrap} resamples of the bucket's sentences, the same for every seed), in "
        "parentheses the lowest and highest seed. Thin lines in the figure are single seeds. "
        f"Decoding: beam {ev.beam}{_own_decoding(ev)}; sacreBLEU tokenize={html.escape(ev.bleu_tokenize)}.</p>",
        f"<img src='{_png(figures['bleu_by_length'])}' alt='BLEU by source length'>",
        _table(["source words", "n", *models], _bucket_rows(models)),
        "<p>Share of the outputs that repeat some 4-gram at least three times (the loop of a decoder that has "
        "lost its place in the source), mean over seeds:</p>",
        _table(["source words", "n", *models], _bucket_mean_rows(models, "repeating", "{:.0%}")),
        "<p>Output length over reference length (sacreBLEU's sys_len / ref_len; below 1 the brevity penalty "
        "lowers BLEU), mean over seeds:</p>",
        _table(["source words", "n", *models], _bucket_mean_rows(models, "length_ratio", "{:.2f}")),
    ]


def _bucket_mean_rows(models: dict[str, dict], key: str, form: str) -> list[list[str]]:
    """One row per length bucket: the seeds' mean of ``key`` for each model ('–' where not measured)."""
    edges = sorted({(r["lo"], r["hi"], r["n"]) for m in models.values() for r in m["buckets"]})
    return [[f"{lo}-{hi - 1}", str(n), *(next((form.format(r[key]["mean"]) for r in m["buckets"]
                                               if r["lo"] == lo and key in r), "–") for m in models.values())]
            for lo, hi, n in edges]


def _extra_tests(models: dict[str, dict]) -> list[str]:
    parts = []
    for set_name in sorted({name for m in models.values() for name in m.get("extra_tests", {})}):
        shown = {name: m["extra_tests"][set_name] for name, m in models.items() if set_name in m.get("extra_tests", {})}
        rows = _bucket_rows(shown)
        rows.append(["perplexity", "", *(f"{_f(x['perplexity']['mean'], 2)} ± {_f(x['perplexity']['std'], 2)}"
                                         for x in shown.values())])
        parts += [f"<h3>Test set {html.escape(set_name)}, reported on its own</h3>",
                  "<p>BLEU by source length as above, and test perplexity (mean ± standard deviation over seeds).</p>",
                  _table(["source words", "n", *shown], rows)]
    return parts


def _perplexity_section(models: dict[str, dict], figures: dict[str, Path]) -> list[str]:
    rows = [[html.escape(name), m["model_type"], "yes" if m["reverse_source"] else "no",
             f"{_f(m['perplexity']['mean'], 2)} ± {_f(m['perplexity']['std'], 2)}",
             _bleu_cell(m["bleu"]), f"{_f(m['chrf']['mean'])}", _f(m["training"].get("steps", {}).get("mean"), 0),
             _f(m["training"].get("train_seconds", {}).get("mean"), 0)] for name, m in models.items()]
    return [
        "<h2>2. Perplexity, BLEU and the reversed source</h2>",
        "<p>Test perplexity under teacher forcing (per target token, mean ± standard deviation over seeds) "
        "and corpus BLEU. <code>reverse_source</code> feeds a seq2seq encoder the source backwards "
        "(Sutskever et al. 2014), which puts the first source words next to the first target words.</p>",
        _table(["model", "type", "reversed", "test perplexity", "BLEU", "chrF", "steps", "train s"], rows),
        f"<img src='{_png(figures['accuracy_by_position'])}' alt='accuracy by target position'>",
        "<p>Next-token accuracy by target position (teacher forcing; band: lowest to highest seed).</p>",
    ]


def _alignment_section(study: Study, result: dict, heatmaps: list[dict], figure_dir: Path) -> list[str]:
    models = result["models"]
    parts = [
        "<h2>3. Attention as word alignment</h2>",
        "<p>Links read off the teacher-forced attention, merged to words (source pieces summed, target "
        "pieces averaged): <i>argmax</i> links each target word to its most attended source word, "
        f"<i>threshold</i> keeps every weight ≥ {study.alignment.threshold}. AER = 1 − (|A∩S| + |A∩P|) / "
        "(|A| + |S|); lower is better. The diagonal baseline needs no model.</p>",
    ]
    rows = []
    for gold_name, base in result["diagonal"].items():
        rows.append([html.escape(gold_name), "diagonal (no model)", "–", _f(base["aer"], 3), _f(base["precision"], 3),
                     _f(base["recall"], 3)])
        for name, m in models.items():
            for method, s in m["alignment"].get(gold_name, {}).items():
                rows.append([html.escape(gold_name), html.escape(name), method,
                             f"{_f(s['aer']['mean'], 3)} ({_f(s['aer']['min'], 3)}–{_f(s['aer']['max'], 3)})",
                             _f(s["precision"]["mean"], 3), _f(s["recall"]["mean"], 3)])
    if rows:
        parts.append(_table(["gold set", "model", "links", "AER (seed range)", "precision", "recall"], rows))
    for name, m in models.items():
        if m["alignment_by_category"]:
            parts.append(f"<p>{html.escape(name)}: share of target words whose argmax link is the gold link, by the "
                         "kind of source word they translate (mean over seeds).</p>")
            parts.append(_table(["target words translating a", "n", "argmax = gold"],
                                [[html.escape(label), str(v["n"]), f"{100 * v['mean']:.1f}%"]
                                 for label, v in m["alignment_by_category"].items()]))
    for h in heatmaps:
        aer = f"; AER of this sentence (argmax) {h['aer']:.3f}" if "aer" in h else ""
        parts.append(f"<h3>{html.escape(h['model'])}, test sentence {h['sentence']} ({h['source_words']} words)</h3>"
                     f"<p>Rows: target words of the reference; columns: source words; white = weight 1{aer}.</p>"
                     f"<img src='{_png(figure_dir / h['file'])}' alt='attention heatmap'>")
    return parts


def _runs_section(result: dict) -> list[str]:
    rows = [[html.escape(r["label"]), r["action"], _f(r.get("steps"), 0), _f(r.get("train_seconds"), 0),
             html.escape(str(r.get("stop_reason", ""))), html.escape(str(r.get("precision") or "–")), _f(r["bleu"]),
             _f(r["perplexity"], 2), html.escape(r["model_dir"])] for r in result["runs"]]
    return ["<h2>4. Runs</h2>",
            _table(["run", "this time", "steps", "train s", "stopped by", "precision", "BLEU", "perplexity",
                    "folder"], rows),
            "<p>Every number of this page is in results.json next to it.</p>"]


# ================================================================ the study command
