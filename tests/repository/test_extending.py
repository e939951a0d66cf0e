"""docs/extending.md's checklists, followed step by step, so that the document cannot go stale."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.decode.translator import load
from attnmt.models import SCORES, register_score
from attnmt.models.attention import Attention
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def test_a_new_attention_score_registers_trains_and_translates(tiny_corpus, tmp_path):
    # Step 1: subclass Attention, define project_keys and score, register it under a name.
    @register_score("scaled_cosine")
    class ScaledCosineAttention(Attention):
        """e_ij = g * cos(W s, h_j), a learnt temperature g (Luong's general score, normalised)."""

        def __init__(self, query_size: int, key_size: int, attn_size: int) -> None:
            super().__init__(query_size, key_size, attn_size)
            self.W = nn.Linear(query_size, key_size, bias=False)
            self.g = nn.Parameter(torch.tensor(5.0))

        def project_keys(self, keys: Tensor) -> Tensor:
            return nn.functional.normalize(keys, dim=-1)

        def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
            q = nn.functional.normalize(self.W(query), dim=-1)
            return self.g * torch.bmm(projected_keys, q.unsqueeze(-1)).squeeze(-1)

    try:
        # Step 2: name it in the config (model.score); train and translate as with any other score.
        config = tiny_config(tiny_corpus, max_steps=30, valid_every=15)
        config.model.score = "scaled_cosine"
        result = train(config, tmp_path / "model", quiet=True)
        translator = load(tmp_path / "model")
        assert isinstance(translator.model.decoder.attention, ScaledCosineAttention)
        assert translator.model.decoder.attention.g.item() != 5.0  # it was trained
        out = translator.translate(["a b c"])[0]
        assert out.attention is not None and torch.allclose(torch.tensor(out.attention.sum(-1)),
                                                            torch.ones(len(out.attention)), atol=1e-5)
        assert result.state.step == 30
    finally:
        SCORES.pop("scaled_cosine", None)


def test_a_new_scheduler_registers_and_trains(tiny_corpus, tmp_path):
    from attnmt.train.schedulers import SCHEDULERS

    # Step 1: a function (optimizer, train config, budget_used) -> torch scheduler, registered under a name.
    @SCHEDULERS.register("halving")
    def halving(optimizer, t, budget_used):
        """Halve the learning rate every 10 updates."""
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)

    try:
        # Step 2: name it in the config (train.scheduler).
        config = tiny_config(tiny_corpus, max_steps=30, valid_every=15, scheduler="halving", lr=0.004)
        result = train(config, tmp_path / "model", quiet=True)
        assert [round(h["lr"], 6) for h in result.history] == [0.002, 0.0005]  # after 15 and 30 updates
    finally:
        SCHEDULERS.pop("halving", None)
