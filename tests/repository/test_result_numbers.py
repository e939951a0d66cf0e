"""Every number a document's table shows beside a result JSON is held by that JSON.

A table row that links a JSON in benchmarks/results/ is read cell by cell; a cell made only of numbers
(``0.111``, ``48.62 / 47.60``, ``81%``, ``1.19e-07``, ``**33.97**``, ``27.6`` for 27,585,996, ``40.2 BLEU``) must
have each number in one of the row's JSONs, as written (rounded to the digits shown), as a percentage of a
fraction, or in thousands, millions or billions. A number the JSON does not hold was typed by hand or is left over
from an earlier run. Cells with other units (seconds of a time budget, a machine's name) are not numbers of a run
and are not read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.repository.test_repository import DOCUMENTS, GENERATED, ROOT, table_rows

JSON_LINK = re.compile(r"\]\(([^)\s]+\.json)\)")
NUMBER = re.compile(r"\**(\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?%?)\**")
UNIT = re.compile(r" (?:BLEU|x)$")


def _numbers(obj):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        yield float(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)


def holds(values, shown: str) -> bool:
    """Whether one of the values, written with the digits of `shown`, reads as `shown`."""
    text = shown.rstrip("%").replace(",", "")
    mantissa = text.split("e")[0]
    digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
    if "e" in text:
        return any(f"{v:.{digits}e}" == text for v in values)
    x = float(text)
    tol = 0.5 * 10 ** -digits + 1e-9
    scales = (1, 0.01) if shown.endswith("%") else (1, 1e3, 1e6, 1e9)
    return any(abs(v / k - x) <= tol for v in values for k in scales)


def unheld(doc: Path):
    """'doc:line: number (row)' for every table number its row's JSONs do not hold."""
    for n, line, cells in table_rows(doc.read_text(encoding="utf-8")):
        links = JSON_LINK.findall(line)
        values = [v for link in links if (doc.parent / link).is_file()
                  for v in _numbers(json.loads((doc.parent / link).read_text(encoding="utf-8")))]
        for cell in cells[1:] if links else []:
            parts = [p.strip() for p in UNIT.sub("", cell).split(" / ")]
            if not cell or not all(NUMBER.fullmatch(p) for p in parts):
                continue
            for shown in (NUMBER.fullmatch(p).group(1) for p in parts):
                if not holds(values, shown):
                    yield f"{doc.name}:{n}: {shown} ({cells[0][:60]})"


@pytest.mark.parametrize("doc", [p for p in DOCUMENTS if p not in GENERATED], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_number_in_a_results_table_is_in_its_json(doc):
    missing = list(unheld(doc))
    assert not missing, ("table numbers that the JSON of their row does not hold (rerun the command that writes "
                         "the JSON, or copy the number from it):\n" + "\n".join(missing))


def test_the_number_check_reads_rounding_percentages_and_scales_and_catches_a_stale_number(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"aer": 0.1124, "bleu": [31.15, 47.6], "share": 0.8077,
                                                 "flops": 27585996, "diff": 1.1942e-07}))
    doc = tmp_path / "page.md"
    doc.write_text("| row | AER | BLEU | share | MFLOP | diff | budget | JSON |\n|---|---|---|---|---|---|---|---|\n"
                   "| a | **0.112** | 31.2 / 47.60 | 81% | 27.6 | 1.19e-07 | 900 s | [r](r.json) |\n"
                   "```\n| b | 0.5 | [r](r.json) |\n```\n")
    assert list(unheld(doc)) == []
    doc.write_text(doc.read_text().replace("0.112", "0.139").replace("81%", "79%"))
    assert [line.split(": ")[1] for line in unheld(doc)] == ["0.139 (a)", "79% (a)"]
