"""`attnmt serve`: an HTTP API and a page for translating with attention, with dynamic batching.

    from attnmt.serve import create_app
    app = create_app({"en-de": "models/en-de"}, max_batch_size=32)   # a FastAPI app

Modules: ``app`` (the app factory and ``serve``), ``batching`` (the dynamic batcher), ``engine``
(decoding a batch), ``options`` (a request's decoding options), ``schema`` (request/response bodies),
``errors`` (the error shape), and ``static/`` (the page). Needs the ``serve`` extra: ``pip install attnmt[serve]``.
"""

from __future__ import annotations

from attnmt.serve.app import create_app, serve
from attnmt.serve.schema import Limits

__all__ = ["Limits", "create_app", "serve"]
