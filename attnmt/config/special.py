"""The four special tokens and their fixed ids, shared by the vocabulary, the models and the searches.

A leaf module: models, search and the loss need the ids (padding, end of sentence) without the
vocabulary's code; :mod:`attnmt.data.vocab` builds on them and re-exports them.
"""

from __future__ import annotations

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIALS: tuple[str, ...] = (PAD, UNK, BOS, EOS)  # in id order
