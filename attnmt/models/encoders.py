"""Recurrent encoders and the recurrent-state plumbing shared with the decoders."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.data.vocab import PAD_ID

RNN_CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


class StackedRNN(nn.Module):
    """A multi-layer LSTM/GRU whose state is a dict of batch-first tensors.

    Batch-first state (`h`, and `c` for LSTMs, each [B, layers, H]) lets beam search reorder any
    model's state without knowing what is inside it.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.is_lstm = cell == "lstm"
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.rnn = RNN_CELLS[cell](
            input_size, hidden_size, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
        )

    def _to_torch(self, state: dict[str, Tensor]):
        h = state["h"].transpose(0, 1).contiguous()
        return (h, state["c"].transpose(0, 1).contiguous()) if self.is_lstm else h

    def _from_torch(self, hidden) -> dict[str, Tensor]:
        if self.is_lstm:
            return {"h": hidden[0].transpose(0, 1), "c": hidden[1].transpose(0, 1)}
        return {"h": hidden.transpose(0, 1)}

    def forward(self, x: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Run over a whole sequence x [B,T,D]; returns the top layer's outputs [B,T,H]."""
        out, hidden = self.rnn(x, self._to_torch(state))
        return out, self._from_torch(hidden)

    def step(self, x: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """One time step: x [B,D] -> top output [B,H]."""
        out, state = self.forward(x.unsqueeze(1), state)
        return out.squeeze(1), state

    def zero_state(self, batch_size: int, device: torch.device) -> dict[str, Tensor]:
        zeros = torch.zeros(batch_size, self.num_layers, self.hidden_size, device=device)
        return {"h": zeros, "c": zeros.clone()} if self.is_lstm else {"h": zeros}


class RNNEncoder(nn.Module):
    """Embeds the source and reads it with a (bi)directional multi-layer LSTM/GRU.

    Returns the annotations h_j [B,S,D] (D = H, or 2H when bidirectional: h_j = [->h_j; <-h_j],
    Bahdanau et al. 2014, sec. 3.2) and the final state of every layer, batch-first.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        hidden_size: int,
        num_layers: int,
        cell: str = "lstm",
        bidirectional: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        self.is_lstm = cell == "lstm"
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self.rnn = RNN_CELLS[cell](
            emb_size,
            hidden_size,
            num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_size = hidden_size * (2 if bidirectional else 1)

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        x = self.dropout(self.embed(src))
        # Packing makes the final state that of each sentence's last real token, not of padding.
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, hidden = self.rnn(packed)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        states = {"h": hidden[0], "c": hidden[1]} if self.is_lstm else {"h": hidden}
        return h, {k: self._per_layer(v) for k, v in states.items()}

    def _per_layer(self, v: Tensor) -> Tensor:
        """[layers*dirs, B, H] -> [B, layers, dirs*H] (directions concatenated per layer)."""
        dirs = 2 if self.bidirectional else 1
        v = v.view(self.num_layers, dirs, v.size(1), v.size(2))
        return v.permute(2, 0, 1, 3).reshape(v.size(2), self.num_layers, dirs * v.size(3))
