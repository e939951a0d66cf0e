// The explorer's "Edit attention" view (Seq2Seq-Vis): choose a step of the translation and a source word; the
// server decodes again with the decoder's attention at that step all on that word (its pieces share it), the
// steps before it kept (POST /explore's prefix_tokens and pin). Before and after side by side, the pinned row
// lit. An RNN attention model's one attention is pinned; a Transformer's cross-attention in every head of every
// decoder layer (attnmt.decode.pinning says why). A model without attention (seq2seq) has nothing to pin, and
// says so. An exported file has no server to decode: it reads the outcomes decoded in advance (the record's
// pins, by step: those of its first steps, attnmt.explore.page.PIN_STEPS), and says so of a pin it lacks.
"use strict";

const pn = { step: null, record: null, busy: 0 };

function pinReset() {
  pn.step = null;
  pn.record = null;
  pn.busy += 1;
}

function canPin(record) {
  if (!record.steps.length) return false;
  return "can_pin" in record.model ? Boolean(record.model.can_pin) : Boolean(record.steps[0].equation);
}

function drawPinView() {
  const record = ex.record;
  const offline = ex.provider.mode === "export";
  const able = canPin(record) && (!offline || Boolean(record.pins));
  byId("pin-none").hidden = able;
  byId("pin-none").textContent = offline ? t("pin_export") : t("pin_none");
  byId("pin-box").hidden = !able;
  if (!able) return;
  byId("pin-heads").hidden = !record.model.heads;
  byId("pin-heads").textContent = t("pin_heads", { layers: record.model.layers, heads: record.model.heads });
  const u = units();
  const target = byId("pin-target");
  target.replaceChildren(...outputChips(record, u, 0));
  for (const c of target.children) {
    c.classList.add("pickable");
    c.classList.toggle("focus", Number(c.dataset.step) === pn.step);
    c.addEventListener("click", () => {
      pn.step = Number(c.dataset.step);
      drawPinView();
    });
  }
  drawPinSources(record, u);
  drawPinResult(u);
}

function drawPinSources(record, u) {
  const box = byId("pin-source");
  if (pn.step === null) {
    byId("pin-prompt").textContent = t("pin_pick");
    box.replaceChildren();
    return;
  }
  byId("pin-prompt").textContent = t("pin_prompt", { i: pn.step + 1, word: pieceLabel(record.steps[pn.step].output, u) });
  const words = u === "words";
  const offline = ex.provider.mode === "export";
  const labels = words ? record.source.words : record.source.pieces.map((p) => pieceLabel(p, u));
  box.replaceChildren(...labels.map((label, col) => {
    const b = labelOf("button", "choice", label);
    b.type = "button";
    b.dataset.col = String(col);
    const pieces = words ? record.source.piece_word.map((w, k) => (w === col ? k : -1)).filter((k) => k >= 0) : [col];
    if (offline && !precomputedPin(record, pn.step, pieces)) {
      b.disabled = true;
      b.title = t("pin_offline", { n: Object.keys(record.pins).length });
    }
    b.addEventListener("click", () => pinTo(pn.step, pieces));
    return b;
  }));
  if (offline && box.querySelector("button:disabled")) {
    box.appendChild(el("span", "muted", t("pin_offline", { n: Object.keys(record.pins).length })));
  }
}

function precomputedPin(record, i, pieces) {
  const same = (a, b) => a.length === b.length && a.every((k, n) => k === b[n]);
  const found = ((record.pins || {})[String(i)] || []).find((r) => same(r.pin.source, pieces));
  return found ? { ...found, source: record.source, model: record.model } : null;
}

async function pinTo(i, pieces) {
  const prefix = ex.record.steps.slice(0, i).map((s) => s.output);
  const ticket = ++pn.busy;
  byId("pin-prompt").textContent = t("wi_loading");
  let record;
  try {
    record = ex.provider.mode === "export" ? precomputedPin(ex.record, i, pieces)
      : await ex.provider.explore(ex.record.source.text, ex.record.model.name, prefix, pieces);
  } catch (e) {
    showError(e.message);
    return;
  }
  if (ticket !== pn.busy) return;
  pn.step = i;
  pn.record = record;
  drawPinView();
}

function drawPinResult(u) {
  const after = pn.record;
  byId("pin-result").hidden = !after;
  if (!after) return;
  const at = after.pin.step;
  const src = after.pin.source.map((k) => after.source.pieces[k]).join(" ");
  const wrote = at < after.steps.length ? after.steps[at].output : "</s>";
  byId("pin-said").textContent = t("pin_said", { i: at + 1, src: pieceLabel(src, u), out: pieceLabel(wrote, u),
                                                 before: pieceLabel(ex.record.steps[at].output, u) });
  byId("pin-before-text").replaceChildren(...markedText(ex.record.output.text));
  byId("pin-after-text").replaceChildren(...outputChips(after, u, at));
  for (const c of byId("pin-after-text").children) {  // the forced words stay marked; the pinned step stands out
    c.classList.remove("swapped");
    c.classList.toggle("focus", Number(c.dataset.step) === at);
  }
  for (const [id, record, lit] of [["pin-before", ex.record, null], ["pin-after", after, at]]) {
    const view = attentionView(record, u);
    drawMatrix(byId(id), view.rows.map((r) => pieceLabel(r, u)), view.cols, view.matrix,
               { unknown: unknownCols(record, u), lit: lit === null ? undefined : view.rowOfStep(lit) });
  }
}
