"""Recurrent decoders: the fixed-vector decoder of seq2seq and the attention decoders.

Every decoder has the same two entry points:
  `step(y_prev, state, enc)` -> (t_i [B,F], state, alpha [B,S] or None), one target position;
  `forward(tgt_in, state, enc)` -> (t [B,T,F], alpha [B,T,S] or None), teacher forcing.
`t_i` is the readout that the model's output layer turns into word scores. The recurrence runs
step by step, but the readout is applied to all steps at once after the loop (one large matrix
product instead of T small ones).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.config.special import PAD_ID
from attnmt.models.dropout import Dropout
from attnmt.models.encoders import StackedRNN
from attnmt.models.registry import score_class


class FixedVectorDecoder(nn.Module):
    """Sutskever et al. (2014): the decoder starts from the encoder's final state, the fixed
    vector c, and sees nothing else of the source.

    With `feed_context`, c is also an input of every step, s_i = f(s_{i-1}, y_{i-1}, c), as in
    Cho et al. (2014)'s RNN Encoder-Decoder (eq. 5 there; Bahdanau et al.'s RNNencdec): the source
    is still one fixed vector, but the decoder need not carry it through its state alone.
    """

    def __init__(self, vocab_size: int, emb_size: int, hidden_size: int, num_layers: int, cell: str, dropout: float,
                 feed_context: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_ID)
        self.feed_context = feed_context
        self.rnn = StackedRNN(cell, emb_size + (hidden_size if feed_context else 0), hidden_size, num_layers, dropout)
        self.dropout = Dropout(dropout)
        self.output_size = hidden_size

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        return self.rnn.state_from_layers(enc["final_h"], enc.get("final_c"))

    def _inputs(self, y: Tensor, enc: dict[str, Tensor]) -> Tensor:
        """E y (and c, the top encoder layer's final state, when it is fed at every step)."""
        x = self.dropout(self.embed(y))
        if not self.feed_context:
            return x
        c = enc["final_h"][:, -1].to(x.dtype)
        c = c.unsqueeze(1).expand(-1, x.size(1), -1) if x.dim() == 3 else c
        return torch.cat([x, c], dim=-1)

    def forward(self, tgt_in: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        # Nothing changes with i on the source side, so teacher forcing runs the RNN in one call.
        s, _ = self.rnn(self._inputs(tgt_in, enc), state)
        return self.dropout(s), None

    def step(self, y_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        s_i, state = self.rnn.step(self._inputs(y_prev, enc), state)
        return self.dropout(s_i), state, None


class _AttentionDecoderBase(nn.Module):
    """What the attention decoders share: embeddings, initial state, the teacher-forcing loop."""

    def __init__(self, vocab_size: int, emb_size: int, enc_size: int, hidden_size: int, num_layers: int,
                 dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        # Bahdanau et al. (2014), appendix A.2.2: s_0 = tanh(W_s <-h_1), the backward annotation
        # of the first word; the backward RNN's final state is exactly <-h_1.
        self.init_size = enc_size // 2
        self.bridge = nn.Linear(self.init_size, num_layers * hidden_size)

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        backward_h1 = enc["final_h"][:, -1, -self.init_size :]
        s0 = torch.tanh(self.bridge(backward_h1)).view(-1, self.num_layers, self.hidden_size)
        state = self.rnn.state_from_layers(s0)
        if self.attention.uses_coverage:  # C_0 = 0: no source word has been attended to yet
            state["coverage"] = enc["h"].new_zeros(enc["h"].shape[:2], dtype=torch.float32)
        return state

    def _attend(self, query: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """c_i and alpha_i for the query; a coverage score reads C_{i-1} from ``state``."""
        return self.attention(query, enc["h"], enc["h"], enc["mask"], enc["keys"], coverage=state.get("coverage"))

    @staticmethod
    def _covered(state: dict[str, Tensor], coverage: Tensor | None, alpha: Tensor) -> dict[str, Tensor]:
        """The new state with C_i = C_{i-1} + alpha_i when the score uses coverage."""
        if coverage is not None:
            state["coverage"] = coverage + alpha.float()
        return state

    def forward(self, tgt_in: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        emb = self.dropout(self.embed(tgt_in))
        # Under teacher forcing every E y_{i-1} is known in advance: its share of the RNN's input
        # gates is one matrix product for all steps. unbind (not emb[:, i]) keeps the backward
        # pass from building a full-size gradient for every step's slice.
        known_gates, w_rest = self.rnn.input_projection(emb)
        steps, alphas = [], []
        for emb_prev, gates in zip(emb.unbind(1), known_gates.unbind(1)):
            features, state, alpha = self._recur(emb_prev, state, enc, (gates, w_rest))
            steps.append(features)
            alphas.append(alpha)
        t = self._readout(*(torch.stack(parts, dim=1) for parts in zip(*steps)))
        return t, torch.stack(alphas, dim=1)

    def step(self, y_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor]):
        features, state, alpha = self._recur(self.dropout(self.embed(y_prev)), state, enc)
        return self._readout(*features), state, alpha

    def _rnn_step(self, emb_prev: Tensor, rest: Tensor | None, state: dict[str, Tensor],
                  known: tuple[Tensor, Tensor] | None):
        """The RNN update on input [E y_{i-1}; rest], with E y_{i-1}'s gates precomputed when known.

        Returns a new state of the RNN's own entries only: the fed vector and the coverage are added back by
        the caller."""
        if known is not None:
            return self.rnn.step(rest, state, *known)
        return self.rnn.step(emb_prev if rest is None else torch.cat([emb_prev, rest], dim=-1), state)


class BahdanauDecoder(_AttentionDecoderBase):
    """RNNsearch's decoder (Bahdanau et al. 2014, eq. 4-6 and appendix A.2.2).

    At step i the previous state s_{i-1} queries the annotations h_j; the context c_i enters both
    the state update s_i = f(s_{i-1}, y_{i-1}, c_i) and the readout t_i = g(s_i, y_{i-1}, c_i).
    """

    # The query of step i, s_{i-1}, has read the inputs up to y_{i-2}: one step behind its own input
    # y_{i-1} (attnmt.align.extract's shift method reads y_i's alignment at step i + 2).
    query_lag = 1

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        enc_size: int,
        hidden_size: int,
        num_layers: int,
        cell: str,
        dropout: float,
        attn_size: int,
        readout_size: int,
        score: str = "additive",
    ):
        super().__init__(vocab_size, emb_size, enc_size, hidden_size, num_layers, dropout)
        self.attention = score_class(score)(hidden_size, enc_size, attn_size)
        self.rnn = StackedRNN(cell, emb_size + enc_size, hidden_size, num_layers, dropout)
        self.readout = nn.Linear(hidden_size + emb_size + enc_size, readout_size)
        self.output_size = readout_size

    def project_keys(self, h: Tensor) -> Tensor:
        return self.attention.project_keys(h)

    def _recur(self, emb_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor], known=None):
        s_prev = self.rnn.top(state)
        c_i, alpha = self._attend(s_prev, state, enc)
        s_i, new_state = self._rnn_step(emb_prev, c_i, state, known)
        return (s_i, emb_prev, c_i), self._covered(new_state, state.get("coverage"), alpha), alpha

    def _readout(self, s: Tensor, emb_prev: Tensor, c: Tensor) -> Tensor:
        """t_i = tanh(W_o [s_i; E y_{i-1}; c_i]) (a tanh readout in place of the paper's maxout)."""
        return self.dropout(torch.tanh(self.readout(torch.cat([s, emb_prev, c], dim=-1))))


class LuongDecoder(_AttentionDecoderBase):
    """Luong et al. (2015): the current state s_i queries the source; the attentional vector
    h~_i = tanh(W_c [c_i; s_i]) (eq. 5) feeds the output layer and, with input feeding, the next step."""

    # The query of step i, s_i, has read its own input y_{i-1} (shift reads y_i's alignment at step i + 1).
    query_lag = 0

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        enc_size: int,
        hidden_size: int,
        num_layers: int,
        cell: str,
        dropout: float,
        score: str,
        attn_size: int,
        input_feeding: bool,
    ):
        super().__init__(vocab_size, emb_size, enc_size, hidden_size, num_layers, dropout)
        self.input_feeding = input_feeding
        self.attention = score_class(score)(hidden_size, enc_size, attn_size)
        self.rnn = StackedRNN(cell, emb_size + (hidden_size if input_feeding else 0), hidden_size, num_layers, dropout)
        self.combine = nn.Linear(enc_size + hidden_size, hidden_size, bias=False)
        self.output_size = hidden_size

    def project_keys(self, h: Tensor) -> Tensor:
        return self.attention.project_keys(h)

    def init_state(self, enc: dict[str, Tensor]) -> dict[str, Tensor]:
        state = super().init_state(enc)
        if self.input_feeding:
            state["feed"] = torch.zeros_like(self.rnn.top(state))
        return state

    def _recur(self, emb_prev: Tensor, state: dict[str, Tensor], enc: dict[str, Tensor], known=None):
        feed = state.get("feed")
        s_i, new_state = self._rnn_step(emb_prev, feed, state, known)
        c_i, alpha = self._attend(s_i, state, enc)
        h_tilde = self.dropout(torch.tanh(self.combine(torch.cat([c_i, s_i], dim=-1))))
        if feed is not None:
            new_state["feed"] = h_tilde
        return (h_tilde,), self._covered(new_state, state.get("coverage"), alpha), alpha

    def _readout(self, h_tilde: Tensor) -> Tensor:
        return h_tilde
