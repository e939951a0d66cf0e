"""Greedy and batched beam search over the model interface (docs/architecture.md).

Both searches run a whole batch of sentences at once and drop a sentence from the batch as soon as
its result is settled, so the decoding work falls as sentences finish. Beam search flattens the
sentences and their beams into ``B*K`` rows; because every tensor in an encoder output or decoder
state is batch-first, any state is reordered with ``t.index_select(0, rows)`` without knowing the
model.

Conventions shared by both searches:

* The hypothesis of sentence ``i`` holds at most ``max_len_i = floor(max_len_a * src_len_i +
  max_len_b)`` tokens (capped by ``max_len_cap``), EOS not counted. A hypothesis that reaches
  ``max_len_i`` tokens is forced to end with EOS at the next step, so every hypothesis ends in a
  scored EOS step.
* PAD and BOS are never generated (their log probs are set to -inf); UNK may be.
* ``log_prob`` is the sum of the model's log probs of the tokens and of the final EOS;
  ``score = log_prob / lp(len(tokens) + 1) + cp`` with the GNMT length penalty
  ``lp(n) = ((5 + n) / 6) ** alpha`` (the length counts the EOS; alpha 0 disables it) and, in beam search,
  the GNMT coverage penalty ``cp = beta * sum_j log(min(sum_i alpha_ij, 1))`` over the source words j
  (Wu et al. 2016, eq. 14; ``alpha_ij`` the attention of output step i, the EOS step included). It is 0
  when beta is 0 or the model returns no attention; a source word no step attended to at all counts as
  coverage ``COVERAGE_FLOOR`` (not log 0).
* ``attention`` is ``[len(tokens) + 1, S_i]`` (one row per generated token including the EOS step,
  columns trimmed to the sentence's real source length), on the CPU; ``None`` for a model whose
  ``decode_step`` returns no attention.
* The model runs in eval mode during the search; its previous mode is restored afterwards.
* ``prefix`` (token ids per sentence) forces the output's first tokens, and the keyword ``constraints``
  (``min_len=...`` and the others of :data:`attnmt.decode.constraints.CONSTRAINTS`) ban tokens, in every search
  (:mod:`attnmt.decode.constraints`); beam search's ``record`` (an :class:`attnmt.decode.beam_tree.BeamTree`)
  records its tree as it goes.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import torch
from torch import Tensor

from attnmt.config.decoding import STOPPING_RULES, DecodeOptions
from attnmt.config.special import BOS_ID, EOS_ID, PAD_ID
from attnmt.decode.constraints import apply_constraints, apply_prefix, constraint_options, length_limits, prefix_table
from attnmt.errors import UserError
from attnmt.models.protocols import TranslationModel

if TYPE_CHECKING:
    from attnmt.decode.beam_tree import BeamTree

__all__ = ["Hypothesis", "greedy_search", "beam_search", "left_to_right", "length_penalty_factor",
           "coverage_penalty_term", "max_output_lengths"]


@dataclass
class Hypothesis:
    """One output sentence: token ids without BOS/EOS, its scores and its attention."""

    tokens: list[int]
    score: float  # length-penalised log prob, plus the coverage penalty (see the module docstring)
    log_prob: float  # sum of the log probs of the tokens and of the final EOS
    attention: Tensor | None  # [len(tokens) + 1, S_i] on the CPU, or None


# ----------------------------------------------------------------------------------------- helpers


def length_penalty_factor(length: int | float, alpha: float) -> float:
    """GNMT length penalty ``((5 + length) / 6) ** alpha``; 1.0 when alpha is 0."""
    if alpha == 0:
        return 1.0
    return ((5.0 + length) / 6.0) ** alpha


COVERAGE_FLOOR = 1e-10  # the coverage a never-attended source word counts as in coverage_penalty_term


def coverage_penalty_term(coverage: Tensor, beta: float) -> Tensor:
    """GNMT's ``cp = beta * sum_j log(min(coverage_j, 1))`` over the last dimension (Wu et al. 2016, eq. 14).

    ``coverage[..., j] = sum_i alpha_ij``: the attention source word j received over the output steps. Each
    word is rewarded up to a total of 1 and no further, so a hypothesis that leaves source words unread
    scores lower; 0 when every word got at least 1. Columns that are not source words must hold 1.
    """
    return beta * coverage.clamp(COVERAGE_FLOOR, 1.0).log().sum(-1)


def max_output_lengths(src_len: list[int], max_len_a: float, max_len_b: float,
                       max_len_cap: int | None = None) -> list[int]:
    """Per sentence the most output tokens (EOS not counted): ``floor(a * src_len + b)``, capped."""
    lengths = []
    for n in src_len:
        m = max(0, math.floor(max_len_a * n + max_len_b))
        if max_len_cap is not None:
            m = min(m, max_len_cap)
        lengths.append(m)
    return lengths


def _select_rows(x: Any, rows: Tensor) -> Any:
    """``x`` with the rows ``rows`` of every batch-first tensor in it (dicts/lists/tuples nested)."""
    if isinstance(x, Tensor):
        return x.index_select(0, rows)
    if isinstance(x, dict):
        return {k: _select_rows(v, rows) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_select_rows(v, rows) for v in x)
    return x  # None, ints, ...: not per-row data


@contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """Run the model in eval mode (no dropout) and restore its previous mode afterwards."""
    was_training = getattr(model, "training", None)
    if was_training:
        model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train(True)


def _prepare_log_probs(log_probs: Tensor, at_max_len: Tensor) -> Tensor:
    """Float32 log probs with PAD/BOS banned and only EOS allowed on rows that are at max length.

    Changes the columns and rows concerned in place (the model's fresh output is not used
    elsewhere): building a full [N, V] mask at every step cost more than the rest of the bookkeeping.
    """
    log_probs = log_probs.float()
    log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")
    if bool(at_max_len.any()):
        eos = log_probs[at_max_len, EOS_ID]
        log_probs[at_max_len] = float("-inf")
        log_probs[at_max_len, EOS_ID] = eos
    return log_probs


_CHUNK = 64  # columns per chunk of a row in _best_per_row


def _best_per_row(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` largest values of each row of ``x`` [N, V] and their columns, best first.

    The values equal ``x.topk(k, dim=1)``'s; with k == 1 values and columns equal ``x.max(dim=1)``'s (the first
    column of equal maxima). On a CPU, top-k and max-with-index over a 10,000-word vocabulary cost about
    ten times a plain ``amax``, so each row is cut into chunks, and the search looks only inside the k chunks
    with the largest maxima: those k maxima are k elements at least as large as anything outside them.
    """
    n, V = x.shape
    if x.device.type != "cpu" or V < 8 * k * _CHUNK or n * V < 2**17:  # a GPU's top-k is fast; small inputs
        return x.max(dim=1) if k == 1 else x.topk(k, dim=1)
    full = V // _CHUNK
    maxima = x[:, : full * _CHUNK].view(n, full, _CHUNK).amax(2)  # [N, chunks]
    if full * _CHUNK < V:
        maxima = torch.cat([maxima, x[:, full * _CHUNK :].amax(1, keepdim=True)], dim=1)
    # k == 1: the first chunk holding the row's maximum, so that the first equal column wins as in max
    chunks = maxima.max(dim=1).indices.unsqueeze(1) if k == 1 else maxima.topk(k, dim=1).indices
    cols = (chunks.unsqueeze(2) * _CHUNK + torch.arange(_CHUNK, device=x.device)).view(n, -1)  # ascending per chunk
    beyond = cols >= V  # the last chunk may be short
    candidates = x.gather(1, cols.clamp_(max=V - 1)).masked_fill_(beyond, float("-inf"))
    values, pick = candidates.max(dim=1, keepdim=True) if k == 1 else candidates.topk(k, dim=1)
    columns = cols.gather(1, pick)
    return (values.squeeze(1), columns.squeeze(1)) if k == 1 else (values, columns)


