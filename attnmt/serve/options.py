"""A translate request's decoding options: the model's ``decode.*`` with the request's decoding fields on top
(:class:`attnmt.config.decoding.DecodeOptions`), checked against the server's limits first. Every refusal is a 422
that names the field at fault."""

from __future__ import annotations

from typing import Any

from attnmt.config.decoding import DecodeOptions, OptionError, option_fields
from attnmt.errors import UserError
from attnmt.serve.engine import ServedModel
from attnmt.serve.errors import ApiError
from attnmt.serve.schema import Limits

__all__ = ["request_options"]


def request_options(request, model: ServedModel, limits: Limits) -> DecodeOptions:
    """The decoding options of ``request`` (a TranslateRequest) for ``model``: beam and n_best within the limits
    (Limits.max_beam), min_len within the model's output cap, and then the options' own checks."""
    given = {f.name: getattr(request, f.name) for f in option_fields("request")}
    if given["sample"]:
        _check_sampling(given, limits)
    else:
        _check_search(given, model, limits)
    _check_min_len(given, model)
    try:
        return model.translator.decode_options(**given)
    except UserError as e:
        field = e.option if isinstance(e, OptionError) and e.option in given else None
        raise ApiError(422, field, str(e)) from None


def _check_search(given: dict[str, Any], model: ServedModel, limits: Limits) -> None:
    """A search request: no sampling field, the beam (the model's, at most max_beam, when left out) within the limits
    and n_best at most the beam."""
    for f in option_fields("sampling"):
        if given[f.name] is not None:
            raise ApiError(422, f.name, f"{f.name} belongs to sampling; add \"sample\": true or leave it out")
    beam = given["beam"] = model.info.default_beam if given["beam"] is None else given["beam"]
    if beam > limits.max_beam:
        raise ApiError(422, "beam", f"beam={beam} is too large; allowed: 1 to {limits.max_beam}")
    n_best = given["n_best"] or 1
    if n_best > beam:
        raise ApiError(422, "n_best", f"n_best={n_best} is larger than the beam ({beam}); allowed: 1 to {beam}")


def _check_sampling(given: dict[str, Any], limits: Limits) -> None:
    """A sampling request: no beam, and at most max_beam samples per sentence."""
    if given["beam"] not in (None, 1):
        raise ApiError(422, "beam", f"beam={given['beam']} with sample: sampling draws each token and beam search "
                                    "keeps the best ones; leave beam out (or 1) to sample")
    n_best = given["n_best"] or 1
    if n_best > limits.max_beam:
        raise ApiError(422, "n_best", f"n_best={n_best} samples per sentence are too many; allowed: 1 to "
                                      f"{limits.max_beam}")


def _check_min_len(given: dict[str, Any], model: ServedModel) -> None:
    """min_len (the request's, else the model's) at most the model's cap on the output length."""
    decode = model.translator.config.decode
    min_len = decode.min_len if given["min_len"] is None else given["min_len"]
    cap = decode.max_len_cap
    if cap is not None and min_len > cap:
        raise ApiError(422, "min_len", f"min_len={min_len} is above model {model.name!r}'s maximum output length "
                                       f"({cap}, decode.max_len_cap); allowed: 0 to {cap}")
