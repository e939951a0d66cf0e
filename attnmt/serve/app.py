"""The FastAPI application: POST /translate, POST /explore, GET /health, GET /models, and the page at /.

The routes are one :data:`router` (an APIRouter); each reaches what its app serves (the models, the limits, the
batcher) through the dependency :func:`served`. :func:`create_app` builds an app around already loaded translators
(or model folders) and a :class:`~attnmt.serve.config.ServeConfig`; the CLI's ``attnmt serve`` calls :func:`serve`,
which loads the folders and runs uvicorn. Requests never name files: ``model`` is looked up among the names given
at startup, nothing else.

The event loop only routes. A request's CPU work runs in worker threads: its checks and its sentences' tokenizing
through the input gate (attnmt.decode.inputs) in the thread pool, its decoding in the batcher's thread, its
response rendered to JSON in the thread pool; so /health answers while a large request is read, decoded or sent.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import logging
import socket
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, AsyncIterator, Mapping

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from attnmt import __version__
from attnmt.align import model_method
from attnmt.config.special import SPECIALS
from attnmt.decode.inputs import InputRefused, check_sentences, check_text, gated_tokens
from attnmt.decode.translator import Translator
from attnmt.errors import UserError
from attnmt.runtime.threads import use_threads
from attnmt.serve.admission import AdmissionMiddleware
from attnmt.serve.batching import DynamicBatcher, QueueFull
from attnmt.serve.config import MAX_BATCH_COST, ServeConfig  # noqa: F401 (MAX_BATCH_COST: the app's default)
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

__all__ = ["Served", "create_app", "router", "serve", "served"]

STATIC_DIR = Path(__file__).parent / "static"
ERROR_RESPONSES = {
    400: {"model": ErrorResponse, "description": "the body is not JSON"},
    404: {"model": ErrorResponse, "description": "no model of that name"},
    413: {"model": ErrorResponse, "description": "the body is too large"},
    422: {"model": ErrorResponse, "description": "a field is missing, of the wrong type or out of range"},
    500: {"model": ErrorResponse, "description": "a server bug"},
    503: {"model": ErrorResponse, "description": "the queue is full; retry after the seconds in Retry-After"},
}
_SAMPLING_JOBS = itertools.count(1)


@dataclass(frozen=True)
class Served:
    """What an app serves: its models by name (the first is the default), its limits and its batcher."""

    models: dict[str, ServedModel]
    limits: Limits
    batcher: DynamicBatcher
    started: float = field(default_factory=time.monotonic)

    @property
    def default(self) -> str:
        return next(iter(self.models))


def served(request: Request) -> Served:
    """The dependency through which every route reaches its app's models, limits and batcher."""
    return request.app.state.served


App = Annotated[Served, Depends(served)]
router = APIRouter()


def create_app(models: Mapping[str, Translator | str | Path], config: ServeConfig | None = None,
               **settings) -> FastAPI:
    """The app serving ``models`` (name -> Translator, or name -> model folder to load) as ``config`` says:
    its batching (max_batch_size, max_wait_ms, max_batch_cost) and its ``limits``, which also bound the queue.
    Without a config, ``settings`` are those of its fields (``create_app(models, max_batch_size=8)``)."""
    if not models:
        raise ValueError("create_app needs at least one model")
    config = config if config is not None else ServeConfig(**settings)
    limits = config.limits
    loaded: dict[str, ServedModel] = {}
    for name, model in models.items():
        translator = _load(model) if isinstance(model, (str, Path)) else model  # or an exported model's
        loaded[name] = served_model(name, translator, limits.max_beam)
    batcher = DynamicBatcher(lambda key, items: decode_batch(loaded, key, items), max_batch_size=config.max_batch_size,
                             max_wait_s=config.max_wait_ms / 1000, max_batch_cost=config.max_batch_cost,
                             max_queue_items=limits.max_queue_sentences, max_queue_cost=limits.max_queue_cost)
    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN, and everything served here
    # must work offline. The schema itself is at /openapi.json.
    app = FastAPI(title="attnmt", version=__version__, lifespan=_lifespan, docs_url=None, redoc_url=None,
                  description="Neural machine translation with attention: translations, n-best lists and "
                              "attention matrices. Every error is {\"error\": {\"field\", \"message\"}}.")
    app.state.served = Served(loaded, limits, batcher)
    app.state.batcher, app.state.limits = batcher, limits
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    # Outermost (added last): a flood is shed before any body is read (attnmt.serve.admission).
    app.add_middleware(AdmissionMiddleware, max_requests=limits.max_queue_sentences,
                       retry_after_s=batcher.retry_after_s)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    batcher = app.state.served.batcher
    batcher.start()
    try:
        yield
    finally:
        await batcher.stop()


