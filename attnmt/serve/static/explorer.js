// The explorer: views of one explore record (docs/explore.md): step by step, the beam search tree,
// what-if re-decoding, attention you can edit (pin.js), two models side by side (compare.js), a Transformer's
// heads, all of its attention (layers.js), and each step's nearest decoder states (neighbours.js).
//
// Records come from a provider: the server (POST /explore) or the data embedded in a file written by
// `attnmt explore --export` (app.js picks one). Views redraw from `ex` alone, so switching the units
// (words / pieces) or the language redraws everything the same way.
"use strict";

const PLAY_MS = 900;
const byId = (id) => document.getElementById(id);
const ex = {
  provider: null,   // {mode, explore(text, model, prefixTokens) -> Promise<record>, compareSet(), models()}
  record: null,     // the record on show (the search's own translation)
  step: 0,
  srcSel: null,     // the source column chosen for the equation (null: the step's strongest)
  timer: null,
  view: "steps",
  wi: { step: null, record: null, busy: 0 },
  cmp: { cache: new Map(), busy: 0 },
};

function units() {
  return byId("units").value;
}

function fixed(x, digits) {
  return x === null || x === undefined ? t("n_a") : Number(x).toFixed(digits);
}

// ------------------------------------------------------------------------------------ the record

function exploreShow(record) {
  ex.record = record;
  byId("explorer").dataset.source = record.source.text;  // which record is on show (tests wait for it)
  byId("explorer").dataset.model = record.model.name;
  ex.step = 0;
  ex.srcSel = null;
  ex.wi = { step: null, record: null, busy: ex.wi.busy + 1 };
  pinReset();
  neighboursReset();
  stopPlaying();
  byId("explorer").hidden = false;
  const step = byId("step");
  step.max = String(record.steps.length - 1);
  step.value = "0";
  const tab = byId("view-heads");
  const hasHeads = Boolean(record.attention && record.attention.pieces.layers);
  document.querySelector('[data-view="heads"]').classList.toggle("dim", !hasHeads);
  tab.dataset.empty = String(!hasHeads);
  document.querySelector('[data-view="pin"]').classList.toggle("dim", !canPin(record) || (ex.provider.mode === "export" && !record.pins));
  const hasLayers = Boolean(layerKinds(record));
  document.querySelector('[data-view="layers"]').classList.toggle("dim", !hasLayers);
  byId("view-layers").dataset.empty = String(!hasLayers);
  redrawExplorer();
}

function redrawExplorer() {
  if (!ex.record) return;
  drawStepView();
  drawBeamView();
  drawWhatifView();
  drawPinView();
  drawNeighboursView();
  drawHeadsView();
  drawLayersView();
  if (ex.view === "compare") drawCompareView();
}

function showView(name) {
  ex.view = name;
  for (const b of document.querySelectorAll(".tabs [data-view]")) {
    b.setAttribute("aria-selected", String(b.dataset.view === name));
    if (b.dataset.view === name) b.scrollIntoView({ block: "nearest", inline: "nearest" });  // a narrow page's tab bar
  }
  for (const v of document.querySelectorAll("#explorer .view")) v.hidden = v.id !== `view-${name}`;
  if (name === "compare") {
    const sentences = ex.provider.compareSet();
    const at = sentences.indexOf(ex.record ? ex.record.source.text : "");
    byId("cmp-length").max = String(Math.max(sentences.length - 1, 0));  // first: a range clamps its value to max
    if (at >= 0) byId("cmp-length").value = String(at);  // start at the sentence on show
    drawCompareView();
  }
  if (name === "neighbours") drawNeighboursView();
  if (name !== "steps") stopPlaying();
}

// ------------------------------------------------------------------------------- step by step

function drawStepView() {
  const record = ex.record;
  const i = ex.step;
  const step = record.steps[i];
  const u = units();
  const view = attentionView(record, u);
  byId("step").value = String(i);
  byId("step-label").textContent = t("step_of", { i: i + 1, n: record.steps.length });
  const row = view ? view.rowOfStep(i) : i;
  const labels = view ? view.rows : record.steps.map((s) => s.output);
  byId("step-target").replaceChildren(...labels.map((w, k) => {
    const chip = labelOf("span", "tok" + (k === row ? " focus" : ""), pieceLabel(w, u));
    chip.dataset.row = String(k);
    return chip;
  }));
  const query = byId("step-query");
  query.textContent = t("query", { i: i + 1, input: pieceLabel(step.input, u), output: pieceLabel(step.output, u),
                                   p: fixed(step.p, 3) });
  if (step.forced) query.appendChild(el("span", "badge", t("forced")));
  drawTopk(step, u);
  const bars = byId("step-bars");
  const heat = byId("step-heatmap");
  byId("step-heatmap-box").hidden = !view;  // seq2seq: no map of empty rows, the note below says why
  if (!view) {
    bars.replaceChildren(el("p", "muted fixed-vector", t("no_attention")));
    heat.replaceChildren();
    byId("step-equation").hidden = true;
    return;
  }
  const weights = view.stepRow(i);
  const strongest = weights.indexOf(Math.max(...weights));
  const sel = ex.srcSel !== null && ex.srcSel < weights.length ? ex.srcSel : strongest;
  const unknown = unknownCols(record, u);
  bars.replaceChildren(...weights.map((w, j) => bar(view.cols[j], w, j, j === sel, unknown(j))));
  drawMatrix(heat, view.rows.map((r) => pieceLabel(r, u)), view.cols, view.matrix, { lit: row, unknown });
  drawEquation(step, sel, u);
}

