// The page's text in English and Chinese. Static text carries data-i18n="key" (textContent),
// data-i18n-placeholder or data-i18n-title; text made by the scripts calls t(key, values).
// The language is the browser's by default (navigator.language "zh..." -> Chinese), and the switch at
// the top changes it; the choice is kept in localStorage where the page may use it.
"use strict";

const STRINGS = {
  en: {
    language: "Language",
    tagline: "Translate a sentence and see what the model looked at.",
    source: "Source sentence",
    placeholder: "Type a sentence; Enter translates, Shift+Enter adds a line",
    examples: "Examples from the model's held-out data",
    choose: "choose one…",
    sentence: "Sentence",
    model: "Model",
    beam: "Beam",
    nbest: "N-best",
    links: "Links",
    links_title: "how attention becomes word links (docs/alignment.md)",
    translate: "Translate",
    translation: "Translation",
    alignment: "Word alignment",
    alignment_help: "Links read off the attention; hover a word to mark the words it is aligned with.",
    side_source: "source",
    side_target: "target",
    attention: "Attention",
    attention_help: "Hover a target word to see the source words it attends to, a source word to see the target " +
      "words attending to it, or a cell for its weight.",
    cross_of: "Cross-attention of",
    nbest_list: "N-best list",
    explorer: "Watch the decoder",
    show: "Show",
    words: "words",
    pieces: "pieces",
    tab_steps: "Step by step",
    tab_beam: "Beam search",
    tab_whatif: "What if",
    tab_compare: "Seq2seq vs attention",
    tab_heads: "Heads",
    tab_layers: "All attention",
    tab_pin: "Edit attention",
    tab_neighbours: "Neighbours",
    nb_help: "Click a word of the translation: below are the decoder states of the model's training sentences (or held-out ones) nearest to the state that wrote it (cosine similarity), each sentence with the word its state wrote highlighted.",
    nb_none: "No neighbours: neither the model's training sentences nor held-out ones are at hand to compare the decoder's states with.",
    nb_prompt: "Step {i} wrote \u201c{word}\u201d. The nearest of {n} decoder states of {data}:",
    nb_training: "training sentences",
    nb_held_out: "held-out sentences",
    pin_help: "Click a word of the translation, then a source word: at that step the decoder's attention goes all to that word, and the rest of the translation is decoded from there.",
    pin_none: "A model without attention (seq2seq) has no attention to edit: it reads the whole source as one vector.",
    pin_heads: "A Transformer: the attention is set in every head of every decoder layer ({layers} layers \u00d7 {heads} heads), so at that step the decoder sees that word and nothing else of the source.",
    pin_export: "Editing the attention decodes the sentence again: it needs the live server (attnmt serve), not this file.",
    pin_pick: "Click a word of the translation to choose its step.",
    pin_prompt: "Step {i} wrote \u201c{word}\u201d. Click the source word to put all of the attention on:",
    pin_said: "At step {i}, all attention on \u201c{src}\u201d: the decoder wrote \u201c{out}\u201d (before: \u201c{before}\u201d).",
    steps_help: "The decoder writes one word per step. At each step it compares its state with every source word " +
      "(the scores e), turns the scores into weights α that sum to 1, and reads the source through them " +
      "(the context c). Move the slider or press play.",
    play: "Play",
    pause: "Pause",
    step_of: "step {i} of {n}",
    query: "Step {i} reads “{input}” and writes “{output}” (p = {p})",
    forced: "forced",
    alpha_title: "Attention α over the source",
    topk_title: "Most likely next words",
    heatmap_title: "All steps (the lit row is this step)",
    no_attention: "No attention: the whole source is squeezed into one fixed vector, read at every step.",
    eq_title: "For “{word}” (click a bar to choose another source word):",
    eq_formula: "e = a(s, h), the score of the decoder's state s against the word's annotation h; " +
      "α = exp(e) / Σ exp(e) over all source words",
    eq_e: "e = {e}",
    eq_alpha: "α = {alpha}",
    eq_h: "h: |h| = {norm}, first components [{head}]",
    eq_c: "c = Σ α h over all source words: |c| = {norm}, first components [{head}]",
    beam_help: "Beam search keeps the best hypotheses at each step. Each column is a step; boxes are the words " +
      "tried.",
    show_pruned: "show pruned",
    kept: "kept",
    finished: "finished",
    pruned: "pruned",
    best_path: "the translation",
    beam_info: "beam {size}: {kept} hypotheses kept, {finished} finished, {pruned} pruned",
    no_beam: "This record has no beam search tree.",
    whatif_help: "Click a word of the translation, then choose another word for that place: the rest is decoded " +
      "again with everything up to it forced.",
    wi_prompt: "Instead of “{word}” at step {i}:",
    wi_pick: "Click a word of the translation above.",
    wi_needs_server: "not precomputed in this file; it needs the server (attnmt serve)",
    wi_loading: "decoding…",
    wi_offline: "The greyed words were not decoded in advance in this file; the server (attnmt serve) decodes any.",
    before: "Before",
    after: "After",
    compare_help: "The same sentence translated by a model that squeezes the source into one fixed vector " +
      "(seq2seq) and by one with attention (RNNsearch). Move to longer sentences and watch the fixed vector lose " +
      "the words; where the sentence has a reference, each translation's sentence BLEU and chrF say which is nearer.",
    length: "Sentence",
    words_count: "{n} words",
    left: "Left",
    right: "Right",
    cmp_one_model: "Start the server with two models (seq2seq and rnnsearch) to compare them.",
    score: "score {s}",
    heads_none: "This model has one attention per step; a Transformer has several layers of several heads each.",
    layer: "Layer",
    head: "Head",
    layer_n: "layer {n}",
    head_n: "head {n}",
    mean_heads: "mean of heads",
    all_heads: "All heads of this layer (click one)",
    mv_none: "A Transformer attends in three places, in every layer and head: the encoder over the source, the decoder over its own output so far, and the decoder over the source. This model has none of them.",
    mv_which: "Attention",
    mv_encoder: "encoder self-attention (source \u2192 source)",
    mv_decoder: "decoder self-attention (output so far \u2192 output so far)",
    mv_cross: "cross-attention (output \u2192 source)",
    mv_help: "Each thumbnail is one head (a row per layer); click one to open it. In pieces.",
    mv_title: "{kind}: layer {layer}, head {head}",
    mv_lines_help: "Left: the word that looks; right: the words it looks at. The darker the line, the more weight. Point at a word on the left to see its lines alone.",
    footer_export: "A file written by attnmt explore --export: the data is inside it, no server is needed.",
    empty: "(empty translation)",
    type_sentence: "Type a sentence to translate.",
    model_info: "{type} \u00b7 {src} \u2192 {tgt} \u00b7 {n} parameters",
    model_heads: " \u00b7 {layers} decoder layer(s) \u00d7 {heads} head(s)",
    cannot_list: "cannot list the models: {error}",
    timing: "{model} \u00b7 {ms} ms in the server \u00b7 decoded in a batch of {size} sentence(s) from {requests} request(s)",
    n_a: "n/a",
    last_layer: " (last)",
    unk_title: "<unk>: a word the model has no piece for (not in its vocabulary)",
    unknown_source: "not in the model's vocabulary: the model read <unk> here",
    beam_numbers: "The number in a box is log p, the log probability of the hypothesis so far (the sum over its " +
      "words, so it only falls). A finished box shows its score instead: log p divided by the length penalty " +
      "((5 + length) / 6)^\u03b1 with \u03b1 = {alpha}, which makes outputs of different lengths comparable. " +
      "Hover a box for the word's own log p.",
    beam_logp: "log p {x}",
    beam_score: "score {x}",
    beam_tip_logp: "log p of the hypothesis so far = {x}",
    beam_tip_word: "log p of this word = {x}",
    beam_tip_score: "final score = log p / length penalty = {x}",
    root: "start",
    reference: "reference",
    cmp_marks: "Words the reference lacks are underlined; the green scores are those of the model nearer the reference.",
    cmp_no_reference: "No reference for this sentence: BLEU and chrF need one (the model's held-out examples have one).",
    cmp_no_reference_file: "No reference for this sentence in this file: the sentences of the model's held-out data have one.",
    bleu: "BLEU {s}",
    chrf: "chrF {s}",
    cmp_lead: "nearer the reference: {bleu} BLEU, {chrf} chrF",
    api: "API",
    schema: "schema",
  },
  zh: {
    language: "语言",
    tagline: "翻译一个句子，看看模型关注了什么。",
    source: "源语句子",
    placeholder: "输入一个句子；回车翻译，Shift+回车换行",
    examples: "模型留出数据中的例句",
    choose: "选一个…",
    sentence: "句子",
    model: "模型",
    beam: "束宽",
    nbest: "N 最佳",
    links: "词对齐方法",
    links_title: "怎样从注意力得到词对齐（docs/alignment.md）",
    translate: "翻译",
    translation: "译文",
    alignment: "词对齐",
    alignment_help: "从注意力读出的词对齐；把鼠标放在一个词上，与它对齐的词会被标出。",
    side_source: "源语",
    side_target: "译文",
    attention: "注意力",
    attention_help: "鼠标放在译文的词上，看它关注哪些源语词；放在源语的词上，看哪些译文词关注它；放在格子上，看它的权重。",
    cross_of: "交叉注意力：",
    nbest_list: "N 最佳列表",
    explorer: "看解码器如何工作",
    show: "显示",
    words: "词",
    pieces: "子词",
    tab_steps: "逐步解码",
    tab_beam: "束搜索",
    tab_whatif: "假如换一个词",
    tab_compare: "seq2seq 与注意力",
    tab_heads: "多头注意力",
    tab_layers: "全部注意力",
    tab_pin: "编辑注意力",
    tab_neighbours: "近邻",
    nb_help: "点击译文中的一个词：下面是模型在训练句子（或留出句子）上与写出这个词的解码器状态最接近的状态（余弦相似度），每个句子里这个状态写出的词高亮显示。",
    nb_none: "没有近邻：找不到模型的训练句子或留出句子来比较解码器状态。",
    nb_prompt: "第 {i} 步写出了“{word}”。在{data}的 {n} 个解码器状态中最接近的：",
    nb_training: "训练句子",
    nb_held_out: "留出句子",
    pin_help: "点击译文中的一个词，再点击一个源语词：解码器在这一步的注意力全部放到这个词上，译文的其余部分从这里重新解码。",
    pin_none: "没有注意力的模型（seq2seq）没有可以编辑的注意力：它把整个源句读成一个向量。",
    pin_heads: "这是 Transformer：注意力在解码器每一层的每一个头里都这样设定（{layers} 层 × {heads} 个头），所以这一步解码器只看到这个词，看不到源句的其他部分。",
    pin_export: "编辑注意力需要重新解码句子，要用在线服务器（attnmt serve），这个文件做不到。",
    pin_pick: "点击译文中的一个词，选择它的那一步。",
    pin_prompt: "第 {i} 步写出了“{word}”。点击一个源语词，把全部注意力放到它上面：",
    pin_said: "第 {i} 步的注意力全部放在“{src}”上：解码器写出了“{out}”（之前是“{before}”）。",
    steps_help: "解码器每一步写出一个词。每一步它把自己的状态与每个源语词比较（得分 e），把得分变成和为 1 的权重 α，再按这些权重读取源语（上下文向量 c）。拖动滑块或按播放。",
    play: "播放",
    pause: "暂停",
    step_of: "第 {i} 步，共 {n} 步",
    query: "第 {i} 步读入“{input}”，写出“{output}”（p = {p}）",
    forced: "已固定",
    alpha_title: "对源语的注意力 α",
    topk_title: "最可能的下一个词",
    heatmap_title: "所有步骤（亮的一行是这一步）",
    no_attention: "没有注意力：整个源句被压缩成一个固定向量，每一步都读同一个向量。",
    eq_title: "对“{word}”（点击柱子可选别的源语词）：",
    eq_formula: "e = a(s, h)：解码器状态 s 与该词的表示 h 的得分；α = exp(e) / Σ exp(e)，对所有源语词求和",
    eq_e: "e = {e}",
    eq_alpha: "α = {alpha}",
    eq_h: "h：|h| = {norm}，前几个分量 [{head}]",
    eq_c: "c = 对所有源语词的 Σ α h：|c| = {norm}，前几个分量 [{head}]",
    beam_help: "束搜索在每一步保留最好的几个假设。每一列是一步；每个方框是试过的一个词。",
    show_pruned: "显示被剪除的",
    kept: "保留",
    finished: "完成",
    pruned: "剪除",
    best_path: "最终译文",
    beam_info: "束宽 {size}：保留 {kept} 个假设，完成 {finished} 个，剪除 {pruned} 个",
    no_beam: "这条记录没有束搜索树。",
    whatif_help: "点击译文中的一个词，再为这个位置选另一个词：模型固定到它为止的前缀，重新解码其余部分。",
    wi_prompt: "第 {i} 步不用“{word}”，改用：",
    wi_pick: "点击上面译文中的一个词。",
    wi_needs_server: "这个文件里没有预先算好；需要服务器（attnmt serve）",
    wi_loading: "解码中…",
    wi_offline: "灰色的词没有在这个文件里预先解码；服务器（attnmt serve）可以解码任何一个。",
    before: "之前",
    after: "之后",
    compare_help: "同一个句子分别由把源句压缩成一个固定向量的模型（seq2seq）和有注意力的模型（RNNsearch）翻译。换成更长的句子，看固定向量怎样丢词；" +
      "句子有参考译文时，每个译文的句子级 BLEU 和 chrF 表明哪个更接近参考译文。",
    length: "句子",
    words_count: "{n} 个词",
    left: "左",
    right: "右",
    cmp_one_model: "用两个模型（seq2seq 和 rnnsearch）启动服务器才能对比。",
    score: "得分 {s}",
    heads_none: "这个模型每一步只有一个注意力；Transformer 有多层，每层有多个头。",
    layer: "层",
    head: "头",
    layer_n: "第 {n} 层",
    head_n: "第 {n} 个头",
    mean_heads: "各头平均",
    all_heads: "本层所有的头（点击一个）",
    mv_none: "Transformer 在三个地方使用注意力，每层每个头都有：编码器看源句，解码器看自己已经写出的部分，解码器看源句。这个模型没有这些注意力。",
    mv_which: "注意力",
    mv_encoder: "编码器自注意力（源句 \u2192 源句）",
    mv_decoder: "解码器自注意力（已写出的部分 \u2192 已写出的部分）",
    mv_cross: "交叉注意力（译文 \u2192 源句）",
    mv_help: "每个小图是一个头（每行是一层）；点击一个打开它。以子词显示。",
    mv_title: "{kind}：第 {layer} 层，第 {head} 个头",
    mv_lines_help: "左边是发出注意的词，右边是它看的词。线越深，权重越大。指向左边的一个词，只显示它的线。",
    footer_export: "由 attnmt explore --export 生成的文件：数据都在文件里，不需要服务器。",
    empty: "（空译文）",
    type_sentence: "请输入要翻译的句子。",
    model_info: "{type} \u00b7 {src} \u2192 {tgt} \u00b7 {n} 个参数",
    model_heads: " \u00b7 解码器 {layers} 层 \u00d7 每层 {heads} 个头",
    cannot_list: "无法列出模型：{error}",
    timing: "{model} \u00b7 服务器用时 {ms} 毫秒 \u00b7 与 {requests} 个请求的共 {size} 个句子一起成批解码",
    n_a: "无",
    last_layer: "（最后一层）",
    unk_title: "<unk>：模型词表里没有的词",
    unknown_source: "不在模型的词表里：模型在这里读到的是 <unk>",
    beam_numbers: "方框里的数字是 log p：这个假设到此为止的对数概率（各词之和，所以只会变小）。已完成的方框显示的是" +
      "得分：log p 除以长度惩罚 ((5 + 长度) / 6)^\u03b1，\u03b1 = {alpha}，这样不同长度的输出才能比较。" +
      "鼠标放在方框上，可以看这个词自己的 log p。",
    beam_logp: "log p {x}",
    beam_score: "得分 {x}",
    beam_tip_logp: "到此为止的假设的 log p = {x}",
    beam_tip_word: "这个词的 log p = {x}",
    beam_tip_score: "最终得分 = log p / 长度惩罚 = {x}",
    root: "起点",
    reference: "参考译文",
    cmp_marks: "参考译文里没有的词加了下划线；绿色的分数属于更接近参考译文的模型。",
    cmp_no_reference: "这个句子没有参考译文：BLEU 和 chrF 需要参考译文（模型留出数据中的例句有）。",
    cmp_no_reference_file: "这个文件里的这个句子没有参考译文：模型留出数据中的句子才有。",
    bleu: "BLEU {s}",
    chrf: "chrF {s}",
    cmp_lead: "更接近参考译文：BLEU {bleu}，chrF {chrf}",
    api: "接口",
    schema: "接口说明",
  },
};

