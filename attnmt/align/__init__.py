"""Attention as word alignment: links, extraction from a model, symmetrization, scores, baselines.

* :mod:`attnmt.align.link_sets`: gold files, Pharaoh links, symmetrization (intersection, union,
  grow-diag-final-and);
* :mod:`attnmt.align.extract`: teacher-forced attention merged to words and read as links
  (argmax, threshold, shift, mutual, shift-mutual), and the soft symmetrization ``agreement``;
* :mod:`attnmt.align.scores`: AER, precision, recall;
* :mod:`attnmt.align.eflomal`: the statistical aligner's links, the baseline of every report;
* :mod:`attnmt.align.command`: what ``attnmt align`` does, and ``align_translations`` (links for a
  Translator's output: ``attnmt translate --alignments``, the server).
"""

from attnmt.align.command import (
                                  ATTENTION_SYMMETRIZATIONS,
                                  AlignResult,
                                  align_files,
                                  align_pairs,
                                  align_translations,
                                  attention_rows,
)
from attnmt.align.eflomal import eflomal_align
from attnmt.align.extract import (
                                  METHODS,
                                  WordAttention,
                                  agreement_links,
                                  argmax_links,
                                  attention_matrices,
                                  diagonal_links,
                                  extract_alignments,
                                  links_from_attention,
                                  mean_attention,
                                  model_method,
                                  mutual_links,
                                  threshold_links,
                                  word_attention,
)
from attnmt.align.link_sets import (
                                  SYMMETRIZATIONS,
                                  GoldAlignment,
                                  Link,
                                  format_links,
                                  grow_diag_final_and,
                                  parse_gold,
                                  parse_links,
                                  read_gold,
                                  read_links,
                                  symmetrize,
)
from attnmt.align.scores import AlignmentScores, format_scores, score_alignments

__all__ = ["ATTENTION_SYMMETRIZATIONS", "METHODS", "SYMMETRIZATIONS", "AlignResult", "AlignmentScores", "GoldAlignment",
           "Link", "WordAttention", "agreement_links", "align_files", "align_pairs", "align_translations",
           "attention_rows", "argmax_links", "attention_matrices", "diagonal_links", "eflomal_align",
           "extract_alignments", "format_links", "format_scores", "grow_diag_final_and", "links_from_attention",
           "mean_attention", "model_method", "mutual_links", "parse_gold", "parse_links", "read_gold", "read_links",
           "score_alignments", "symmetrize", "threshold_links", "word_attention"]
