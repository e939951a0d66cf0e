# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # seq2seq 与注意力：打破固定向量的瓶颈 · seq2seq and attention: breaking the fixed-vector bottleneck
#
# 本笔记本跟随教材这一章的顺序：固定向量 c 与瓶颈、加性注意力的三步、作为软字典查询的注意力、
# 作为对齐的热图、缩放点积、因果掩码和多头注意力。每一节是一小段文字和演示它的代码，只用 attnmt
# 的公开接口；图都由 attnmt 自己的绘图函数画出。文中不写死任何结果：数字都由下面的代码算出。
#
# This notebook follows the chapter: the fixed vector c and the bottleneck, additive attention in
# three steps, attention as a soft dictionary lookup, heatmaps as alignment, scaled dot-product
# attention, the causal mask and multi-head attention. Each section is a short paragraph and the
# code that shows it, through attnmt's public API; every figure is drawn by attnmt's own plotting
# functions. No result is written into the text: the numbers are the ones the cells compute.
#
# 运行：`bash scripts/setup.sh && .venv/bin/pip install -e '.[notebook]'`（包含 JupyterLab），然后
# `.venv/bin/jupyter lab notebooks/chapter.ipynb`；不开浏览器时，`.venv/bin/jupyter-execute
# notebooks/chapter.ipynb` 运行所有单元（图写进输出文件夹）。请在内核中运行，不要用
# `python chapter.py`：演示在新启动的进程中训练两个模型，这些进程会重新执行脚本的顶层代码。
# 默认规模与 `attnmt demo --quick` 相同（一两分钟）；设置环境变量 `ATTNMT_NOTEBOOK_TINY=1` 则用极小的
# 模型，只检查每个单元都能运行（测试就是这样运行它的），这时模型太小，看不出下文描述的效果。
# `ATTNMT_NOTEBOOK_OUT` 指定输出文件夹（默认是笔记本旁边的 `chapter-output/`）。
#
# Running: `bash scripts/setup.sh && .venv/bin/pip install -e '.[notebook]'` (JupyterLab included), then
# `.venv/bin/jupyter lab notebooks/chapter.ipynb`; without a browser, `.venv/bin/jupyter-execute
# notebooks/chapter.ipynb` runs every cell (the figures land in the output folder). Run it in a
# kernel, not as `python chapter.py`: the demo trains its two models in spawned processes, which
# re-run a script's top level. The default size is `attnmt demo --quick`'s (a minute or two);
# `ATTNMT_NOTEBOOK_TINY=1` uses tiny models that only check that every cell runs (the tests run it
# so), too small to show the effects described below. `ATTNMT_NOTEBOOK_OUT` sets the output folder
# (default `chapter-output/` next to the notebook).

# %%
import os
from pathlib import Path

import numpy as np
import torch
from IPython.display import Image, Markdown, display

import attnmt
from attnmt.align import align_translations
from attnmt.decode.evaluate import format_table
from attnmt.models import reference as ref  # the NumPy reference of every attention primitive
from attnmt.study.demo import DemoSettings, run_demo
from attnmt.viz.heatmap import plot_attention
from attnmt.viz.length import plot_bleu_by_length

TINY = os.environ.get("ATTNMT_NOTEBOOK_TINY", "").strip().lower() not in ("", "0", "false", "no")
OUT = Path(os.environ.get("ATTNMT_NOTEBOOK_OUT", "chapter-output"))
OUT.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
np.set_printoptions(precision=3, suppress=True)
print(f"attnmt {attnmt.__version__} ({Path(attnmt.__file__).parent}), torch {torch.__version__}, tiny={TINY}")
print(f"output in {OUT.resolve()}")

