// Attention matrices of an explore record (the format in docs/explore.md), in words or pieces, and
// a small heatmap drawer shared by the explorer's views. Text goes in with textContent only.
"use strict";

const WORD_START = "\u2581";  // sentencepiece's word-start mark

// How a piece is shown: without its word-start mark when the page shows words.
function pieceLabel(piece, units) {
  if (units !== "words" || piece === WORD_START) return piece;
  return piece.startsWith(WORD_START) ? piece.slice(1) : piece;
}

// Rows of `matrix` (one per decoder step) averaged per output word, and the </s> step's row last.
function rowsPerWord(record, matrix) {
  const n = record.output.words.length;
  const sums = Array.from({ length: n + 1 }, () => null);
  const counts = new Array(n + 1).fill(0);
  record.steps.forEach((step, i) => {
    const w = step.output_word === null || step.output_word === undefined ? n : step.output_word;
    sums[w] = sums[w] ? sums[w].map((x, j) => x + matrix[i][j]) : matrix[i].slice();
    counts[w] += 1;
  });
  return sums.map((row, w) => (row ? row.map((x) => x / counts[w]) : null)).filter(Boolean);
}

// The record's attention as shown: {cols, rows, matrix, layers, rowOfStep, stepRow}, or null (seq2seq).
// Words: columns are source words, rows output words (+ </s>); pieces: the encoder's and decoder's pieces.
function attentionView(record, units) {
  const att = record.attention;
  if (!att) return null;
  const words = units === "words";
  const level = words ? att.words : att.pieces;
  const perRow = (m) => (words ? rowsPerWord(record, m) : m);
  const nWords = record.output.words.length;
  return {
    cols: words ? record.source.words : record.source.pieces,
    rows: words ? record.output.words.concat(["</s>"]) : record.steps.map((s) => s.output),
    matrix: perRow(level.mean),
    layers: level.layers ? level.layers.map((heads) => heads.map(perRow)) : null,
    rawLayers: level.layers,
    rowOfStep: (i) => {
      if (!words) return i;
      const w = record.steps[i].output_word;
      return w === null || w === undefined ? nWords : w;
    },
    stepRow: (i) => level.mean[i],  // the step's own weights over the columns
  };
}

function meanOf(matrices) {
  return matrices[0].map((row, i) => row.map((_, j) => matrices.reduce((s, m) => s + m[i][j], 0) / matrices.length));
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Draw `matrix` (rows x cols) into `box`; options: lit (a row to light), small (no labels, tiny cells),
// onCell(i, j) for clicks. Each cell carries data-i, data-j and its weight in --w.
function drawMatrix(box, rows, cols, matrix, options = {}) {
  box.replaceChildren();
  box.classList.toggle("small", Boolean(options.small));
  // small maps (the grid of heads) fit about 150 px whatever the sentence's length
  const size = options.small ? Math.max(5, Math.min(14, Math.floor(150 / Math.max(rows.length, cols.length)))) : 24;
  box.style.gridTemplateColumns = options.small ? `repeat(${cols.length}, ${size}px)`
    : `auto repeat(${cols.length}, ${size}px)`;
  if (!options.small) {
    box.appendChild(el("span"));
    cols.forEach((c, j) => {
      const label = el("span", "mx-col", c);
      label.dataset.j = String(j);
      box.appendChild(label);
    });
  }
  const cellSize = `${size}px`;
  matrix.forEach((row, i) => {
    if (!options.small) {
      const label = el("span", "mx-row", rows[i]);
      label.dataset.i = String(i);
      if (i === options.lit) label.classList.add("lit");
      box.appendChild(label);
    }
    row.forEach((w, j) => {
      const cell = el("div", "mx-cell");
      cell.dataset.i = String(i);
      cell.dataset.j = String(j);
      cell.style.setProperty("--w", String(w));
      if (options.small) cell.style.width = cell.style.height = cellSize;
      cell.title = `${rows[i]} \u2192 ${cols[j]}: ${w.toFixed(3)}`;
      if (i === options.lit) cell.classList.add("lit");
      if (options.onCell) cell.addEventListener("click", () => options.onCell(i, j));
      box.appendChild(cell);
    });
  });
}

// The lit row moves without redrawing the matrix.
function lightRow(box, i) {
  for (const e of box.querySelectorAll(".lit")) e.classList.remove("lit");
  for (const e of box.querySelectorAll(`[data-i="${i}"]`)) e.classList.add("lit");
}
