"""The compiled decoder step (--compile, attnmt.models.compiled) translates as the eager step does.

Slow: torch.compile generates and builds C++ for each model (about a minute each on two cores). The tiny models'
near-ties could flip on rounding; the outputs below were equal on the AVX-512 EPYC, greedy and beam.
"""

from __future__ import annotations

import pytest
import torch

from attnmt.decode.translator import load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _sentences(corpus, n=40):
    return (corpus / "test.src").read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("model", ["tiny_model", "tiny_transformer"])
def test_compiled_step_translates_as_the_eager_step(request, tiny_corpus, model, int8):
    # a step beyond torch's recompile_limit would run eager and translate the same: fail instead (the int8 model
    # follows the float32 one of its type in this process, and each compiles about five graphs against a limit of 8)
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        _compiled_translates_as_eager(request, tiny_corpus, model, int8)


def _compiled_translates_as_eager(request, tiny_corpus, model, int8):
    folder = request.getfixturevalue(model)
    sentences = _sentences(tiny_corpus)
    eager = load(folder, int8=int8)
    compiled = load(folder, int8=int8, compile_step=True)
    assert compiled.compile_seconds > 0 and eager.compile_seconds is None
    for beam in (1, 3):
        a = eager.translate(sentences, beam=beam, batch_size=1)
        b = compiled.translate(sentences, beam=beam, batch_size=1)
        assert [t.text for t in b] == [t.text for t in a]
        for x, y in zip(a, b):
            assert y.score == pytest.approx(x.score, abs=1e-4)
            if x.attention is not None:
                assert abs(y.attention - x.attention).max() < 1e-4
