"""Prefix-forced decoding (greedy and beam) and the beam search's own tree (attnmt.decode.beam_tree), on the exact
table model of tests/decode/test_search.py: every answer is checked against an enumeration of all outputs."""

from __future__ import annotations

import pytest
import torch

from attnmt.data.vocab import BOS_ID, EOS_ID
from attnmt.decode.beam_tree import BeamTree
from attnmt.decode.search import beam_search, greedy_search
from tests.decode.test_search import TableModel, TinyAttnModel, brute_force, make_batch, random_table

A, B = 4, 5
SRC = torch.tensor([[0, 0, 0], [1, 1, 0], [2, 2, 2]])
SRC_LEN = torch.tensor([1, 2, 3])  # with max_len_a 1, max_len_b 0: at most 1, 2, 3 tokens after a prefix
PREFIXES = [[B], [A, A], []]


def greedy_path(table: torch.Tensor, key: int, prefix: list[int], max_len: int) -> list[int]:
    """The prefix, then at each step the most likely token (EOS ends), as greedy search must find."""
    last, tokens, prev = table.size(1) - 1, list(prefix), BOS_ID
    for tok in prefix:
        prev = tok
    while len(tokens) < len(prefix) + max_len:
        row = table[key, min(len(tokens), last), prev].clone()
        row[[0, BOS_ID]] = float("-inf")  # PAD and BOS are never generated
        tok = int(row.argmax())
        if tok == EOS_ID:
            break
        tokens.append(tok)
        prev = tok
    return tokens


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_with_a_prefix_finds_the_best_output_that_starts_with_it(seed):
    table = random_table(keys=3, steps=6, seed=seed)
    found = beam_search(TableModel(table), SRC, SRC_LEN, beam_size=60, length_penalty=0.6, max_len_a=1.0,
                        max_len_b=0, prefix=PREFIXES)
    for key, (max_len, prefix) in enumerate(zip([1, 2, 3], PREFIXES)):
        every = brute_force(table, key, max_len + len(prefix), 0.6)
        best_score, best_tokens = next((s, t) for s, t in every if t[:len(prefix)] == prefix)
        assert found[key][0].tokens == best_tokens
        assert found[key][0].score == pytest.approx(best_score, abs=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_search_with_a_prefix_keeps_it_and_continues_greedily(seed):
    table = random_table(keys=3, steps=6, seed=seed)
    found = greedy_search(TableModel(table), SRC, SRC_LEN, max_len_a=1.0, max_len_b=0, prefix=PREFIXES)
    for key, (max_len, prefix) in enumerate(zip([1, 2, 3], PREFIXES)):
        assert found[key][0].tokens == greedy_path(table, key, prefix, max_len)
        assert found[key][0].tokens[:len(prefix)] == prefix


def test_a_prefix_the_model_finds_anyway_changes_nothing():
    model = TinyAttnModel(seed=3)
    src, src_len = make_batch([5, 3, 6])
    free = beam_search(model, src, src_len, beam_size=4)
    prefixed = beam_search(model, src, src_len, beam_size=4, prefix=[h[0].tokens[:2] for h in free])
    assert [h[0].tokens for h in prefixed] == [h[0].tokens for h in free]
    greedy = greedy_search(model, src, src_len)
    assert [h[0].tokens for h in greedy_search(model, src, src_len, prefix=[h[0].tokens for h in greedy])] == \
        [h[0].tokens for h in greedy]


def test_forced_tokens_keep_the_models_log_probs():
    """The score of a prefixed output is the model's own: a forced step adds the forced token's log prob."""
    table = random_table(keys=3, steps=6, seed=1)
    found = greedy_search(TableModel(table), SRC, SRC_LEN, max_len_a=1.0, max_len_b=0, length_penalty=0.0,
                          prefix=PREFIXES)
    for key in range(3):
        tokens, prev, log_prob = found[key][0].tokens, BOS_ID, 0.0
        for t, tok in enumerate(tokens + [EOS_ID]):
            log_prob += float(table[key, min(t, 5), prev, tok])
            prev = tok
        assert found[key][0].log_prob == pytest.approx(log_prob, abs=1e-5)


# ------------------------------------------------------------------------------------------- tree


def kept_per_step(tree) -> dict[int, int]:
    counts: dict[int, int] = {}
    for node in tree:
        if node.status in ("kept", "finished"):
            counts[node.step] = counts.get(node.step, 0) + 1
    return counts


@pytest.mark.parametrize("beam", [1, 3, 5])
def test_the_tree_holds_the_searchs_own_steps(beam):
    model = TinyAttnModel(vocab=13, seed=2)
    src, src_len = make_batch([6, 4, 7])
    tree = BeamTree()
    found = beam_search(model, src, src_len, beam_size=beam, n_best=beam, record=tree)
    plain = beam_search(model, src, src_len, beam_size=beam, n_best=beam)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in found] == \
        [[(h.tokens, h.score) for h in hyps] for hyps in plain]  # recording changes nothing
    for i, hyps in enumerate(found):
        nodes = tree.trees[i]
        assert nodes[0].status == "root" and all(n.parent < n.id for n in nodes[1:])
        # every step keeps exactly the beam: live hypotheses plus the ones that finished at that step
        assert set(kept_per_step(nodes).values()) == {beam}
        # every hypothesis the search returned is a finished path of the tree, with its tokens and score
        for hyp in hyps:
            path = tree.path(i, hyp)
            assert [nodes[k].token for k in path[1:]] == hyp.tokens + [EOS_ID]
            assert nodes[path[-1]].status == "finished"
            assert nodes[path[-1]].score == pytest.approx(hyp.score)
            assert nodes[path[-1]].log_prob == pytest.approx(hyp.log_prob, abs=1e-5)
            assert [nodes[k].step for k in path] == list(range(-1, len(hyp.tokens) + 1))
        # the runners-up of a step are worse than every candidate it kept
        for step in {n.step for n in nodes[1:]}:
            kept = [n.log_prob for n in nodes if n.step == step and n.status != "pruned"]
            pruned = [n.log_prob for n in nodes if n.step == step and n.status == "pruned"]
            assert len(pruned) <= beam and all(p <= min(kept) + 1e-6 for p in pruned)


def test_the_tree_of_a_prefixed_search_has_one_forced_node_per_forced_step():
    model = TinyAttnModel(vocab=13, seed=2)
    src, src_len = make_batch([6])
    tree = BeamTree()
    hyp = beam_search(model, src, src_len, beam_size=4, prefix=[[7, 8, 9]], record=tree)[0][0]
    assert hyp.tokens[:3] == [7, 8, 9]
    nodes = tree.trees[0]
    for step in range(3):
        at_step = [n for n in nodes if n.step == step]
        assert [(n.token, n.status, n.forced) for n in at_step] == [([7, 8, 9][step], "kept", True)]
    assert kept_per_step(nodes)[3] == 4 and not any(n.forced for n in nodes if n.step >= 3)
    assert [nodes[k].token for k in tree.path(0, hyp)][1:4] == [7, 8, 9]
