"""The HTTP API's request and response bodies (pydantic), which FastAPI also turns into the OpenAPI schema.

Requests are validated strictly (``strict=True``: ``"3"`` is not a beam size, ``1`` is not a text)
and unknown fields are rejected (``extra="forbid"``), so a typo such as ``"beem"`` is an error that
names the field instead of a silently ignored option. Limits that the server operator configures
(the most texts per request, characters per text, the largest beam) are not in these classes but in
:class:`Limits`, checked by the endpoint; GET /models reports them.

Two sets of fields are derived, not written here: a request's decoding fields are the decoding options that a
request may set (:class:`attnmt.config.decoding.DecodeOptions`: their types, ranges and help), and a translation's
fields are those of :class:`attnmt.decode.translation.Translation`, with the JSON types below where a field is not
JSON as it is (attention as nested lists), and the server's own ``attention_heads``.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from attnmt.config.decoding import option_fields, option_type
from attnmt.decode.inputs import MAX_REQUEST_SENTENCES, InputLimits
from attnmt.decode.translation import Translation as TranslationResult

MAX_EXPLORE_TOP_K = 50  # attnmt.decode.steps.MAX_TOP_K
# The decoding fields whose upper bound is the server's own, Limits.max_beam, checked by the endpoint
LIMITED_BY_THE_SERVER = ("beam", "n_best")
MAX_PREFIX_TOKENS = 1_000


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the text is empty (or only whitespace); send the sentence to translate")
    try:
        # JSON may carry a lone surrogate ("\ud800"), which no tokenizer, and no UTF-8 response, can hold
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text is not valid Unicode (it has a lone surrogate escape such as \\ud800)") from None
    return text


# A sentence to translate: any string with a non-whitespace character.
SourceText = Annotated[str, AfterValidator(_not_blank)]


class Limits(BaseModel):
    """What one request may ask for and how much work may wait; set by whoever starts the server.

    A sentence's cost is ``beam x n_best x (its source tokens + 1)`` (beam 1 when sampling): an estimate
    of the decoder's work that grows with each of the three. The queue holds the sentences of the
    requests admitted and not yet answered; a request that would take it over ``max_queue_sentences``
    or ``max_queue_cost`` gets 503 with Retry-After, and a request whose own cost is over
    ``max_queue_cost`` a 422. What a request brings in is checked by the input gate (attnmt.decode.inputs) with
    the limits of :meth:`inputs`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_texts: int = Field(32, ge=1, le=MAX_REQUEST_SENTENCES, description="most sentences in one request")
    max_text_chars: int = Field(1000, ge=1, description="most characters in one sentence")
    max_beam: int = Field(10, ge=1, le=100, description="largest beam size (n_best is at most the beam)")
    max_body_bytes: int = Field(1_000_000, ge=1024, description="largest request body; larger ones get 413")
    max_queue_sentences: int = Field(256, ge=1, description="most sentences queued or decoding; more get 503")
    max_queue_cost: int = Field(100_000, ge=1, description="most cost (beam x n_best x (source tokens + 1) per "
                                                           "sentence) queued or decoding; more get 503")

    def inputs(self, translator: InputLimits | None = None) -> InputLimits:
        """The input gate's limits of a request to a model whose translator has ``translator`` (its sentence
        bytes and tokens): at most max_texts sentences of max_text_chars characters, and at most max_queue_cost
        source tokens in all, since a request's cost is at least its tokens."""
        return (translator or InputLimits()).replace(line_chars=self.max_text_chars, sentences=self.max_texts,
                                                     request_tokens=self.max_queue_cost)

    @model_validator(mode="after")
    def _a_full_request_fits(self) -> "Limits":
        if self.max_queue_sentences < self.max_texts:
            raise ValueError(f"max_queue_sentences ({self.max_queue_sentences}) is below max_texts "
                             f"({self.max_texts}): a request of max_texts sentences could never be queued")
        return self