def _add_finished(results: list[list[Hypothesis]], rows: Tensor, sentences: list[int], log_probs: list[float],
                  tokens: Tensor, attn: Tensor | None, lengths: list[int], alpha: float, beta: float = 0.0) -> None:
    """Append to ``results[sentences[j]]`` the finished hypothesis of row ``rows[j]`` with log prob ``log_probs[j]``.

    Its tokens come without the final EOS, its attention rows with it (columns trimmed to the source, on
    the CPU). One pass for all the rows that finish at a step: the per-hypothesis work is Python's.
    ``alpha``: the length penalty; ``beta``: the coverage penalty (see the module docstring).
    """
    hyp_tokens = tokens.index_select(0, rows)[:, :-1].tolist()
    hyp_attn = None
    if attn is not None:
        with torch.inference_mode(False):  # a normal tensor, which callers may also change in place
            hyp_attn = attn.index_select(0, rows).float().cpu().clone()
    for j, i in enumerate(sentences):
        attention = None if hyp_attn is None else hyp_attn[j, :, : lengths[i]]  # disjoint views of one tensor
        score = log_probs[j] / length_penalty_factor(len(hyp_tokens[j]) + 1, alpha)
        if beta and attention is not None:
            score += float(coverage_penalty_term(attention.sum(0), beta))
        results[i].append(Hypothesis(hyp_tokens[j], score, log_probs[j], attention))


