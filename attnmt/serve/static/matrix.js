// Attention matrices of an explore record (the format in docs/explore.md), in words or pieces, and
// a small heatmap drawer shared by the explorer's views. Text goes in with textContent only.
"use strict";

const WORD_START = "\u2581";  // sentencepiece's word-start mark
const UNK = "<unk>";  // what a model writes for a word it has no piece for
// Scripts written without spaces (CJK ideographs, kana, hangul): their labels stand upright in a vertical line
const UNSPACED = /[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]/;

function isUnspaced(text) {
  return UNSPACED.test(text);
}

// A chip for <unk>, marked so that a reader sees the model did not know the word.
function unkMark() {
  const mark = el("span", "unk", UNK);
  mark.title = t("unk_title");
  return mark;
}

// A text with each <unk> in it marked: nodes to put in an element.
function markedText(text) {
  return text.split(/(<unk>)/).filter(Boolean).map((part) => (part === UNK ? unkMark() : document.createTextNode(part)));
}

// A label for a token: upright for a script without spaces; marked when it is <unk> or an unknown source piece.
function labelOf(tag, className, text, unknown) {
  const label = el(tag, className, text);
  if (isUnspaced(text)) label.classList.add("upright");
  if (text === UNK || unknown) {
    label.classList.add("unk");
    label.title = t(unknown ? "unknown_source" : "unk_title");
  }
  return label;
}

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

// Which columns (source words or pieces) hold a piece the model does not know (it read <unk>).
function unknownCols(record, units) {
  const unknown = record.source.unknown || [];
  const cols = new Set(units === "words" ? unknown.map((k) => record.source.piece_word[k]) : unknown);
  return (j) => cols.has(j);
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
// unknown(j) (a source column the model did not know), onCell(i, j) for clicks. Each cell carries data-i,
// data-j and its weight in --w.
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
      const label = labelOf("span", "mx-col", c, options.unknown && options.unknown(j));
      label.dataset.j = String(j);
      box.appendChild(label);
    });
  }
  const cellSize = `${size}px`;
  matrix.forEach((row, i) => {
    if (!options.small) {
      const label = labelOf("span", "mx-row", rows[i]);
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
