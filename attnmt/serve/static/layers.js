// The explorer's "All attention" view (BertViz's model and head views): a Transformer's encoder
// self-attention, decoder self-attention and cross-attention, every layer and head, as a grid of thumbnails
// (layers x heads) that opens into one head drawn twice: lines between the tokens and a heatmap. It reads
// the record's `self_attention` and `attention.pieces.layers` (docs/explore.md), in pieces. svg() is beam.js's.
"use strict";

const LINE_ROW = 22;  // px between two tokens of the lines view
const LINE_GAP = 160;  // px between the two columns of tokens
const LINE_MIN = 0.02;  // weights below this draw no line
const mv = { kind: "encoder", layer: null, head: 0 };

// The layers [L][H][rows][cols] of one kind of attention, with the labels of its rows (queries) and columns (keys).
function layerKinds(record) {
  const self = record.self_attention;
  const cross = record.attention && record.attention.pieces.layers;
  if (!self || !cross) return null;
  const inputs = record.steps.map((s) => s.input);
  return {
    encoder: { layers: self.encoder, rows: record.source.pieces, cols: record.source.pieces },
    decoder: { layers: self.decoder, rows: inputs, cols: inputs },
    cross: { layers: cross, rows: record.steps.map((s) => s.output), cols: record.source.pieces },
  };
}

function drawLayersView() {
  const kinds = layerKinds(ex.record);
  byId("mv-none").hidden = Boolean(kinds);
  byId("mv-box").hidden = !kinds;
  if (!kinds) return;
  const select = byId("mv-kind");
  select.replaceChildren(...Object.keys(kinds).map((k) => option(k, t(`mv_${k}`))));
  select.value = mv.kind;
  const kind = kinds[mv.kind];
  if (mv.layer === null || mv.layer >= kind.layers.length) mv.layer = kind.layers.length - 1;
  if (mv.head >= kind.layers[0].length) mv.head = 0;
  drawLayerGrid(kind);
  drawOneHead(kind);
}

function drawLayerGrid(kind) {
  const grid = byId("mv-grid");
  const nHeads = kind.layers[0].length;
  grid.replaceChildren(el("span"));
  grid.style.gridTemplateColumns = `auto repeat(${nHeads}, auto)`;
  for (let h = 0; h < nHeads; h++) grid.appendChild(el("span", "mv-label", t("head_n", { n: h + 1 })));
  kind.layers.forEach((heads, l) => {
    grid.appendChild(el("span", "mv-label", t("layer_n", { n: l + 1 })));
    heads.forEach((m, h) => {
      const thumb = el("button", "mv-thumb" + (l === mv.layer && h === mv.head ? " selected" : ""));
      thumb.type = "button";
      thumb.dataset.layer = String(l);
      thumb.dataset.head = String(h);
      thumb.title = `${t("layer_n", { n: l + 1 })}, ${t("head_n", { n: h + 1 })}`;
      const mini = el("div", "matrix");
      drawMatrix(mini, kind.rows, kind.cols, m, { small: true });
      thumb.appendChild(mini);
      thumb.addEventListener("click", () => {
        mv.layer = l;
        mv.head = h;
        drawLayersView();
      });
      grid.appendChild(thumb);
    });
  });
}

function drawOneHead(kind) {
  const u = units();
  const matrix = kind.layers[mv.layer][mv.head];
  const rows = kind.rows.map((r) => pieceLabel(r, u));
  const cols = kind.cols.map((c) => pieceLabel(c, u));
  byId("mv-title").textContent = t("mv_title", { kind: t(`mv_${mv.kind}`), layer: mv.layer + 1, head: mv.head + 1 });
  drawLines(byId("mv-lines"), rows, cols, matrix);
  drawMatrix(byId("mv-heatmap"), rows, cols, matrix);
}

// The head view: queries on the left, keys on the right, a line from each query to each key it attends,
// as opaque as its weight; pointing at a query shows its lines alone.
function drawLines(box, rows, cols, matrix) {
  const height = LINE_ROW * (Math.max(rows.length, cols.length) + 1);
  const width = 2 * 110 + LINE_GAP;
  const lines = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "mv-svg" });
  const y = (k) => LINE_ROW * (k + 1);
  matrix.forEach((row, i) => row.forEach((w, j) => {
    if (w < LINE_MIN) return;
    const line = svg("line", { x1: 110, y1: y(i) - 4, x2: 110 + LINE_GAP, y2: y(j) - 4, "data-i": i, "data-j": j });
    line.style.strokeOpacity = String(w);
    lines.appendChild(line);
  }));
  const label = (text, x, k, anchor, side) => {
    const e = svg("text", { x, y: y(k), "text-anchor": anchor, class: `mv-tok mv-${side}` }, text);
    e.dataset.k = String(k);
    lines.appendChild(e);
    return e;
  };
  rows.forEach((r, i) => {
    const e = label(r, 104, i, "end", "query");
    e.addEventListener("mouseenter", () => focusQuery(lines, i));
    e.addEventListener("mouseleave", () => focusQuery(lines, null));
  });
  cols.forEach((c, j) => label(c, 116 + LINE_GAP, j, "start", "key"));
  box.replaceChildren(lines);
}

function focusQuery(box, i) {
  box.classList.toggle("focused", i !== null);
  for (const line of box.querySelectorAll("line")) line.classList.toggle("on", i !== null && line.dataset.i === String(i));
}

function layersInit() {
  byId("mv-kind").addEventListener("change", () => {
    mv.kind = byId("mv-kind").value;
    mv.layer = null;
    drawLayersView();
  });
}
