"""Decoding: one search for every model (`search`: greedy and beam;
`sampling`; `constraints`; a forced prefix in `forced`), the model folder's `translator` and the `Translation`
it returns (`translation`), ensembles, the live loop (`interactive`), a sentence step by step for the explorer
(`steps`, with `beam_tree`), forked decoding workers (`parallel`) and sacreBLEU scores (`evaluate`). The
decoding options they read are attnmt.config.decoding's DecodeOptions."""