@router.get("/health", response_model=HealthResponse, tags=["service"])
async def health(app: App) -> HealthResponse:
    """Liveness: answers while a batch decodes, since decoding runs in a worker thread."""
    return HealthResponse(status="ok", models=list(app.models), uptime_s=round(time.monotonic() - app.started, 3),
                          queued_sentences=app.batcher.queued_items, queued_cost=round(app.batcher.queued_cost, 1))


@router.get("/models", response_model=ModelsResponse, tags=["service"])
async def list_models(app: App) -> ModelsResponse:
    """The served models (the first is the default) and the request limits."""
    return ModelsResponse(models=[m.info for m in app.models.values()], limits=app.limits)


@router.post("/translate", response_model=TranslateResponse, responses=ERROR_RESPONSES, tags=["translate"])
async def translate(request: TranslateRequest, app: App) -> JSONResponse:
    """Translate one sentence (`text`) or several (`texts`), batched with concurrent requests.

    A full queue is a 503 with Retry-After (seconds): the request was not queued; send it again later."""
    t0 = time.perf_counter()
    model, key, items, costs = await run_in_threadpool(_translate_job, request, app)
    translations, timing = await _submit(app.batcher, key, items, costs, t0)
    return await _rendered(TranslateResponse(model=model.name, translations=translations, timing=timing))


@router.post("/explore", response_model=ExploreResponse, responses=ERROR_RESPONSES, tags=["translate"])
async def explore(request: ExploreRequest, app: App) -> JSONResponse:
    """One sentence's decoding step by step, as the page's explorer shows it: per decoder step the top-k
    next pieces and the attention (every layer and head of a Transformer; e_ij and c_i of an RNN attention
    model), and the beam search tree. `prefix` or `prefix_tokens` force the start of the translation ("what
    if"); `pin` sets the attention at the step after it (an RNN attention model's, or every head of
    every layer of a Transformer's cross-attention). Decoded on its own,
    through the same bounded queue as /translate (503 with Retry-After when full)."""
    t0 = time.perf_counter()
    model, key, item, cost = await run_in_threadpool(_explore_job, request, app.models, app.default, app.limits)
    records, timing = await _submit(app.batcher, key, [item], [cost], t0)
    return await _rendered(ExploreResponse(model=model.name, record=records[0], timing=timing))


