"""The configuration layer: the typed config's sections (`schema`), the decoding options its `decode` section
is built of (`decoding`: DecodeOptions, which every entry point builds and the searches read), the YAML reader
and typed-dataclass machinery behind them (`yaml_input`, `typed`), the bounds of the numeric settings
(`bounds`), the registries users extend (`registry`), the special token ids every vocabulary and model share
(`special`) and the model-size check (`model_size`). It imports nothing of attnmt but `errors`, `runtime` and,
for the names it checks, the scheduler registry (attnmt.train.schedulers)."""
