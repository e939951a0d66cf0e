"""Every error as one JSON shape, {"error": {"field": ..., "message": ...}}, and a body-size guard.

FastAPI's own errors (a list of pydantic error dicts for a 422, {"detail": ...} otherwise) are
replaced by handlers registered in :func:`install_error_handlers`, so that a client, and the page,
can always show ``error.message`` and point at ``error.field``.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attnmt.decode.inputs import InputRefused, check_count
from attnmt.serve.schema import Limits, TranslateRequest

__all__ = ["ApiError", "BodyLimitMiddleware", "error_json", "install_error_handlers"]

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A request the server refuses: the HTTP status, the field at fault and what to do."""

    def __init__(self, status: int, field: str | None, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers


def error_json(status: int, field: str | None, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}}, status_code=status, headers=headers)


def field_name(loc: Sequence[Any]) -> str:
    """('texts', 2) -> 'texts[2]'; ('a', 'b') -> 'a.b'; () -> 'body'."""
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "body"


def _validation_error(exc: RequestValidationError, limits: Limits | None) -> JSONResponse:
    """The first of pydantic's errors, as 400 (not JSON at all) or 422 (JSON, but not a valid request); more texts
    than any server takes (counted before any is validated) in the words of the input gate, with ``limits``."""
    errors = exc.errors()
    if not errors:
        return error_json(422, "body", "invalid request")
    err = errors[0]
    loc = list(err.get("loc", ()))
    if loc and loc[0] == "body":  # FastAPI prefixes where the value came from
        loc = loc[1:]
    kind = err.get("type", "")
    if kind == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "")
        return error_json(400, "body", f"the body is not valid JSON ({detail}); send a JSON object such as "
                                       '{"text": "a sentence"}')
    if kind == "extra_forbidden":
        allowed = ", ".join(TranslateRequest.model_fields)
        return error_json(422, field_name(loc), f"unknown field; the fields are: {allowed}")
    if kind == "too_long" and loc == ["texts"] and limits is not None:
        try:
            check_count(int((err.get("ctx") or {}).get("actual_length", 0)), limits.inputs())
        except InputRefused as e:
            return error_json(422, "texts", str(e))
    if kind == "missing" and not loc:
        return error_json(422, "body", 'the request has no JSON body; send e.g. {"text": "a sentence"}')
    message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        message = 'the body must be a JSON object sent as Content-Type: application/json, e.g. {"text": "a sentence"}'
    return error_json(422, field_name(loc), message)


def install_error_handlers(app: FastAPI) -> None:
    """Route every error, expected or not, to the one JSON shape."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_json(exc.status, exc.field, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc, getattr(request.app.state, "limits", None))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # unknown path (404), wrong method (405): not about a field
        response = error_json(exc.status_code, None, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not the client's fault: log the traceback, tell the client no more than that.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_json(500, None, "internal server error; the server log has the details")


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413 before anything parses them.

    Pure ASGI so that it also covers chunked bodies without a Content-Length: the body is read
    here, counted, and handed on whole.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_large = error_json(413, "body", f"the request body is over {self.max_bytes} bytes; send fewer or "
                                            "shorter texts")
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isascii() and length.isdigit() and int(length) > self.max_bytes:
            await too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # afterwards only a disconnect can come

        await self.app(scope, replay, send)
