"""The statistical aligner beside the attention: eflomal (Östling & Tiedemann 2017).

eflomal is a Bayesian IBM-model aligner with an HMM and fertility model, sampled with Gibbs; it
is a well-kept package (``pip install eflomal``, attnmt's ``align`` extra) and far better than a
hand-written IBM model, so attnmt calls it rather than reimplementing one. It aligns whole
corpora without labels: give it every sentence pair it should learn from, the ones to align
among them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from attnmt.align.link_sets import Link, parse_links
from attnmt.errors import UserError


def eflomal_align(sources: Sequence[str], targets: Sequence[str],
                  model: int = 3) -> tuple[list[set[Link]], list[set[Link]]]:
    """eflomal's forward and reverse links (both 0-based (source, target)) for tokenized pairs.

    ``model``: 1 IBM1, 2 +HMM, 3 +fertility (eflomal's default). eflomal samples (its Python API
    takes no seed), so two runs can differ slightly.
    """
    try:
        from eflomal import Aligner
    except ImportError:
        raise UserError("the eflomal baseline needs the eflomal package; pip install 'attnmt[align]' "
                        "(or pip install eflomal)") from None
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} source but {len(targets)} target sentences; they must be line-aligned")
    # eflomal cannot read an empty sentence; such pairs have no links anyway.
    keep = [k for k in range(len(sources)) if sources[k].split() and targets[k].split()]
    with tempfile.TemporaryDirectory(prefix="attnmt-eflomal-") as tmp:
        fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
        Aligner(model=model).align([sources[k] + "\n" for k in keep], [targets[k] + "\n" for k in keep],
                                   links_filename_fwd=str(fwd), links_filename_rev=str(rev))
        forward_lines = fwd.read_text(encoding="utf-8").splitlines()
        reverse_lines = rev.read_text(encoding="utf-8").splitlines()
    forward: list[set[Link]] = [set() for _ in sources]
    reverse: list[set[Link]] = [set() for _ in sources]
    for k, f, r in zip(keep, forward_lines, reverse_lines):
        forward[k], reverse[k] = parse_links(f), parse_links(r)
    return forward, reverse
