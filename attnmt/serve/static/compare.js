// The explorer's side-by-side view: one sentence translated by two models (by default a seq2seq model and
// one with attention), and, where the sentence's reference is known, each translation's sentence BLEU and
// chrF (the records' `reference`, scored by sacreBLEU on the Python side), the words the reference lacks
// underlined, and the model nearer the reference marked with its lead. Uses explorer.js's `ex` and helpers.
"use strict";

function compareChoices() {
  const models = ex.provider.models();
  for (const id of ["cmp-a", "cmp-b"]) {
    const select = byId(id);
    if (select.options.length === models.length) continue;
    select.replaceChildren(...models.map((m) => option(m.name, `${m.name} (${m.type})`)));
  }
  if (!byId("cmp-a").dataset.set && models.length) {
    const fixedVector = models.find((m) => !m.has_attention) || models[0];
    const attentive = models.find((m) => m.has_attention && m.name !== fixedVector.name) ||
      models.find((m) => m.name !== fixedVector.name) || fixedVector;
    byId("cmp-a").value = fixedVector.name;
    byId("cmp-b").value = attentive.name;
    byId("cmp-a").dataset.set = "true";
  }
}

async function drawCompareView() {
  if (!ex.provider) return;
  compareChoices();
  const sentences = ex.provider.compareSet();
  const slider = byId("cmp-length");
  slider.max = String(Math.max(sentences.length - 1, 0));
  const k = Math.min(Number(slider.value), sentences.length - 1);
  const text = sentences[k];
  if (text === undefined) return;
  const n = text.split(/\s+/).filter(Boolean).length;
  byId("cmp-length-value").textContent = t("words_count", { n });
  byId("cmp-source").textContent = text;
  const names = [byId("cmp-a").value, byId("cmp-b").value];
  const ticket = ++ex.cmp.busy;
  try {
    const records = await Promise.all(names.map((name) => compareRecord(text, name)));
    if (ticket !== ex.cmp.busy) return;
    const one = names[0] === names[1];
    drawReference(records[0].reference || records[1].reference);
    const leads = one ? [null, null] : compareLeads(records);
    records.forEach((record, c) => drawCompareColumn(byId(c === 0 ? "cmp-col-a" : "cmp-col-b"), record, leads[c]));
    byId("cmp-col-b").hidden = one;
    if (one) byId("cmp-col-a").appendChild(el("p", "muted", t("cmp_one_model")));
  } catch (e) {
    if (ticket === ex.cmp.busy) showError(e.message);
  }
}

function drawReference(reference) {
  const box = byId("cmp-reference");
  box.dataset.known = String(Boolean(reference));
  if (!reference) {
    box.replaceChildren(el("span", "muted", t(ex.provider.mode === "export" ? "cmp_no_reference_file" : "cmp_no_reference")));
    return;
  }
  box.replaceChildren(el("span", "side", t("reference")), el("span", "cmp-ref-text", reference.text),
                      el("span", "muted cmp-marks", t("cmp_marks")));
}

// The column nearer the reference, by sentence BLEU (chrF where BLEU ties): per column its lead over the
// other ({bleu, chrf} differences), or null.
function compareLeads(records) {
  const [a, b] = records.map((r) => r.reference);
  if (!a || !b) return [null, null];
  const d = { bleu: a.bleu - b.bleu, chrf: a.chrf - b.chrf };
  const aLeads = d.bleu > 0 || (d.bleu === 0 && d.chrf > 0);
  const bLeads = d.bleu < 0 || (d.bleu === 0 && d.chrf < 0);
  return [aLeads ? d : null, bLeads ? { bleu: -d.bleu, chrf: -d.chrf } : null];
}

function signed(x) {
  return (x > 0 ? "+" : x < 0 ? "\u2212" : "\u00b1") + Math.abs(x).toFixed(1);
}

// The reference's words as a multiset; in a script without spaces, its characters.
function wordPool(text) {
  const pool = new Map();
  for (const w of text.split(/\s+/).filter(Boolean).flatMap((w) => (isUnspaced(w) ? Array.from(w) : [w]))) {
    pool.set(w, (pool.get(w) || 0) + 1);
  }
  return pool;
}

function takeWord(pool, word) {
  const parts = isUnspaced(word) ? Array.from(word) : [word];
  if (!parts.every((p) => pool.get(p) > 0)) return false;
  for (const p of parts) pool.set(p, pool.get(p) - 1);
  return true;
}

// The translation's text with each of its words in a span: those the reference lacks marked .miss.
function compareText(record) {
  const text = record.output.text;
  const pool = record.reference ? wordPool(record.reference.text) : null;
  const nodes = [];
  let at = 0;
  for (const word of record.output.words) {
    const k = text.indexOf(word, at);
    if (k < 0) continue;
    if (k > at) nodes.push(document.createTextNode(text.slice(at, k)));
    const span = labelOf("span", "cmp-word", word);
    if (pool && !takeWord(pool, word)) span.classList.add("miss");
    nodes.push(span);
    at = k + word.length;
  }
  if (at < text.length) nodes.push(document.createTextNode(text.slice(at)));
  return nodes;
}

async function compareRecord(text, model) {
  const key = `${model}\n${text}`;
  if (!ex.cmp.cache.has(key)) ex.cmp.cache.set(key, ex.provider.explore(text, model, null));
  try {
    return await ex.cmp.cache.get(key);
  } catch (e) {
    ex.cmp.cache.delete(key);
    throw e;
  }
}

function drawCompareColumn(box, record, lead) {
  const u = units();
  box.dataset.model = record.model.name;
  const text = el("p", "translation cmp-text");
  text.replaceChildren(...(record.output.text ? compareText(record) : [t("empty")]));
  box.replaceChildren(el("h3", "", `${record.model.name} (${record.model.type})`), text);
  const ref = record.reference;
  if (ref) {
    const scores = el("p", "cmp-scores" + (lead ? " lead" : ""));
    scores.append(el("span", "cmp-bleu", t("bleu", { s: ref.bleu.toFixed(1) })), document.createTextNode("  \u00b7  "),
                  el("span", "cmp-chrf", t("chrf", { s: ref.chrf.toFixed(1) })));
    if (lead) scores.appendChild(el("span", "badge cmp-lead", t("cmp_lead", { bleu: signed(lead.bleu), chrf: signed(lead.chrf) })));
    box.appendChild(scores);
  }
  box.appendChild(el("p", "muted", t("score", { s: fixed(record.output.score, 3) })));
  const view = attentionView(record, u);
  if (!view) {
    box.appendChild(el("p", "muted fixed-vector", t("no_attention")));
    return;
  }
  const wrap = el("div", "matrix-wrap");
  const grid = el("div", "matrix");
  wrap.appendChild(grid);
  box.appendChild(wrap);
  drawMatrix(grid, view.rows.map((r) => pieceLabel(r, u)), view.cols, view.matrix, { unknown: unknownCols(record, u) });
}
