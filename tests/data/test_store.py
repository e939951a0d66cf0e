"""The token store: what it holds, its batches, weighted mixing, and training from it (exact resume)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.data.batching import batch_by_sentences, token_batches
from attnmt.data.dataset import encode_pairs, load_processors, read_split
from attnmt.data.loading import training_batches
from attnmt.data.order import EpochOrder, Mix
from attnmt.data.store import EpochBatches, StoreData
from attnmt.data.store_prepare import prepare
from attnmt.errors import UserError
from attnmt.folder.checkpoint import load_checkpoint
from attnmt.train.trainer import train
from tests.conftest import tiny_config


def store_config(corpus, **train_args):
    config = tiny_config(corpus, **{"max_steps": 12, "valid_every": 6, "valid_bleu_sample": 0, **train_args})
    config.model.emb_size, config.model.hidden_size = 16, 16
    config.data.max_len = 8  # some pairs of the tiny corpus are dropped as too long
    return config


def encoded(config, model_dir):
    """The training corpus encoded pair by pair with the store's tokenizers."""
    src, tgt = load_processors(model_dir)
    data, stats = encode_pairs(read_split(config.data, "train"), src, tgt, config.data.max_len)
    return data, stats


def test_store_holds_each_pairs_ids_lengths_and_counts_in_corpus_order(tiny_corpus, tmp_path):
    config = store_config(tiny_corpus)
    done = prepare(config, tmp_path / "m", workers=1, progress=False)
    store = StoreData(done["location"])
    data, stats = encoded(config, done["location"])
    assert 0 < len(store) == len(data) < 600
    assert [store.src_ids[i] for i in range(len(store))] == data.src_ids
    assert [store.tgt_ids[i] for i in range(len(store))] == data.tgt_ids
    assert store.src_len.tolist() == [len(s) for s in data.src_ids]
    corpus = store.meta["corpora"][0]
    assert {k: corpus[k] for k in ("total", "kept", "empty", "too_long")} == stats
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"] is False  # reused


@pytest.mark.parametrize("by", ["tokens", "sentences"])
def test_an_epoch_in_one_window_packs_as_the_list_batchers_do(tiny_corpus, tmp_path, by):
    """One window's batches are token_batches' (batch_by_sentences') over the same lengths: the packing
    that validation batches use, and what the window-by-window packing is checked against."""
    config = store_config(tiny_corpus, batch_size=16 if by == "sentences" else None)
    t = config.train
    store = StoreData(prepare(config, tmp_path / "m", workers=1, progress=False)["location"])
    src_len, tgt_len = store.src_len.tolist(), store.tgt_len.tolist()

    def listed(shuffle, epoch):
        if t.batch_size:
            return batch_by_sentences(src_len, tgt_len, t.batch_size, shuffle=shuffle, seed=t.seed, epoch=epoch)
        return token_batches(src_len, tgt_len, t.batch_tokens, shuffle=shuffle, seed=t.seed, epoch=epoch)

    for epoch in range(3):
        assert list(training_batches(store, config, epoch=epoch)) == listed(True, epoch)
    unshuffled = EpochBatches(store, t.batch_tokens, t.batch_size, False, t.seed, 0, config.data.shuffle_window)
    assert list(unshuffled) == listed(False, 0)


def test_windows_cover_the_epoch_once_within_the_token_budget(tiny_corpus, tmp_path):
    config = store_config(tiny_corpus)
    store = StoreData(prepare(config, tmp_path / "m", workers=1, progress=False)["location"])
    batches = EpochBatches(store, 60, None, shuffle=True, seed=1, epoch=0, window=50)
    assert batches.n_windows > 3
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(store)))
    for b in batches:
        longest = max(max(int(store.src_len[i]), int(store.tgt_len[i]) + 1) for i in b)
        assert len(b) == 1 or longest * len(b) <= 60
    again = EpochBatches(store, 60, None, shuffle=True, seed=1, epoch=0, window=50)
    assert [again[k] for k in reversed(range(len(again)))] == list(batches)[::-1]  # random access, same batches
    assert list(EpochBatches(store, 60, None, True, 1, 1, 50)) != list(batches)  # a new order each epoch


def epoch_of(order):
    return np.concatenate([order.positions(w) for w in range(order.n_windows)])