# %% [markdown]
# ## 1. 固定向量 c 与瓶颈 · The fixed vector c and the bottleneck
#
# Sutskever 等人（2014）的 seq2seq 把整个源句读进编码器的最终状态，即一个固定大小的向量 c，解码器
# 只能从 c 出发生成整句译文。句子越长，要塞进同样多数字里的信息越多。RNNsearch（Bahdanau 等人，2014）
# 为每个源词保留一个注释向量 h_j，并在每个目标步重新查看它们。下面在内置的合成语言上训练这两个隐藏层
# 大小相同的模型（即 `attnmt demo --quick`），再按源句长度分桶计算 BLEU。
#
# seq2seq (Sutskever et al. 2014) reads the whole source into the encoder's final state, one
# fixed-size vector c, from which the decoder must produce the whole translation: the longer the
# sentence, the more has to fit into the same numbers. RNNsearch (Bahdanau et al. 2014) keeps one
# annotation h_j per source word and looks at all of them again at every target step. The cell below
# trains both, with the same hidden size, on the built-in synthetic language (what `attnmt demo
# --quick` does), and measures BLEU by source length.

# %%
if TINY:
    settings = DemoSettings(n_train=800, n_valid=20, n_test=60, max_len=20, hidden_size=32, emb_size=16,
                            attn_size=16, batch_tokens=500, steps={"seq2seq": 60, "rnnsearch": 60},
                            bucket_edges=(4, 12, 21))
else:
    settings = DemoSettings.quick()
demo = run_demo(OUT / "demo", settings=settings, overwrite=True, quiet=True)
display(Markdown(format_table(demo.buckets)))
for name, buckets in demo.buckets.items():
    print(f"{name}: all {settings.n_test} sentences {demo.bleu[name]:.1f} BLEU; the longest bucket keeps "
          f"{buckets[-1].bleu / max(buckets[0].bleu, 1e-9):.2f} of the shortest bucket's BLEU")
Image(filename=str(plot_bleu_by_length(demo.buckets, OUT / "bleu_by_length.png",
                                        title="BLEU by source length (synthetic language, greedy)")))

# %% [markdown]
# 固定向量到底有多大？用 `attnmt.load` 载入训练好的 seq2seq 模型，对一个测试句调用模型的 `encode`：
# 解码器从源句得到的全部信息就是 `final_h`（LSTM 还有记忆单元 `final_c`）。句子再长，它的大小也不变。
#
# How large is the fixed vector? Load the trained seq2seq model with `attnmt.load` and call the
# model's `encode` on a test sentence: `final_h` (and the LSTM's memory cell `final_c`) is all the
# decoder receives from the source, and its size does not grow with the sentence.

# %%
seq2seq = attnmt.load(OUT / "demo" / "models" / "seq2seq" / "seed1", checkpoint="last")
rnnsearch = attnmt.load(OUT / "demo" / "models" / "rnnsearch" / "seed1", checkpoint="last")
test_src = (OUT / "demo" / "data" / "test.src").read_text(encoding="utf-8").splitlines()
test_tgt = (OUT / "demo" / "data" / "test.tgt").read_text(encoding="utf-8").splitlines()


def source_batch(translator, sentence):
    """A one-sentence batch of source ids, as the translator's own tokenizer and vocabulary make it."""
    ids = translator.src.vocab.encode(translator.src.tokens(sentence))
    return torch.tensor([ids]), torch.tensor([len(ids)])


with torch.inference_mode():
    for sentence in (min(test_src, key=len), max(test_src, key=len)):
        enc = seq2seq.model.encode(*source_batch(seq2seq, sentence))
        print(f"{len(sentence.split()):3d} source words -> final_h {tuple(enc['final_h'].shape)}"
              + (f", final_c {tuple(enc['final_c'].shape)}" if "final_c" in enc else ""))
        enc = rnnsearch.model.encode(*source_batch(rnnsearch, sentence))
        print(f"    rnnsearch keeps every annotation: h {tuple(enc['h'].shape)}")

