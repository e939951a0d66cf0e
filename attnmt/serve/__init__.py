"""`attnmt serve`: an HTTP API and a page for translating with attention, with dynamic batching.

    from attnmt.serve import ServeConfig, create_app
    app = create_app({"en-de": "models/en-de"}, ServeConfig(max_batch_size=32))   # a FastAPI app
    app = create_app({"en-de": "models/en-de"}, max_batch_size=32)                # the same

Modules: ``app`` (the routes, the app factory and ``serve``), ``config`` (``ServeConfig``), ``admission`` (the
first bound), ``batching`` (the dynamic batcher), ``engine`` (decoding a batch), ``options`` (a request's decoding
options), ``schema`` (request/response bodies, ``Limits``), ``errors`` (the error shape), and ``static/`` (the
page). Needs the ``serve`` extra: ``pip install attnmt[serve]``.
"""

from __future__ import annotations

from attnmt.serve.app import create_app, serve
from attnmt.serve.config import ServeConfig
from attnmt.serve.schema import Limits

__all__ = ["Limits", "ServeConfig", "create_app", "serve"]
