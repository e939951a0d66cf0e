"""An exported model folder (:mod:`attnmt.export.convert`) as a translator: :class:`CT2Translator` decodes with
``ctranslate2.Translator`` and answers as :class:`attnmt.decode.translator.Translator` does (text in; text, tokens,
scores and attention out), so ``attnmt translate``, ``evaluate`` and ``serve`` run it as any model folder.

What differs from attnmt's own decoding, each refused in one line where it would change an output:
beam search's stopping rule is CTranslate2's (``--stopping`` refused); samples come from CTranslate2's generator
(the same seed gives the same samples here, not attnmt's); there is no coverage penalty, ensemble, worker processes
(threads instead: ``intra_threads``, ``inter_threads``), explorer, or per-head attention. The attention is the one the
export chose (:func:`attnmt.export.convert.attention_choice`); a guided model trained with full context is read in
its causal pass.

The length rule is attnmt's: each sentence's output holds at most ``floor(max_len_a * S + max_len_b)`` tokens, S its
own source length (:func:`attnmt.decode.search.max_output_lengths`). ``translate_batch`` takes one
``max_decoding_length`` per call: beam search and sampling decode sentences of one cap per call
(:func:`capped_batches`); greedy search, whose tokens up to a sentence's cap do not depend on a longer cap, decodes
length-sorted batches to their longest cap and cuts each output at its own. Either way a sentence's output does
not depend on what it is batched with. A hypothesis cut at its cap gets the log prob of the end token attnmt
forces there (``score_batch``), so its score is attnmt's too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnmt.config.decoding import DecodeOptions, OptionError
from attnmt.config.load_options import LoadOptions
from attnmt.config.special import EOS
from attnmt.data.dataset import load_processors
from attnmt.data.pretokenize import model_pretokenizers
from attnmt.decode.inputs import InputLimits, InputRefused, check_sentences, gated_tokens, sentence_list
from attnmt.decode.search import length_penalty_factor, max_output_lengths
from attnmt.decode.translation import (
    Translation,
    call_options,
    decoding_batches,
    model_config,
    prefix_texts,
)
from attnmt.errors import UserError
from attnmt.export import EXPORT_FILE, require_ctranslate2

COMPUTE_TYPES = ("float32", "int8", "int16", "bfloat16")


class CT2Translator:
    """Batched translation of an exported model with CTranslate2 (greedy, beam search, n-best, sampling)."""

    has_heads = False  # CTranslate2 returns one attention per sentence, not every layer's heads
    has_self_attention = False
    has_attention = True
    members = None

    def __init__(self, model_dir: str | Path, intra_threads: int = 1, inter_threads: int = 1,
                 compute_type: str | None = None):
        ctranslate2 = require_ctranslate2()
        self.model_dir = Path(model_dir)
        self.config = model_config(self.model_dir)
        self.export = json.loads((self.model_dir / EXPORT_FILE).read_text(encoding="utf-8"))
        self.src, self.tgt = load_processors(self.model_dir)
        self.split_source, self.split_target = model_pretokenizers(self.config.data)  # as Translator's
        compute_type = compute_type or self.export["quantization"]
        if compute_type not in COMPUTE_TYPES:
            raise UserError(f"compute type {compute_type} is unknown; allowed: {', '.join(COMPUTE_TYPES)}")
        for name, n, least in (("threads", intra_threads, 0), ("inter-threads", inter_threads, 1)):
            if n < least:
                raise UserError(f"--{name} {n} is out of range; allowed: 1 or more")
        self._engine_options = dict(device="cpu", compute_type=compute_type, intra_threads=intra_threads,
                                    inter_threads=inter_threads)
        self.engine = ctranslate2.Translator(str(self.model_dir), **self._engine_options)
        self.device = "cpu"
        # what translate() accepts (attnmt.decode.inputs); a sentence's tokens are bounded by the position table
        self.limits = InputLimits(sentence_tokens=None)
        self.return_attention = True  # the benchmark turns it off to time the search alone

    @property
    def model_type(self) -> str:
        return self.config.model.type

    @property
    def max_src_tokens(self) -> int | None:
        """The most tokens of a source sentence besides the position table's rows (``limits.sentence_tokens``)."""
        return self.limits.sentence_tokens

    @max_src_tokens.setter
    def max_src_tokens(self, tokens: int | None) -> None:
        self.limits = self.limits.replace(sentence_tokens=tokens)

    def parameter_count(self) -> int:
        return int(self.export.get("parameters", 0))

    def decode_options(self, options: DecodeOptions | None = None, sampling=None, **given) -> DecodeOptions:
        """As :meth:`attnmt.decode.translator.Translator.decode_options`; what CTranslate2 cannot do is a UserError
        (the model's decode.coverage_penalty does not apply)."""
        options = call_options(self.config, options, sampling, given, coverage_penalty=0.0)
        if options.coverage_penalty:
            raise OptionError("coverage_penalty", "coverage_penalty: an exported (CTranslate2) model has no coverage "
                                                  "penalty; leave it at 0 or translate with the attnmt model folder")
        if options.stopping != self.config.decode.stopping:
            raise OptionError("stopping", f"stopping={options.stopping}: an exported (CTranslate2) model ends beam "
                                          "search by CTranslate2's own rule; leave --stopping out")
        if options.workers > 1:
            raise OptionError("workers", f"workers={options.workers}: an exported (CTranslate2) model decodes in "
                                         "threads; use --threads and --inter-threads instead of --workers")
        return options

    def explore(self, *args, **kwargs) -> dict:
        raise UserError("explore: an exported (CTranslate2) model has no step-by-step decoding to show; explore "
                        "the attnmt model folder it was exported from")

    def translate(self, sentences: str | list[str], *, options: DecodeOptions | None = None, prefix=None,
                  sampling=None, **given) -> Translation | list[Translation]:
        """As :meth:`attnmt.decode.translator.Translator.translate`; what CTranslate2 cannot do is a UserError."""
        single, sentences = isinstance(sentences, str), sentence_list(sentences)
        options = self.decode_options(options, sampling, **given)
        if self.split_source is not None:  # as Translator.read: the size checked before the split
            check_sentences(sentences, self.limits)
            sentences = [self.split_source(s) for s in sentences]
        positions = self.export["max_positions"]  # the rows of the exported position table
        most = positions if self.max_src_tokens is None else min(self.max_src_tokens, positions)
        src_tokens = gated_tokens(sentences, self.src.tokens, self.limits, limit=most)
        # through attnmt's vocabulary: an unknown word, or text spelled like a special token, becomes <unk>
        known = [self.src.vocab.decode(self.src.vocab.encode(t)) for t in src_tokens]
        prefixes = self._prefixes(prefix, single, len(sentences), most)
        results = [None if toks else Translation(s, "", [], [], None, 0.0) for s, toks in zip(sentences, known)]
        engine = self.engine if not options.sample else self._seeded(options.seed)
        caps = [min(m, positions - 1) for m in max_output_lengths([len(t) for t in known], options.max_len_a,
                                                                  options.max_len_b, options.max_len)]
        if options.beam == 1 and not options.sample:  # greedy: a sentence's tokens up to its cap do not depend on
            calls = [(max(caps[i] for i in indices), indices) for indices in decoding_batches(  # the batch's
                [[1] * len(t) for t in known], options.batch_tokens, options.batch_size)]
        else:
            calls = capped_batches(known, caps, options.batch_tokens, options.batch_size)
        for limit, indices in calls:
            sources = [known[i] for i in indices]
            found = engine.translate_batch(sources, [prefixes[i] for i in indices] if prefixes else None,
                                           max_decoding_length=max(limit, 1), **self._options(options))
            first = self._first_rows(sources) if _width(options) > 1 and self.return_attention else None
            settled = self._settled(sources, found, [caps[i] for i in indices])
            for k, i in enumerate(indices):
                results[i] = self._best(sentences[i], src_tokens[i], settled[k], options.length_penalty,
                                        options.n_best, None if first is None else first[k])
        return results[0] if single else results

    def _prefixes(self, prefix, single: bool, n: int, most: int) -> list[list[str] | None] | None:
        """Each sentence's forced prefix as target pieces known to the vocabulary (None: no sentence has one)."""
        texts = prefix_texts(prefix, single, n)
        if texts is None:
            return None
        try:
            pieces = gated_tokens([t or "" for t in texts], self.tgt.tokens,
                                  self.limits.replace(sentences=None, request_tokens=None), limit=most)
        except InputRefused as e:
            raise e.named("the prefix" if single else f"the prefix of sentence {e.index + 1}") from None
        return [self.tgt.vocab.decode(self.tgt.vocab.encode(p)) if t else None for t, p in zip(texts, pieces)]

    def _options(self, options: DecodeOptions) -> dict:
        """CTranslate2's settings of ``translate_batch`` for the options (sampling: n_best draws of one)."""
        found = dict(beam_size=_width(options), num_hypotheses=_width(options),
                     no_repeat_ngram_size=options.no_repeat_ngram, min_decoding_length=options.min_len,
                     return_end_token=True, return_scores=True, return_attention=self.return_attention,
                     max_input_length=0,
                     length_penalty=0.0)  # raw log probs; _best ranks them with attnmt's length penalty
        if options.sample:
            found.update(beam_size=1, sampling_topk=options.top_k, sampling_topp=options.top_p,
                         sampling_temperature=options.temperature)
        return found

    def _seeded(self, seed: int):
        """A fresh engine for sampling: CTranslate2 seeds a translator's generators when it starts its threads,
        so the same seed gives the same samples only from a new one (loaded again from the folder)."""
        ctranslate2 = require_ctranslate2()
        ctranslate2.set_random_seed(seed)
        return ctranslate2.Translator(str(self.model_dir), **self._engine_options)

    def _first_rows(self, sources: list[list[str]]) -> list[np.ndarray]:
        """Each source's attention row for the first output token, from one greedy step: in a batch, CTranslate2's
        beam search returns that row from another sentence (the later rows are right)."""
        found = self.engine.translate_batch(sources, beam_size=1, max_decoding_length=1, return_attention=True,
                                            max_input_length=0)
        return [np.asarray(r.attention[0][0], dtype=np.float32) for r in found]

    def _settled(self, sources: list[list[str]], found, caps: list[int]) -> list[list[list]]:
        """Per sentence its hypotheses as [words, log prob with the end token, attention rows]: one longer than the
        sentence's cap (greedy search decodes a batch to its longest cap) cut to the cap, as decoding to that cap
        gives it; one cut or stopped at the cap gets the log prob of the </s> attnmt forces there (one
        ``score_batch`` for the batch's) and the attention row of that step (one forced pass for the batch's)."""
        settled, cut = [], []
        for k, result in enumerate(found):
            hypotheses = []
            for h, tokens in enumerate(result.hypotheses):
                ended = bool(tokens) and tokens[-1] == EOS
                words = list(tokens[:-1] if ended else tokens)
                attention = np.asarray(result.attention[h], dtype=np.float32) if result.attention else None
                if len(words) > caps[k]:
                    words, ended = words[:caps[k]], False
                    attention = None if attention is None else attention[:caps[k]]
                hypotheses.append([words, float(result.scores[h]), attention])
                if not ended:
                    cut.append((k, h))
            settled.append(hypotheses)
        if cut:
            scored = self.engine.score_batch([sources[k] for k, _ in cut], [settled[k][h][0] for k, h in cut],
                                             max_input_length=0)
            for (k, h), result in zip(cut, scored):
                settled[k][h][1] = float(sum(result.log_probs))  # the words' log probs and </s>'s
            if self.return_attention:
                rows = self._forced_rows([sources[k] for k, _ in cut], [settled[k][h][0] for k, h in cut])
                for (k, h), forced in zip(cut, rows):  # the words' rows and the forced </s> step's
                    settled[k][h][2] = forced[: len(settled[k][h][0]) + 1]
        return settled

    def _best(self, sentence: str, src_tokens: list[str], hypotheses: list[list], alpha: float, n_best: int,
              first_row: np.ndarray | None = None) -> Translation:
        """The hypotheses (:meth:`_settled`) as Translations ranked by attnmt's score: log prob / ((5 + length) / 6)
        ** alpha, the length counting </s> (:mod:`attnmt.decode.search`)."""
        options = []
        for words, log_prob, attention in hypotheses:
            score = log_prob / length_penalty_factor(len(words) + 1, alpha)
            if attention is not None and first_row is not None and len(attention):
                attention = attention.copy()
                attention[0] = first_row
            ids = self.tgt.vocab.encode(words)
            options.append(Translation(sentence, self.tgt.detokenize(ids), src_tokens, words, attention,
                                       float(score)))
        options.sort(key=lambda t: -t.score)
        options = options[:n_best]
        if options:
            options[0].n_best = options
            return options[0]
        return Translation(sentence, "", src_tokens, [], None, float("-inf"))

    @property
    def attention_choice(self) -> str:
        """The one attention the export returns, in words: "layer 1, the heads averaged" or "layer 1, head 2"."""
        head = self.export["attention_head"]
        return f"layer {self.export['attention_layer']}, " + ("the heads averaged" if head is None else f"head {head}")

    def check_attention_choice(self, layer: int | None, head: int | None, full_context: bool) -> None:
        """A UserError unless (``layer``, ``head``) is the attention the export returns."""
        n = self.config.model.dec_layers
        chosen = (self.export["attention_layer"], self.export["attention_head"])
        if layer is not None and not -n <= layer < n:
            raise UserError(f"--layer {layer} is out of range: the model has {n} decoder layers "
                            f"(0 to {n - 1}, or -1 for the last)")
        asked = ((n - 1) if layer is None else layer % n, head)
        if asked != chosen:
            raise UserError(f"--layer/--head: an exported (CTranslate2) model returns one attention "
                            f"({self.attention_choice}); leave --layer and --head out, or align with the attnmt "
                            "model folder")
        if full_context:
            raise UserError("alignments: the model was guided with full context, a pass CTranslate2 does not run; "
                            "align with the attnmt model folder")

    def forced_attention(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[np.ndarray]:
        """The exported attention of each pair read with the target forced: rows for <s> y </s> as inputs,
        [len(y) + 2, len(x)] (as attnmt's teacher-forced pass with </s>, :mod:`attnmt.decode.forced`)."""
        return self._forced_rows([self.src.vocab.decode(ids) for ids in src_ids],
                                 [self.tgt.vocab.decode(ids) for ids in tgt_ids])

    def _forced_rows(self, src: list[list[str]], targets: list[list[str]]) -> list[np.ndarray]:
        """:meth:`forced_attention` of source and target pieces."""
        tgt = [t + [EOS] for t in targets]
        longest = max((len(t) for t in tgt), default=0) + 1
        found = self.engine.translate_batch(src, tgt, beam_size=1, return_attention=True, max_input_length=0,
                                            min_decoding_length=longest, max_decoding_length=longest)
        return [np.asarray(r.attention[0], dtype=np.float32)[: len(t) + 1] for r, t in zip(found, tgt)]


def _width(options: DecodeOptions) -> int:
    """Hypotheses that CTranslate2 keeps per sentence: the beam, or the samples drawn."""
    return options.n_best if options.sample else options.beam


def capped_batches(sources: list[list[str]], caps: list[int], batch_tokens: int,
                   batch_size: int) -> list[tuple[int, list[int]]]:
    """(output cap, sentence indices) for each CTranslate2 call: the sentences of one cap (empty ones left out)
    batched by length as :func:`attnmt.decode.translation.decoding_batches` batches them, the longest batches first."""
    members: dict[int, list[int]] = {}
    for i, tokens in enumerate(sources):
        if tokens:
            members.setdefault(caps[i], []).append(i)
    calls = [(limit, [group[k] for k in batch]) for limit, group in members.items()
             for batch in decoding_batches([[1] * len(sources[i]) for i in group], batch_tokens, batch_size)]
    calls.sort(key=lambda call: -max(len(sources[i]) for i in call[1]))
    return calls


def load_exported(model_dir: Path, options: LoadOptions) -> CT2Translator:
    """:func:`attnmt.decode.translator.load` for an exported folder; what does not apply to one is a UserError.
    ``options.threads`` is CTranslate2's per batch (default: its own)."""
    if options.checkpoint not in (None, "best"):
        raise UserError(f"--checkpoint {options.checkpoint}: an exported model holds the one checkpoint it was "
                        "exported from; export that checkpoint (attnmt export --checkpoint) instead")
    if options.device != "cpu":
        raise UserError(f"device {options.device}: the exported model runs on the CPU here; leave the device out")
    return CT2Translator(model_dir, options.threads or 0, options.inter_threads,
                         compute_type="int8" if options.int8 else None)
