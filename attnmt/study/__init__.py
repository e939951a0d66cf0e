"""`attnmt study`: train a set of models over several seeds, measure them, and write a report.

A study config (YAML) names the data, the models (each a base attnmt config, a file and/or inline
overrides, or existing model folders) and the seeds. `run_study` trains every model that is not
trained yet into an output folder (re-running reuses finished models and resumes interrupted
ones), evaluates each model on the test split, and writes

* ``report.html``: one self-contained page (figures embedded as base64 PNG);
* ``results.json``: every number behind the report;
* ``figures/*.png``: the figures on their own, for documents that cite them.

What it measures, per model and seed: BLEU per source-length bucket with a 95% bootstrap
interval (Bahdanau et al. 2014, Figure 2), corpus BLEU and chrF, test perplexity (teacher
forcing), next-token accuracy by target position, and for attention models the alignment error
rate of the word alignments read off the attention (:mod:`attnmt.align`). Over seeds it reports
the mean, the spread (min, max, standard deviation) and a bootstrap interval of the seed mean
that resamples test sentences jointly for all seeds.

The package: `spec` (the study config), `data` (its splits), `runs` (training), `measure` (one run),
`aggregate` (over seeds), `figures`, `report` (the HTML page) and `command` (`run_study`).

Output folder layout::

    data/                       the splits the study trained and tested on
    models/<model>/seed<k>/     attnmt model folders (as `attnmt train` writes them)
    evals/<model>-seed<k>.json  cached evaluations (redone when the model or test set changes)
    figures/  report.html  results.json

Source length is counted in whitespace-separated words of the source text, so that models with
different tokenizers share the same buckets.
"""

from attnmt.study.aggregate import seed_mean_interval
from attnmt.study.command import StudyResult, run_study
from attnmt.study.data import join_consecutive, target_word_labels
from attnmt.study.spec import Multi30kLongData, Study, deep_merge, load_study, model_raw_config, study_from_dict

__all__ = ["Multi30kLongData", "Study", "StudyResult", "deep_merge", "join_consecutive", "load_study",
           "model_raw_config", "run_study", "seed_mean_interval", "study_from_dict", "target_word_labels"]
