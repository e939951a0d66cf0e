"""`attnmt serve`: every endpoint, every bad request, batching through the app, the OpenAPI schema, the CLI.

The batcher on its own, the bounded queue and big requests split into chunks: tests/serve/test_serve_load.py.

The app is driven in-process with FastAPI's TestClient (inside ``with``, so that the lifespan starts
the batcher). Models: the session's tiny rnnsearch and a tiny Transformer trained here in seconds.
"""

from __future__ import annotations

import json
import logging
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")

with warnings.catch_warnings():  # newer Starlette warns, on import, that its TestClient will leave httpx
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

from attnmt.decode.translator import load
from attnmt.serve import Limits, create_app
from attnmt.serve.engine import parse_model_spec

SENTENCE = "gupo pelido duno gute"  # from the synthetic language the tiny models learned


@pytest.fixture(scope="module")
def client(tiny_model, tiny_transformer):
    app = create_app({"rnn": tiny_model, "tf": tiny_transformer})
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def post(client: TestClient, body) -> tuple[int, dict]:
    r = client.post("/translate", json=body)
    return r.status_code, r.json()


# ------------------------------------------------------------------------------------- endpoints


def test_health(client):
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["models"] == ["rnn", "tf"] and body["uptime_s"] >= 0


def test_models_lists_name_languages_type_and_size(client, tiny_model):
    body = client.get("/models").json()
    rnn, tf = body["models"]
    assert rnn["name"] == "rnn" and rnn["model_type"] == "rnnsearch"
    assert (rnn["src_lang"], rnn["tgt_lang"]) == ("src", "tgt")
    assert rnn["parameters"] == sum(p.numel() for p in load(tiny_model).model.parameters())
    assert rnn["layers"] is None and rnn["heads"] is None and rnn["default_beam"] == 3
    assert tf["model_type"] == "transformer" and (tf["layers"], tf["heads"]) == (1, 2)
    assert body["limits"] == Limits().model_dump()


def test_translate_matches_the_translator(client, tiny_model):
    expected = load(tiny_model).translate([SENTENCE], beam=3, n_best=1)[0]
    status, body = post(client, {"text": SENTENCE, "attention": True})
    assert status == 200 and body["model"] == "rnn"
    (tr,) = body["translations"]
    assert tr["source"] == SENTENCE and tr["text"] == expected.text
    assert tr["src_tokens"] == SENTENCE.split() and tr["tgt_tokens"] == expected.tgt_tokens
    attention = np.array(tr["attention"])
    assert attention.shape == (len(tr["tgt_tokens"]) + 1, len(tr["src_tokens"]))  # last row: </s>
    np.testing.assert_allclose(attention, expected.attention, atol=1e-4)
    np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-3)
    assert tr["score"] == pytest.approx(expected.score, abs=1e-5)
    assert tr["attention_heads"] is None
    timing = body["timing"]
    assert timing["batch_size"] == 1 and timing["total_ms"] >= timing["decode_ms"] > 0


def test_attention_only_when_asked(client):
    status, body = post(client, {"text": SENTENCE})
    assert status == 200 and body["translations"][0]["attention"] is None


def test_texts_keep_their_order(client, tiny_model):
    texts = ["ra retaro mudeti dunilu", SENTENCE, "seke bubaga katu deme sinali pakota"]
    status, body = post(client, {"texts": texts, "beam": 2})
    assert status == 200
    expected = load(tiny_model).translate(texts, beam=2)
    assert [t["source"] for t in body["translations"]] == texts
    assert [t["text"] for t in body["translations"]] == [e.text for e in expected]


def test_n_best_list(client):
    status, body = post(client, {"text": SENTENCE, "beam": 4, "n_best": 3})
    assert status == 200
    tr = body["translations"][0]
    scores = [h["score"] for h in tr["n_best"]]
    assert len(tr["n_best"]) == 3 and scores == sorted(scores, reverse=True)
    assert tr["n_best"][0]["text"] == tr["text"] and tr["n_best"][0]["score"] == tr["score"]