@router.get("/", include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


def _translate_job(request: TranslateRequest, app: Served) -> tuple[ServedModel, BatchKey, list[Item], list[int]]:
    """A translate request's checks, its sentences through the input gate, its items and their costs (in a worker
    thread: tokenizing is CPU work)."""
    model, texts, key = _resolve(request, app.models, app.default, app.limits)
    method = request.alignment_method or model_method(model.translator.config)
    items = [Item(text, request.attention, request.attention_heads, method if request.alignment else None)
             for text in texts]
    return model, key, items, _costs(request, model, texts, key, app.limits)


async def _rendered(response: BaseModel) -> JSONResponse:
    """The response as JSON, rendered in a worker thread (attention matrices make large bodies)."""
    return await run_in_threadpool(lambda: JSONResponse(response.model_dump(mode="json")))


def _refusal(e: InputRefused, single: bool) -> ApiError:
    """The input gate's refusal as a 422 naming the field: the text at fault, or the request's texts."""
    if e.index is None:
        return ApiError(422, "text" if single else "texts", str(e))
    return ApiError(422, "text" if single else f"texts[{e.index}]", str(e.named("the text")))


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
    try:
        check_sentences(texts, limits.inputs())
    except InputRefused as e:
        raise _refusal(e, request.text is not None) from None
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
    for name, text in (("text", request.text), ("prefix", request.prefix or "")):
        try:
            check_text(text, 0, limits.inputs())
        except InputRefused as e:
            raise ApiError(422, name, str(e.named(f"the {name}"))) from None
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
    cost = 2 * sentence_costs(_gated_lengths([request.text], model, limits, True), beam, 1)[0]
    if cost > limits.max_queue_cost:
        raise ApiError(422, "text", f"the request's cost is {cost:,}; this server takes at most "
                                    f"{limits.max_queue_cost:,} at a time: send a shorter sentence or a smaller beam")
    key = BatchKey(model.name, model.translator.decode_options(beam=beam), job=next(_SAMPLING_JOBS), explore=True)
    prefix_tokens = tuple(request.prefix_tokens) if request.prefix_tokens is not None else None
    pin = tuple(request.pin) if request.pin is not None else None
    return model, key, ExploreItem(request.text, request.prefix, prefix_tokens, request.top_k, pin,
                                           request.neighbours), cost


def _costs(request: TranslateRequest, model: ServedModel, texts: list[str], key: BatchKey,
           limits: Limits) -> list[int]:
    """Each sentence's cost (Limits); a request that alone is over the queue's cost bound could never be queued."""
    beam, n_best = key.options.beam, key.options.n_best
    costs = sentence_costs(_gated_lengths(texts, model, limits, request.text is not None), beam, n_best)
    if sum(costs) > limits.max_queue_cost:
        raise ApiError(422, "texts" if request.texts is not None else "text",
                       f"the request's cost is {sum(costs):,} (beam {beam} x n_best {n_best} x (source tokens "
                       f"+ 1), summed over its {len(texts)} sentences); this server takes at most "
                       f"{limits.max_queue_cost:,} at a time: send fewer or shorter sentences, or a smaller beam "
                       "or n_best")
    return costs


def _gated_lengths(texts: list[str], model: ServedModel, limits: Limits, single: bool) -> list[int]:
    """Each text's source tokens, counted through the input gate with the limits of a request to ``model``."""
    inputs = limits.inputs(getattr(model.translator, "limits", None))
    try:
        return [len(tokens) for tokens in gated_tokens(texts, model.translator.src.tokens, inputs)]
    except InputRefused as e:
        raise _refusal(e, single) from None


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _load(directory: str | Path) -> Translator:
    from attnmt.decode.translator import load

    return load(directory)


def serve(config: ServeConfig) -> None:
    """Load the models of ``config`` (``NAME=DIR`` or ``DIR``) and serve them with uvicorn until interrupted; the
    server's thread count is set here, for the whole process (:func:`attnmt.runtime.threads.use_threads`)."""
    import uvicorn

    use_threads(config.load.threads)
    host, port = config.host, config.port
    listening = bind(host, port)  # before the models load: a port in use is refused at once
    models = load_models(list(config.models), config.load)
    app = create_app(models, config)
    if not _is_loopback(host):
        print(f"attnmt serve: listening on {host}, reachable from other machines; the API has no authentication")
    uvicorn_config = uvicorn.Config(app, host=host, port=port, log_level=config.log_level)  # sets up its logging
    shown = f"[{host}]" if ":" in host else host
    logging.getLogger("uvicorn.error").info("attnmt serve: http://%s:%d (Ctrl+C to stop)", shown,
                                            listening.getsockname()[1])
    uvicorn.Server(uvicorn_config).run(sockets=[listening])  # uvicorn announces no address for a socket it is given


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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
