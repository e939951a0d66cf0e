"""A trained Transformer exported to CTranslate2 (the C++ inference engine, PyPI ``ctranslate2``, the
``.[ct2]`` extra): :mod:`attnmt.export.convert` writes the folder (``attnmt export``),
:mod:`attnmt.export.ct2_translator` translates with it behind the interface of
:class:`attnmt.decode.translator.Translator` (``attnmt.load`` picks it for such a folder).
"""

from __future__ import annotations

from pathlib import Path

from attnmt.errors import UserError

EXPORT_FILE = "attnmt_export.json"  # what the exporter wrote: format, quantization, attention choice
QUANTIZATIONS = ("float32", "int8", "int16", "bfloat16")


def is_exported(model_dir: str | Path) -> bool:
    """Whether ``model_dir`` is a folder written by ``attnmt export --format ctranslate2``."""
    return (Path(model_dir) / EXPORT_FILE).is_file()


def require_ctranslate2():
    """The ``ctranslate2`` module, or a UserError that says how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError("CTranslate2 is not installed; install it with pip install 'attnmt[ct2]' "
                        "(or pip install 'ctranslate2>=4.0')") from None
    return ctranslate2