class _RequestBase(BaseModel):
    """What a translate request holds besides its decoding options."""

    model_config = ConfigDict(
        strict=True, extra="forbid",
        json_schema_extra={"examples": [{"text": "the cat sleeps", "beam": 5, "n_best": 3, "attention": True},
                                         {"text": "the cat sleeps", "sample": True, "top_p": 0.9, "n_best": 3,
                                          "seed": 1}]},
    )

    text: Optional[SourceText] = Field(None, description="one sentence")
    # at most MAX_REQUEST_SENTENCES, counted before a text is looked at (the server's own max_texts: the app)
    texts: Optional[list[SourceText]] = Field(None, min_length=1, max_length=MAX_REQUEST_SENTENCES,
                                              description="several sentences (a batch)")
    model: Optional[str] = Field(None, description="a name from GET /models; default: the first model")
    attention: bool = Field(False, description="return each translation's attention matrix")
    attention_heads: bool = Field(False, description="Transformer models only: return every decoder layer's "
                                                     "and head's cross-attention")
    alignment: bool = Field(False, description="return word links between the source's and the translation's "
                                               "whitespace-separated words, read off the attention")
    alignment_method: Optional[Literal["argmax", "threshold", "shift", "mutual", "shift-mutual"]] = Field(
        None, description="how attention becomes links, as `attnmt align --method` (docs/alignment.md); "
                          "default: the model's own (shift if it was guided on that row, else argmax)")


def _decoding_field(f: dataclasses.Field) -> tuple[Any, Any]:
    """A request field for the decoding option ``f``: its type, range and help; left out (null), the model's
    decode.* or the option's default."""
    kind, _ = option_type(f.name)
    default = f"the model's decode.{f.name}" if f.metadata["config"] else f"{f.default}".lower()
    description = f"{f.metadata['help']}; default: {default}"
    if kind is bool:
        return bool, Field(f.default, description=description)
    bounds: dict[str, Any] = {"allow_inf_nan": False} if kind is float else {}
    allowed = f.metadata.get("range")
    if allowed is not None and allowed.low is not None:
        bounds["gt" if allowed.above else "ge"] = allowed.low
    if allowed is not None and allowed.high is not None and f.name not in LIMITED_BY_THE_SERVER:
        bounds["le"] = allowed.high
    return Optional[kind], Field(None, description=description, **bounds)


# POST /translate. Its decoding fields are the options a request may set (option_fields("request")).
TranslateRequest = create_model(
    "TranslateRequest", __base__=_RequestBase, __doc__="POST /translate. Give exactly one of `text` and `texts`.",
    **{f.name: _decoding_field(f) for f in option_fields("request")})

# The JSON of the fields of attnmt.decode.translation.Translation that are not JSON as they are, and what they say;
# a field not named here is sent as its annotation says.
JSON_FIELDS: dict[str, tuple[Any, Any]] = {
    "source": (str, Field(description="the input sentence, as sent")),
    "tgt_tokens": (list[str], Field(description="the output tokens, without </s>")),
    "score": (Optional[float], Field(description="length-normalised log probability (higher is better; null if "
                                                 "not finite)")),
    "attention": (Optional[list[list[float]]], Field(
        None, description="[len(tgt_tokens) + 1][len(src_tokens)]: one row per output token and a last row "
                          "for </s>; each row sums to 1. Null unless `attention` was asked for, or the "
                          "model has no attention (seq2seq)")),
    "alignment": (Optional[list[tuple[int, int]]], Field(
        None, description="[[source word, output word], ...], 0-based positions among the whitespace-separated "
                          "words of `source` and `text`, sorted. Null unless `alignment` was asked for")),
}
# The server's own fields of a translation
SERVER_FIELDS: dict[str, tuple[Any, Any]] = {
    "attention_heads": (Optional[list[list[list[list[float]]]]], Field(
        None, description="[layers][heads][len(tgt_tokens) + 1][len(src_tokens)]: the Transformer's "
                          "cross-attention per decoder layer and head. Null unless asked for")),
}


def _response_model(name: str, doc: str, names: tuple[str, ...] | None = None, **more: tuple[Any, Any]):
    """The pydantic model of the fields ``names`` (None: all) of attnmt.decode.translation.Translation, in its
    order, in their JSON (JSON_FIELDS, or ``more``), with the other fields of ``more`` after them."""
    hints = typing.get_type_hints(TranslationResult)
    fields = {f.name: JSON_FIELDS.get(f.name, (hints[f.name], ...)) for f in dataclasses.fields(TranslationResult)
              if names is None or f.name in names}
    return create_model(name, __doc__=doc, **{**fields, **more})


