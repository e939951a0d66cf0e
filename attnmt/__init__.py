"""attnmt: neural machine translation with seq2seq, RNNsearch (attention) and the Transformer."""

from __future__ import annotations

__version__ = "0.1.0"


def load(model_dir, **options):
    """Load a trained model folder; returns a Translator whose `translate(sentences, beam=...)`
    gives text, source and target tokens and the attention matrix of each sentence.
    ``options`` (`attnmt.config.load_options.LoadOptions`): ``checkpoint`` (best, last, averaged, stepN, ema),
    ``device``, ``int8`` (int8 matrix products for faster decoding on a CPU), ``compile_step`` (the decoder step
    compiled by torch.compile, paid at load), ``threads``. A folder written by `attnmt export --format ctranslate2`
    decodes with CTranslate2 (docs/deploy.md) in ``threads`` threads per batch and ``inter_threads`` batches at a
    time."""
    from attnmt.decode.translator import load as _load

    return _load(model_dir, **options)
