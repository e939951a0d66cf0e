"""The FastAPI application: POST /translate, POST /explore, GET /health, GET /models, and the page at /.

:func:`create_app` builds an app around already loaded translators (or model folders); the CLI's
``attnmt serve`` calls :func:`serve`, which loads the folders and runs uvicorn. Requests never name
files: ``model`` is looked up among the names given at startup, nothing else.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import logging
import socket
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Mapping

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from attnmt import __version__
from attnmt.align import model_method
from attnmt.config.special import SPECIALS
from attnmt.decode.translator import Translator
from attnmt.errors import UserError
from attnmt.serve.admission import AdmissionMiddleware
from attnmt.serve.batching import DynamicBatcher, QueueFull
from attnmt.serve.engine import (
    BatchKey,
    ExploreItem,
    Item,
    ServedModel,
    decode_batch,
    load_models,
    sentence_costs,
    served_model,
)
from attnmt.serve.errors import ApiError, BodyLimitMiddleware, install_error_handlers
from attnmt.serve.options import request_options
from attnmt.serve.schema import (
    ErrorResponse,
    ExploreRequest,
    ExploreResponse,
    HealthResponse,
    Limits,
    ModelsResponse,
    Timing,
    TranslateRequest,
    TranslateResponse,
)

__all__ = ["create_app", "serve"]

STATIC_DIR = Path(__file__).parent / "static"
ERROR_RESPONSES = {
    400: {"model": ErrorResponse, "description": "the body is not JSON"},
    404: {"model": ErrorResponse, "description": "no model of that name"},
    413: {"model": ErrorResponse, "description": "the body is too large"},
    422: {"model": ErrorResponse, "description": "a field is missing, of the wrong type or out of range"},
    500: {"model": ErrorResponse, "description": "a server bug"},
    503: {"model": ErrorResponse, "description": "the queue is full; retry after the seconds in Retry-After"},
}
MAX_BATCH_COST = 10_000  # about 32 sentences of 60 tokens at beam 5 (cost: see Limits)
_SAMPLING_JOBS = itertools.count(1)


def create_app(models: Mapping[str, Translator | str | Path], *, max_batch_size: int = 32,
               max_wait_ms: float = 10.0, limits: Limits | None = None,
               max_batch_cost: float = MAX_BATCH_COST) -> FastAPI:
    """The app serving ``models`` (name -> Translator, or name -> model folder to load).

    max_batch_size: the most sentences decoded together (1 = one sentence at a time, no batching);
    max_wait_ms: how long the first request of a batch waits for others to join it; max_batch_cost: the
    most cost (see :class:`Limits`) in one batch: a larger request is split, and decoded in turns with
    the others (attnmt.serve.batching). ``limits`` also bounds the queue.
    """
    if not models:
        raise ValueError("create_app needs at least one model")
    limits = limits or Limits()
    served: dict[str, ServedModel] = {}
    for name, model in models.items():
        translator = _load(model) if isinstance(model, (str, Path)) else model  # or an exported model's
        served[name] = served_model(name, translator, limits.max_beam)
    default_model = next(iter(served))
    batcher = DynamicBatcher(lambda key, items: decode_batch(served, key, items), max_batch_size=max_batch_size,
                             max_wait_s=max_wait_ms / 1000, max_batch_cost=max_batch_cost,
                             max_queue_items=limits.max_queue_sentences, max_queue_cost=limits.max_queue_cost)
    started = time.monotonic()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN, and everything served here
    # must work offline. The schema itself is at /openapi.json.
    app = FastAPI(title="attnmt", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Neural machine translation with attention: translations, n-best lists and "
                              "attention matrices. Every error is {\"error\": {\"field\", \"message\"}}.")
    app.state.batcher = batcher
    app.state.limits = limits
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    # Outermost (added last): a flood is shed before any body is read (attnmt.serve.admission).
    app.add_middleware(AdmissionMiddleware, max_requests=limits.max_queue_sentences,
                       retry_after_s=batcher.retry_after_s)

    _add_routes(app, served, default_model, limits, batcher, started)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


def _add_routes(app: FastAPI, served: dict[str, ServedModel], default_model: str, limits: Limits,
                batcher: DynamicBatcher, started: float) -> None:
    """GET /health, GET /models, POST /translate, POST /explore and the page at /."""

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    async def health() -> HealthResponse:
        """Liveness: answers while a batch decodes, since decoding runs in a worker thread."""
        return HealthResponse(status="ok", models=list(served), uptime_s=round(time.monotonic() - started, 3),
                              queued_sentences=batcher.queued_items, queued_cost=round(batcher.queued_cost, 1))

    @app.get("/models", response_model=ModelsResponse, tags=["service"])
    async def list_models() -> ModelsResponse:
        """The served models (the first is the default) and the request limits."""
        return ModelsResponse(models=[m.info for m in served.values()], limits=limits)

    @app.post("/translate", response_model=TranslateResponse, responses=ERROR_RESPONSES, tags=["translate"])
    async def translate(request: TranslateRequest) -> TranslateResponse:
        """Translate one sentence (`text`) or several (`texts`), batched with concurrent requests.

        A full queue is a 503 with Retry-After (seconds): the request was not queued; send it again later."""
        t0 = time.perf_counter()
        model, texts, key = _resolve(request, served, default_model, limits)
        method = request.alignment_method or model_method(model.translator.config)
        items = [Item(text, request.attention, request.attention_heads, method if request.alignment else None)
                 for text in texts]
        costs = _costs(request, model, texts, key, limits)
        translations, timing = await _submit(batcher, key, items, costs, t0)
        return TranslateResponse(model=model.name, translations=translations, timing=timing)

    @app.post("/explore", response_model=ExploreResponse, responses=ERROR_RESPONSES, tags=["translate"])
    async def explore(request: ExploreRequest) -> ExploreResponse:
        """One sentence's decoding step by step, as the page's explorer shows it: per decoder step the top-k
        next pieces and the attention (every layer and head of a Transformer; e_ij and c_i of an RNN attention
        model), and the beam search tree. `prefix` or `prefix_tokens` force the start of the translation ("what
        if"). Decoded on its own, through the same bounded queue as /translate (503 with Retry-After when full)."""
        t0 = time.perf_counter()
        model, key, item, cost = _explore_job(request, served, default_model, limits)
        records, timing = await _submit(batcher, key, [item], [cost], t0)
        return ExploreResponse(model=model.name, record=records[0], timing=timing)

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


async def _submit(batcher: DynamicBatcher, key, items: list, costs: list, t0: float) -> tuple[list, Timing]:
    """Queue a request's items and wait for their results and the request's timing; a full queue is 503 with
    Retry-After (the request was not queued), a decoding setting the checks let through a 422."""
    try:
        results, info = await batcher.submit(key, items, costs)
    except QueueFull as e:
        raise ApiError(503, None, str(e), headers={"Retry-After": str(e.retry_after_s)}) from None
    except UserError as e:
        raise ApiError(422, None, str(e)) from None
    return results, Timing(queue_ms=_ms(info.queue_s), decode_ms=_ms(info.run_s),
                           total_ms=_ms(time.perf_counter() - t0), batch_size=info.batch_items,
                           batch_requests=info.batch_jobs, batches=info.batches)


def _model(name: str | None, served: Mapping[str, ServedModel], default_model: str) -> ServedModel:
    """The served model a request names (the default when it names none); an unknown name is 404."""
    if name is not None and name not in served:
        raise ApiError(404, "model", f"unknown model {name!r}; available: {', '.join(served)}")
    return served[name or default_model]


def _resolve(request: TranslateRequest, served: Mapping[str, ServedModel], default_model: str,
             limits: Limits) -> tuple[ServedModel, list[str], BatchKey]:
    """The checks that depend on the served models and the limits, which a pydantic class cannot know."""
    model = _model(request.model, served, default_model)
    if (request.text is None) == (request.texts is None):
        raise ApiError(422, "text", "give exactly one of 'text' (a sentence) and 'texts' (a list of sentences)")
    texts = [request.text] if request.text is not None else list(request.texts or [])
    if len(texts) > limits.max_texts:
        raise ApiError(422, "texts", f"{len(texts)} texts in one request; at most {limits.max_texts} are allowed")
    for i, text in enumerate(texts):
        if len(text) > limits.max_text_chars:
            field = "text" if request.text is not None else f"texts[{i}]"
            raise ApiError(422, field, f"the text has {len(text)} characters; at most {limits.max_text_chars} "
                                       "are allowed")
    options = request_options(request, model, limits)
    if request.attention_heads and model.info.heads is None:
        raise ApiError(422, "attention_heads", _no_heads(model))
    if request.alignment and not model.info.has_attention:
        raise ApiError(422, "alignment", f"model {model.name!r} is a {model.info.model_type} model, which has no "
                                         "attention to read word links from")
    job = next(_SAMPLING_JOBS) if options.sample else 0  # a sampling request is decoded on its own
    return model, texts, BatchKey(model.name, options, job)


def _no_heads(model: ServedModel) -> str:
    """Why a model has no per-head attention to return, and what it has instead."""
    exported = getattr(model.translator, "attention_choice", None)  # an exported (CTranslate2) model's
    if exported is not None:
        return (f"model {model.name!r} is exported (CTranslate2), which returns one attention per sentence "
                f"({exported}), not every layer's and head's; ask for \"attention\" or \"alignment\" (read off that "
                "attention) instead, or serve the model folder it was exported from for attention_heads")
    return (f"model {model.name!r} is a {model.info.model_type} model; only models with attention heads "
            "(transformer) have per-head attention")


def _explore_job(request: ExploreRequest, served: Mapping[str, ServedModel], default_model: str,
                 limits: Limits) -> tuple[ServedModel, BatchKey, ExploreItem, int]:
    """The checks of an explore request that need the served models and the limits; its job and cost."""
    model = _model(request.model, served, default_model)
    for field, text in (("text", request.text), ("prefix", request.prefix or "")):
        if len(text) > limits.max_text_chars:
            raise ApiError(422, field, f"the {field} has {len(text)} characters; at most {limits.max_text_chars} "
                                       "are allowed")
    beam = model.info.default_beam if request.beam is None else request.beam
    if beam > limits.max_beam:
        raise ApiError(422, "beam", f"beam={beam} is too large; allowed: 1 to {limits.max_beam}")
    if request.prefix is not None and request.prefix_tokens is not None:
        raise ApiError(422, "prefix_tokens", "give the forced start once: as text (prefix) or as pieces "
                                             "(prefix_tokens), not both")
    vocab = model.translator.tgt.vocab
    for i, piece in enumerate(request.prefix_tokens or []):
        if piece in SPECIALS or piece not in vocab:
            raise ApiError(422, f"prefix_tokens[{i}]", f"{piece[:40]!r} is not a piece model {model.name!r} can "
                                                       "output; use pieces of its output or top_k lists")
    if model.translator.members is not None:
        raise ApiError(422, "model", f"model {model.name!r} is an ensemble; explore reads one model's attention")
    if not hasattr(model.translator, "model"):
        raise ApiError(422, "model", f"model {model.name!r} is exported (CTranslate2), which has no step-by-step "
                                     "decoding to explore; serve the model folder it was exported from")
    # the search and the teacher-forced pass that reads each step: twice a translation's cost
    cost = 2 * sentence_costs(model.translator, [request.text], beam, 1)[0]
    if cost > limits.max_queue_cost:
        raise ApiError(422, "text", f"the request's cost is {cost:,}; this server takes at most "
                                    f"{limits.max_queue_cost:,} at a time: send a shorter sentence or a smaller beam")
    key = BatchKey(model.name, model.translator.decode_options(beam=beam), job=next(_SAMPLING_JOBS), explore=True)
    prefix_tokens = tuple(request.prefix_tokens) if request.prefix_tokens is not None else None
    return model, key, ExploreItem(request.text, request.prefix, prefix_tokens, request.top_k), cost


def _costs(request: TranslateRequest, model: ServedModel, texts: list[str], key: BatchKey,
           limits: Limits) -> list[int]:
    """Each sentence's cost (Limits); a request that alone is over the queue's cost bound could never be queued."""
    beam, n_best = key.options.beam, key.options.n_best
    costs = sentence_costs(model.translator, texts, beam, n_best)
    if sum(costs) > limits.max_queue_cost:
        raise ApiError(422, "texts" if request.texts is not None else "text",
                       f"the request's cost is {sum(costs):,} (beam {beam} x n_best {n_best} x (source tokens "
                       f"+ 1), summed over its {len(texts)} sentences); this server takes at most "
                       f"{limits.max_queue_cost:,} at a time: send fewer or shorter sentences, or a smaller beam "
                       "or n_best")
    return costs


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _load(directory: str | Path) -> Translator:
    from attnmt.decode.translator import load

    return load(directory)


def serve(model_specs: list[str], host: str = "127.0.0.1", port: int = 8000, *, max_batch_size: int = 32,
          max_wait_ms: float = 10.0, max_texts: int = 32, max_text_chars: int = 1000, max_beam: int = 10,
          max_queue_sentences: int = 256, max_queue_cost: int = 100_000, max_batch_cost: float = MAX_BATCH_COST,
          checkpoint: str | None = None, threads: int | None = None, log_level: str = "info", int8: bool = False,
          inter_threads: int = 1) -> None:
    """Load the models (``NAME=DIR`` or ``DIR``) and serve them with uvicorn until interrupted."""
    import torch
    import uvicorn

    limits = _limits(max_texts=max_texts, max_text_chars=max_text_chars, max_beam=max_beam,
                     max_queue_sentences=max_queue_sentences, max_queue_cost=max_queue_cost)
    if not max_batch_cost >= 1:
        raise UserError(f"serve: --max-batch-cost {max_batch_cost} is out of range; allowed: 1 or more")
    if threads is not None:
        torch.set_num_threads(threads)
    if not 0 <= port <= 65535:
        raise UserError(f"serve: --port {port} is out of range; allowed: 0 to 65535")
    if max_batch_size < 1:
        raise UserError(f"serve: --max-batch-size {max_batch_size} is out of range; allowed: 1 or more")
    if max_wait_ms < 0:
        raise UserError(f"serve: --max-wait-ms {max_wait_ms} is out of range; allowed: 0 or more")
    listening = bind(host, port)  # before the models load: a port in use is refused at once
    models = load_models(model_specs, checkpoint=checkpoint, int8=int8, threads=threads, inter_threads=inter_threads)
    app = create_app(models, max_batch_size=max_batch_size,
                     max_wait_ms=max_wait_ms, limits=limits, max_batch_cost=max_batch_cost)
    if not _is_loopback(host):
        print(f"attnmt serve: listening on {host}, reachable from other machines; the API has no authentication")
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level)  # sets up uvicorn's logging
    shown = f"[{host}]" if ":" in host else host
    logging.getLogger("uvicorn.error").info("attnmt serve: http://%s:%d (Ctrl+C to stop)", shown,
                                            listening.getsockname()[1])
    uvicorn.Server(config).run(sockets=[listening])  # uvicorn announces no address for a socket it is given