# One entry of a translation's n-best list: its text, tokens and score
Hypothesis = _response_model("Hypothesis", "One entry of the n-best list.", ("text", "tgt_tokens", "score"))
# One sentence's best translation: every field of attnmt.decode.translation.Translation (its n-best list of
# Hypothesis), and the server's own
Translation = _response_model(
    "Translation", "One sentence's best translation.", **SERVER_FIELDS,
    n_best=(list[Hypothesis], Field(description="the n_best hypotheses, best first (the first is this one)")))


class Timing(BaseModel):
    """Where the request's time went; batch_* show the dynamic batching at work."""

    queue_ms: float = Field(description="waiting to be batched (and for the batches before and between its own)")
    decode_ms: float = Field(description="decoding the batches this request was part of")
    total_ms: float = Field(description="in the server, from the parsed request to the response")
    batch_size: int = Field(description="sentences decoded together with (and including) this request's, in "
                                        "its first batch")
    batch_requests: int = Field(description="requests in that batch")
    batches: int = Field(1, description="batches this request's sentences were decoded in: a request over "
                                        "max_batch_size sentences or max_batch_cost is split")


class TranslateResponse(BaseModel):
    model: str
    translations: list[Translation] = Field(description="one per input sentence, in input order")
    timing: Timing


class ExploreRequest(BaseModel):
    """POST /explore: one sentence's decoding step by step (docs/explore.md)."""

    model_config = ConfigDict(strict=True, extra="forbid",
                              json_schema_extra={"examples": [{"text": "the cat sleeps", "beam": 5},
                                                              {"text": "the cat sleeps", "prefix_tokens": ["le"]}]})

    text: SourceText = Field(description="one sentence")
    model: Optional[str] = Field(None, description="a name from GET /models; default: the first model")
    beam: Optional[int] = Field(None, ge=1, description="beam size; 1 is greedy search; default: the model's")
    prefix: Optional[str] = Field(None, description="force the translation to start with this text (the target "
                                                    "language's); the rest is the best continuation")
    prefix_tokens: Optional[list[str]] = Field(None, max_length=MAX_PREFIX_TOKENS,
                                               description="the forced start as target pieces, e.g. the outputs of "
                                                           "the steps before one and a piece of its top_k")
    top_k: int = Field(10, ge=1, le=MAX_EXPLORE_TOP_K, description="next pieces listed per decoder step")
    pin: Optional[list[int]] = Field(None, max_length=MAX_PREFIX_TOKENS,
                                     description="edit the attention: source piece positions (0-based) that share "
                                                 "it equally at the step right after the forced prefix; the "
                                                 "record is the translation decoded from there (an RNN "
                                                 "attention model's attention or a Transformer's "
                                                 "cross-attention)")
    neighbours: int = Field(0, ge=0, le=10, description="per decoder step, this many nearest decoder states of "
                                                        "the model's held-out sentences, with their sentences "
                                                        "(0: none)")


class ExploreResponse(BaseModel):
    model: str
    record: dict[str, Any] = Field(description="the explore record: source and output as pieces and words, per "
                                               "decoder step the top-k next pieces and the attention row, the "
                                               "beam search tree (docs/explore.md)")
    timing: Timing


class ModelInfo(BaseModel):
    name: str
    src_lang: str
    tgt_lang: str
    model_type: str = Field(description="model.type: a name in attnmt.models.MODELS (seq2seq, rnnsearch, transformer)")
    has_attention: bool = Field(True, description="whether the model has attention (and so alignments)")
    parameters: int = Field(description="number of trainable parameters")
    default_beam: int
    layers: Optional[int] = Field(description="decoder layers with cross-attention (Transformer), else null")
    heads: Optional[int] = Field(description="attention heads per layer (Transformer), else null")
    examples: list[str] = Field(default_factory=list, description="a few source sentences of the model's held-out "
                                                                  "data, to try it with")


class ModelsResponse(BaseModel):
    models: list[ModelInfo] = Field(description="the served models; the first is the default")
    limits: Limits


class HealthResponse(BaseModel):
    status: Literal["ok"]
    models: list[str]
    uptime_s: float
    queued_sentences: int = Field(0, description="sentences of admitted requests, waiting or decoding")
    queued_cost: float = Field(0.0, description="their cost (Limits)")


class ErrorDetail(BaseModel):
    field: Optional[str] = Field(description="the request field at fault, e.g. 'beam' or 'texts[2]'; "
                                             "'body' for the body as a whole; null when no field is")
    message: str


class ErrorResponse(BaseModel):
    """Every error, whatever its status: {"error": {"field": ..., "message": ...}}."""

    error: ErrorDetail
