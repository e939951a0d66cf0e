"""A model folder: its checkpoints, read as untrusted input and matched to the folder's tokenizers
(`checkpoint`), and the folder a training run writes, kept rerunnable (`model_folder`)."""
