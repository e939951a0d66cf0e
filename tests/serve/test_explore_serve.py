"""POST /explore: the explore record over HTTP, its what-if prefix, two models side by side, and its errors."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")

with warnings.catch_warnings():  # newer Starlette warns, on import, that its TestClient will leave httpx
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

from attnmt.decode.steps import explore
from attnmt.decode.translator import load
from attnmt.serve import Limits, create_app
from tests.explore.test_explore import SENTENCE


@pytest.fixture(scope="module")
def client(tiny_model, tiny_seq2seq):
    with TestClient(create_app({"rnnsearch": tiny_model, "seq2seq": tiny_seq2seq}), raise_server_exceptions=False) as c:
        yield c


def post(client: TestClient, body) -> tuple[int, dict]:
    r = client.post("/explore", json=body)
    return r.status_code, r.json()


def test_the_record_is_the_librarys(client, tiny_model):
    status, body = post(client, {"text": SENTENCE, "beam": 3, "top_k": 5})
    assert status == 200 and body["model"] == "rnnsearch"
    assert body["record"] == explore(load(tiny_model), SENTENCE, beam=3, top_k=5, name="rnnsearch")
    assert body["timing"]["batch_size"] == 1


def test_what_if_forces_the_chosen_piece_and_re_decodes_the_rest(client):
    _, body = post(client, {"text": SENTENCE})
    steps = body["record"]["steps"]
    other = next(c["piece"] for c in steps[1]["top_k"] if c["piece"] not in (steps[1]["output"], "</s>"))
    prefix = [steps[0]["output"], other]
    status, changed = post(client, {"text": SENTENCE, "prefix_tokens": prefix})
    assert status == 200
    record = changed["record"]
    assert record["prefix"] == prefix and record["output"]["pieces"][:2] == prefix
    assert [s["forced"] for s in record["steps"][:3]] == [True, True, False]
    _, as_text = post(client, {"text": SENTENCE, "prefix": " ".join(prefix)})
    assert as_text["record"]["output"] == record["output"]


def test_a_pinned_attention_is_the_librarys_and_a_model_without_one_is_refused(client, tiny_model):
    _, body = post(client, {"text": SENTENCE, "beam": 1})
    prefix = body["record"]["output"]["pieces"][:2]
    status, pinned = post(client, {"text": SENTENCE, "beam": 1, "prefix_tokens": prefix, "pin": [3]})
    assert status == 200 and pinned["record"]["pin"] == {"step": 2, "source": [3]}
    assert pinned["record"] == explore(load(tiny_model), SENTENCE, beam=1, prefix_tokens=prefix, pin=[3],
                                       name="rnnsearch")
    code, answer = post(client, {"text": SENTENCE, "model": "seq2seq", "pin": [0]})
    assert code == 422 and "cannot be pinned" in answer["error"]["message"]
    code, answer = post(client, {"text": SENTENCE, "pin": [9]})
    assert code == 422 and "outside the source" in answer["error"]["message"]


def test_two_models_side_by_side(client):
    records = {name: post(client, {"text": SENTENCE, "model": name})[1]["record"] for name in ("seq2seq", "rnnsearch")}
    assert records["seq2seq"]["model"]["type"] == "seq2seq" and records["seq2seq"]["attention"] is None
    assert records["rnnsearch"]["model"]["type"] == "rnnsearch" and records["rnnsearch"]["attention"] is not None
    assert records["seq2seq"]["source"] == {**records["rnnsearch"]["source"], "annotations": None}


@pytest.mark.parametrize("body, status, field, words", [
    ({"text": SENTENCE, "prefix_tokens": ["zi", "no-such-piece"]}, 422, "prefix_tokens[1]", "not a piece"),
    ({"text": SENTENCE, "prefix_tokens": ["</s>"]}, 422, "prefix_tokens[0]", "not a piece"),
    ({"text": SENTENCE, "prefix": "zi", "prefix_tokens": ["zi"]}, 422, "prefix_tokens", "not both"),
    ({"text": SENTENCE, "model": "nope"}, 404, "model", "unknown model"),
    ({"text": SENTENCE, "beam": 11}, 422, "beam", "too large"),
    ({"text": SENTENCE, "top_k": 0}, 422, "top_k", ""),
    ({"text": SENTENCE, "top_k": 51}, 422, "top_k", ""),
    ({"text": "   "}, 422, "text", "empty"),
    ({"text": SENTENCE, "beem": 3}, 422, "beem", ""),
])
def test_bad_requests_name_the_field(client, body, status, field, words):
    code, answer = post(client, body)
    assert code == status and answer["error"]["field"] == field and words in answer["error"]["message"]


def test_a_request_over_the_queues_cost_is_refused(tiny_model):
    with TestClient(create_app({"m": tiny_model}, limits=Limits(max_queue_cost=10))) as c:
        r = c.post("/explore", json={"text": SENTENCE, "beam": 3})
    assert r.status_code == 422 and "cost" in r.json()["error"]["message"]


def test_openapi_describes_explore(client):
    from attnmt.serve.schema import ExploreRequest

    schema = client.get("/openapi.json").json()
    op = schema["paths"]["/explore"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/ExploreRequest")
    request = schema["components"]["schemas"]["ExploreRequest"]
    assert set(request["properties"]) == set(ExploreRequest.model_fields) == {"text", "model", "beam", "prefix",
                                                                              "prefix_tokens", "top_k", "pin",
                                                                              "neighbours"}
    assert request["additionalProperties"] is False
    for status in ("404", "422", "503"):
        assert op["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")


def test_a_held_out_example_comes_with_its_reference_and_scores(client, tiny_model):
    from attnmt.decode.held_out import held_out_pairs

    example, reference = held_out_pairs(load(tiny_model))[3]
    for model in ("rnnsearch", "seq2seq"):
        _, body = post(client, {"text": example, "model": model})
        record = body["record"]
        assert record["reference"]["text"] == reference and record["reference"]["tokenize"] == "13a"
        assert 0 <= record["reference"]["bleu"] <= 100 and 0 <= record["reference"]["chrf"] <= 100
    _, body = post(client, {"text": SENTENCE})  # a sentence of no held-out pair: no reference
    assert body["record"]["reference"] is None