# %% [markdown]
# ## 2. 加性注意力的三步 · Additive attention in three steps
#
# 在第 i 个目标步，RNNsearch 用前一个解码器状态 s_{i-1} 去询问每个注释 h_j：
#
# 1. 打分 · scores: $e_{ij} = v^\top \tanh(W_s s_{i-1} + W_h h_j)$
# 2. 归一化 · weights: $\alpha_{ij} = \exp(e_{ij}) / \sum_k \exp(e_{ik})$
# 3. 加权求和 · context: $c_i = \sum_j \alpha_{ij} h_j$
#
# 下面用 NumPy 参考实现 `attnmt.models.reference` 按这三步计算，用的是刚训练出的模型的权重 W_s、W_h、v
# 和它的注释与解码器状态，再与模型翻译时自己给出的注意力比较。权重必须是学到的：
# `python -m attnmt.models.reference` 演示了单位矩阵这样的手选权重找不到最近的键。
#
# At target step i, RNNsearch asks every annotation h_j with the previous decoder state s_{i-1},
# in the three steps above. The cells compute them with the NumPy reference `attnmt.models.reference`, on
# the weights W_s, W_h, v the model has just learned and on its own annotations and decoder states,
# and compare the result with the attention the model reported while translating. The weights have
# to be learned: `python -m attnmt.models.reference` shows that hand-picked ones (identity matrices) do not
# find the nearest key.

# %%
sentence = min(test_src, key=lambda s: abs(len(s.split()) - 10))  # a test sentence of about 10 words
translation = rnnsearch.translate([sentence], beam=1)[0]
print("source:     ", sentence)
print("translation:", translation.text)

attn = rnnsearch.model.decoder.attention  # the trained AdditiveAttention module
W_s = attn.W_s.weight.detach().double().numpy()  # [A, hidden]
W_h = attn.W_h.weight.detach().double().numpy()  # [A, 2 * hidden]
v = attn.v.weight[0].detach().double().numpy()  # [A]
print("learned W_s", W_s.shape, " W_h", W_h.shape, " v", v.shape)

# %%
from attnmt.data.vocab import BOS_ID

with torch.inference_mode():
    src, src_len = source_batch(rnnsearch, sentence)
    enc = rnnsearch.model.encode(src, src_len)
    state = rnnsearch.model.init_state(enc)
    h = enc["h"][0].double().numpy()  # the annotations h_j [S, 2 * hidden]
    inputs = [BOS_ID] + rnnsearch.tgt.vocab.encode(translation.tgt_tokens)  # y_0 = <s>, then the output
    rows, queries = [], []
    for i, y_prev in enumerate(inputs):
        s_prev = rnnsearch.model.decoder.rnn.top(state)[0].double().numpy()  # the query s_{i-1}
        e = ref.additive_scores(s_prev, h, W_s, W_h, v)  # step 1
        alpha = ref.softmax(e)  # step 2
        c = alpha @ h  # step 3
        rows.append(alpha)
        queries.append(s_prev)
        if i == len(inputs) // 2:
            print(f"target step {i}: e = {e}\n  alpha = {alpha}\n  c_i[:6] = {c[:6]}")
        _, state, model_alpha = rnnsearch.model.decode_step(torch.tensor([y_prev]), state, enc)
reference_alpha = np.stack(rows)
print("rows x source:", reference_alpha.shape, " the model's:", translation.attention.shape)
difference = np.abs(reference_alpha - translation.attention).max()
print(f"largest difference from the model's own attention: {difference:.2e}")
assert difference < 1e-5, "the NumPy reference and the model disagree"

# %% [markdown]
# 没有学过的权重会怎样？用同样形状的随机权重重做这三步：注意力几乎是均匀的（熵接近 log S），
# 学到的权重则集中在少数几个源词上。参考实现自带的 `attnmt.models.reference.tour` 在一个检索任务上说明了同一点：
# 从一组键中找出离查询最近的那个，单位矩阵权重和随机权重都不行，拟合后的权重可以。
#
# What do unlearned weights do? The same three steps with random weights of the same shapes: the
# weights are close to uniform (entropy near log S), where the learned ones concentrate on a few
# source words. The reference's own `attnmt.models.reference.tour` makes the same point on a retrieval task,
# finding the key nearest the query: identity weights and random weights fail, fitted ones succeed.

