"""Recurrent encoders and the recurrent-state plumbing shared with the decoders."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.config.special import PAD_ID
from attnmt.models.dropout import Dropout

RNN_CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


class StackedRNN(nn.Module):
    """A multi-layer LSTM/GRU whose state is a dict of batch-first tensors, one per layer.

    The state holds `h0`, `h1`, ... (and `c0`, ... for LSTMs), each [B, H]. Batch-first lets beam
    search reorder any model's state without knowing what is inside it; one tensor per layer spares
    the step-by-step decoder a stack and a slice (and their gradients) at every target position.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.is_lstm = cell == "lstm"
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.rnn = RNN_CELLS[cell](
            input_size, hidden_size, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
        )
        self.inter_dropout = Dropout(dropout if num_layers > 1 else 0.0)  # as nn.LSTM's between layers
        # Set by use_step_linears (attnmt.models.int8): the step's matrices as layers [ih_0, hh_0, ih_1, ...].
        self.int8_step: nn.ModuleList | None = None

    def use_step_linears(self) -> None:
        """Run the step through copies of its matrices as nn.Linear layers, which int8 quantization converts."""
        self.int8_step = self.step_linears()

    def step_linears(self) -> nn.ModuleList:
        """Copies of the step's matrices as nn.Linear layers [ih_0, hh_0, ih_1, hh_1, ...] (for quantizing)."""
        layers = nn.ModuleList()
        for layer in range(self.num_layers):
            for kind in ("ih", "hh"):
                weight = getattr(self.rnn, f"weight_{kind}_l{layer}")
                bias = getattr(self.rnn, f"bias_{kind}_l{layer}")
                linear = nn.Linear(weight.size(1), weight.size(0)).to(weight.device)
                with torch.no_grad():
                    linear.weight.copy_(weight)
                    linear.bias.copy_(bias)
                layers.append(linear)
        return layers

    def state_from_layers(self, h: Tensor, c: Tensor | None = None) -> dict[str, Tensor]:
        """A state from per-layer tensors h (and c) of shape [B, layers, H]."""
        state = {f"h{layer}": h[:, layer] for layer in range(self.num_layers)}
        if self.is_lstm:
            c = torch.zeros_like(h) if c is None else c
            state.update({f"c{layer}": c[:, layer] for layer in range(self.num_layers)})
        return state

    def top(self, state: dict[str, Tensor]) -> Tensor:
        """The top layer's hidden state [B, H]."""
        return state[f"h{self.num_layers - 1}"]

    def _to_torch(self, state: dict[str, Tensor]):
        h = torch.stack([state[f"h{layer}"] for layer in range(self.num_layers)])
        if not self.is_lstm:
            return h
        return h, torch.stack([state[f"c{layer}"] for layer in range(self.num_layers)])

    def forward(self, x: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Run over a whole sequence x [B,T,D]; returns the top layer's outputs [B,T,H]."""
        out, hidden = self.rnn(x, self._to_torch(state))
        if self.is_lstm:
            return out, self.state_from_layers(hidden[0].transpose(0, 1), hidden[1].transpose(0, 1))
        return out, self.state_from_layers(hidden.transpose(0, 1))

    def input_projection(self, known: Tensor) -> tuple[Tensor, Tensor]:
        """Layer 0's input gates from the input features known in advance, for all steps at once.

        known [B,T,k] holds the first k features of every step's input (the decoder's embeddings of
        y_{i-1} under teacher forcing). Returns their gates [B,T,G] (with the input bias) and the
        weight columns of the remaining features, for :meth:`step`: one large matrix product in place
        of T small ones.
        """
        w_ih = self.rnn.weight_ih_l0
        k = known.size(-1)
        w_rest = w_ih[:, k:]
        if torch.is_autocast_enabled(known.device.type):
            # Autocast caches its casts of parameters only, not of a slice: cast the slice once here rather
            # than at every step (a copy forward and back per step, a fifth of an rnn-256 bf16 step's time).
            w_rest = w_rest.to(torch.get_autocast_dtype(known.device.type))
        return F.linear(known, w_ih[:, :k], self.rnn.bias_ih_l0), w_rest

    def step(self, x: Tensor | None, state: dict[str, Tensor], known_gates: Tensor | None = None,
             w_rest: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """One time step: x [B,D] -> top output [B,H].

        With ``known_gates`` and ``w_rest`` from :meth:`input_projection`, x holds only the input
        features that were not known in advance (None when there are none). The cell equations are
        written out with the fused RNN's own weights (or, once quantized, with ``int8_step``): for a
        single step on a CPU this is several times faster than calling the fused RNN with a length-1
        sequence.
        """
        new = {}
        int8 = self.int8_step
        for layer in range(self.num_layers):
            h = state[f"h{layer}"]
            if int8 is not None:
                gates_x, gates_h = int8[2 * layer](x), int8[2 * layer + 1](h)
            else:
                w_ih, w_hh, b_ih, b_hh = (getattr(self.rnn, f"{name}_l{layer}")
                                          for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
                if layer == 0 and known_gates is not None:
                    gates_x = known_gates if x is None else known_gates + F.linear(x, w_rest)
                else:
                    gates_x = F.linear(x, w_ih, b_ih)
                gates_h = F.linear(h, w_hh, b_hh)
            if self.is_lstm:
                gates = gates_x + gates_h
                i, f, g, o = gates.chunk(4, dim=-1)
                c = torch.sigmoid(f) * state[f"c{layer}"] + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                new[f"c{layer}"] = c
            else:
                r_x, z_x, n_x = gates_x.chunk(3, dim=-1)
                r_h, z_h, n_h = gates_h.chunk(3, dim=-1)
                r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
                h = (1 - z) * torch.tanh(n_x + r * n_h) + z * h
            new[f"h{layer}"] = h
            x = h if layer == self.num_layers - 1 else self.inter_dropout(h)
        return x, new


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
        self.dropout = Dropout(dropout)
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
        if bool((src_len == src.size(1)).all()):
            # No padding (length-sorted batches are mostly like this): the same result without
            # packing, whose CPU backward zero-fills a full-size gradient at every time step.
            h, hidden = self.rnn(x)
        else:
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