def _check_inputs(src: Tensor, src_len: Tensor) -> list[int]:
    if src.dim() != 2:
        raise ValueError(f"search: src must be [B, S], got shape {tuple(src.shape)}")
    lengths = [int(n) for n in src_len.tolist()]
    if len(lengths) != src.size(0):
        raise ValueError(f"search: src_len has {len(lengths)} entries for a batch of {src.size(0)}")
    return lengths


# ------------------------------------------------------------------------------------------ greedy


@torch.inference_mode()
def greedy_search(model: TranslationModel, src: Tensor, src_len: Tensor, max_len_a: float = 1.5, max_len_b: float = 10,
                  max_len_cap: int | None = None, length_penalty: float = 1.0,
                  prefix: Sequence[Sequence[int]] | None = None, **constraints: Any) -> list[list[Hypothesis]]:
    """Batched greedy decoding: per sentence a list with its one hypothesis.

    ``length_penalty`` only sets ``Hypothesis.score`` (the tokens do not depend on it); it matches
    beam_search's default so that ``beam_search(beam_size=1)`` gives exactly this output. A sentence
    stops at EOS (or at its maximum length, with a forced EOS) and leaves the batch. ``prefix`` and the
    ``constraints`` (``min_len=...``): :mod:`attnmt.decode.constraints`.
    """
    return left_to_right(model, src, src_len, _greedy_choice, 1, max_len_a, max_len_b, max_len_cap, length_penalty,
                         prefix, **constraints)


