"""Decoding in forked worker processes (attnmt.decode.parallel, Translator.translate(workers=N))."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from attnmt import load
from attnmt.decode.parallel import can_fork, map_in_processes

pytestmark = pytest.mark.skipif(not can_fork(), reason="worker processes are forked; this platform cannot fork")


def _where(i: int) -> tuple[int, int, int]:
    return i * i, os.getpid(), torch.get_num_threads()


def test_map_in_processes_keeps_order_and_runs_elsewhere_on_one_thread():
    results = map_in_processes(_where, 9, workers=2)
    assert [r[0] for r in results] == [i * i for i in range(9)]
    assert os.getpid() not in {r[1] for r in results}
    assert {r[2] for r in results} == {1}
    # one worker, or one piece of work: in this process
    assert {r[1] for r in map_in_processes(_where, 3, workers=1)} == {os.getpid()}
    assert map_in_processes(_where, 1, workers=4)[0][1] == os.getpid()
    assert map_in_processes(_where, 0, workers=2) == []


def _same(a, b) -> bool:
    for x, y in zip(a, b, strict=True):
        if (x.text, x.score, x.tgt_tokens, len(x.n_best)) != (y.text, y.score, y.tgt_tokens, len(y.n_best)):
            return False
        if (x.attention is None) != (y.attention is None):
            return False
        if x.attention is not None and not np.array_equal(x.attention, y.attention):
            return False
    return True


@pytest.mark.parametrize("beam,n_best", [(1, 1), (3, 2)])
def test_workers_translate_exactly_as_one_process(tiny_model, tiny_corpus, beam, n_best):
    translator = load(tiny_model)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:30] + ["", "a"]
    alone = translator.translate(sentences, beam=beam, n_best=n_best, batch_size=4)
    forked = translator.translate(sentences, beam=beam, n_best=n_best, batch_size=4, workers=3)
    assert _same(alone, forked)
    assert all(_same(x.n_best, y.n_best) for x, y in zip(alone, forked))
    assert forked[-2].text == "" and forked[-1].text  # an empty line stays empty, in its place
    assert torch.get_num_threads() == 1  # the conftest's setting: the parent's threads are untouched


def test_workers_with_int8(tiny_model, tiny_corpus):
    translator = load(tiny_model, int8=True)
    sentences = (tiny_corpus / "test.src").read_text(encoding="utf-8").splitlines()[:20]
    assert _same(translator.translate(sentences, beam=2, batch_size=5),
                 translator.translate(sentences, beam=2, batch_size=5, workers=2))


def test_cli_evaluate_with_workers_and_early_stopping(capsys, tiny_model, tiny_corpus, tmp_path):
    from attnmt.cli import main

    scores = []
    for extra in ([], ["--workers", "2", "--stopping", "early"]):
        json_path = tmp_path / f"scores{len(extra)}.json"
        assert main(["evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"),
                     "--ref", str(tiny_corpus / "test.tgt"), "--tokenize", "none", "--json", str(json_path)]
                    + extra) == 0
        scores.append(json.loads(json_path.read_text(encoding="utf-8"))["scores"]["bleu"])
    capsys.readouterr()
    assert scores[0] > 0 and abs(scores[0] - scores[1]) < 5  # the early rule may end a few sentences sooner
    with pytest.raises(SystemExit) as refused:  # argparse: usage and one line naming the choices
        main(["evaluate", "--model", str(tiny_model), "--src", str(tiny_corpus / "test.src"),
              "--ref", str(tiny_corpus / "test.tgt"), "--stopping", "soon"])
    assert refused.value.code == 2 and "'exact', 'early'" in capsys.readouterr().err
