"""How a model folder is loaded for decoding: one frozen dataclass, checked once when it is built.

:class:`LoadOptions` is what every entry point that loads a model builds and passes down: the command line's
``--checkpoint``, ``--int8``, ``--compile``, ``--threads`` and ``--inter-threads`` (``attnmt.cli.common.load_options``),
``attnmt.load``'s keywords, the server's ``ServeConfig.load`` and the explorer. ``attnmt.decode.translator.load``
reads it, and hands an exported folder's to the CTranslate2 translator. A field's range is declared once, here: the
command line checks its flag against it. Adding a load option is a field here, the code in ``load`` that reads it,
its flag, and its test.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional

from attnmt.config.bounds import MAX_WORKERS
from attnmt.config.typed import check_declared, ranged
from attnmt.errors import UserError, closest

__all__ = ["LoadOptions"]


@dataclass(frozen=True)
class LoadOptions:
    """``checkpoint``: best, last, averaged, stepN or ema (default: best, else last). ``device``: torch's device.
    ``int8``: int8 matrix products (CPU only; :mod:`attnmt.models.int8`). ``compile_step``: the decoder step
    compiled by torch.compile, paid at load (:mod:`attnmt.models.compiled`). ``threads``: torch's threads while a
    model folder decodes, or CTranslate2's per batch for an exported one. ``inter_threads``: batches an exported
    model decodes at the same time."""

    checkpoint: Optional[str] = None
    device: str = "cpu"
    int8: bool = False
    compile_step: bool = False
    threads: Optional[int] = ranged(None, 1, MAX_WORKERS)
    inter_threads: int = ranged(1, 1, MAX_WORKERS)

    def __post_init__(self) -> None:
        if self.int8 and self.device != "cpu":
            raise UserError(f"int8 decoding runs on a CPU only, not on {self.device}; drop --int8 or use the CPU")
        try:
            check_declared(self, "")  # the ranges the command line's --threads and --inter-threads check too
        except UserError as e:
            raise UserError(f"load: {str(e).removeprefix('config: ')}") from None

    @classmethod
    def of(cls, options: "LoadOptions | None" = None, **settings) -> "LoadOptions":
        """``options`` (default: the defaults) with the keyword ``settings`` on top; an unknown keyword is a
        UserError naming the closest field."""
        names = [f.name for f in fields(cls)]
        for key in settings:
            if key not in names:
                near = closest(key, names)
                hint = f"; did you mean {near!r}?" if near else f"; the options: {', '.join(names)}"
                raise UserError(f"load: unknown option {key!r}{hint}")
        return replace(options or cls(), **settings)
