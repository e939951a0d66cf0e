"""Alignment quality: the alignment error rate (Och & Ney 2003), precision and recall."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from attnmt.align.link_sets import GoldAlignment, Link


@dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level alignment quality: links are counted over all sentences, then divided.

    ``aer = 1 - (|A & S| + |A & P|) / (|A| + |S|)`` (Och & Ney 2003), ``precision = |A & P| / |A|``,
    ``recall = |A & S| / |S|``; A the predicted, S the sure and P the possible links.
    """

    aer: float
    precision: float
    recall: float
    sentences: int
    predicted: int  # |A|
    sure: int  # |S|
    possible: int  # |P| (sure links included)
    hits_sure: int  # |A & S|
    hits_possible: int  # |A & P|


def score_alignments(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> AlignmentScores:
    """AER, precision and recall of ``predicted`` links against ``gold``, sentence by sentence."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    a = s = p = a_s = a_p = 0
    for links, g in zip(predicted, gold):
        links = set(links)
        a += len(links)
        s += len(g.sure)
        p += len(g.possible)
        a_s += len(links & g.sure)
        a_p += len(links & g.possible)
    denominator = a + s
    return AlignmentScores(
        aer=1.0 - (a_s + a_p) / denominator if denominator else 0.0,
        precision=a_p / a if a else 0.0,
        recall=a_s / s if s else 0.0,
        sentences=len(gold), predicted=a, sure=s, possible=p, hits_sure=a_s, hits_possible=a_p,
    )


def format_scores(scores: dict[str, AlignmentScores]) -> str:
    """A small Markdown table: method, AER, precision, recall, links."""
    lines = ["| method | AER | precision | recall | links |", "|---|---:|---:|---:|---:|"]
    for method, s in scores.items():
        lines.append(f"| {method} | {s.aer:.3f} | {s.precision:.3f} | {s.recall:.3f} | {s.predicted} |")
    return "\n".join(lines)
