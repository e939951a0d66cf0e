"""attnmt: neural machine translation with seq2seq, RNNsearch (attention) and the Transformer."""

from __future__ import annotations

__version__ = "0.1.0"


def load(model_dir, checkpoint: str | None = None, device: str = "cpu", int8: bool = False, threads: int | None = None,
         inter_threads: int = 1):
    """Load a trained model folder; returns a Translator whose `translate(sentences, beam=...)`
    gives text, source and target tokens and the attention matrix of each sentence.
    ``int8``: int8 matrix products for faster decoding on a CPU (`attnmt.models.int8.quantize_int8`).
    A folder written by `attnmt export --format ctranslate2` decodes with CTranslate2 (docs/deploy.md) in
    ``threads`` threads per batch and ``inter_threads`` batches at a time."""
    from attnmt.decode.translator import load as _load

    return _load(model_dir, checkpoint=checkpoint, device=device, int8=int8, threads=threads,
                 inter_threads=inter_threads)
