"""The training objective: the summed cross-entropy of a batch, plus guided alignment's loss.

Losses are sums over target tokens; the training loop divides by the tokens of the whole
(accumulated, distributed) batch, so that the gradient is that of the mean over one global batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.config.schema import Config
from attnmt.data.batching import Batch
from attnmt.data.dataset import ParallelData
from attnmt.data.loading import batch_of, validation_batches
from attnmt.data.vocab import EOS_ID, PAD_ID
from attnmt.decode.forced import eval_mode
from attnmt.train.cross_entropy import cross_entropy_sum, linear_cross_entropy_sum
from attnmt.train.guidance import alignment_loss, guidance_matrix, guided_row_offset


def step_loss(trained: nn.Module, batch: Batch, guidance, config: Config) -> tuple[Tensor, Tensor | None]:
    """The summed translation loss of a batch and, under guided alignment, the summed alignment loss.

    ``guidance``: None, or a callable that gives the piece links of the batch's pairs by their indices
    (attnmt.train.guidance.Guidance)."""
    t = config.train
    guided = t.guided_alignment
    if guidance is None or guided.weight == 0:
        features, _ = trained(batch.src, batch.src_len, batch.tgt_in, features=True)
        return output_loss(trained, features, batch.tgt_out, t.label_smoothing), None
    model = getattr(trained, "module", trained)  # under DDP, the wrapped model's capabilities
    chosen = {"layer": -1 if guided.layer is None else guided.layer, "head": guided.head}
    if guided.full_context:
        chosen["full_context"] = True
    offset = guided_row_offset(guided.row, model.query_lag)
    # A row past the pair's n + 1 steps (the last piece's, in Bahdanau's order under row: shift) exists
    # once the decoder reads </s> as well: <s> y </s> as the input, one step longer. The decoder is
    # causal, so the first n + 1 rows, and with them the translation loss, are those of <s> y.
    extra = max(offset - 1, 0)
    tgt_in = with_eos_inputs(batch.tgt_in, batch.tgt_len, extra) if extra else batch.tgt_in
    features, alpha = trained(batch.src, batch.src_len, tgt_in, features=True, **(chosen if model.has_heads else {}))
    G = guidance_matrix(guidance(batch.index.tolist()), alpha.size(2), alpha.size(1), alpha.device,
                        offset=offset, extra_rows=extra)
    translation = output_loss(trained, features[:, :batch.tgt_out.size(1)], batch.tgt_out, t.label_smoothing)
    return translation, alignment_loss(alpha, G)


def with_eos_inputs(tgt_in: Tensor, tgt_len: Tensor, extra: int) -> Tensor:
    """``tgt_in`` (<s> y, PAD after) followed by ``extra`` more inputs per pair: ``</s>``, then PAD."""
    longer = torch.cat([tgt_in, tgt_in.new_full((tgt_in.size(0), extra), PAD_ID)], dim=1)
    longer[torch.arange(tgt_in.size(0), device=tgt_in.device), tgt_len.to(tgt_in.device)] = EOS_ID
    return longer


def nll_loss(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over the real (unpadded) target tokens, in fp32 (attnmt.train.cross_entropy)."""
    return cross_entropy_sum(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), PAD_ID, label_smoothing)


def output_loss(trained: nn.Module, features: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """``nll_loss`` of the logits the model's output layer makes of ``features`` [B,T,d] (``forward(...,
    features=True)``), the layer and the loss fused: no [tokens, vocabulary] tensor is made
    (attnmt.train.cross_entropy.linear_cross_entropy_sum)."""
    output = getattr(trained, "module", trained).output
    return linear_cross_entropy_sum(features.reshape(-1, features.size(-1)), output.weight, output.bias,
                                    tgt_out.reshape(-1), PAD_ID, label_smoothing)


def validation_loss(model: nn.Module, data: ParallelData, config: Config, device: torch.device) -> float:
    """Mean per-token cross-entropy (no label smoothing) on a whole split, in the training's batches."""
    total, tokens = 0.0, 0
    with eval_mode(model), torch.no_grad():
        for indices in validation_batches(data, config):
            batch = batch_of(data, indices, device)
            features, _ = model(batch.src, batch.src_len, batch.tgt_in, features=True)
            total += output_loss(model, features, batch.tgt_out).item()
            tokens += batch.n_tgt_tokens
    return total / max(tokens, 1)