function bar(label, w, j, selected, unknown) {
  const col = el("button", "bar" + (selected ? " selected" : ""));
  col.type = "button";
  col.dataset.j = String(j);
  col.dataset.w = String(w);
  col.title = `${label}: ${w.toFixed(3)}`;
  const fill = el("span", "fill");
  fill.style.height = `${Math.round(w * 100)}%`;
  const track = el("span", "track");
  track.appendChild(fill);
  col.append(el("span", "value", w.toFixed(2)), track, labelOf("span", "label", label, unknown));
  col.addEventListener("click", () => {
    ex.srcSel = j;
    drawStepView();
  });
  return col;
}

function drawTopk(step, u) {
  const list = byId("step-topk");
  list.replaceChildren(...step.top_k.map((cand) => {
    const li = el("li", cand.piece === step.output ? "chosen" : "");
    li.dataset.piece = cand.piece;
    const fill = el("span", "pbar");
    fill.style.width = `${Math.max(1, Math.round(cand.p * 100))}%`;
    li.append(labelOf("span", "word", pieceLabel(cand.piece, u)), fill, el("span", "p", fixed(cand.p, 3)));
    if (cand.piece !== step.output && cand.piece !== "</s>") {
      li.classList.add("pickable");
      li.addEventListener("click", () => {
        showView("whatif");
        chooseWhatifStep(ex.step);
        whatif(ex.step, cand.piece);
      });
    }
    return li;
  }));
}

// For RNNsearch: the chosen source column's scores e, weights alpha (softmax of e over all source pieces,
// computed here from e), its annotation h, and the context c.
function drawEquation(step, sel, u) {
  const box = byId("step-equation");
  const eq = step.equation;
  const ann = ex.record.source.annotations;
  box.hidden = !eq;
  if (!eq) return;
  const top = Math.max(...eq.e);
  const exps = eq.e.map((e) => Math.exp(e - top));
  const total = exps.reduce((a, b) => a + b, 0);
  const pieces = u === "words"
    ? ex.record.source.piece_word.map((w, k) => (w === sel ? k : -1)).filter((k) => k >= 0) : [sel];
  const cols = u === "words" ? ex.record.source.words : ex.record.source.pieces;
  box.replaceChildren(el("p", "eq-title", t("eq_title", { word: cols[sel] })), el("p", "muted eq-formula", t("eq_formula")));
  for (const k of pieces) {
    const line = el("p", "eq-line");
    line.dataset.piece = String(k);
    const name = pieces.length > 1 ? `${ex.record.source.pieces[k]}: ` : "";
    line.append(el("span", "eq-e", name + t("eq_e", { e: fixed(eq.e[k], 3) })), document.createTextNode("  \u00b7  "),
                el("span", "eq-alpha", t("eq_alpha", { alpha: (exps[k] / total).toFixed(4) })));
    box.appendChild(line);
    if (!ann) continue;
    if (pieces.length > 1) line.appendChild(document.createTextNode(`  \u00b7  |h| = ${fixed(ann.norm[k], 3)}`));
    else box.appendChild(el("p", "eq-line", t("eq_h", { norm: fixed(ann.norm[k], 3), head: ann.head[k].map((x) => fixed(x, 2)).join(", ") })));
  }
  box.appendChild(el("p", "eq-line eq-c", t("eq_c", { norm: fixed(eq.c_norm, 3), head: eq.c_head.map((x) => fixed(x, 2)).join(", ") })));
}

function setStep(i) {
  ex.step = Math.max(0, Math.min(i, ex.record.steps.length - 1));
  ex.srcSel = null;
  drawStepView();
}

function stopPlaying() {
  if (ex.timer !== null) clearInterval(ex.timer);
  ex.timer = null;
  byId("play").textContent = t("play");
}

