"""The upper bounds of the numeric settings: far beyond any real run, and small enough that no value overflows the
integer types that torch, numpy and the token store put them in. The config's keys (:mod:`attnmt.config.schema`)
and the decoding options (:mod:`attnmt.config.decoding`) declare their ranges with them. Sizes of the model beyond
what the machine's memory holds are refused with an estimate of that memory (:mod:`attnmt.config.model_size`)."""

MAX_COUNT = 10**12  # sentences, tokens per batch, pairs held out or sampled
MAX_STEPS = 10**12  # steps, epochs, validations
MAX_TOKENS = 1_000_000  # tokens of one sentence or output
MIN_VOCAB, MAX_VOCAB = 8, 10_000_000  # MIN_VOCAB: the special tokens and a few words
MAX_COLUMN = 1_000  # TSV columns
MAX_WORKERS = 4096  # processes and threads
MAX_KEPT = 10_000  # checkpoints kept
MAX_LAYERS = 1_000
MAX_HEADS = 4096
MAX_WIDTH = 2**24  # embedding, hidden and feed-forward sizes
MAX_BEAM = 100
MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit
