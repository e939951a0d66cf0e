"""The input gate (attnmt.decode.inputs): one set of limits, one line per refusal, checked before the work that grows
with the input; every entry point reads through it: the Python API, the command line, the server. A request's CPU
work runs off the server's event loop. Loading a model changes no thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from attnmt.cli import main
from attnmt.decode.inputs import (
    InputLimits,
    InputRefused,
    SentenceTooLong,
    check_words,
    gated_tokens,
)
from attnmt.decode.translator import load
from attnmt.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "gupo pelido duno gute"


class Recorder:
    """A whitespace tokenizer that records the sentences it was given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> list[str]:
        self.seen.append(text)
        return text.split()


# ---------------------------------------------------------------------------------------------- the gate


@pytest.mark.parametrize("sentences, message", [
    (["a", "b", "c"], "the request has 3 sentences; at most 2 are allowed"),
    (["a", "a b c d e f"], "sentence 2 has 11 characters; at most 10 are allowed"),
    (["a b c d"], "sentence 1 has 4 tokens, more than the 3 this translator accepts; split long lines into sentences"),
    (["a b c", "d e"], "the request has more than 4 source tokens (at sentence 2); send fewer or shorter sentences"),
])
def test_each_limit_is_one_line(sentences, message):
    limits = InputLimits(line_chars=10, sentence_tokens=3, sentences=2, request_tokens=4)
    with pytest.raises(InputRefused) as refused:
        gated_tokens(sentences, str.split, limits)
    assert str(refused.value) == message


def test_the_work_stops_at_the_first_refusal():
    tokenize = Recorder()
    with pytest.raises(SentenceTooLong) as refused:
        gated_tokens(["a b", "w " * 100, "c d"], tokenize, InputLimits(sentence_tokens=10))
    assert tokenize.seen == ["a b", "w " * 100]  # the third sentence never tokenized
    assert (refused.value.index, refused.value.tokens, refused.value.limit) == (1, 100, 10)
    tokenize = Recorder()
    with pytest.raises(InputRefused, match="the request has 3 sentences"):
        gated_tokens(["a"] * 3, tokenize, InputLimits(sentences=2))
    assert tokenize.seen == []  # counted before any is looked at
    with pytest.raises(InputRefused, match="sentence 2 is longer than 1,024 bytes"):
        gated_tokens(["a", "w" * 1025], tokenize, InputLimits(line_bytes=1024))
    assert tokenize.seen == []  # a sentence's size before its tokens


def test_bytes_are_utf8_bytes():
    limits = InputLimits(line_bytes=1024)
    assert gated_tokens(["é" * 512], str.split, limits) == [["é" * 512]]  # 1,024 bytes
    with pytest.raises(InputRefused, match="sentence 1 is longer than 1,024 bytes, the limit for one sentence"):
        gated_tokens(["é" * 513], str.split, limits)  # 513 characters, 1,026 bytes
    assert gated_tokens(["\ud800 a"], str.split, limits) == [["\ud800", "a"]]  # a str may hold a lone surrogate


def test_a_refusal_names_the_place_its_caller_knows():
    with pytest.raises(SentenceTooLong) as refused:
        gated_tokens(["a", "a b c"], str.split, InputLimits(sentence_tokens=2))
    e = refused.value
    assert str(e.at("in.txt")) == "in.txt:2 has 3 tokens, more than the 2 this translator accepts; split long lines " \
                                  "into sentences"
    assert str(e.at("in.txt", 1000)).startswith("in.txt:1002 has 3 tokens")
    assert str(e.named("the text")).startswith("the text has 3 tokens") and isinstance(e.named("x"), SentenceTooLong)
    assert (e.shifted(10).index, str(e.shifted(10)).split(" has")[0]) == (11, "sentence 12")


def test_words_are_counted_only_up_to_the_limit():
    check_words(["a " * 512], InputLimits())
    with pytest.raises(InputRefused, match="sentence 2 has 513 words, more than the 512 a sentence may have"):
        check_words(["a", "a " * 513], InputLimits())


@pytest.mark.parametrize("field, value", [("sentences", 0), ("line_bytes", None), ("sentence_tokens", 2.5),
                                          ("request_tokens", True)])
def test_limits_out_of_range_are_refused(field, value):
    with pytest.raises(UserError, match=f"InputLimits.{field}="):
        InputLimits(**{field: value})


# ---------------------------------------------------------------------------------------------- the Python API