# %%
def entropy(p):
    return float(-(p * np.log(np.clip(p, 1e-12, None))).sum(-1).mean())


untrained = {name: rng.normal(size=w.shape) / np.sqrt(w.shape[-1])  # the scale of a fresh layer
             for name, w in (("W_s", W_s), ("W_h", W_h), ("v", v))}
random_alpha = np.stack([ref.softmax(ref.additive_scores(q, h, untrained["W_s"], untrained["W_h"], untrained["v"]))
                         for q in queries])  # the same queries s_{i-1}, random W_s, W_h, v
print(f"log S = {np.log(len(h)):.2f}; mean entropy of the learned rows {entropy(reference_alpha):.2f}, "
      f"random weights {entropy(random_alpha):.2f}")

tour = ref.tour(out=lambda line: None)  # python -m attnmt.models.reference prints it all
print(f"retrieval, held-out accuracy (chance {tour.chance:.2f}): W_q = W_k = I, v = 1: {tour.accuracy_identity:.3f}; "
      f"random weights: {tour.accuracy_random_init:.3f}; fitted: {tour.accuracy_fitted:.3f}")

# %% [markdown]
# ## 3. 注意力是软的字典查询 · Attention as a soft dictionary lookup
#
# 字典按键取值：查询与某个键相同，就返回那个键的值。注意力把“相同”换成相似度：查询 q 与每个键 k_j
# 打分，softmax 把分数变成权重，返回所有值 v_j 的加权平均。分数越尖锐，查询就越像普通的字典查询。
# 在 RNNsearch 中，查询是 W_s s_{i-1}，键是 W_h h_j，值是 h_j 本身。
#
# A dictionary returns the value of the key equal to the query. Attention replaces equality by
# similarity: the query q is scored against every key k_j, a softmax turns the scores into
# weights, and the result is the weighted mean of all values v_j. The sharper the scores, the closer
# it comes to a plain lookup. In RNNsearch the query is W_s s_{i-1}, the keys W_h h_j, the values h_j.

# %%
keys = np.eye(4)  # four orthogonal keys ...
values = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])  # ... and their values
query = keys[2] + 0.3 * keys[1]  # close to key 2, a little of key 1
for sharpness in (1, 4, 16):
    output, weights = ref.scaled_dot_product_attention(sharpness * query[None], keys, values)
    print(f"query x {sharpness:2d}: weights {weights[0]} -> output {output[0]}  (value of key 2: {values[2]})")

# %% [markdown]
# ## 4. 热图即对齐 · Heatmaps as alignment
#
# 把每个目标步的权重 α_i 排成矩阵就是 Bahdanau 等人论文图 3 那样的热图：行是输出词，列是源词。模型
# 从未见过词对齐，它的注意力却大体沿对角线，并在词序改变处交叉（合成语言把动词放到从句末尾、形容词
# 放到名词之后）。`attnmt.align.align_translations` 从注意力读出词对齐，红圈标出这些链接。
#
# The weights α_i of every target step, stacked, are the heatmap of Bahdanau et al.'s Figure 3: rows
# are output words, columns source words. The model never saw a word alignment, yet its attention
# runs near the diagonal and crosses where the word order changes (the synthetic language moves verbs
# to the end of their clause and adjectives after their noun). `attnmt.align.align_translations`
# reads word links off the attention; they are circled in red.

# %%
long_sentence = max(test_src, key=lambda s: len(s.split()))
shown = align_translations(rnnsearch, rnnsearch.translate([long_sentence], beam=1))[0]
path = plot_attention(shown.attention, shown.src_tokens, shown.tgt_tokens + ["</s>"], OUT / "attention_links.png",
                      title=f"rnnsearch attention, {len(shown.src_tokens)} source words; circles: links",
                      marks=shown.alignment)
Image(filename=str(path))

