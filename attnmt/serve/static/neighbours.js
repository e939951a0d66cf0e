// The explorer's "Neighbours" view (Seq2Seq-Vis): for a step of the translation, the decoder states of the
// model's training (or held-out) sentences nearest to that step's state (cosine similarity), each with its
// sentence and the word that state wrote highlighted. The live page asks the server for them when the view
// opens (POST /explore's neighbours); an exported record carries them (the record's `neighbours`,
// docs/explore.md).
"use strict";

const NEIGHBOURS = 5;
const nb = { step: 0, found: null, busy: 0, loading: false };

function neighboursReset() {
  nb.step = 0;
  nb.found = ex.record && ex.record.neighbours ? ex.record.neighbours : null;
  nb.busy += 1;
  nb.loading = false;
}

async function fetchNeighbours() {
  const record = ex.record;
  const ticket = ++nb.busy;
  nb.loading = true;
  byId("nb-box").hidden = true;
  byId("nb-none").hidden = false;
  byId("nb-none").textContent = t("wi_loading");
  let found;
  try {
    found = (await ex.provider.explore(record.source.text, record.model.name, null, null, NEIGHBOURS)).neighbours;
  } catch (e) {
    if (ticket === nb.busy) nb.loading = false;
    showError(e.message);
    return;
  }
  if (ticket !== nb.busy) return;
  nb.loading = false;
  nb.found = found || { steps: [], sentences: [], none: true };
  drawNeighboursView();
}

function drawNeighboursView() {
  if (!ex.record) return;
  if (!nb.found) {
    if (ex.view === "neighbours" && ex.provider.mode === "server") {
      if (!nb.loading) fetchNeighbours();
    } else {
      byId("nb-none").hidden = false;
      byId("nb-none").textContent = t("nb_none");
      byId("nb-box").hidden = true;
    }
    return;
  }
  const has = nb.found.steps.length > 0;
  byId("nb-none").hidden = has;
  byId("nb-none").textContent = t("nb_none");
  byId("nb-box").hidden = !has;
  if (!has) return;
  const u = units();
  const target = byId("nb-target");
  target.replaceChildren(...outputChips(ex.record, u, 0));
  for (const c of target.children) {
    c.classList.add("pickable");
    c.classList.toggle("focus", Number(c.dataset.step) === nb.step);
    c.addEventListener("click", () => {
      nb.step = Number(c.dataset.step);
      drawNeighboursView();
    });
  }
  const step = ex.record.steps[nb.step];
  const data = t(nb.found.from === "training" ? "nb_training" : "nb_held_out");
  byId("nb-prompt").textContent = t("nb_prompt", { i: nb.step + 1, word: pieceLabel(step.output, u), n: nb.found.states, data });
  byId("nb-list").replaceChildren(...nb.found.steps[nb.step].map((n) => neighbourItem(nb.found.sentences[n.sentence], n, u)));
}

function neighbourItem(sentence, n, u) {
  const item = el("li", "nb-item");
  item.appendChild(el("span", "nb-sim", fixed(n.similarity, 3)));
  const text = el("span", "tokens nb-text");
  sentence.pieces.concat(["</s>"]).forEach((piece, k) => {
    const tok = labelOf("span", "tok" + (k === n.at ? " nb-word" : ""), pieceLabel(piece, u));
    text.appendChild(tok);
  });
  item.append(text, el("span", "muted nb-source", sentence.source));
  return item;
}