def test_the_python_api_refuses_a_long_sentence_and_prefix_in_one_line(tiny_model):
    translator = load(tiny_model)
    with pytest.raises(SentenceTooLong) as refused:
        translator.translate("w " * 100_000)
    assert str(refused.value) == ("sentence 1 has 100,000 tokens, more than the 512 this translator accepts; split "
                                  "long lines into sentences")
    with pytest.raises(InputRefused, match="^sentence 2 is longer than 1,048,576 bytes"):
        translator.translate([SENTENCE, "w" * (2 << 20)])
    with pytest.raises(SentenceTooLong, match="^the prefix of sentence 2 has 600 tokens"):
        translator.translate([SENTENCE, SENTENCE], prefix=[None, "w " * 600])
    for run in (lambda: translator.explore("w " * 600), lambda: translator.explore(SENTENCE, prefix="w " * 600),
                lambda: translator.explore(SENTENCE, prefix_tokens=["w"] * 600)):
        with pytest.raises(SentenceTooLong, match="has 600 tokens, more than the 512"):
            run()
    translator.max_src_tokens = 3  # the limits are the translator's to change
    with pytest.raises(SentenceTooLong, match="^sentence 1 has 4 tokens, more than the 3"):
        translator.translate(SENTENCE)


def test_loading_sets_no_thread_count_and_threads_apply_while_decoding(tiny_model, monkeypatch):
    before = torch.get_num_threads()
    translator = load(tiny_model, threads=before + 1)
    assert torch.get_num_threads() == before  # loading changed nothing global
    seen = []
    search = translator._search
    monkeypatch.setattr(translator, "_search", lambda *a, **k: seen.append(torch.get_num_threads()) or search(*a, **k))
    translator.translate(SENTENCE)
    translator.explore(SENTENCE)
    assert seen == [before + 1] and torch.get_num_threads() == before  # set for the call, restored after it


# ---------------------------------------------------------------------------------------------- the command line


