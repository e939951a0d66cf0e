// The explorer's "Neighbours" view (Seq2Seq-Vis): for a step of the translation, the decoder states of the
// model's training (or held-out) sentences nearest to that step's state (cosine similarity), each with its
// sentence and the word that state wrote highlighted; for a word of the source, the nearest encoder states, each
// with its source sentence and the word that state read highlighted. The live page asks the server for them
// when the view opens (POST /explore's neighbours); an exported record carries them (the record's
// `neighbours`, docs/explore.md).
"use strict";

const NEIGHBOURS = 5;
const nb = { step: 0, side: "target", at: 0, found: null, busy: 0, loading: false };

function neighboursReset() {
  nb.step = 0;
  nb.side = "target";
  nb.at = 0;
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
  drawNeighbourChips(byId("nb-target"), outputChips(ex.record, u, 0), "target", "step");
  const encoder = Boolean(nb.found.source);
  byId("nb-source").replaceChildren(...sourceChips(ex.record, u));
  if (encoder) drawNeighbourChips(byId("nb-source"), Array.from(byId("nb-source").children), "source", "at");
  if (!encoder && nb.side === "source") nb.side = "target";
  const data = t(nb.found.from === "training" ? "nb_training" : "nb_held_out");
  const list = byId("nb-list");
  if (nb.side === "source") {
    const word = pieceLabel(ex.record.source.pieces[nb.at], u);
    byId("nb-prompt").textContent = t("nb_source_prompt", { word, n: nb.found.source_states, data });
    list.replaceChildren(...nb.found.source[nb.at].map((n) => neighbourItem(nb.found.sentences[n.sentence], n, u, true)));
  } else {
    const step = ex.record.steps[nb.step];
    const said = t("nb_prompt", { i: nb.step + 1, word: pieceLabel(step.output, u), n: nb.found.states, data });
    byId("nb-prompt").textContent = said + (encoder ? "" : " " + t("nb_no_source"));
    list.replaceChildren(...nb.found.steps[nb.step].map((n) => neighbourItem(nb.found.sentences[n.sentence], n, u, false)));
  }
}

// The chips of one side made pickable: a click shows the neighbours of that step (target) or piece (source).
function drawNeighbourChips(box, chips, side, key) {
  box.replaceChildren(...chips);
  for (const c of chips) {
    const at = Number(c.dataset[key]);
    c.classList.add("pickable");
    c.classList.toggle("focus", nb.side === side && at === (side === "source" ? nb.at : nb.step));
    c.addEventListener("click", () => {
      nb.side = side;
      if (side === "source") nb.at = at;
      else nb.step = at;
      drawNeighboursView();
    });
  }
}

// One chip per source word (its first piece's state) or piece; data-at: the piece.
function sourceChips(record, u) {
  if (u !== "words") {
    return record.source.pieces.map((p, j) => chipAt(pieceLabel(p, u), j));
  }
  return record.source.words.map((w, k) => chipAt(w, record.source.piece_word.indexOf(k)));
}

function chipAt(text, at) {
  const c = labelOf("span", "tok", text);
  c.dataset.at = String(at);
  return c;
}

// A neighbour: its similarity, its sentence with the word of that state highlighted (the target sentence for a
// decoder state, the source sentence for an encoder state) and the other side below.
function neighbourItem(sentence, n, u, encoder) {
  const item = el("li", "nb-item");
  item.appendChild(el("span", "nb-sim", fixed(n.similarity, 3)));
  const text = el("span", "tokens nb-text");
  const pieces = encoder ? sentence.source_pieces : sentence.pieces.concat(["</s>"]);
  pieces.forEach((piece, k) => {
    const tok = labelOf("span", "tok" + (k === n.at ? " nb-word" : ""), pieceLabel(piece, u));
    text.appendChild(tok);
  });
  const other = encoder ? sentence.pieces.map((p) => pieceLabel(p, u)).join(" ") : sentence.source;
  item.append(text, el("span", "muted nb-source", other));
  return item;
}