function togglePlay() {
  if (ex.timer !== null) return stopPlaying();
  if (ex.step >= ex.record.steps.length - 1) setStep(0);
  byId("play").textContent = t("pause");
  ex.timer = setInterval(() => {
    if (ex.step >= ex.record.steps.length - 1) return stopPlaying();
    setStep(ex.step + 1);
  }, PLAY_MS);
}

// ---------------------------------------------------------------------------------------- beam

function drawBeamView() {
  const beam = ex.record.beam;
  const wrap = byId("beam-wrap");
  byId("beam-numbers").hidden = !beam;
  if (!beam) {
    wrap.replaceChildren();
    byId("beam-info").textContent = t("no_beam");
    return;
  }
  const c = beamCounts(beam);
  byId("beam-info").textContent = t("beam_info", { size: beam.size, kept: c.kept, finished: c.finished, pruned: c.pruned });
  byId("beam-numbers").textContent = t("beam_numbers", { alpha: ex.record.decode.length_penalty });
  drawBeam(wrap, beam, units());
  wrap.classList.toggle("no-pruned", !byId("beam-pruned").checked);
}

// -------------------------------------------------------------------------------------- what if

// The output's chips: one per word (or piece); each knows the first step that writes it.
function outputChips(record, u, forcedSteps) {
  if (u !== "words") {
    return record.output.pieces.map((p, i) => chip(pieceLabel(p, u), i, i < forcedSteps, i === forcedSteps - 1));
  }
  return record.output.words.map((w, k) => {
    const steps = record.steps.map((s, i) => (s.output_word === k ? i : -1)).filter((i) => i >= 0);
    return chip(w, steps[0], steps[0] < forcedSteps, steps.includes(forcedSteps - 1));
  });
}

function chip(text, step, forced, swapped) {
  const c = labelOf("span", "tok" + (forced ? " forced" : "") + (swapped ? " swapped" : ""), text);
  c.dataset.step = String(step);
  return c;
}

function drawWhatifView() {
  const u = units();
  const target = byId("wi-target");
  target.replaceChildren(...outputChips(ex.record, u, 0));
  for (const c of target.children) {
    c.classList.add("pickable");
    if (Number(c.dataset.step) === ex.wi.step) c.classList.add("focus");
    c.addEventListener("click", () => chooseWhatifStep(Number(c.dataset.step)));
  }
  drawWhatifChoices();
  drawWhatifResult();
}

function chooseWhatifStep(i) {
  ex.wi.step = i;
  for (const c of byId("wi-target").children) c.classList.toggle("focus", Number(c.dataset.step) === i);
  drawWhatifChoices();
}

// The precomputed alternative of an exported record for forcing `piece` at step i, if any (its source and
// model are the record's).
function precomputed(record, i, piece) {
  const alts = (record.alternatives || {})[String(i)] || [];
  const alt = alts.find((r) => r.prefix.length === i + 1 && r.prefix[i] === piece);
  return alt ? { ...alt, source: record.source, model: record.model } : null;
}

function drawWhatifChoices() {
  const box = byId("wi-choices");
  const i = ex.wi.step;
  if (i === null || i < 0) {
    byId("wi-prompt").textContent = t("wi_pick");
    box.replaceChildren();
    return;
  }
  const step = ex.record.steps[i];
  const u = units();
  byId("wi-prompt").textContent = t("wi_prompt", { word: pieceLabel(step.output, u), i: i + 1 });
  const offline = ex.provider.mode === "export";
  box.replaceChildren(...step.top_k.filter((c) => c.piece !== "</s>").map((cand) => {
    const b = el("button", "choice", `${pieceLabel(cand.piece, u)}  ${fixed(cand.p, 3)}`);
    b.type = "button";
    b.dataset.piece = cand.piece;
    if (cand.piece === step.output) {
      b.classList.add("chosen");
      b.disabled = true;
    } else if (offline && !precomputed(ex.record, i, cand.piece)) {
      b.disabled = true;
      b.title = t("wi_needs_server");
    }
    b.addEventListener("click", () => whatif(i, cand.piece));
    return b;
  }));
  if (offline && box.querySelector("button:disabled:not(.chosen)")) box.appendChild(el("span", "muted", t("wi_offline")));
}

async function whatif(i, piece) {
  const prefix = ex.record.steps.slice(0, i).map((s) => s.output).concat([piece]);
  const ticket = ++ex.wi.busy;
  byId("wi-prompt").textContent = t("wi_loading");
  let record;
  try {
    record = ex.provider.mode === "export" ? precomputed(ex.record, i, piece)
      : await ex.provider.explore(ex.record.source.text, ex.record.model.name, prefix);
  } catch (e) {
    showError(e.message);
    return;
  }
  if (ticket !== ex.wi.busy) return;
  ex.wi.step = i;
  ex.wi.record = record;
  drawWhatifView();
}