def test_an_epoch_drawn_window_by_window_visits_every_pair_once_in_a_new_order_each_epoch():
    corpus = [Mix("a", 0, 10_007, 1.0)]
    order = EpochOrder(corpus, seed=1, epoch=0, window=1000, shuffle=True)
    assert order.n_windows > 9
    drawn = epoch_of(order)
    assert sorted(drawn.tolist()) == list(range(10_007))
    for w in range(order.n_windows):
        window = order.positions(w)
        assert len(window) <= 1000
        if w < order.n_windows - 1:  # drawn from all over the corpus, not from one or two stretches of it
            assert len(set((window // 1000).tolist())) >= 5
    assert np.array_equal(epoch_of(EpochOrder(corpus, 1, 0, 1000, True)), drawn)  # what a resumed run draws
    assert not np.array_equal(epoch_of(EpochOrder(corpus, 1, 1, 1000, True)), drawn)
    assert not np.array_equal(epoch_of(EpochOrder(corpus, 2, 0, 1000, True)), drawn)
    assert epoch_of(EpochOrder(corpus, 1, 0, 1000, shuffle=False)).tolist() == list(range(10_007))


def test_weighted_corpora_keep_their_shares_over_several_windows():
    corpora = [Mix("big", 0, 30_000, 1.0), Mix("small", 30_000, 3_000, 1.0)]
    halves = []
    for epoch in range(2):
        order = EpochOrder(corpora, seed=1, epoch=epoch, window=2000, shuffle=True)
        assert order.n_windows > 10
        drawn = epoch_of(order)
        big, small = drawn[drawn < 30_000], drawn[drawn >= 30_000]
        # 33,000 pairs an epoch, 16,500 from each: a random 16,500 of the big corpus, once each; the small one
        # five times over (15,000) and 1,500 of its pairs a sixth time
        assert (len(big), len(set(big.tolist()))) == (16_500, 16_500)
        assert sorted(np.bincount(small - 30_000, minlength=3000).tolist()) == [5] * 1500 + [6] * 1500
        halves.append(set(big.tolist()))
    assert halves[0] != halves[1]


def fake_store(folder, pairs):
    """A store of `pairs` pairs with random lengths; its ids and offsets are empty (sparse) files."""
    folder.mkdir()
    tokens = {}
    for k, side in enumerate(("src", "tgt")):
        lengths = np.random.default_rng(k).integers(1, 60, size=pairs).astype(np.uint16)
        lengths.tofile(folder / f"{side}.len")
        tokens[side] = int(lengths.sum())
        with open(folder / f"{side}.off", "wb") as f:
            f.truncate(8 * (pairs + 1))
        with open(folder / f"{side}.ids", "wb") as f:
            f.truncate(2 * tokens[side])
    meta = {"pairs": pairs, "ids_dtype": "uint16", "len_dtype": "uint16", "src_tokens": tokens["src"],
            "tgt_tokens": tokens["tgt"], "corpora": [{"name": "a", "start": 0, "kept": pairs, "weight": 1.0}]}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return StoreData(folder)


def test_an_epochs_batches_need_no_array_as_long_as_the_corpus(tmp_path):
    store = fake_store(tmp_path / "store", 2_000_000)
    tracemalloc.start()
    try:
        batches = EpochBatches(store, 2000, None, shuffle=True, seed=1, epoch=0, window=65_536)
        first, last = batches[0], batches[len(batches) - 1]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert batches.n_windows > 30 and first and last
    # one int32 per pair would be 8 MB, the int64 permutation of every pair 16 MB
    assert peak < 6_000_000, f"{peak / 1e6:.1f} MB traced"


def test_reading_a_store_for_training_maps_none_of_it(tiny_corpus, tmp_path):
    maps = Path("/proc/self/maps")
    if not maps.is_file():
        pytest.skip("no /proc/self/maps on this system")
    config = store_config(tiny_corpus)
    store = StoreData(prepare(config, tmp_path / "m", workers=1, progress=False)["location"])
    batches = training_batches(store, config, epoch=0)
    pairs = [(store.src_ids[i], store.tgt_ids[i]) for b in batches for i in b]
    assert len(pairs) == len(store) and all(src and tgt for src, tgt in pairs)
    mapped = [line for line in maps.read_text().splitlines() if str(store.folder) in line]
    assert mapped == []  # the pages it read stay in the page cache, not in this process


def test_two_workers_write_the_same_store_as_one(tiny_corpus, tmp_path, monkeypatch):
    from attnmt.data import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 512)  # many chunks from the tiny corpus
    config = store_config(tiny_corpus)
    one = prepare(config, tmp_path / "a", workers=1, progress=False)["location"]
    two = prepare(config, tmp_path / "b", workers=2, progress=False)["location"]
    for name in ("src.ids", "tgt.ids", "src.off", "tgt.off", "src.len", "tgt.len", "src.vocab", "tgt.vocab"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def write_pairs(folder, name, n, offset):
    (folder / f"{name}.src").write_text("".join(f"s{offset + i} x\n" for i in range(n)), encoding="utf-8")
    (folder / f"{name}.tgt").write_text("".join(f"t{offset + i} y\n" for i in range(n)), encoding="utf-8")


def test_weighted_corpora_give_each_epoch_their_share_and_log_it(tiny_corpus, tmp_path):
    write_pairs(tmp_path, "big", 300, 0)
    write_pairs(tmp_path, "small", 30, 1000)
    config = store_config(tiny_corpus, max_steps=2)
    config.data.train_src = config.data.train_tgt = None
    config.data.train = [{"name": "big", "src": str(tmp_path / "big.src"), "tgt": str(tmp_path / "big.tgt"),
                          "tsv": None, "weight": 1.0},
                         {"name": "small", "src": str(tmp_path / "small.src"), "tgt": str(tmp_path / "small.tgt"),
                          "tsv": None, "weight": 1.0}]
    train(config, tmp_path / "m", quiet=True)
    store = StoreData(tmp_path / "m" / "store")
    for epoch in range(2):
        batches = training_batches(store, config, epoch=epoch)
        drawn = [i for b in batches for i in b]
        from_small = sum(i >= 300 for i in drawn)
        assert (len(drawn), from_small) == (330, 165)  # equal weights: half each, the small corpus repeated
        assert len({i for i in drawn if i < 300}) == 165  # a random half of the big one
    log = [json.loads(line) for line in (tmp_path / "m" / "train_log.jsonl").open(encoding="utf-8")]
    shares = {r["corpus"]: r["pairs_per_epoch"] for r in log if r.get("corpus")}
    assert shares == {"big": 165, "small": 165}


def test_a_changed_corpus_is_prepared_again_and_refused_on_resume(tiny_corpus, tmp_path):
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        (tmp_path / name).write_bytes((tiny_corpus / name).read_bytes())
    config = store_config(tmp_path, max_steps=2)
    train(config, tmp_path / "m", quiet=True)
    before = StoreData(tmp_path / "m" / "store").meta["pairs"]
    with open(tmp_path / "train.src", "a", encoding="utf-8") as f, open(tmp_path / "train.tgt", "a") as g:
        f.write("a b c\n")
        g.write("d e f\n")
    with pytest.raises(UserError, match="changed since it was prepared.*without --resume"):
        train(store_config(tmp_path, max_steps=4), tmp_path / "m", resume=True, quiet=True)
    train(config, tmp_path / "m", overwrite=True, quiet=True)
    assert StoreData(tmp_path / "m" / "store").meta["pairs"] == before + 1
    config.data.vocab_size = 99  # a data setting of the store: the hash changes
    done = prepare(config, tmp_path / "m", workers=1, progress=False)
    assert done["prepared"] and "data settings changed" in done["reason"]


def test_a_failed_preparation_leaves_nothing_that_is_taken_for_a_store(tiny_corpus, tmp_path):
    lines = (tiny_corpus / "train.src").read_bytes().splitlines(keepends=True)
    (tmp_path / "train.src").write_bytes(b"".join(lines[:500]) + b"caf\xe9\n" + b"".join(lines[501:]))
    for name in ("train.tgt", "valid.src", "valid.tgt"):
        (tmp_path / name).write_bytes((tiny_corpus / name).read_bytes())
    config = store_config(tmp_path)
    with pytest.raises(UserError, match=r"train.src:501 is not valid UTF-8"):
        prepare(config, tmp_path / "m", workers=2, progress=False)
    assert list((tmp_path / "m").iterdir()) == []  # no store, no temporary folder
    (tmp_path / "m" / ".store.preparing-killed").mkdir()  # what a killed run leaves: never read
    (tmp_path / "train.src").write_bytes(b"".join(lines))
    assert prepare(config, tmp_path / "m", workers=1, progress=False)["prepared"]


@pytest.mark.parametrize("window", [None, 100])  # one window, or six
def test_training_from_the_store_resumes_bit_identically(tiny_corpus, tmp_path, window):
    config, stopped = store_config(tiny_corpus, save_every=3), store_config(tiny_corpus, save_every=3, max_steps=7)
    if window:
        config.data.shuffle_window = stopped.data.shuffle_window = window
    train(config, tmp_path / "straight", quiet=True)
    train(stopped, tmp_path / "resumed", quiet=True)
    train(config, tmp_path / "resumed", resume=True, quiet=True)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    a["train_state"].pop("elapsed_s"), b["train_state"].pop("elapsed_s")
    assert a["train_state"] == b["train_state"]
    for key, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][key]), key


def test_a_data_train_list_takes_held_out_pairs_and_transforms(tiny_corpus, tmp_path):
    """Held-out pairs leave every corpus; the transforms' pairs come last, each read once an epoch, and
    the corpora keep the shares their weights give them."""
    from attnmt.data.order import epoch_counts

    config = store_config(tiny_corpus)
    files = {"src": str(tiny_corpus / "train.src"), "tgt": str(tiny_corpus / "train.tgt"), "tsv": None}
    config.data.train_src = config.data.train_tgt = config.data.valid_src = config.data.valid_tgt = None
    config.data.train = [{"name": "a", **files, "weight": 1.0}, {"name": "b", **files, "weight": 3.0}]
    config.data.valid_size, config.data.test_size = 10, 4
    config.data.transforms = [{"name": "joined_pairs", "count": 30, "max_parts": 2}]
    store = StoreData(prepare(config, tmp_path / "m", workers=1, progress=False)["location"])
    a, b, added = store.meta["corpora"]
    assert (a["name"], b["name"], added["name"]) == ("a", "b", "transforms")
    lines = len((tiny_corpus / "train.src").read_text(encoding="utf-8").splitlines())
    assert a["total"] + b["total"] == 2 * lines - 14 and added["total"] == 30 and 0 < added["kept"] <= 30
    assert len((store.folder / "valid.src").read_text(encoding="utf-8").splitlines()) == 10
    n = a["kept"] + b["kept"]
    assert epoch_counts(store.corpora) == [round(n / 4), round(3 * n / 4), added["kept"]]