def test_transformer_per_layer_and_head_attention(client):
    status, body = post(client, {"text": SENTENCE, "model": "tf", "attention": True, "attention_heads": True})
    assert status == 200 and body["model"] == "tf"
    tr = body["translations"][0]
    heads = np.array(tr["attention_heads"])
    T, S = len(tr["tgt_tokens"]) + 1, len(tr["src_tokens"])
    assert heads.shape == (1, 2, T, S)
    np.testing.assert_allclose(heads.sum(axis=-1), 1.0, atol=1e-3)
    # the search's attention is the last layer's mean over heads: the re-read reproduces it
    np.testing.assert_allclose(heads[-1].mean(axis=0), np.array(tr["attention"]), atol=2e-4)


def test_chinese_text_round_trips(client):
    r = client.post("/translate", json={"text": "我爱你", "attention": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    tr = json.loads(r.content.decode("utf-8"))["translations"][0]
    assert tr["source"] == "我爱你" and tr["src_tokens"] == ["我爱你"]


def test_min_len_and_no_repeat_ngram_match_the_translator(client, tiny_model):
    translator = load(tiny_model)
    for options in ({"min_len": 6}, {"no_repeat_ngram": 1}, {"min_len": 5, "no_repeat_ngram": 2, "beam": 1},
                    {"coverage_penalty": 0.4, "length_penalty": 0.2}, {"coverage_penalty": 1.0, "beam": 1}):
        expected = translator.translate([SENTENCE], **{"beam": 3, **options})[0]
        status, body = post(client, {"text": SENTENCE, **options})
        assert status == 200, body
        assert body["translations"][0]["tgt_tokens"] == expected.tgt_tokens
        assert body["translations"][0]["score"] == pytest.approx(expected.score, abs=1e-5)
    long = post(client, {"text": SENTENCE, "min_len": 6})[1]["translations"][0]["tgt_tokens"]
    assert len(long) >= 6
    distinct = post(client, {"text": SENTENCE, "min_len": 6, "no_repeat_ngram": 1})[1]["translations"][0]
    assert len(set(distinct["tgt_tokens"])) == len(distinct["tgt_tokens"]) >= 6


def test_sampling_matches_the_translator_and_is_reproducible(client, tiny_model):
    from attnmt.decode.sampling import Sampling

    body = {"text": SENTENCE, "sample": True, "n_best": 4, "top_k": 8, "top_p": 0.95, "temperature": 1.5, "seed": 3}
    status, answer = post(client, body)
    assert status == 200, answer
    samples = [h["tgt_tokens"] for h in answer["translations"][0]["n_best"]]
    expected = load(tiny_model).translate([SENTENCE], n_best=4, sampling=Sampling(8, 0.95, 1.5, 3))[0]
    assert samples == [h.tgt_tokens for h in expected.n_best]
    assert post(client, body)[1]["translations"][0]["n_best"] == answer["translations"][0]["n_best"]
    others = [post(client, {**body, "seed": seed})[1]["translations"][0]["n_best"] for seed in (4, 5, 6)]
    assert any(o != answer["translations"][0]["n_best"] for o in others)
    # the defaults: seed 0, no cut, temperature 1, one sample; beam 1 is allowed
    plain = post(client, {"text": SENTENCE, "sample": True, "beam": 1})[1]["translations"][0]
    assert plain["tgt_tokens"] == load(tiny_model).translate([SENTENCE], sampling=Sampling())[0].tgt_tokens
    # a sample has its attention and word links like a search's translation, on a Transformer too
    for model in ("rnn", "tf"):
        status, answer = post(client, {"text": SENTENCE, "model": model, "sample": True, "top_k": 5,
                                       "attention": True, "alignment": True})
        tr = answer["translations"][0]
        assert status == 200 and np.array(tr["attention"]).shape == (len(tr["tgt_tokens"]) + 1, 4)
        assert tr["alignment"] is not None


def test_min_len_above_the_models_output_cap(tiny_model):
    import dataclasses

    translator = load(tiny_model)
    translator.config = dataclasses.replace(translator.config,
                                            decode=dataclasses.replace(translator.config.decode, max_len_cap=5))
    with TestClient(create_app({"m": translator})) as c:
        status, body = post(c, {"text": SENTENCE, "min_len": 6})
        assert status == 422 and body["error"]["field"] == "min_len"
        assert body["error"]["message"] == ("min_len=6 is above model 'm''s maximum output length (5, "
                                            "decode.max_len_cap); allowed: 0 to 5")
        assert post(c, {"text": SENTENCE, "min_len": 5})[0] == 200


def test_a_path_as_text_is_translated_not_read(client):
    status, body = post(client, {"text": "/etc/passwd"})
    assert status == 200 and body["translations"][0]["src_tokens"] == ["/etc/passwd"]


# ---------------------------------------------------------------------------------- bad requests

# Values that pass a type check and used to crash decoding (a 500 with tracebacks in the log) or to
# pass silently (an empty translation for temperature 1e-300).
HOSTILE_VALUES = [
    ({"text": SENTENCE, "sample": True, "seed": 2**70}, 422, "seed", "less than or equal to 17592186044415"),
    ({"text": SENTENCE, "sample": True, "seed": 2**44}, 422, "seed", "less than or equal to 17592186044415"),
    ({"text": SENTENCE, "sample": True, "temperature": 1e-300}, 422, "temperature", "greater than or equal to 0.01"),
    ({"text": SENTENCE, "sample": True, "temperature": 1e300}, 422, "temperature", "less than or equal to 100"),
    ({"text": SENTENCE, "sample": True, "top_k": 2**70}, 422, "top_k", "less than or equal to 1000000"),
    ({"text": SENTENCE, "min_len": 2**70}, 422, "min_len", "less than or equal to 10000"),
    ({"text": SENTENCE, "no_repeat_ngram": 2**70}, 422, "no_repeat_ngram", "less than or equal to 10000"),
    ({"text": SENTENCE, "beam": 2**70}, 422, "beam", "allowed: 1 to 10"),
    ({"text": SENTENCE, "n_best": 2**70}, 422, "n_best", "allowed: 1 to 3"),
    ({"text": SENTENCE, "length_penalty": 1e300}, 422, "length_penalty", "less than or equal to 10"),
    # 32 sentences of 40 tokens at beam 10 and n_best 10: 32 x 10 x 10 x 41 = 131,200 > 100,000
    ({"texts": [" ".join([SENTENCE] * 10)] * 32, "beam": 10, "n_best": 10}, 422, "texts",
     "the request's cost is 131,200"),
]

BAD_REQUESTS = [
    # (body, status, field, words in the message)
    ({"text": ""}, 422, "text", "empty"),
    ({"text": "   "}, 422, "text", "empty"),
    ({"texts": [SENTENCE, " "]}, 422, "texts[1]", "empty"),
    ({"texts": []}, 422, "texts", "at least 1"),
    ({"texts": [SENTENCE] * 33}, 422, "texts", "at most 32"),
    ({"text": "a" * 1001}, 422, "text", "at most 1000"),
    ({"texts": [SENTENCE, "b" * 1001]}, 422, "texts[1]", "at most 1000"),
    ({"text": SENTENCE, "beam": 0}, 422, "beam", "greater than or equal to 1"),
    ({"text": SENTENCE, "beam": 11}, 422, "beam", "1 to 10"),
    ({"text": SENTENCE, "n_best": 0}, 422, "n_best", "greater than or equal to 1"),
    ({"text": SENTENCE, "beam": 2, "n_best": 3}, 422, "n_best", "1 to 2"),
    ({"text": SENTENCE, "n_best": 4}, 422, "n_best", "beam (3)"),  # the model's default beam is 3
    ({"text": SENTENCE, "model": "nope"}, 404, "model", "available: rnn, tf"),
    ({"text": SENTENCE, "model": "/etc/passwd"}, 404, "model", "unknown model"),
    ({"text": 5}, 422, "text", "string"),
    ({"texts": "not a list"}, 422, "texts", "list"),
    ({"texts": [SENTENCE, 7]}, 422, "texts[1]", "string"),
    ({"text": SENTENCE, "beam": "3"}, 422, "beam", "integer"),
    ({"text": SENTENCE, "beam": 2.5}, 422, "beam", "integer"),
    ({"text": SENTENCE, "beam": True}, 422, "beam", "integer"),
    ({"text": SENTENCE, "attention": "yes"}, 422, "attention", "boolean"),
    ({"text": SENTENCE, "model": 1}, 422, "model", "string"),
    ({"text": SENTENCE, "beem": 3}, 422, "beem", "unknown field"),
    ({"text": SENTENCE, "attention_heads": True}, 422, "attention_heads", "only models with attention heads"),
    ({"text": SENTENCE, "min_len": -1}, 422, "min_len", "greater than or equal to 0"),
    ({"text": SENTENCE, "min_len": 2.5}, 422, "min_len", "integer"),
    ({"text": SENTENCE, "no_repeat_ngram": -1}, 422, "no_repeat_ngram", "greater than or equal to 0"),
    ({"text": SENTENCE, "sample": "yes"}, 422, "sample", "boolean"),
    ({"text": SENTENCE, "top_p": 0.9}, 422, "top_p", 'belongs to sampling; add "sample": true'),
    ({"text": SENTENCE, "seed": 1}, 422, "seed", "belongs to sampling"),
    ({"text": SENTENCE, "sample": True, "top_p": 1.5}, 422, "top_p", "less than or equal to 1"),
    ({"text": SENTENCE, "sample": True, "top_p": 0}, 422, "top_p", "greater than 0"),
    ({"text": SENTENCE, "sample": True, "top_k": -1}, 422, "top_k", "greater than or equal to 0"),
    ({"text": SENTENCE, "sample": True, "temperature": 0}, 422, "temperature", "greater than or equal to 0.01"),
    ({"text": SENTENCE, "sample": True, "temperature": "hot"}, 422, "temperature", "number"),
    ({"text": SENTENCE, "sample": True, "seed": -1}, 422, "seed", "greater than or equal to 0"),
    ({"text": SENTENCE, "sample": True, "beam": 3}, 422, "beam", "beam=3 with sample"),
    ({"text": SENTENCE, "coverage_penalty": -0.1}, 422, "coverage_penalty", "greater than or equal to 0"),
    ({"text": SENTENCE, "length_penalty": "long"}, 422, "length_penalty", "number"),
    ({"text": SENTENCE, "sample": True, "coverage_penalty": 0.2}, 422, "coverage_penalty", "leave it out to sample"),
    ({"text": SENTENCE, "sample": True, "n_best": 11}, 422, "n_best", "allowed: 1 to 10"),
    *HOSTILE_VALUES,
    ({}, 422, "text", "exactly one"),
    ({"text": SENTENCE, "texts": [SENTENCE]}, 422, "text", "exactly one"),
    ([SENTENCE], 422, "body", "JSON object"),
    ("a sentence", 422, "body", "JSON object"),
]


@pytest.mark.parametrize("body,status,field,words", BAD_REQUESTS, ids=[str(i) for i in range(len(BAD_REQUESTS))])
def test_bad_request_names_the_field(client, body, status, field, words):
    code, answer = post(client, body)
    assert code == status
    assert set(answer) == {"error"} and set(answer["error"]) == {"field", "message"}
    assert answer["error"]["field"] == field
    assert words in answer["error"]["message"]


def test_hostile_values_leave_no_traceback_in_the_log(client, caplog):
    with caplog.at_level(logging.WARNING):
        for body, status, _, _ in HOSTILE_VALUES:
            assert post(client, body)[0] == status
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("raw", [b"{bad json", b'{"text": "a",}', b"\xff\xfe", b"nul\x00l"])
def test_invalid_json_is_400(client, raw):
    r = client.post("/translate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "body" and "not valid JSON" in r.json()["error"]["message"]


def test_lone_surrogate_is_422_not_a_crash(client):
    r = client.post("/translate", content=b'{"text": "a \\ud800 b"}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "text"
    assert "not valid Unicode" in r.json()["error"]["message"]


def test_missing_body_or_json_content_type(client):
    r = client.post("/translate")
    assert r.status_code == 422 and r.json()["error"]["field"] == "body"
    r = client.post("/translate", content=b'{"text": "a"}', headers={"content-type": "text/plain"})
    assert r.status_code == 422 and "application/json" in r.json()["error"]["message"]


def test_body_too_large_is_413_with_or_without_content_length(client):
    big = json.dumps({"text": "a " * 600_000}).encode()
    r = client.post("/translate", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["field"] == "body"

    def chunks():  # a generator body is sent chunked, with no Content-Length to check up front
        for _ in range(20):
            yield b"x" * 100_000

    r = client.post("/translate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_unknown_path_and_method_have_the_error_shape(client):
    r = client.get("/nowhere")
    assert r.status_code == 404 and r.json() == {"error": {"field": None, "message": "Not Found"}}
    r = client.get("/translate")
    assert r.status_code == 405 and r.json()["error"]["field"] is None


def test_configured_limits(tiny_model):
    app = create_app({"m": tiny_model}, limits=Limits(max_texts=2, max_text_chars=30, max_beam=2))
    with TestClient(app) as c:
        assert post(c, {"texts": ["a", "b", "c"]})[1]["error"]["message"].endswith("at most 2 are allowed")
        assert post(c, {"text": "x" * 31})[1]["error"]["field"] == "text"
        # the model's default beam (3) is clipped to the server's largest
        status, body = post(c, {"text": SENTENCE})
        assert status == 200 and c.get("/models").json()["models"][0]["default_beam"] == 2
        assert post(c, {"text": SENTENCE, "beam": 3})[1]["error"]["message"] == "beam=3 is too large; allowed: 1 to 2"


def test_a_failing_batch_is_a_500_and_the_server_goes_on(tiny_model, monkeypatch):
    import attnmt.serve.app as app_module

    calls = {"n": 0}
    real = app_module.decode_batch

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(*args)

    monkeypatch.setattr(app_module, "decode_batch", flaky)
    with TestClient(create_app({"m": tiny_model}), raise_server_exceptions=False) as c:
        status, body = post(c, {"text": SENTENCE})
        assert status == 500 and body["error"]["field"] is None and "boom" not in body["error"]["message"]
        assert post(c, {"text": SENTENCE})[0] == 200


# --------------------------------------------------------------------------------------- batching


def _concurrent(client: TestClient, bodies: list[dict]) -> list[dict]:
    with ThreadPoolExecutor(len(bodies)) as pool:
        responses = list(pool.map(lambda b: client.post("/translate", json=b), bodies))
    assert all(r.status_code == 200 for r in responses), [r.json() for r in responses]
    return [r.json() for r in responses]


def test_concurrent_requests_are_decoded_in_one_batch(tiny_model):
    texts = ["ra retaro mudeti dunilu", SENTENCE, "seke bubaga katu deme sinali pakota", "gupo pelido"] * 2
    alone = load(tiny_model).translate(texts, beam=3)
    # a long wait makes the grouping deterministic: the batch closes when all 8 requests are in
    app = create_app({"m": tiny_model}, max_batch_size=8, max_wait_ms=2000)
    with TestClient(app) as c:
        answers = _concurrent(c, [{"text": t} for t in texts])
    assert all(a["timing"]["batch_requests"] == 8 and a["timing"]["batch_size"] == 8 for a in answers)
    # batching changes nothing in the output
    assert [a["translations"][0]["text"] for a in answers] == [e.text for e in alone]


@pytest.mark.timeout(120)
def test_max_batch_size_1_decodes_one_request_at_a_time(tiny_model):
    # A batch that can hold one request does not wait for company: with a ten-minute window, a
    # batcher that waited would run into the timeout instead of answering four requests.
    app = create_app({"m": tiny_model}, max_batch_size=1, max_wait_ms=600_000)
    with TestClient(app) as c:
        answers = _concurrent(c, [{"text": SENTENCE}] * 4)
    assert all(a["timing"]["batch_requests"] == 1 and a["timing"]["batch_size"] == 1 for a in answers)


def test_requests_of_different_settings_are_not_mixed(tiny_model, tiny_transformer):
    # Six requests, two of each setting, and a window long enough for all six to be collected
    # together (the batch closes when the sixth arrives): each decode call serves one setting's two.
    app = create_app({"rnn": tiny_model, "tf": tiny_transformer}, max_batch_size=6, max_wait_ms=60_000)
    bodies = [{"text": SENTENCE, "beam": 2}, {"text": SENTENCE, "beam": 3}, {"text": SENTENCE, "model": "tf"}] * 2
    with TestClient(app) as c:
        answers = _concurrent(c, bodies)
    assert all(a["timing"]["batch_requests"] == 2 and a["timing"]["batch_size"] == 2 for a in answers), answers


def test_requests_of_different_decoding_options_are_not_mixed(tiny_model):
    # The model's defaults (min_len 0, no_repeat_ngram 0) named or left out are one setting.
    app = create_app({"m": tiny_model}, max_batch_size=6, max_wait_ms=60_000)
    bodies = [{"text": SENTENCE}, {"text": SENTENCE, "min_len": 0, "no_repeat_ngram": 0},
              {"text": SENTENCE, "min_len": 6}, {"text": SENTENCE, "min_len": 6},
              {"text": SENTENCE, "no_repeat_ngram": 2}, {"text": SENTENCE, "no_repeat_ngram": 2}]
    with TestClient(app) as c:
        answers = _concurrent(c, bodies)
    assert all(a["timing"]["batch_requests"] == 2 and a["timing"]["batch_size"] == 2 for a in answers), answers
    assert len(answers[2]["translations"][0]["tgt_tokens"]) >= 6


def test_sampling_requests_are_decoded_on_their_own(tiny_model):
    # Three identical sampling requests collected together are still three decode calls, so a
    # request's samples never depend on the company it arrived in: all three get the same samples.
    app = create_app({"m": tiny_model}, max_batch_size=3, max_wait_ms=60_000)
    body = {"text": SENTENCE, "sample": True, "n_best": 3, "seed": 7, "temperature": 2.0}
    with TestClient(app) as c:
        answers = _concurrent(c, [body] * 3)
    assert all(a["timing"]["batch_requests"] == 1 and a["timing"]["batch_size"] == 1 for a in answers), answers
    assert answers[0]["translations"] == answers[1]["translations"] == answers[2]["translations"]


# ---------------------------------------------------------------------------- schema, page, CLI


def test_openapi_lists_the_endpoints_and_request_fields(client):
    schema = client.get("/openapi.json").json()
    assert {"/translate", "/health", "/models"} <= set(schema["paths"])
    assert "post" in schema["paths"]["/translate"] and "get" in schema["paths"]["/models"]
    op = schema["paths"]["/translate"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/TranslateRequest")
    request = schema["components"]["schemas"]["TranslateRequest"]
    assert set(request["properties"]) == {"text", "texts", "beam", "n_best", "model", "attention", "attention_heads",
                                          "alignment", "alignment_method", "min_len", "no_repeat_ngram",
                                          "length_penalty", "coverage_penalty", "sample",
                                          "top_k", "top_p", "temperature", "seed"}
    assert request["additionalProperties"] is False
    translation = schema["components"]["schemas"]["Translation"]
    assert {"text", "src_tokens", "tgt_tokens", "attention", "attention_heads", "n_best", "score"} <= set(
        translation["properties"])
    for status in ("400", "413", "422"):  # the documented error shape is the real one
        assert op["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    # the schema matches the pydantic models the endpoint validates with
    from attnmt.serve.schema import TranslateRequest

    assert set(request["properties"]) == set(TranslateRequest.model_fields)


def test_page_and_static_files_work_offline(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    assert '<meta charset="utf-8">' in r.text and "/static/app.js" in r.text
    for name in ("app.js", "style.css"):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200
        assert "http://" not in asset.text and "https://" not in asset.text  # no CDN, nothing remote
    assert "http" not in r.text.replace("http-equiv", "")
    assert client.get("/docs").status_code == 404  # FastAPI's docs page would load a CDN


def test_static_files_cannot_reach_outside_their_folder(client):
    for path in ("/static/../app.py", "/static/..%2Fapp.py", "/static/%2e%2e/%2e%2e/pyproject.toml"):
        assert client.get(path).status_code == 404


@pytest.mark.parametrize("spec,name,directory", [
    ("models/en-de", "en-de", "models/en-de"),
    ("big=models/en-de", "big", "models/en-de"),
    ("x=y=z", "x", "y=z"),
])
def test_parse_model_spec(spec, name, directory):
    assert parse_model_spec(spec) == (name, Path(directory))


def test_cli_serve_reports_bad_models_in_one_line(tmp_path, tiny_model, capsys):
    from attnmt.cli import main

    assert main(["serve", "--model", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["serve", "--model", f"a={tiny_model}", "--model", f"a={tiny_model}"]) == 2
    assert "two models are named 'a'" in capsys.readouterr().err
    assert main(["serve", "--model", str(tiny_model), "--max-beam", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-beam" in err
    for flags, words in ((["--max-queue-sentences", "10"], "--max-queue-sentences 10 is below --max-texts 32"),
                         (["--max-queue-cost", "0"], "--max-queue-cost=0"),
                         (["--max-batch-cost", "0"], "--max-batch-cost 0.0 is out of range")):
        assert main(["serve", "--model", str(tiny_model), *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err


def test_a_port_in_use_is_one_line_and_exit_2_before_the_models_load(tiny_model, capsys, monkeypatch):
    import socket

    from attnmt.cli import main

    monkeypatch.setattr("attnmt.serve.app.load_models", lambda *a, **k: pytest.fail("loaded before binding"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", str(tiny_model), "--port", str(port)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnmt: error: serve: port {port} on 127.0.0.1 is in use by another program; stop it, or choose another "
        "--port"]