function drawWhatifResult() {
  const box = byId("wi-result");
  const after = ex.wi.record;
  box.hidden = !after;
  if (!after) return;
  const u = units();
  byId("wi-before-text").replaceChildren(...markedText(ex.record.output.text));
  byId("wi-after-text").replaceChildren(...outputChips(after, u, after.prefix.length));
  for (const [id, record] of [["wi-before", ex.record], ["wi-after", after]]) {
    const view = attentionView(record, u);
    if (view) drawMatrix(byId(id), view.rows.map((r) => pieceLabel(r, u)), view.cols, view.matrix,
                         { unknown: unknownCols(record, u) });
    else byId(id).replaceChildren(el("p", "muted", t("no_attention")));
  }
}

// ---------------------------------------------------------------------------------------- heads

function drawHeadsView() {
  const view = attentionView(ex.record, units());
  const has = Boolean(view && view.layers);
  byId("heads-none").hidden = has;
  byId("heads-none").textContent = view ? t("heads_none") : t("no_attention");
  byId("heads-box").hidden = !has;
  if (!has) return;
  const layer = byId("hv-layer");
  const head = byId("hv-head");
  const nLayers = view.layers.length;
  const nHeads = view.layers[0].length;
  const keepLayer = layer.options.length === nLayers ? layer.value : String(nLayers - 1);
  const keepHead = head.options.length === nHeads + 1 ? head.value : "mean";
  layer.replaceChildren(...view.layers.map((_, l) => option(l, t("layer_n", { n: l + 1 }))));
  head.replaceChildren(option("mean", t("mean_heads")), ...view.layers[0].map((_, h) => option(h, t("head_n", { n: h + 1 }))));
  layer.value = keepLayer;
  head.value = keepHead;
  drawHeadMatrix();
}

function drawHeadMatrix() {
  const u = units();
  const view = attentionView(ex.record, u);
  const heads = view.layers[Number(byId("hv-layer").value)];
  const chosen = byId("hv-head").value;
  const matrix = chosen === "mean" ? meanOf(heads) : heads[Number(chosen)];
  const rows = view.rows.map((r) => pieceLabel(r, u));
  drawMatrix(byId("hv-heatmap"), rows, view.cols, matrix, { unknown: unknownCols(ex.record, u) });
  const grid = byId("hv-grid");
  grid.replaceChildren();
  [["mean", meanOf(heads)], ...heads.map((m, h) => [String(h), m])].forEach(([value, m]) => {
    const card = el("button", "head-card" + (value === chosen ? " selected" : ""));
    card.type = "button";
    card.dataset.head = value;
    const mini = el("div", "matrix");
    drawMatrix(mini, rows, view.cols, m, { small: true });
    card.append(mini, el("span", "", value === "mean" ? t("mean_heads") : t("head_n", { n: Number(value) + 1 })));
    card.addEventListener("click", () => {
      byId("hv-head").value = value;
      drawHeadMatrix();
    });
    grid.appendChild(card);
  });
}

// ------------------------------------------------------------------------------------- controls

function exploreInit(provider) {
  ex.provider = provider;
  for (const b of document.querySelectorAll(".tabs [data-view]")) b.addEventListener("click", () => showView(b.dataset.view));
  byId("step").addEventListener("input", () => {
    stopPlaying();
    setStep(Number(byId("step").value));
  });
  byId("play").addEventListener("click", togglePlay);
  byId("step-target").addEventListener("click", (event) => {
    const chipEl = event.target.closest("[data-row]");
    if (!chipEl) return;
    const view = attentionView(ex.record, units());
    const i = ex.record.steps.findIndex((_, s) => (view ? view.rowOfStep(s) : s) === Number(chipEl.dataset.row));
    if (i >= 0) setStep(i);
  });
  byId("units").addEventListener("change", redrawExplorer);
  byId("beam-pruned").addEventListener("change", () => byId("beam-wrap").classList.toggle("no-pruned", !byId("beam-pruned").checked));
  for (const id of ["cmp-a", "cmp-b"]) byId(id).addEventListener("change", drawCompareView);
  byId("cmp-length").addEventListener("input", drawCompareView);
  byId("hv-layer").addEventListener("change", drawHeadMatrix);
  byId("hv-head").addEventListener("change", drawHeadMatrix);
  layersInit();
  onLanguage(() => {
    redrawExplorer();
    if (ex.timer === null) byId("play").textContent = t("play");
  });
  showView("steps");
}
