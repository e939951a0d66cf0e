"""A trained model folder as a translator: text in; text, tokens and attention out."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attnmt.config.schema import Config
from attnmt.data.batching import collate
from attnmt.data.dataset import TextProcessor, load_processors
from attnmt.data.pretokenize import model_pretokenizers
from attnmt.decode.forced import eval_mode
from attnmt.decode.parallel import map_in_processes
from attnmt.decode.search import beam_search, greedy_search
from attnmt.decode.translation import (
    SentenceTooLong,  # noqa: F401 (re-exported: attnmt.cli, tests)
    Translation,
    check_decoding,
    check_lengths,
    check_options,
    decoding_batches,
    model_config,
    prefix_texts,
    sentence_list,
)
from attnmt.errors import UserError
from attnmt.folder.checkpoint import checkpoint_path, load_folder_checkpoint, load_weights
from attnmt.models import build_model

if typing.TYPE_CHECKING:
    from attnmt.decode.sampling import Sampling


MAX_SOURCE_TOKENS = 512  # the CLI's limit: beam search time grows with the cube of the sentence length


class Translator:
    """Batched translation with greedy or beam search."""

    def __init__(self, model: nn.Module, src: TextProcessor, tgt: TextProcessor, config: Config):
        self.model = model
        self.src = src
        self.tgt = tgt
        self.config = config
        self.device = next(model.parameters()).device
        self.max_src_tokens: int | None = None  # if set, translate() refuses longer sentences (SentenceTooLong)
        self.model_dir: Path | None = None  # the folder it was loaded from (load() sets it)
        self.members: list[Translator] | None = None  # an ensemble's own translators (load_ensemble sets them)
        # How raw text is split into the words the model was trained on, source and target (load() sets them from
        # data.pretokenize: attnmt.data.pretokenize.model_pretokenizers); None: text is read as it is.
        self.split_source: Callable[[str], str] | None = None
        self.split_target: Callable[[str], str] | None = None

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

    def parameter_count(self) -> int:
        """The model's trained parameters (GET /models)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    @torch.inference_mode()
    def translate(self, sentences: str | list[str], beam: int | None = None, n_best: int = 1,
                  length_penalty: float | None = None, batch_tokens: int = 2000, batch_size: int | None = None,
                  workers: int = 1, stopping: str | None = None, min_len: int | None = None,
                  no_repeat_ngram: int | None = None, max_len: int | None = None, sampling: "Sampling | None" = None,
                  coverage_penalty: float | None = None,
                  prefix: str | list[str | None] | None = None) -> Translation | list[Translation]:
        """Translate one sentence (a str: one Translation) or a list of them (a list, in the input's order).

        Sentences of similar length are decoded together, at most ``batch_size`` (default
        ``decode.batch_size``) and ``batch_tokens`` source tokens at a time. On a CPU, ``workers`` > 1
        forked processes of one thread each decode the batches in parallel
        (:func:`attnmt.decode.parallel.map_in_processes`); the translations are the same. Forking is the caller's
        choice (``attnmt translate`` and ``evaluate`` pass ``decode.workers``): a threaded server or a
        training run must not fork. ``stopping`` (default ``decode.stopping``): beam search's rule for ending a
        sentence (:func:`attnmt.decode.search.beam_search`). ``min_len``, ``no_repeat_ngram`` (default ``decode.*``):
        :mod:`attnmt.decode.constraints`; ``max_len``: a cap on the output length (default ``decode.max_len_cap``).
        ``sampling`` (:class:`attnmt.decode.sampling.Sampling`): draw ``n_best`` samples per sentence instead of
        searching (no beam), seeded per batch. ``length_penalty``, ``coverage_penalty`` (default ``decode.*``):
        GNMT's alpha and beta (:mod:`attnmt.decode.search`); the coverage penalty needs a model with attention and
        applies to beam search. ``prefix``: the start the translation must have (text in the target language; a
        str for one sentence, a list with a str or None per sentence for a list); the rest is the best
        continuation found (:mod:`attnmt.decode.constraints`). :meth:`explore` shows a sentence's decoding step by
        step. A number out of range, or not finite, is a UserError, as on the command line. :meth:`read` splits input.
        """
        single, sentences = isinstance(sentences, str), sentence_list(sentences)
        check_options(beam=beam, n_best=n_best, length_penalty=length_penalty, coverage_penalty=coverage_penalty,
                      min_len=min_len, no_repeat_ngram=no_repeat_ngram, max_len=max_len, workers=workers,
                      batch_size=batch_size, batch_tokens=batch_tokens)
        d = self.config.decode
        extra = self._extra_settings(beam, n_best, min_len, no_repeat_ngram, max_len, sampling)
        extra["coverage_penalty"] = self.coverage_beta(coverage_penalty, sampling)
        beam = n_best if sampling is not None else d.beam if beam is None else beam
        length_penalty = d.length_penalty if length_penalty is None else length_penalty
        stopping = d.stopping if stopping is None else stopping
        check_decoding(beam, n_best, workers, stopping)  # before any worker starts
        sentences, src_tokens = self.read(sentences)
        # An empty line still gets a translation (of nothing): keep line counts equal.
        src_ids = [self.src.vocab.encode(toks) for toks in src_tokens]
        forced = self._prefixes(prefix, single, len(sentences), extra["no_repeat_ngram"])
        check_lengths([len(ids) for ids in src_ids], self.max_src_tokens)
        results: list[Translation | None] = [
            None if ids else Translation(sentence, "", [], [], None, 0.0) for sentence, ids in zip(sentences, src_ids)]
        batches = decoding_batches(src_ids, batch_tokens, d.batch_size if batch_size is None else batch_size)
        search = dict(beam_size=beam, n_best=n_best, length_penalty=length_penalty, max_len_a=d.max_len_a,
                      max_len_b=d.max_len_b, stopping=stopping, **extra)

        def decode(b: int) -> list[Translation]:
            indices = batches[b]
            batch = collate([(src_ids[i], None) for i in indices], indices).to(self.device)
            hyps = self._search(batch.src, batch.src_len, batch_index=b,
                                prefix=[forced[i] for i in indices] if forced else None, **search)
            return [self._best(sentences[i], src_tokens[i], sentence_hyps) for i, sentence_hyps in zip(indices, hyps)]

        with eval_mode(self.model):
            if self.device.type != "cpu":
                workers = 1  # a GPU is one device: more processes would only queue on it
            for indices, translations in zip(batches, map_in_processes(decode, len(batches), workers)):
                for i, translation in zip(indices, translations):
                    results[i] = translation
        return results[0] if single else results  # type: ignore[return-value]

    def read(self, sentences: list[str]) -> tuple[list[str], list[list[str]]]:
        """``sentences`` as the model reads them: split into words as its training text was (a model trained on
        pretokenized text, ``data.pretokenize``: Chinese segmented into words, ...; :attr:`split_source`), and
        their source pieces."""
        if self.split_source is not None:
            sentences = [self.split_source(s) for s in sentences]
        return sentences, [self.src.tokens(s) for s in sentences]

    def _best(self, sentence: str, src_tokens: list[str], hyps) -> Translation:
        """The best of a sentence's hypotheses as a Translation, with all of them as its n-best list."""
        options = [self._translation(sentence, src_tokens, h) for h in hyps]
        if not options:  # every continuation banned (attnmt.decode.constraints on a tiny vocabulary)
            options = [Translation(sentence, "", src_tokens, [], None, float("-inf"))]
        options[0].n_best = options
        return options[0]

    def explore(self, sentence: str, beam: int | None = None, prefix: str | None = None,
                prefix_tokens: list[str] | None = None, top_k: int = 10) -> dict:
        """The sentence's decoding step by step, as the explorer page shows it: the explore record
        (:func:`attnmt.decode.steps.explore`; its keys in docs/explore.md)."""
        from attnmt.decode.steps import explore

        return explore(self, sentence, beam=beam, prefix=prefix, prefix_tokens=prefix_tokens, top_k=top_k)

    def _prefixes(self, prefix, single: bool, n: int, no_repeat_ngram: int) -> list[list[int]] | None:
        """Each sentence's forced prefix as target ids (None: no sentence has one); checked (UserError)."""
        from attnmt.decode.constraints import check_prefix

        texts = prefix_texts(prefix, single, n)
        if texts is None:
            return None
        ids = [self.tgt.ids(t) if t else [] for t in texts]
        for tokens in ids:
            check_prefix(tokens, no_repeat_ngram)
        return ids

    def _extra_settings(self, beam, n_best, min_len, no_repeat_ngram, max_len, sampling) -> dict:
        """The search settings beyond beam and n-best, checked: constraints, the length cap, sampling."""
        from attnmt.decode.constraints import check_constraints

        d = self.config.decode
        extra = dict(min_len=d.min_len if min_len is None else min_len,
                     no_repeat_ngram=d.no_repeat_ngram if no_repeat_ngram is None else no_repeat_ngram,
                     max_len_cap=d.max_len_cap if max_len is None else max_len, sampling=sampling)
        if max_len is not None and max_len < 1:
            raise UserError(f"max_len={max_len} is out of range; allowed: 1 or more output tokens")
        check_constraints(extra["min_len"], extra["no_repeat_ngram"], extra["max_len_cap"])
        if sampling is not None and beam not in (None, 1):
            raise UserError(f"beam={beam} with sampling: sampling draws each token and beam search keeps the best "
                            "ones; use one of them")
        if sampling is not None and not 1 <= n_best <= 100:
            raise UserError(f"n_best={n_best} is out of range; allowed: 1 to 100 samples per sentence")
        return extra

    def coverage_beta(self, coverage_penalty: float | None, sampling=None) -> float:
        """The coverage penalty to search with: asked for (or decode.coverage_penalty), and checked (UserError).

        0 where it does not apply: with sampling, or for a model without attention when it comes from the config."""
        given = coverage_penalty is not None
        beta = self.config.decode.coverage_penalty if coverage_penalty is None else coverage_penalty
        if beta < 0:
            raise UserError(f"coverage_penalty={beta} is out of range; allowed: 0 (off) or more, e.g. 0.2")
        if beta and not self.has_attention:
            if given:
                raise UserError(f"coverage_penalty={beta}: a {self.model_type} model has no attention to measure "
                                "coverage with; leave it at 0 for this model")
            return 0.0  # decode.coverage_penalty of a config shared with attention models
        if beta and sampling is not None and given:
            raise UserError("coverage_penalty with sampling: the penalty ranks the finished hypotheses of beam "
                            "search; leave it out to sample")
        return 0.0 if sampling is not None else beta

    def _search(self, src, src_len, beam_size: int, n_best: int, stopping: str, sampling=None, batch_index: int = 0,
                coverage_penalty: float = 0.0, **kwargs):
        if sampling is not None:  # a generator per batch: the same samples in any worker process
            from attnmt.decode.sampling import sample_search

            generator = torch.Generator(device=src.device).manual_seed((sampling.seed << 20) + batch_index)
            return sample_search(self.model, src, src_len, n_samples=n_best, sampling=sampling, generator=generator,
                                 **kwargs)
        if beam_size == 1 and n_best == 1 and not coverage_penalty:  # the same output as beam search's, faster
            return greedy_search(self.model, src, src_len, **kwargs)
        return beam_search(self.model, src, src_len, beam_size=beam_size, n_best=n_best, stopping=stopping,
                           coverage_penalty=coverage_penalty, **kwargs)

    def _translation(self, source: str, src_tokens: list[str], hyp) -> Translation:
        attention = hyp.attention.float().cpu().numpy() if hyp.attention is not None else None
        return Translation(source, self.tgt.detokenize(hyp.tokens), src_tokens, self.tgt.vocab.decode(hyp.tokens),
                           attention, float(hyp.score))