def bind(host: str, port: int) -> socket.socket:
    """The server's socket, bound to ``host``:``port`` as uvicorn binds it (IPv6 when the host has a colon) and
    handed to uvicorn; a port in use, or an address that cannot be bound, is a UserError naming them instead of
    uvicorn's lines and exit 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart need not wait
        sock.bind((host, port))
    except (OSError, UnicodeError) as e:
        sock.close()
        if getattr(e, "errno", None) == errno.EADDRINUSE:
            raise UserError(f"serve: port {port} on {host} is in use by another program; stop it, or choose "
                            "another --port") from None
        raise UserError(f"serve: cannot listen on {host} port {port} ({getattr(e, 'strerror', None) or e}); "
                        "choose another --host or --port") from None
    return sock


def _limits(**values: int) -> Limits:
    """Limits from the command line's values; an out-of-range one is a UserError naming its flag."""
    import pydantic

    if values["max_queue_sentences"] < values["max_texts"]:
        raise UserError(f"serve: --max-queue-sentences {values['max_queue_sentences']} is below --max-texts "
                        f"{values['max_texts']}: a request of --max-texts sentences could never be queued; raise "
                        "--max-queue-sentences or lower --max-texts")
    try:
        return Limits(**values)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        option = "--" + str(err["loc"][0]).replace("_", "-")
        raise UserError(f"serve: {option}={err.get('input')!r}: {err['msg']}") from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