# %% [markdown]
# 合成语言带有每个句对的标准对齐（`test.align`）。在参考译文上以 teacher forcing 运行模型，就能把注意力
# 读出的链接与标准对齐比较，用对齐错误率 AER 打分，并与不用模型的对角线基线对比。真实语言（英法
# Hansards 标准集）上的对齐工作见 [docs/alignment.md](../docs/alignment.md)：那里说明了从注意力读出
# 链接的几种方法、两个方向的对称化和引导对齐训练。
#
# The synthetic language comes with the gold alignment of every pair (`test.align`). Running the
# model with teacher forcing on the reference translations gives links that can be scored against
# the gold ones by the alignment error rate (AER), beside the diagonal baseline that needs no model.
# Alignment on real language (the English-French Hansards gold set) is in
# [docs/alignment.md](../docs/alignment.md): the methods that read links off attention,
# symmetrizing two directions, and guided alignment training.

# %%
from attnmt.align import attention_matrices, diagonal_links, links_from_attention, read_gold, score_alignments

gold = read_gold(OUT / "demo" / "data" / "test.align")
matrices = attention_matrices(rnnsearch, test_src, test_tgt)
scores = {
    "rnnsearch, argmax": score_alignments([links_from_attention(m, "argmax") for m in matrices], gold),
    "diagonal (no model)": score_alignments(
        [diagonal_links(len(s.split()), len(t.split())) for s, t in zip(test_src, test_tgt)], gold),
}
for name, s in scores.items():
    print(f"{name:20s} AER {s.aer:.3f}  precision {s.precision:.3f}  recall {s.recall:.3f}")
k = test_src.index(long_sentence)
path = plot_attention(matrices[k].weights, matrices[k].src_words, matrices[k].tgt_words, OUT / "attention_gold.png",
                      title="teacher-forced attention on the reference; circles: gold links", marks=gold[k].sure)
Image(filename=str(path))

# %% [markdown]
# ## 5. 缩放点积注意力 · Scaled dot-product attention
#
# Transformer（Vaswani 等人，2017）用点积打分：$\mathrm{softmax}(QK^\top / \sqrt{d_k})\,V$。各分量独立、方差为 1 的 q 与 k，
# 其点积的方差是 d_k，维度越高分数越大，softmax 就越接近 one-hot，梯度也随之消失。除以 √d_k 让分数
# 的方差回到 1。下面对不同的 d_k 比较不缩放和缩放时每行最大的权重。
#
# The Transformer (Vaswani et al. 2017) scores by dot products: $\mathrm{softmax}(QK^\top / \sqrt{d_k})\,V$. For q and k
# with independent components of variance 1, q·k has variance d_k: the larger the dimension, the
# larger the scores, the closer the softmax comes to one-hot, and its gradients vanish. Dividing by
# √d_k brings the variance back to 1. The cell compares the largest weight of each row, unscaled and
# scaled, for several d_k.

# %%
for d_k in (4, 64, 512):
    Q, K = rng.normal(size=(200, d_k)), rng.normal(size=(10, d_k))
    unscaled = ref.softmax(Q @ K.T)
    _, scaled = ref.scaled_dot_product_attention(Q, K, K)
    print(f"d_k = {d_k:3d}: std of q.k {np.std(Q @ K.T):5.1f}; mean largest weight unscaled "
          f"{unscaled.max(-1).mean():.2f}, scaled {scaled.max(-1).mean():.2f}")

# %% [markdown]
# ## 6. 因果掩码 · The causal mask
#
# 解码器的自注意力不能看见还没生成的词：位置 i 只能关注位置 j ≤ i。`causal_mask` 是下三角的布尔矩阵，
# 被屏蔽的位置权重恰好为 0。所以改变后面的输入，前面位置的输出完全不变。
#
# A decoder's self-attention must not see words not yet produced: position i may attend positions
# j ≤ i only. `causal_mask` is a lower-triangular boolean matrix, and masked positions get exactly
# zero weight, so changing a later input leaves the outputs of earlier positions unchanged.

