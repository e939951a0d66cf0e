"""A trained model folder as a translator: text in; text, tokens and attention out."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attnmt.config.decoding import DecodeOptions, OptionError
from attnmt.config.load_options import LoadOptions
from attnmt.config.schema import Config
from attnmt.data.batching import collate
from attnmt.data.dataset import TextProcessor, load_processors
from attnmt.data.pretokenize import model_pretokenizers
from attnmt.decode.forced import eval_mode
from attnmt.decode.inputs import (  # MAX_SOURCE_TOKENS, SentenceTooLong re-exported: attnmt.cli, tests
    MAX_SOURCE_TOKENS,  # noqa: F401
    InputLimits,
    InputRefused,
    SentenceTooLong,  # noqa: F401
    check_sentences,
    gated_tokens,
    sentence_list,
)
from attnmt.decode.parallel import map_in_processes
from attnmt.decode.search import beam_search, greedy_search
from attnmt.decode.translation import (
    Translation,
    call_options,
    decoding_batches,
    model_config,
    prefix_texts,
    search_arguments,
)
from attnmt.errors import UserError
from attnmt.folder.checkpoint import checkpoint_path, load_folder_checkpoint, load_weights
from attnmt.models import build_model
from attnmt.runtime.threads import threads_for

if typing.TYPE_CHECKING:
    from attnmt.decode.sampling import Sampling


class Translator:
    """Batched translation with greedy or beam search.

    ``limits``: what translate() and explore() accept (:class:`attnmt.decode.inputs.InputLimits`), refused in one
    line by the input gate: :func:`load` gives 512 tokens and 1 MiB a sentence; by default here (a model in
    training), 1 MiB and no token limit. ``threads``: torch's threads while it decodes, set for each call and
    restored after it (None: the caller's)."""

    def __init__(self, model: nn.Module, src: TextProcessor, tgt: TextProcessor, config: Config,
                 limits: InputLimits | None = None, threads: int | None = None):
        self.model = model
        self.src = src
        self.tgt = tgt
        self.config = config
        self.device = next(model.parameters()).device
        self.limits = InputLimits(sentence_tokens=None) if limits is None else limits
        self.threads = threads
        self.model_dir: Path | None = None  # the folder it was loaded from (load() sets it)
        self.members: list[Translator] | None = None  # an ensemble's own translators (load_ensemble sets them)
        # How raw text is split into the words the model was trained on, source and target (load() sets them from
        # data.pretokenize: attnmt.data.pretokenize.model_pretokenizers); None: text is read as it is.
        self.split_source: Callable[[str], str] | None = None
        self.split_target: Callable[[str], str] | None = None
        self.compile_seconds: float | None = None  # load(compile_step=True): the decoder step's compilation

    @property
    def max_src_tokens(self) -> int | None:
        """The most tokens of a source sentence (``limits.sentence_tokens``): translate() refuses a longer one
        with SentenceTooLong; None: no limit but the sentence's bytes."""
        return self.limits.sentence_tokens

    @max_src_tokens.setter
    def max_src_tokens(self, tokens: int | None) -> None:
        self.limits = self.limits.replace(sentence_tokens=tokens)

    @property
    def model_type(self) -> str:
        return self.config.model.type

    @property
    def has_attention(self) -> bool:
        """Whether the model attends over the source (a capability the model class declares)."""
        return bool(getattr(self.model, "has_attention", False))

    @property
    def has_heads(self) -> bool:
        """Whether the model's attention has layers and heads to choose from (the Transformer's)."""
        return bool(getattr(self.model, "has_heads", False))

    @property
    def has_self_attention(self) -> bool:
        """Whether the model gives its encoder's and decoder's self-attention (the Transformer's)."""
        return bool(getattr(self.model, "has_self_attention", False))

    def parameter_count(self) -> int:
        """The model's trained parameters (GET /models)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    @torch.inference_mode()
    def translate(self, sentences: str | list[str], *, options: DecodeOptions | None = None,
                  prefix: str | list[str | None] | None = None, sampling: "Sampling | None" = None,
                  **given) -> Translation | list[Translation]:
        """Translate one sentence (a str: one Translation) or a list of them (a list, in the input's order).

        The decoding options are keyword arguments (``beam=5``, ``n_best=3``, ``min_len=2``, ...), each
        :class:`attnmt.config.decoding.DecodeOptions` field, which says what it does; one left out (or None) is the
        model's ``decode.*`` where the config has it, else the field's default. ``options=`` a DecodeOptions is used
        as it is (:meth:`decode_options` gives the model's with changes), with any keyword options on top.
        ``sampling`` (:class:`attnmt.decode.sampling.Sampling`) is ``sample=True`` with its settings: ``n_best``
        samples per sentence instead of a search (no beam), seeded per batch. A value out of its option's range, or
        not finite, is a UserError, as on the command line; so is a sentence over :attr:`limits`
        (:mod:`attnmt.decode.inputs`), before any decoding.

        Sentences of similar length are decoded together, at most ``batch_size`` sentences and ``batch_tokens``
        source tokens at a time. On a CPU, ``workers`` > 1 forked processes of one thread each decode the batches
        in parallel (:func:`attnmt.decode.parallel.map_in_processes`); the translations are the same. Forking is
        the caller's choice (``attnmt translate`` and ``evaluate`` pass ``decode.workers``; here it is 1 unless
        given): a threaded server or a training run must not fork. The coverage penalty needs a model with
        attention. ``prefix``: the start the translation must have (text in the target language; a str for one
        sentence, a list with a str or None per sentence for a list); the rest is the best continuation found
        (:mod:`attnmt.decode.constraints`). :meth:`explore` shows a sentence's decoding step by step; :meth:`read`
        splits input as the model's training text was.
        """
        single, sentences = isinstance(sentences, str), sentence_list(sentences)
        options = self.decode_options(options, sampling, **given)  # checked before any worker starts
        sentences, src_tokens = self.read(sentences)
        # An empty line still gets a translation (of nothing): keep line counts equal.
        src_ids = [self.src.vocab.encode(toks) for toks in src_tokens]
        forced = self._prefixes(prefix, single, len(sentences), options)
        results: list[Translation | None] = [
            None if ids else Translation(sentence, "", [], [], None, 0.0) for sentence, ids in zip(sentences, src_ids)]
        batches = decoding_batches(src_ids, options.batch_tokens, options.batch_size)

        def decode(b: int) -> list[Translation]:
            indices = batches[b]
            batch = collate([(src_ids[i], None) for i in indices], indices).to(self.device)
            hyps = self._search(batch.src, batch.src_len, options, batch_index=b,
                                prefix=[forced[i] for i in indices] if forced else None)
            return [self._best(sentences[i], src_tokens[i], sentence_hyps) for i, sentence_hyps in zip(indices, hyps)]

        # a GPU is one device: more processes would only queue on it
        workers = options.workers if self.device.type == "cpu" else 1
        with eval_mode(self.model), threads_for(self.threads):
            for indices, translations in zip(batches, map_in_processes(decode, len(batches), workers)):
                for i, translation in zip(indices, translations):
                    results[i] = translation
        return results[0] if single else results  # type: ignore[return-value]

    def decode_options(self, options: DecodeOptions | None = None, sampling: "Sampling | None" = None,
                       **given) -> DecodeOptions:
        """The decoding options of a translate() call with these arguments, checked: ``options``, else the model's
        ``decode.*``, with the ``given`` ones on top. The model's coverage penalty does not apply to a model without
        attention (a config shared with attention models); asked for, it is refused."""
        options = call_options(self.config, options, sampling, given,
                               **({} if self.has_attention else {"coverage_penalty": 0.0}))
        if options.coverage_penalty and not self.has_attention:
            raise OptionError("coverage_penalty", f"coverage_penalty={options.coverage_penalty}: a {self.model_type} "
                                                  "model has no attention to measure coverage with; leave it at 0 for "
                                                  "this model")
        return options

    def read(self, sentences: list[str]) -> tuple[list[str], list[list[str]]]:
        """``sentences`` as the model reads them, through the input gate (:mod:`attnmt.decode.inputs`): split into
        words as its training text was (a model trained on pretokenized text, ``data.pretokenize``: Chinese
        segmented into words, ...; :attr:`split_source`), and their source pieces. Their size is checked before
        they are split."""
        if self.split_source is not None:
            check_sentences(sentences, self.limits)
            sentences = [self.split_source(s) for s in sentences]
        return sentences, gated_tokens(sentences, self.src.tokens, self.limits)

    def _best(self, sentence: str, src_tokens: list[str], hyps) -> Translation:
        """The best of a sentence's hypotheses as a Translation, with all of them as its n-best list."""
        options = [self._translation(sentence, src_tokens, h) for h in hyps]
        if not options:  # every continuation banned (attnmt.decode.constraints on a tiny vocabulary)
            options = [Translation(sentence, "", src_tokens, [], None, float("-inf"))]
        options[0].n_best = options
        return options[0]

    def explore(self, sentence: str, beam: int | None = None, prefix: str | None = None,
                prefix_tokens: list[str] | None = None, top_k: int = 10, pin: list[int] | None = None,
                neighbours: int = 0) -> dict:
        """The sentence's decoding step by step, as the explorer page shows it: the explore record
        (:func:`attnmt.decode.steps.explore`; its keys in docs/explore.md). ``pin``: source piece positions that
        share the attention at the step after the prefix (:mod:`attnmt.decode.pinning`); ``neighbours``: the
        nearest held-out decoder states per step (:mod:`attnmt.decode.neighbours`)."""
        from attnmt.decode.steps import explore

        return explore(self, sentence, beam=beam, prefix=prefix, prefix_tokens=prefix_tokens, top_k=top_k, pin=pin,
                       neighbours=neighbours)

    def _prefixes(self, prefix, single: bool, n: int, options: DecodeOptions) -> list[list[int]] | None:
        """Each sentence's forced prefix as target ids (None: no sentence has one); checked (UserError)."""
        from attnmt.decode.constraints import check_prefix

        texts = prefix_texts(prefix, single, n)
        if texts is None:
            return None
        try:
            pieces = gated_tokens([t or "" for t in texts], self.tgt.tokens,
                                  self.limits.replace(sentences=None, request_tokens=None))
        except InputRefused as e:
            raise e.named("the prefix" if single else f"the prefix of sentence {e.index + 1}") from None
        ids = [self.tgt.vocab.encode(p) for p in pieces]
        for tokens in ids:
            check_prefix(tokens, options)
        return ids

    def _search(self, src, src_len, options: DecodeOptions, prefix=None, batch_index: int = 0):
        """The search the options ask for: sampling, greedy or beam search."""
        settings = dict(search_arguments(options), prefix=prefix)
        if options.sample:  # a generator per batch: the same samples in any worker process
            from attnmt.decode.sampling import Sampling, sample_search

            generator = torch.Generator(device=src.device).manual_seed((options.seed << 20) + batch_index)
            return sample_search(self.model, src, src_len, n_samples=options.n_best, sampling=Sampling.of(options),
                                 generator=generator, **settings)
        if options.beam == 1 and options.n_best == 1 and not options.coverage_penalty:  # beam search's output, faster
            return greedy_search(self.model, src, src_len, **settings)
        return beam_search(self.model, src, src_len, beam_size=options.beam, n_best=options.n_best,
                           stopping=options.stopping, coverage_penalty=options.coverage_penalty, **settings)

    def _translation(self, source: str, src_tokens: list[str], hyp) -> Translation:
        attention = hyp.attention.float().cpu().numpy() if hyp.attention is not None else None
        return Translation(source, self.tgt.detokenize(hyp.tokens), src_tokens, self.tgt.vocab.decode(hyp.tokens),
                           attention, float(hyp.score))


def load(model_dir: str | Path, options: LoadOptions | None = None, **settings) -> Translator:
    """Load a trained model folder (as written by `attnmt train`) for translation, as ``options``
    (:class:`attnmt.config.load_options.LoadOptions`) with the keyword ``settings`` on top say.

    int8: decode with int8 matrix products (:func:`attnmt.models.int8.quantize_int8`; CPU only).
    A folder written by ``attnmt export --format ctranslate2`` gives a
    :class:`attnmt.export.ct2_translator.CT2Translator`
    (the same interface), decoding in ``threads`` threads per batch (default CTranslate2's) and ``inter_threads``
    batches at a time; for a model folder, ``threads`` is torch's thread count while it decodes (set for each call
    and restored after it: loading changes no global state; a command sets its own with
    :func:`attnmt.runtime.threads.use_threads`).
    compile_step: decode with the model's decoder step compiled by torch.compile
    (:func:`attnmt.models.compiled.compile_decoder_step`), its compilation paid here, at load
    (``Translator.compile_seconds``).
    """
    options = LoadOptions.of(options, **settings)
    model_dir = Path(model_dir)
    from attnmt.export import is_exported

    if is_exported(model_dir):  # attnmt export --format ctranslate2
        if options.compile_step:
            raise UserError(f"--compile compiles attnmt's own decoder step; {model_dir} is an exported (CTranslate2) "
                            "model, already compiled: drop --compile")
        from attnmt.export.ct2_translator import load_exported

        return load_exported(model_dir, options)
    if options.inter_threads != 1:
        raise UserError(f"--inter-threads {options.inter_threads} belongs to an exported (CTranslate2) model; for "
                        f"{model_dir} use --workers")
    config = model_config(model_dir)
    path = checkpoint_path(model_dir, options.checkpoint)
    payload = load_folder_checkpoint(model_dir, path, config.model.type)  # the tokenizers checked before they load
    src, tgt = load_processors(model_dir)
    model = build_model(config.model, len(src.vocab), len(tgt.vocab))
    load_weights(model, payload["model"], path)
    model.to(options.device).eval()
    if options.int8:
        from attnmt.models.int8 import quantize_int8

        model = quantize_int8(model)
    if options.compile_step:
        from attnmt.models.compiled import compile_decoder_step

        model = compile_decoder_step(model)
    translator = Translator(model, src, tgt, config, limits=InputLimits(), threads=options.threads)
    translator.model_dir = model_dir
    translator.split_source, translator.split_target = model_pretokenizers(config.data)
    if options.compile_step:
        from attnmt.models.compiled import warm_up

        beam = translator.decode_options().beam
        translator.compile_seconds = warm_up(lambda text, width: translator.translate(text, beam=width), beam)
    return translator
