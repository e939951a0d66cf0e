// attnmt serve page: plain JavaScript, no build step, no network access beyond this server.
//
// Every token and text from the server is inserted with textContent, never innerHTML, so a
// sentence such as "<img onerror=...>" is shown, not run.
"use strict";

// Target word i "attends to" source word j when a[i][j] >= ATTEND_RATIO * max_k a[i][k]: the
// strongest source word always, and the others that are nearly as strong. The same relation is used
// in both directions, so hovering a source word shows exactly the target words that highlight it.
const ATTEND_RATIO = 0.5;

const $ = (id) => document.getElementById(id);
const state = { models: [], limits: null, translation: null, result: null, requestId: 0, export: null };
const EXPLORE_TOP_K = 10;

// ----------------------------------------------------------------------------------------- API

class ApiError extends Error {
  constructor(field, message) {
    super(field ? `${field}: ${message}` : message);
    this.field = field;
  }
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  let data = null;
  try {
    data = await response.json();
  } catch (e) {
    throw new ApiError(null, `the server answered ${response.status} without JSON`);
  }
  if (!response.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(err.field || null, err.message || `HTTP ${response.status}`);
  }
  return data;
}

// ----------------------------------------------------------------------------------- controls

function selectedModel() {
  return state.models.find((m) => m.name === $("model").value) || state.models[0];
}

function option(value, label) {
  const o = document.createElement("option");
  o.value = String(value);
  o.textContent = label;
  return o;
}

function showExamples() {
  const m = selectedModel();
  const select = $("examples");
  select.replaceChildren(option("", t("choose")));
  for (const text of m.examples || []) select.appendChild(option(text, text));
  $("examples-label").hidden = !(m.examples && m.examples.length);
}

function showModelInfo() {
  showExamples();
  const m = selectedModel();
  $("model-info").textContent =
    t("model_info", { type: m.model_type, src: m.src_lang, tgt: m.tgt_lang, n: m.parameters.toLocaleString("en") }) +
    (m.layers ? t("model_heads", { layers: m.layers, heads: m.heads }) : "");
}

function updateBeam() {
  const beam = Number($("beam").value);
  $("beam-value").textContent = String(beam);
  const select = $("n-best");
  const previous = Number(select.value) || 1;
  select.replaceChildren();
  for (let n = 1; n <= beam; n++) select.appendChild(option(n, String(n)));
  select.value = String(Math.min(previous, beam));
}

async function init() {
  const embedded = document.getElementById("attnmt-export");
  if (embedded) return initExport(await exportedData(embedded));
  try {
    const data = await api("/models");
    state.models = data.models;
    state.limits = data.limits;
  } catch (e) {
    showError(t("cannot_list", { error: e.message }));
    return;
  }
  for (const m of state.models) $("model").appendChild(option(m.name, `${m.name} (${m.src_lang}\u2192${m.tgt_lang})`));
  $("beam").max = String(state.limits.max_beam);
  $("beam").value = String(state.models[0].default_beam);
  updateBeam();
  showModelInfo();

  $("model").addEventListener("change", () => {
    $("beam").value = String(selectedModel().default_beam);
    updateBeam();
    showModelInfo();
    if ($("source").value.trim()) translate();
  });
  $("beam").addEventListener("input", updateBeam);
  $("examples").addEventListener("change", () => {
    if (!$("examples").value) return;
    $("source").value = $("examples").value;
    translate();
  });
  $("form").addEventListener("submit", (event) => {
    event.preventDefault();
    translate();
  });
  $("source").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {  // isComposing: IME input (e.g. pinyin)
      event.preventDefault();
      translate();
    }
  });
  $("layer").addEventListener("change", drawAttention);
  $("head").addEventListener("change", drawAttention);
  exploreInit(serverProvider());
  onLanguage(() => {
    showModelInfo();
    if (state.result) render(state.result);
  });
  // never an empty page: the first example is translated at once
  const first = (selectedModel().examples || [])[0];
  if (first && !$("source").value) {
    $("source").value = first;
    translate();
  }
  document.body.dataset.ready = "true";  // for tests: the controls are filled in
}

