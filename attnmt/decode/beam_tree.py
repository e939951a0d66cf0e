"""The search tree of a beam search, recorded by the search itself: what the explorer's beam view draws.

``beam_search(..., record=BeamTree())`` calls :meth:`BeamTree.step` at every step, right after the beam
kept its ``beam_size`` best candidates, and :meth:`BeamTree.close` at the end. Per sentence the tree holds:

* the root (the empty hypothesis, step -1);
* per step the candidates the beam kept: ``"kept"`` (live after the step) or ``"finished"`` (it ended
  with EOS here: it took a beam slot and left the beam with its final score);
* per step the runners-up: the next best candidates after the kept ones (``"pruned"``), at most
  ``pruned`` of them (default: the beam size).

Each node has its parent, token, cumulative log prob, the token's own log prob and its rank among the
step's candidates of its sentence. Kept and finished nodes are exactly the search's own choices (the rows
it continues from), not a re-enactment; runners-up are ranked from the same step's log probs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from attnmt.config.special import BOS_ID, EOS_ID

__all__ = ["BeamTree", "Node"]


@dataclass
class Node:
    """One hypothesis of the search tree (see the module docstring)."""

    id: int
    step: int  # the output position of its last token (0 first); -1 for the root
    parent: int | None
    token: int
    log_prob: float  # of the whole hypothesis, its last token included
    token_log_prob: float
    rank: int  # kept and finished: its place in the beam (0 best); pruned: beam size, beam size + 1, ...
    status: str  # "root", "kept", "finished" or "pruned"
    forced: bool = False  # its token was forced (a prefix)
    score: float | None = None  # a finished node's final score (length penalty and coverage applied)


class BeamTree:
    """The search trees of the sentences of one beam search (``trees[i]``: sentence i's nodes, parents first)."""

    def __init__(self, pruned: int | None = None) -> None:
        self.pruned = pruned  # runners-up per step; None: as many as the beam size
        self.trees: list[list[Node]] = []
        self._rows: list[list[int | None]] = []  # per sentence the node of each live row (None: a dead row)
        self._finished: list[list[int]] = []  # per sentence its finished nodes, in the order the search finished them
        self._forced: list[int] = []  # per sentence the length of its forced prefix
        self._hyps: list[list] = []  # per sentence its finished hypotheses, set by close()

    def start(self, batch_size: int, prefix_lengths: Sequence[int] | None = None) -> None:
        self.trees = [[Node(0, -1, None, BOS_ID, 0.0, 0.0, 0, "root")] for _ in range(batch_size)]
        self._rows = [[0] for _ in range(batch_size)]
        self._finished = [[] for _ in range(batch_size)]
        self._forced = list(prefix_lengths) if prefix_lengths is not None else [0] * batch_size

    @torch.inference_mode()
    def step(self, step: int, sent: Tensor, prev_cum: Tensor, log_probs: Tensor, parent: Tensor, tok: Tensor,
             cum: Tensor) -> None:
        """Record a step: ``sent`` [n] the active sentences, ``prev_cum`` [n, width] their rows' log probs before
        the step, ``log_probs`` [n*width, V] the step's (bans applied), ``parent`` and ``tok`` [n*K] the rows and
        tokens the beam kept, ``cum`` [n, K] their log probs (-inf: a dead row)."""
        n, width = prev_cum.shape
        K = cum.size(1)
        parent_slot = (parent.view(n, K) - torch.arange(n, device=parent.device).unsqueeze(1) * width).tolist()
        tokens, cums, before = tok.view(n, K).tolist(), cum.tolist(), prev_cum.tolist()
        runners = self._runners_up(prev_cum, log_probs, K)
        for a, i in enumerate(sent.tolist()):
            tree, rows, kept = self.trees[i], self._rows[i], []
            forced = step < self._forced[i]
            for k in range(K):
                slot, c = parent_slot[a][k], cums[a][k]
                if c == float("-inf") or rows[slot] is None:
                    kept.append(None)
                    continue
                status = "finished" if tokens[a][k] == EOS_ID else "kept"
                tree.append(Node(len(tree), step, rows[slot], tokens[a][k], c, c - before[a][slot], k, status, forced))
                kept.append(tree[-1].id if status == "kept" else None)
                if status == "finished":
                    self._finished[i].append(tree[-1].id)
            chosen = {(parent_slot[a][k], tokens[a][k]) for k in range(K)}
            self._add_runners_up(tree, rows, runners[a], chosen, before[a], step, K, forced)
            self._rows[i] = kept

    def _runners_up(self, prev_cum: Tensor, log_probs: Tensor, K: int) -> list[list[tuple[float, int, int]]]:
        """Per sentence its best ``K + pruned`` candidates: (log prob, parent slot, token), best first."""
        n, width = prev_cum.shape
        V = log_probs.size(1)
        extra = K if self.pruned is None else self.pruned
        scores = (prev_cum.float().unsqueeze(2) + log_probs.float().view(n, width, V)).view(n, width * V)
        values, index = scores.topk(min(K + extra, width * V), dim=1)
        return [[(v, j // V, j % V) for v, j in zip(vs, js)] for vs, js in zip(values.tolist(), index.tolist())]

    def _add_runners_up(self, tree: list[Node], rows: list[int | None], candidates, chosen: set, before: list[float],
                        step: int, K: int, forced: bool) -> None:
        limit = K if self.pruned is None else self.pruned
        added = 0
        for value, slot, token in candidates:
            if added == limit or value == float("-inf"):
                break
            if (slot, token) in chosen or rows[slot] is None:
                continue
            tree.append(Node(len(tree), step, rows[slot], token, value, value - before[slot], K + added, "pruned",
                             forced))
            added += 1

    def close(self, finished: Sequence[Sequence]) -> None:
        """Give the finished nodes the scores of the search's finished hypotheses (the same order)."""
        for i, hyps in enumerate(finished):
            for node_id, hyp in zip(self._finished[i], hyps):
                self.trees[i][node_id].score = float(hyp.score)
        self._hyps = [list(hyps) for hyps in finished]

    def path(self, sentence: int, hypothesis) -> list[int]:
        """The node ids from the root to ``hypothesis`` (one the search returned for ``sentence``)."""
        index = next(j for j, h in enumerate(self._hyps[sentence]) if h is hypothesis)
        node = self.trees[sentence][self._finished[sentence][index]]
        ids = [node.id]
        while node.parent is not None:
            node = self.trees[sentence][node.parent]
            ids.append(node.id)
        return ids[::-1]
