"""Keys of older configs that became data transforms (attnmt/data/transforms.py): a config that sets one is
read as the ``data.transforms`` entry it became, with a note on stderr, so that the model folders of an older
attnmt still load. `attnmt.config.config_from_dict` reads every config through :func:`read_moved_keys`."""

from __future__ import annotations

import sys

from attnmt.errors import UserError

__all__ = ["MOVED_KEYS", "read_moved_keys"]

# Keys that became data transforms (attnmt/data/transforms.py), with their former defaults: a config that
# sets one is read as the data.transforms entry it became, with a note; at its default it is dropped (every
# model folder's config.yaml from before lists them all).
MOVED_KEYS = {"data.synthetic": False, "data.synthetic_train": 20000, "data.synthetic_valid": 500,
              "data.synthetic_min_len": 4, "data.synthetic_max_len": 60, "data.joined_pairs": 0,
              "data.join_max_parts": 3, "data.align_text_src": None, "data.align_text_tgt": None,
              "data.align_text_copies": 1, "data.drop_final_punct": 0.0, "train.guided_alignment.links": None}


def read_moved_keys(raw: dict) -> dict:
    """``raw`` with the keys of MOVED_KEYS written as the data.transforms entries they became."""
    train, guided = raw.get("train") if isinstance(raw, dict) else None, None
    if not isinstance(raw, dict) or not isinstance(raw.get("data", {}), dict) or not isinstance(train or {}, dict):
        return raw  # the builder names what is wrong
    raw = {**raw, "data": dict(raw.get("data") or {})}
    if isinstance((train or {}).get("guided_alignment"), dict):
        raw["train"] = {**train, "guided_alignment": (guided := dict(train["guided_alignment"]))}
    old = {}
    for key, default in MOVED_KEYS.items():
        node, name = raw["data"] if key.startswith("data.") else guided, key.rsplit(".", 1)[1]
        if isinstance(node, dict) and name in node and (value := node.pop(name)) != default:
            old[key] = value
    if not old:
        return raw
    if raw["data"].get("transforms"):
        raise UserError(f"config: {', '.join(old)} and data.transforms are both given; write them all as "
                        "data.transforms entries (docs/guide.md, Data transforms)")
    v = {key.rsplit(".", 1)[1]: old.get(key, default) for key, default in MOVED_KEYS.items()}
    raw["data"]["transforms"] = [entry for entry, on in (
        ({"name": "synthetic", "train": v["synthetic_train"], "valid": v["synthetic_valid"],
          "min_len": v["synthetic_min_len"], "max_len": v["synthetic_max_len"]}, v["synthetic"]),
        ({"name": "joined_pairs", "count": v["joined_pairs"], "max_parts": v["join_max_parts"]}, v["joined_pairs"]),
        ({"name": "align_text", "src": v["align_text_src"], "tgt": v["align_text_tgt"],
          "copies": v["align_text_copies"]}, v["align_text_src"] or v["align_text_tgt"]),
        ({"name": "drop_final_punct", "fraction": v["drop_final_punct"]}, v["drop_final_punct"]),
        ({"name": "links", "path": v["links"]}, v["links"])) if on]
    written = ", ".join("{" + ", ".join(f"{k}: {x}" for k, x in e.items()) + "}" for e in raw["data"]["transforms"])
    print(f"note: {', '.join(old)} is written data.transforms: [{written}] now", file=sys.stderr)
    return raw