def test_plot_attention_refuses_a_long_sentence_in_one_line(tiny_model, tmp_path, capsys):
    out = tmp_path / "a.png"
    assert main(["plot-attention", "--model", str(tiny_model), "w " * 60_000, "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "attnmt: error: plot-attention: the sentence has 60,000 tokens, more than the 512 this translator accepts; "
        "split long lines into sentences"]
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- the server


def client(models: dict, config=None, **settings):
    """FastAPI's TestClient of the app serving ``models`` (the test is skipped without the serve extra)."""
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    with warnings.catch_warnings():  # newer Starlette warns, on import, that its TestClient will leave httpx
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from attnmt.serve import create_app

    return TestClient(create_app(models, config, **settings))


def test_150000_texts_are_counted_before_any_is_validated(tiny_model):
    with client({"m": tiny_model}) as c:
        for texts in (["a"] * 150_000, [" "] * 150_000, [1] * 150_000):
            started = time.process_time()  # CPU seconds: what the refusal costs, whatever else shares the machine
            r = c.post("/translate", json={"texts": texts})
            assert time.process_time() - started < 1.0
            assert (r.status_code, r.json()) == (422, {"error": {"field": "texts", "message": (
                "the request has 150000 sentences; at most 32 are allowed")}})


def test_the_server_refuses_through_the_gate_naming_the_field(tiny_model):
    from attnmt.serve import Limits, ServeConfig

    with client({"m": tiny_model}, ServeConfig(limits=Limits(max_text_chars=5000, max_queue_cost=1000))) as c:
        r = c.post("/translate", json={"texts": [SENTENCE, "w " * 600]})
        assert (r.status_code, r.json()["error"]) == (422, {"field": "texts[1]", "message": (
            "the text has 600 tokens, more than the 512 this translator accepts; split long lines into sentences")})
        r = c.post("/translate", json={"texts": ["w " * 400] * 3})
        assert (r.status_code, r.json()["error"]) == (422, {"field": "texts", "message": (
            "the request has more than 1,000 source tokens (at sentence 3); send fewer or shorter sentences")})
        r = c.post("/explore", json={"text": "w " * 600})
        assert (r.status_code, r.json()["error"]["field"]) == (422, "text")
        assert r.json()["error"]["message"].startswith("the text has 600 tokens")
        assert c.post("/translate", json={"texts": [SENTENCE] * 2}).status_code == 200


@pytest.mark.timeout(120)
def test_the_event_loop_answers_while_a_request_is_tokenized(tiny_model):
    """A request's tokenizing runs in a worker thread: /health answers while it is held there."""
    translator = load(tiny_model)
    entered, release = threading.Event(), threading.Event()
    tokens = translator.src.tokens

    def held(text: str) -> list[str]:
        if text == "held":
            entered.set()
            release.wait(timeout=30)
        return tokens(text)

    translator.src.tokens = held
    with client({"m": translator}) as c, ThreadPoolExecutor(2) as pool:
        request = pool.submit(c.post, "/translate", json={"texts": [SENTENCE, "held"]})
        try:
            assert entered.wait(30)
            health = pool.submit(c.get, "/health")
            assert health.result(timeout=5).status_code == 200  # on the loop, the tokenizer would hold it back
        finally:
            release.set()
        assert request.result(timeout=60).status_code == 200


def test_serve_config_checks_what_the_flags_set(tiny_model):
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    from attnmt.serve import ServeConfig

    with pytest.raises(UserError, match="^serve: --max-queue-sentences 8 is below --max-texts 32"):
        ServeConfig.from_options(["m"], max_queue_sentences=8)
    with pytest.raises(UserError, match="^serve: --max-texts=20000: Input should be less than or equal to 10000"):
        ServeConfig.from_options(["m"], max_texts=20_000, max_queue_sentences=20_000)
    for fields, flag in (({"port": 70_000}, "--port"), ({"max_batch_size": 0}, "--max-batch-size"),
                         ({"max_wait_ms": -1}, "--max-wait-ms"), ({"max_batch_cost": 0}, "--max-batch-cost")):
        with pytest.raises(UserError, match=f"^serve: {flag} "):
            ServeConfig(**fields)
    config = ServeConfig.from_options(["a=x"], max_texts=2, max_batch_size=3, port=0)
    assert (config.models, config.limits.max_texts, config.max_batch_size) == (("a=x",), 2, 3)
    with client({"m": tiny_model}, config) as c:
        assert c.get("/models").json()["limits"]["max_texts"] == 2
        assert c.post("/translate", json={"texts": [SENTENCE] * 3}).json()["error"]["message"] == (
            "the request has 3 sentences; at most 2 are allowed")


# ---------------------------------------------------------------------------------------------- measured

MEASURE = r"""
import contextlib, io, json, sys, time, warnings
import torch
torch.set_num_threads(1)
import attnmt.decode.translator, attnmt.cli, attnmt.viz.heatmap
from attnmt.cli import main
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient
from attnmt.serve import create_app

def kib(field):
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith(field + ":")))

def measured(name, run):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak (VmHWM) starts again from what is resident now
    except OSError:
        pass
    rss, started = kib("VmRSS"), time.process_time()  # CPU seconds, which a busy machine does not stretch
    said = run()
    seconds = time.process_time() - started
    print(json.dumps({"case": name, "said": said, "seconds": seconds, "grew_mb": (kib("VmHWM") - rss) / 1024,
                      "peak_mb": kib("VmHWM") / 1024}), flush=True)

model = sys.argv[1]
translator = attnmt.load(model)

def python_api():
    try:
        translator.translate("w " * 100_000)
    except attnmt.errors.UserError as e:
        return str(e)

def plot_attention():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["plot-attention", "--model", model, "w " * 60_000, "--out", sys.argv[2]])
    return f"{code} {err.getvalue()}"

with TestClient(create_app({"m": translator})) as client:
    def http():
        r = client.post("/translate", json={"texts": ["a"] * 150_000})
        return f"{r.status_code} {r.text}"

    for name, run in (("python", python_api), ("plot-attention", plot_attention), ("http", http)):
        measured(name, run)
"""


@pytest.mark.timeout(300)
def test_the_three_length_cases_are_refused_within_a_second_in_bounded_memory(tiny_model, tmp_path):
    """The Python API on one 100,000-word sentence, plot-attention on one 60,000-word line (about what a command
    line holds), a request of 150,000 texts: each refused in one line, in under a second of the process's CPU time,
    the process growing by less than 100 MB (measured in a process of its own, from its peak resident memory)."""
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(tiny_model), str(tmp_path / "a.png")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = {case["case"]: case for case in map(json.loads, proc.stdout.splitlines())}
    assert cases["python"]["said"].startswith("sentence 1 has 100,000 tokens, more than the 512")
    assert cases["plot-attention"]["said"] == (
        "2 attnmt: error: plot-attention: the sentence has 60,000 tokens, more than the 512 this translator "
        "accepts; split long lines into sentences\n")
    assert cases["http"]["said"] == ('422 {"error":{"field":"texts","message":"the request has 150000 sentences; at '
                                     'most 32 are allowed"}}')
    for case in cases.values():
        assert case["seconds"] < 1.0 and case["grew_mb"] < 100, case


def test_a_nul_character_is_refused_by_the_api_and_the_server(tiny_model):
    """A NUL is refused at the gate, as the file readers refuse it: in Python and over HTTP alike."""
    from attnmt.serve import ServeConfig

    with pytest.raises(UserError, match=r"^sentence 2 has a NUL character"):
        load(tiny_model).translate([SENTENCE, "a\x00b"])
    with client({"m": tiny_model}, ServeConfig()) as c:
        r = c.post("/translate", json={"texts": [SENTENCE, "a\u0000b"]})
        assert (r.status_code, r.json()["error"]["field"]) == (422, "texts[1]")
        assert "NUL character" in r.json()["error"]["message"]
        r = c.post("/explore", json={"text": "\u0000"})
        assert r.status_code == 422 and "NUL character" in r.json()["error"]["message"]