const i18n = { lang: "en", listeners: [] };

function browserLanguage() {
  let saved = null;
  try {
    saved = window.localStorage.getItem("attnmt-lang");
  } catch (e) { /* storage may be off (file://, privacy settings): the browser's language decides */ }
  if (saved && STRINGS[saved]) return saved;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"];
  return String(langs[0]).toLowerCase().startsWith("zh") ? "zh" : "en";
}

// t("step_of", {i: 2, n: 7}) -> "step 2 of 7"
function t(key, values) {
  const text = (STRINGS[i18n.lang] && STRINGS[i18n.lang][key]) || STRINGS.en[key] || key;
  return values ? text.replace(/\{(\w+)\}/g, (m, name) => (name in values ? String(values[name]) : m)) : text;
}

function setLanguage(lang) {
  i18n.lang = STRINGS[lang] ? lang : "en";
  document.documentElement.lang = i18n.lang === "zh" ? "zh-CN" : "en";
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-title]")) el.title = t(el.dataset.i18nTitle);
  document.getElementById("lang").value = i18n.lang;
  for (const listener of i18n.listeners) listener();
}

// Scripts whose text depends on the language redraw through this.
function onLanguage(listener) {
  i18n.listeners.push(listener);
}

document.getElementById("lang").addEventListener("change", (event) => {
  try {
    window.localStorage.setItem("attnmt-lang", event.target.value);
  } catch (e) { /* not kept: fine */ }
  setLanguage(event.target.value);
});
setLanguage(browserLanguage());