// Records from the server: POST /explore, at the form's beam for the model on show.
function serverProvider() {
  return {
    mode: "server",
    explore: async (text, model, prefixTokens, pin, neighbours) => {
      const m = state.models.find((x) => x.name === model);
      const body = { text, model, top_k: EXPLORE_TOP_K };
      if (model === selectedModel().name) body.beam = Number($("beam").value);
      else if (m) body.beam = Math.min(m.default_beam, state.limits.max_beam);
      if (prefixTokens) body.prefix_tokens = prefixTokens;
      if (pin) body.pin = pin;
      if (neighbours) body.neighbours = neighbours;
      return (await api("/explore", body)).record;
    },
    models: () => state.models.map((m) => ({ name: m.name, type: m.model_type, has_attention: m.has_attention })),
    // the models' example sentences and the sentence on show, short to long
    compareSet: () => byLength([$("source").value.trim(), ...state.models.flatMap((m) => m.examples || [])]),
  };
}

function byLength(texts) {
  const words = (s) => s.split(/\s+/).filter(Boolean).length;
  return [...new Set(texts.filter((s) => s && s.trim()))].sort((a, b) => words(a) - words(b) || a.localeCompare(b));
}

// ------------------------------------------------------------------------------ exported file

// The data that `attnmt explore --export` put in the page: JSON, or (a large export) a JSON string of the
// JSON gzip-compressed and base64-encoded, which the browser decompresses.
async function exportedData(script) {
  const value = JSON.parse(script.textContent);
  if (script.dataset.encoding !== "gzip+base64") return value;
  const bytes = Uint8Array.from(atob(value), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

// A file written by `attnmt explore --export`: the records are in the page; nothing is fetched.
function initExport(data) {
  state.export = data;
  document.body.classList.add("exported");
  $("server-input").hidden = true;
  $("export-input").hidden = false;
  $("footer-api").hidden = true;
  $("footer-export").hidden = false;
  for (const e of document.querySelectorAll(".server-only")) e.hidden = true;
  for (const m of data.models) $("model").appendChild(option(m.name, `${m.name} (${m.type})`));
  data.sentences.forEach((s, k) => $("export-sentence").appendChild(option(k, s.source)));
  const show = () => {
    const sentence = data.sentences[Number($("export-sentence").value)];
    const record = sentence && sentence.records[$("model").value];
    if (!record) return;
    render(recordAsTranslation(record));
    exploreShow(record);
  };
  $("model").addEventListener("change", show);
  $("export-sentence").addEventListener("change", show);
  onLanguage(() => {
    if (state.result) render(state.result);
  });
  $("layer").addEventListener("change", drawAttention);
  $("head").addEventListener("change", drawAttention);
  exploreInit({
    mode: "export",
    explore: async (text, model) => {
      const sentence = data.sentences.find((s) => s.source === text);
      if (!sentence || !sentence.records[model]) throw new Error(t("wi_needs_server"));
      return sentence.records[model];
    },
    models: () => data.models,
    compareSet: () => data.sentences.map((s) => s.source),
  });
  show();
  document.body.dataset.ready = "true";
}

// A record in the shape of POST /translate's answer, for the translation panel.
function recordAsTranslation(record) {
  const att = record.attention;
  const tr = {
    source: record.source.text, text: record.output.text, src_tokens: record.source.pieces,
    tgt_tokens: record.output.pieces, score: record.output.score, attention: att ? att.pieces.mean : null,
    attention_heads: att ? att.pieces.layers : null, alignment: null,
    n_best: [{ text: record.output.text, score: record.output.score }],
  };
  return { model: record.model.name, translations: [tr], timing: null };
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

// -------------------------------------------------------------------------------- translation

async function translate() {
  const text = $("source").value;
  if (!text.trim()) {
    showError(t("type_sentence"));
    return;
  }
  const model = selectedModel();
  const body = {
    text,
    model: model.name,
    beam: Number($("beam").value),
    n_best: Number($("n-best").value),
    attention: true,
    attention_heads: model.heads != null,  // the capabilities /models declares
    alignment: model.has_attention,
    alignment_method: $("align-method").value,
  };
  const id = ++state.requestId;  // a slower earlier answer must not overwrite a later one
  $("translate").disabled = true;
  const explored = ex.provider.explore(text, model.name, null);
  explored.catch(() => {});  // reported below, once
  try {
    const result = await api("/translate", body);
    if (id !== state.requestId) return;
    showError("");
    render(result);
  } catch (e) {
    if (id === state.requestId) showError(e.message);
    return;
  } finally {
    if (id === state.requestId) $("translate").disabled = false;
  }
  try {
    const record = await explored;
    if (id === state.requestId) exploreShow(record);
  } catch (e) {  // the translation stands; the explorer, which would show another sentence, is hidden
    if (id !== state.requestId) return;
    $("explorer").hidden = true;
    showError(e.message);
  }
}

function render(result) {
  const tr = result.translations[0];
  state.result = result;
  state.translation = tr;
  $("translation").replaceChildren(...(tr.text ? markedText(tr.text) : [t("empty")]));
  const timing = result.timing;
  $("timing").textContent = !timing ? "" : t("timing", {
    model: result.model, ms: timing.total_ms.toFixed(1), size: timing.batch_size, requests: timing.batch_requests });

  const list = $("n-best-list");
  list.replaceChildren();
  for (const h of tr.n_best) {
    const li = document.createElement("li");
    li.replaceChildren(...(h.text ? markedText(h.text) : [t("empty")]));
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = t("score", { s: h.score === null ? t("n_a") : h.score.toFixed(3) });
    li.appendChild(score);
    list.appendChild(li);
  }
  setupHeadChooser(tr.attention_heads);
  $("result").hidden = false;
  drawAttention();
  drawAlignment(tr);
}

// -------------------------------------------------------------------------------- word alignment

function drawAlignment(tr) {
  const box = $("alignment-box");
  box.hidden = !tr.alignment;
  if (!tr.alignment) return;
  const src = tr.source.split(/\s+/).filter(Boolean);
  const tgt = tr.text.split(/\s+/).filter(Boolean);
  $("align-name").textContent = $("align-method").value;
  $("src-words").replaceChildren(...src.map((w, i) => token(w, "sw", i)));
  $("tgt-words").replaceChildren(...tgt.map((w, j) => token(w, "tw", j)));
  $("links").textContent = tr.alignment.map(([i, j]) => `${src[i]}\u2013${tgt[j]}`).join("  \u00b7  ");
  state.links = tr.alignment;
}

function onWordHover(event) {
  for (const el of all("#alignment-box .focus, #alignment-box .attended")) el.classList.remove("focus", "attended");
  const el = event.target.closest("[data-sw], [data-tw]");
  if (!el || !state.links) return;
  el.classList.add("focus");
  const isSource = el.dataset.sw !== undefined;
  const index = Number(isSource ? el.dataset.sw : el.dataset.tw);
  for (const [i, j] of state.links) {
    if ((isSource ? i : j) !== index) continue;
    const other = isSource ? `[data-tw="${j}"]` : `[data-sw="${i}"]`;
    for (const o of all(`#alignment-box ${other}`)) o.classList.add("attended");
  }
}

$("alignment-box").addEventListener("mouseover", onWordHover);

function setupHeadChooser(heads) {
  $("head-chooser").hidden = !heads;
  if (!heads) return;
  const layers = heads.length;
  const nHeads = heads[0].length;
  const layer = $("layer");
  const head = $("head");
  const keepLayer = layer.options.length === layers ? layer.value : String(layers - 1);
  const keepHead = head.options.length === nHeads + 1 ? head.value : "mean";
  layer.replaceChildren();
  // labels say "layer 2", not "2": a label equal to another option's value (0-based) would be ambiguous
  for (let l = 0; l < layers; l++) {
    layer.appendChild(option(l, t("layer_n", { n: l + 1 }) + (l === layers - 1 ? t("last_layer") : "")));
  }
  head.replaceChildren(option("mean", t("mean_heads")));
  for (let h = 0; h < nHeads; h++) head.appendChild(option(h, t("head_n", { n: h + 1 })));
  layer.value = keepLayer;
  head.value = keepHead;
}

// The matrix on show: the search's attention, or a chosen layer and head (or the layer's head mean).
function currentMatrix() {
  const tr = state.translation;
  if (!tr.attention_heads) return tr.attention;
  const perHead = tr.attention_heads[Number($("layer").value)];
  const h = $("head").value;
  if (h !== "mean") return perHead[Number(h)];
  return perHead[0].map((row, i) => row.map((_, j) => perHead.reduce((s, m) => s + m[i][j], 0) / perHead.length));
}

// -------------------------------------------------------------------------------- attention map

function token(text, attr, index) {
  const span = document.createElement("span");
  span.className = text === UNK ? "tok unk" : "tok";
  span.textContent = text;
  span.dataset[attr] = String(index);
  return span;
}

function drawAttention() {
  const tr = state.translation;
  if (!tr) return;
  const matrix = currentMatrix();
  const tgtLabels = tr.tgt_tokens.concat(["</s>"]);
  const srcBox = $("src-sentence");
  const tgtBox = $("tgt-sentence");
  srcBox.replaceChildren(...tr.src_tokens.map((t, j) => token(t, "src", j)));
  tgtBox.replaceChildren(...tr.tgt_tokens.map((t, i) => token(t, "tgt", i)));

  const grid = $("heatmap");
  grid.replaceChildren();
  state.matrix = matrix;
  if (!matrix) {
    grid.textContent = t("no_attention");
    return;
  }
  grid.style.gridTemplateColumns = `auto repeat(${tr.src_tokens.length}, 28px)`;
  grid.appendChild(document.createElement("span"));  // the corner
  tr.src_tokens.forEach((piece, j) => {
    const label = token(piece, "src", j);
    label.classList.add("hm-col");
    if (isUnspaced(piece)) label.classList.add("upright");
    grid.appendChild(label);
  });
  matrix.forEach((row, i) => {
    const label = token(tgtLabels[i], "tgt", i);
    label.classList.add("hm-row");
    grid.appendChild(label);
    row.forEach((w, j) => {
      const cell = document.createElement("div");
      cell.className = "cell";
      cell.dataset.i = String(i);
      cell.dataset.j = String(j);
      cell.style.setProperty("--w", String(w));
      cell.title = `${tgtLabels[i]} \u2192 ${tr.src_tokens[j]}: ${w.toFixed(3)}`;
      cell.setAttribute("role", "gridcell");
      grid.appendChild(cell);
    });
  });
}

function attends(i, j) {
  const row = state.matrix[i];
  return row[j] >= ATTEND_RATIO * Math.max(...row);
}

function all(selector) {
  return document.querySelectorAll(selector);
}

function clearHighlight() {
  for (const el of all(".focus, .attended, .in-row, .in-col")) el.classList.remove("focus", "attended", "in-row", "in-col");
  $("cell-info").textContent = "\u00a0";
}

// A target word: it, and the source words it attends to.
function highlightTarget(i) {
  for (const el of all(`[data-tgt="${i}"]`)) el.classList.add("focus");
  state.matrix[i].forEach((_, j) => {
    if (attends(i, j)) for (const el of all(`[data-src="${j}"]`)) el.classList.add("attended");
  });
  for (const el of all(`.cell[data-i="${i}"]`)) el.classList.add("in-row");
}

// A source word: it, and the target words that attend to it.
function highlightSource(j) {
  for (const el of all(`[data-src="${j}"]`)) el.classList.add("focus");
  state.matrix.forEach((_, i) => {
    if (attends(i, j)) for (const el of all(`[data-tgt="${i}"]`)) el.classList.add("attended");
  });
  for (const el of all(`.cell[data-j="${j}"]`)) el.classList.add("in-col");
}

// A cell: its target and source word, and the weight between them.
function highlightCell(cell) {
  const i = Number(cell.dataset.i);
  const j = Number(cell.dataset.j);
  cell.classList.add("focus");
  for (const el of all(`[data-tgt="${i}"]:not(.cell)`)) el.classList.add("focus");
  for (const el of all(`[data-src="${j}"]:not(.cell)`)) el.classList.add("focus");
  $("cell-info").textContent = cell.title;
}

function onHover(event) {
  if (!state.matrix) return;
  const el = event.target.closest("[data-tgt], [data-src], .cell");
  clearHighlight();
  if (!el) return;
  if (el.classList.contains("cell")) highlightCell(el);
  else if (el.dataset.tgt !== undefined) highlightTarget(Number(el.dataset.tgt));
  else highlightSource(Number(el.dataset.src));
}

for (const id of ["heatmap", "src-sentence", "tgt-sentence"]) {
  $(id).addEventListener("mouseover", onHover);
  $(id).addEventListener("mouseleave", clearHighlight);
}

init();
