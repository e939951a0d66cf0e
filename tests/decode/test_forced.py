"""The teacher-forced pass that validation, study, align and serve share."""

from __future__ import annotations

import torch

from attnmt.decode.forced import eval_mode, forced_batches
from attnmt.models import build_model, model_config


def test_forced_batches_cover_every_pair_once_in_eval_mode_and_restore_the_mode():
    torch.manual_seed(0)
    model = build_model(model_config("rnnsearch", emb_size=8, hidden_size=12, dropout=0.5), 20, 30)
    model.train()
    src = [[4 + (k % 7)] * (1 + k % 5) for k in range(23)]
    tgt = [[5 + (k % 9)] * (2 + k % 4) for k in range(23)]
    seen = []
    for forced in forced_batches(model, src, tgt, torch.device("cpu"), batch_tokens=30, with_eos=True):
        assert not model.training  # no dropout while forced
        B, T, V = forced.logits.shape
        assert forced.attention.shape == (B, T, forced.batch.src.size(1)) and V == 30
        for row, k in enumerate(forced.index):
            assert forced.batch.tgt_len[row] == len(tgt[k]) + 2  # <s> y </s> in, y </s> </s> out
        # the same pairs again, alone and in eval mode: the batch changes nothing
        with eval_mode(model), torch.no_grad():
            k = forced.index[0]
            alone, _ = model(torch.tensor([src[k]]), torch.tensor([len(src[k])]),
                             forced.batch.tgt_in[:1, :len(tgt[k]) + 2])
        torch.testing.assert_close(alone[0], forced.logits[0, :len(tgt[k]) + 2], atol=1e-5, rtol=1e-5)
        seen += forced.index
    assert sorted(seen) == list(range(23)) and model.training