# %%
words = ["<s>", "the", "cat", "sat", "down"]
X = rng.normal(size=(len(words), 8))
output, weights = ref.scaled_dot_product_attention(X, X, X, mask=ref.causal_mask(len(words)))
print(ref.causal_mask(len(words)).astype(int))
X_changed = X.copy()
X_changed[-1] = rng.normal(size=8)  # change the last position's input
changed, _ = ref.scaled_dot_product_attention(X_changed, X_changed, X_changed, mask=ref.causal_mask(len(words)))
print("outputs of the first four positions unchanged:", np.array_equal(output[:-1], changed[:-1]))
assert np.array_equal(output[:-1], changed[:-1])
Image(filename=str(plot_attention(weights, words, words, OUT / "causal.png", title="causal self-attention")))

# %% [markdown]
# ## 7. 多头注意力 · Multi-head attention
#
# 多头注意力把 d_model 维的查询、键、值分别投影成 H 组较小的向量，每组（一个“头”）独立做缩放点积注意力，
# 再把各头的输出拼接起来并投影回 d_model 维。不同的头可以关注不同的位置。下面用参考实现
# `multi_head_attention`，手算其中一个头来核对，并为第二个句子（只有 3 个真实的键，其余是填充）
# 的每个头画一张热图。
#
# Multi-head attention projects the d_model-wide queries, keys and values into H groups of smaller
# vectors; each group, a head, does scaled dot-product attention on its own, and the heads' outputs
# are concatenated and projected back to d_model. Different heads can attend to different positions.
# The cell uses the reference `multi_head_attention`, checks one head against scaled dot-product
# attention done by hand, and draws each head's weights for the second sentence, which has 3 real
# keys (a padding mask).

# %%
D, H, T = 16, 4, 6
params = {f"W_{n}": rng.normal(size=(D, D)) / np.sqrt(D) for n in "qkvo"}
X = rng.normal(size=(2, T, D))
key_mask = ref.padding_mask([T, 3], T)[:, None, :]  # [B, 1, Tk]: True = a real key
output, weights = ref.multi_head_attention(X, X, params, n_heads=H, mask=key_mask)
print("output", output.shape, " weights [B, H, Tq, Tk]", weights.shape)
print("second sentence: weight on its 3 padded keys, all heads =", weights[1, :, :, 3:].sum())

# head 1 by hand: its rows of W_q, W_k, W_v, then scaled dot-product attention
head, d_h = 1, D // H
rows_h = slice(head * d_h, (head + 1) * d_h)
Q_h, K_h, V_h = (X[0] @ params[f"W_{n}"][rows_h].T for n in "qkv")
_, by_hand = ref.scaled_dot_product_attention(Q_h, K_h, V_h)
print("head 1 by hand equals multi_head_attention's head 1:", np.allclose(by_hand, weights[0, head]))
assert np.allclose(by_hand, weights[0, head])

positions = [f"x{t}" for t in range(T)]
for head in range(H):
    path = plot_attention(weights[1, head], positions, positions, OUT / f"head_{head}.png",
                          title=f"head {head}, sentence 2 (3 real keys)")
    display(Image(filename=str(path)))

# %% [markdown]
# ## 下一步 · Next
#
# - 完整的演示（句长到 60 词）：`attnmt demo`；自己的语料：README 的 “Train on your own corpus”。
# - 三个论断的完整测量（多个随机种子、置信区间、反转源句、对齐）：[docs/chapter.md](../docs/chapter.md)。
# - 中文：[README.zh-CN.md](../README.zh-CN.md) 与 [docs/chinese.md](../docs/chinese.md)。
#
# - The full demo (sentences of up to 60 words): `attnmt demo`; your own corpus: the README's "Train
#   on your own corpus".
# - The three claims measured in full (seeds, intervals, source reversal, alignment):
#   [docs/chapter.md](../docs/chapter.md).
# - Chinese: [README.zh-CN.md](../README.zh-CN.md) and [docs/chinese.md](../docs/chinese.md).