def _greedy_choice(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    # the same selection as beam search's (the best of the row, then added), so beam 1 == greedy exactly
    return _best_per_row(log_probs, 1)


def _end_rows(results: list[list[Hypothesis]], tok: Tensor, cum: Tensor, sent: Tensor, tokens: Tensor,
              attn: Tensor | None, lengths: list[int], length_penalty: float) -> Tensor:
    """Rows that end now: at EOS (a hypothesis), or with every continuation at probability 0 (none)."""
    finished = (tok == EOS_ID) & torch.isfinite(cum)
    if bool(finished.any()):
        rows = finished.nonzero().flatten()
        _add_finished(results, rows, sent[rows].tolist(), cum[rows].tolist(), tokens, attn, lengths, length_penalty)
    return (tok == EOS_ID) | ~torch.isfinite(cum)


@torch.inference_mode()
def left_to_right(model: TranslationModel, src: Tensor, src_len: Tensor, choose, copies: int = 1,
                  max_len_a: float = 1.5, max_len_b: float = 10, max_len_cap: int | None = None,
                  length_penalty: float = 1.0, prefix: Sequence[Sequence[int]] | None = None,
                  **constraints: Any) -> list[list[Hypothesis]]:
    """One hypothesis per row, extended a token at a time: greedy search, and sampling (attnmt.decode.sampling).

    ``choose(log_probs [N, V]) -> (log probs [N], tokens [N])`` picks each row's next token from the step's
    log probs (PAD/BOS banned, the constraints applied). Each sentence gets ``copies`` rows (sentence-major),
    so its list holds up to ``copies`` hypotheses, in the order they finish (a row whose every token is banned
    ends without one).
    """
    rules = constraint_options(constraints)
    lengths = _check_inputs(src, src_len)
    batch_size = len(lengths)
    if batch_size == 0:
        return []
    device = src.device
    forced = prefix_table(prefix, batch_size, device)
    _, max_lens, min_lens = length_limits(max_output_lengths(lengths, max_len_a, max_len_b, max_len_cap), rules,
                                          forced, device)
    results: list[list[Hypothesis]] = [[] for _ in range(batch_size)]

    with _eval_mode(model):
        # original index of each active row
        sent = torch.arange(batch_size, device=device).repeat_interleave(copies)
        # The model sees tensors laid out exactly as in beam_search (which copies enc to expand it and
        # copies the state to reorder it every step): a kernel on a non-contiguous view may round
        # differently, and beam size 1 must give greedy's output bit for bit.
        enc = _select_rows(model.encode(src, src_len), sent)
        state = model.init_state(enc)
        y_prev = torch.full((sent.numel(),), BOS_ID, dtype=torch.long, device=device)
        cum = torch.zeros(sent.numel(), device=device)  # log prob so far
        tokens = torch.empty(sent.numel(), 0, dtype=torch.long, device=device)
        attn: Tensor | None = None  # [N, t, S]

        for step in range(int(max_lens.max()) + 1):
            log_probs, state, alpha = model.decode_step(y_prev, state, enc)
            log_probs = _prepare_log_probs(log_probs, max_lens[sent] == step)
            apply_constraints(log_probs, tokens, None if min_lens is None else min_lens[sent], rules)
            if forced is not None and step < forced.size(1):
                apply_prefix(log_probs, forced[sent, step])
            best, tok = choose(log_probs)
            cum = cum + best
            tokens = torch.cat([tokens, tok.unsqueeze(1)], dim=1)
            if alpha is not None:
                rows = alpha.unsqueeze(1).float()
                attn = rows if attn is None else torch.cat([attn, rows], dim=1)

            done = _end_rows(results, tok, cum, sent, tokens, attn, lengths, length_penalty)
            if bool(done.all()):
                break
            keep = (~done).nonzero().flatten()
            if len(keep) < len(done):  # shrink the batch to the unfinished sentences
                enc = _select_rows(enc, keep)
                sent, cum, tok, tokens = sent[keep], cum[keep], tok[keep], tokens[keep]
                attn = None if attn is None else attn[keep]
            state = _select_rows(state, keep)
            y_prev = tok
    return results


# -------------------------------------------------------------------------------------------- beam


def _check_beam_options(beam_size: int, n_best: int, stopping: str, coverage_penalty: float) -> None:
    if beam_size < 1:
        raise UserError(f"search: beam_size must be at least 1, got {beam_size}")
    if not 1 <= n_best <= beam_size:
        raise UserError(f"search: n_best must be between 1 and beam_size ({beam_size}), got {n_best}")
    if stopping not in STOPPING_RULES:
        raise UserError(f"search: stopping must be one of {STOPPING_RULES}, got {stopping!r}")
    if coverage_penalty < 0:
        raise UserError(f"search: coverage_penalty must be 0 (off) or more, got {coverage_penalty}")


@dataclass
class _Beam:
    """The live hypotheses of the unsettled sentences. Rows are sentence-major: row a*width + k is
    hypothesis k of active sentence a, laid out as greedy search lays out its rows."""

    sent: Tensor  # [n] original index of each active sentence
    enc: dict
    state: dict
    width: int  # hypotheses per sentence: the empty one at the first step, K after it
    y_prev: Tensor  # [n*width]
    cum: Tensor  # [n, width] log prob so far (-inf: a dead row)
    tokens: Tensor  # [n*width, t]
    attn: Tensor | None  # [n*width, t, S]
    worst_kept: Tensor  # [n] the n_best-th best finished score
    record: BeamTree | None = None  # records the search tree

    @classmethod
    def start(cls, model: TranslationModel, src: Tensor, src_len: Tensor, record: BeamTree | None = None,
              prefix: Sequence[Sequence[int]] | None = None) -> _Beam:
        n, device = src.size(0), src.device
        sent = torch.arange(n, device=device)
        enc = _select_rows(model.encode(src, src_len), sent)
        if record is not None:
            record.start(n, [len(p) for p in prefix] if prefix is not None else None)
        return cls(sent, enc, model.init_state(enc), 1, torch.full((n,), BOS_ID, dtype=torch.long, device=device),
                   torch.zeros(n, 1, device=device), torch.empty(n, 0, dtype=torch.long, device=device), None,
                   torch.full((n,), float("-inf"), device=device), record)

    def step_log_probs(self, model: TranslationModel, at_max_len: Tensor, min_lens: Tensor | None,
                       rules: DecodeOptions, prefix: Tensor | None, step: int) -> tuple[Tensor, Tensor | None]:
        """The model's next-token log probs for every row, with the bans (``rules``: the constraints) and the forced
        prefix applied; and its attention."""
        log_probs, self.state, alpha = model.decode_step(self.y_prev, self.state, self.enc)
        log_probs = _prepare_log_probs(log_probs, at_max_len.repeat_interleave(self.width))
        row_min = None if min_lens is None else min_lens[self.sent].repeat_interleave(self.width)
        apply_constraints(log_probs, self.tokens, row_min, rules)
        if prefix is not None and step < prefix.size(1):
            apply_prefix(log_probs, prefix[self.sent, step].repeat_interleave(self.width))
        return log_probs, alpha

    def expand(self, log_probs: Tensor, alpha: Tensor | None, K: int, step: int) -> tuple[Tensor, Tensor]:
        """Keep the K best expansions of each sentence's live hypotheses; returns their parent rows and tokens.

        A row adds one constant (its cum) to all its log probs, so the K best of a sentence are among the
        K best of each row: ranking rows first spares adding cum to, and ranking, all n*width*V scores.
        """
        n, width, device = self.sent.numel(), self.width, self.sent.device
        per_row = min(K, log_probs.size(1))
        # [n*width, per_row]; with per_row 1 greedy's selection, exactly (top-k and max may break ties differently)
        row_lp, row_tok = (t.view(n * width, per_row) for t in _best_per_row(log_probs, per_row))
        candidates = (self.cum.view(-1, 1) + row_lp).view(n, width * per_row)
        cum, pick = candidates.topk(min(K, width * per_row), dim=1)  # [n, K], best first
        if cum.size(1) < K:  # a vocabulary smaller than the beam, at the first step: the rest are dead rows
            cum = torch.nn.functional.pad(cum, (0, K - cum.size(1)), value=float("-inf"))
            pick = torch.nn.functional.pad(pick, (0, K - pick.size(1)))
        before, self.cum = self.cum, cum
        tok = row_tok.view(n, width * per_row).gather(1, pick).view(-1)
        parent = ((torch.arange(n, device=device) * width).unsqueeze(1) + pick // per_row).view(-1)  # rows
        self.tokens = torch.cat([self.tokens.index_select(0, parent), tok.unsqueeze(1)], dim=1)
        if alpha is not None:
            rows = alpha.index_select(0, parent).unsqueeze(1).float()
            self.attn = rows if self.attn is None else torch.cat([self.attn.index_select(0, parent), rows], dim=1)
        if self.record is not None:
            self.record.step(step, self.sent, before, log_probs, parent, tok, cum)
        return parent, tok

    def finish(self, tok: Tensor, K: int, finished: list[list[Hypothesis]], n_best: int, lengths: list[int],
               length_penalty: float, coverage_beta: float) -> None:
        """Candidates ending in EOS are finished hypotheses; their rows die (log prob -inf)."""
        n = self.sent.numel()
        is_eos = (tok == EOS_ID).view(n, K)
        new_finished = is_eos & torch.isfinite(self.cum)
        if bool(new_finished.any()):
            rows = new_finished.view(-1).nonzero().flatten()  # sentence-major, as nonzero() orders (a, k)
            _add_finished(finished, rows, self.sent[rows // K].tolist(), self.cum.view(-1)[rows].tolist(),
                          self.tokens, self.attn, lengths, length_penalty, coverage_beta)
            for a in new_finished.any(1).nonzero().flatten().tolist():
                scores = sorted((h.score for h in finished[int(self.sent[a])]), reverse=True)
                if len(scores) >= n_best:
                    self.worst_kept[a] = scores[n_best - 1]
        self.cum = self.cum.masked_fill(is_eos, float("-inf"))

    def settled(self, step: int, lp_longest: Tensor, length_penalty: float, stopping: str, src_len: Tensor,
                coverage_beta: float) -> Tensor:
        """[n] True for a sentence with nothing live, or no live hypothesis that can beat its worst kept one.

        The coverage penalty only rises towards 0 as rows are added, so "exact" bounds it by 0; "early"
        takes each live hypothesis's penalty as it stands (``src_len`` [B]: every sentence's source length).
        """
        live = torch.isfinite(self.cum)
        lp_now = length_penalty_factor(step + 2, length_penalty)  # live ones hold step+1 tokens
        if stopping == "exact":  # the largest divisor a live hypothesis can still reach
            divisor: Tensor | float = lp_longest[self.sent].clamp(min=lp_now).unsqueeze(1)
        else:  # "early": as if each live hypothesis ended now
            divisor = lp_now
        bound = self.cum / divisor
        if stopping == "early" and coverage_beta and self.attn is not None:
            coverage = self.attn.sum(1).view(bound.size(0), bound.size(1), -1)  # [n, K, S]
            beyond = torch.arange(coverage.size(2), device=coverage.device) >= src_len[self.sent].view(-1, 1, 1)
            bound = bound + coverage_penalty_term(coverage.masked_fill(beyond, 1.0), coverage_beta)
        bound = bound.masked_fill(~live, float("-inf")).max(dim=1).values
        return ~live.any(dim=1) | (self.worst_kept >= bound)

    def keep_unsettled(self, done: Tensor, parent: Tensor, tok: Tensor, K: int) -> tuple[Tensor, Tensor]:
        """Shrink the batch to the unsettled sentences; returns their parent rows and tokens."""
        if not bool(done.any()):
            return parent, tok
        keep = (~done).nonzero().flatten()
        keep_rows = (keep.unsqueeze(1) * K + torch.arange(K, device=keep.device)).view(-1)
        if self.width == K:
            self.enc = _select_rows(self.enc, keep_rows)
        self.sent, self.cum, self.worst_kept = self.sent[keep], self.cum[keep], self.worst_kept[keep]
        self.tokens = self.tokens[keep_rows]
        self.attn = None if self.attn is None else self.attn[keep_rows]
        return parent[keep_rows], tok[keep_rows]

    def reorder(self, parent: Tensor, tok: Tensor, K: int) -> None:
        """The decoder states of the kept expansions, and their tokens as the next inputs."""
        if self.width < K:  # after the first step each hypothesis needs its own copy of the source's rows
            self.enc = _select_rows(self.enc, parent)
            self.width = K
        self.state = _select_rows(self.state, parent)
        self.y_prev = tok


@torch.inference_mode()
def beam_search(model: TranslationModel, src: Tensor, src_len: Tensor, beam_size: int = 5, n_best: int = 1,
                length_penalty: float = 1.0, max_len_a: float = 1.5, max_len_b: float = 10,
                max_len_cap: int | None = None, stopping: str = "exact", coverage_penalty: float = 0.0,
                prefix: Sequence[Sequence[int]] | None = None, record: BeamTree | None = None,
                **constraints: Any) -> list[list[Hypothesis]]:
    """Batched beam search: per sentence its ``n_best`` best hypotheses, best score first.

    Each step expands the live hypotheses of every sentence and keeps the ``beam_size`` best
    candidates by log prob; candidates that end in EOS are finished and leave the beam (their slot
    is refilled at the next step from the expansions of the live ones). A sentence is settled, and
    leaves the batch, when it has no live hypothesis, or when it has ``n_best`` finished ones and no
    live hypothesis can still reach a better score than the worst of the ``n_best`` best finished
    ones. ``stopping`` says how a live hypothesis is judged:

    * ``"exact"``: by a bound. Log probs only fall, so a live hypothesis with log prob ``lp`` (<= 0) ends
      with a score of at most ``lp / max(lp(n) for the final lengths n it can still reach)`` (the largest
      penalty divisor is that of the longest reachable output when alpha > 0, of the shortest when
      alpha < 0; with alpha 0 the bound is ``lp`` itself). The search returns what an exhaustive one would
      among the hypotheses the beam kept.
    * ``"early"``: by its score if it ended now, ``lp / lp(its length + 1)``, as Hugging Face's
      ``early_stopping=False`` does (OpenNMT-py stops even sooner: when the best candidate ends). Fewer
      steps; with alpha > 0 it can miss a longer hypothesis that would have won.

    The first step expands each sentence's one empty hypothesis; only then does a sentence hold
    ``beam_size`` rows. With ``beam_size`` 1 this is exactly :func:`greedy_search` (tokens and scores).
    ``prefix`` and the ``constraints`` (``min_len=...``): :mod:`attnmt.decode.constraints` (a banned expansion is
    never a candidate). ``coverage_penalty`` (GNMT's beta, 0: off) adds ``cp`` (the module docstring) to each finished
    hypothesis's score: candidates are still ranked by log prob, the penalty decides among finished ones.
    ``record``: an :class:`attnmt.decode.beam_tree.BeamTree` that records the search tree.
    """
    _check_beam_options(beam_size, n_best, stopping, coverage_penalty)
    rules = constraint_options(constraints)
    lengths = _check_inputs(src, src_len)
    batch_size = len(lengths)
    if batch_size == 0:
        return []
    device, K = src.device, beam_size
    forced = prefix_table(prefix, batch_size, device)
    max_len_list, max_lens, min_lens = length_limits(max_output_lengths(lengths, max_len_a, max_len_b, max_len_cap),
                                                     rules, forced, device)
    # the length-penalty divisor of the longest output each sentence allows (EOS counted)
    lp_longest = torch.tensor([length_penalty_factor(m + 1, length_penalty) for m in max_len_list], device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]

    with _eval_mode(model):
        beam = _Beam.start(model, src, src_len, record, prefix)
        for step in range(int(max_lens.max()) + 1):
            log_probs, alpha = beam.step_log_probs(model, max_lens[beam.sent] == step, min_lens, rules, forced, step)
            parent, tok = beam.expand(log_probs, alpha, K, step)
            beam.finish(tok, K, finished, n_best, lengths, length_penalty, coverage_penalty)
            done = beam.settled(step, lp_longest, length_penalty, stopping, src_len, coverage_penalty)
            if bool(done.all()):
                break
            parent, tok = beam.keep_unsettled(done, parent, tok, K)
            beam.reorder(parent, tok, K)
    if record is not None:
        record.close(finished)
    # stable sort: among equal scores the one finished first comes first
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in finished]