def load(model_dir: str | Path, checkpoint: str | None = None, device: str = "cpu", int8: bool = False,
         threads: int | None = None, inter_threads: int = 1) -> Translator:
    """Load a trained model folder (as written by `attnmt train`) for translation.

    int8: decode with int8 matrix products (:func:`attnmt.models.int8.quantize_int8`; CPU only).
    A folder written by ``attnmt export --format ctranslate2`` gives a
    :class:`attnmt.export.ct2_translator.CT2Translator`
    (the same interface), decoding in ``threads`` threads per batch (default CTranslate2's) and ``inter_threads``
    batches at a time; for a model folder, ``threads`` sets torch's threads.
    """
    if int8 and device != "cpu":
        raise UserError(f"int8 decoding runs on a CPU only, not on {device}; drop --int8 or use the CPU")
    model_dir = Path(model_dir)
    from attnmt.export import is_exported

    if is_exported(model_dir):  # attnmt export --format ctranslate2
        from attnmt.export.ct2_translator import load_exported

        return load_exported(model_dir, checkpoint=checkpoint, device=device, int8=int8, intra_threads=threads or 0,
                             inter_threads=inter_threads)
    if inter_threads != 1:
        raise UserError(f"--inter-threads {inter_threads} belongs to an exported (CTranslate2) model; for {model_dir} "
                        "use --workers")
    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads {threads} is out of range; allowed: 1 or more")
        torch.set_num_threads(threads)
    config = model_config(model_dir)
    path = checkpoint_path(model_dir, checkpoint)
    payload = load_folder_checkpoint(model_dir, path, config.model.type)  # the tokenizers checked before they load
    src, tgt = load_processors(model_dir)
    model = build_model(config.model, len(src.vocab), len(tgt.vocab))
    load_weights(model, payload["model"], path)
    model.to(device).eval()
    if int8:
        from attnmt.models.int8 import quantize_int8

        model = quantize_int8(model)
    translator = Translator(model, src, tgt, config)
    translator.model_dir = model_dir
    translator.split_source, translator.split_target = model_pretokenizers(config.data)
    return translator
