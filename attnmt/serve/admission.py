"""The first bound a request meets: how many requests the server holds at once, counted before any body is read.

The queue (attnmt.serve.batching) bounds the work admitted by sentences and by cost, but it sees a request only
after its body was read, parsed and validated, which costs the event loop more than decoding a short sentence.
Under a flood the requests then wait unseen in front of the queue, and their latency grows with the flood. This
pure ASGI layer sheds them before that: a translating request that arrives while ``max_requests`` are held gets
503 with Retry-After at once, with its body unread. Every request holds at least one sentence, so
``max_requests`` is the queue's sentence bound: the two shed at about the same point.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from attnmt.serve.errors import error_json

SHED_PATHS = ("/translate", "/explore")  # the requests that queue work; pages, /health and /models never wait


class AdmissionMiddleware:
    """503 + Retry-After for a translating request that arrives while ``max_requests`` are in the server."""

    def __init__(self, app: ASGIApp, max_requests: int, retry_after_s: Callable[[], int]) -> None:
        self.app = app
        self.max_requests = max_requests
        self.retry_after_s = retry_after_s
        self.held = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in SHED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.held >= self.max_requests:
            retry = self.retry_after_s()
            busy = error_json(503, None, f"the server is busy: {self.held} requests are in it and at most "
                                         f"{self.max_requests} may be; retry in {retry} s",
                              headers={"Retry-After": str(retry)})
            await busy(scope, receive, send)
            return
        self.held += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.held -= 1
