"""What a server runs with: :class:`ServeConfig`, built once (by ``attnmt serve`` from its flags, or in Python)
and read by the app factory (:func:`attnmt.serve.app.create_app`) and the server (:func:`attnmt.serve.server.serve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnmt.config.load_options import LoadOptions
from attnmt.errors import UserError
from attnmt.serve.schema import Limits

__all__ = ["LOG_LEVELS", "MAX_BATCH_COST", "ServeConfig"]

MAX_BATCH_COST = 10_000  # about 32 sentences of 60 tokens at beam 5 (cost: see Limits)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@dataclass(frozen=True)
class ServeConfig:
    """The models to serve, where to listen, how to batch, what a request may ask for, how to decode.

    ``models``: ``NAME=DIR`` or ``DIR`` (named after its folder), the first the default (``serve`` loads them;
    ``create_app`` takes loaded translators and leaves this empty). ``max_batch_size``: the most sentences decoded
    together (1: one at a time); ``max_wait_ms``: how long the first request of a batch waits for others to join
    it; ``max_batch_cost``: the most cost (see :class:`Limits`) in one batch: a larger request is split and decoded
    in turns with the others (attnmt.serve.batching). ``limits`` bound a request and the queue. ``load``: how the
    models load and decode (:class:`attnmt.config.load_options.LoadOptions`: checkpoint, int8, the compiled step,
    threads; ``load.threads`` is the server's: torch's for the process, CTranslate2's per batch for an exported
    model). A value out of range is a UserError naming the flag of ``attnmt serve`` that sets it.
    """

    models: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    max_batch_size: int = 32
    max_wait_ms: float = 10.0
    max_batch_cost: float = MAX_BATCH_COST
    limits: Limits = field(default_factory=Limits)
    load: LoadOptions = field(default_factory=LoadOptions)
    log_level: str = "info"

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        if not self.max_batch_cost >= 1:
            raise UserError(f"serve: --max-batch-cost {self.max_batch_cost} is out of range; allowed: 1 or more")
        if not 0 <= self.port <= 65535:
            raise UserError(f"serve: --port {self.port} is out of range; allowed: 0 to 65535")
        if self.max_batch_size < 1:
            raise UserError(f"serve: --max-batch-size {self.max_batch_size} is out of range; allowed: 1 or more")
        if not self.max_wait_ms >= 0:
            raise UserError(f"serve: --max-wait-ms {self.max_wait_ms} is out of range; allowed: 0 or more")
        if self.log_level not in LOG_LEVELS:
            raise UserError(f"serve: --log-level {self.log_level!r} is unknown; allowed: {', '.join(LOG_LEVELS)}")

    @classmethod
    def from_options(cls, models, *, max_texts: int = 32, max_text_chars: int = 1000, max_beam: int = 10,
                     max_queue_sentences: int = 256, max_queue_cost: int = 100_000, **options) -> "ServeConfig":
        """A config from ``attnmt serve``'s options, the limits among them given one by one (an out-of-range one
        is a UserError naming its flag); ``options``: the other fields."""
        limits = _limits(max_texts=max_texts, max_text_chars=max_text_chars, max_beam=max_beam,
                         max_queue_sentences=max_queue_sentences, max_queue_cost=max_queue_cost)
        return cls(models=tuple(models), limits=limits, **options)


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
