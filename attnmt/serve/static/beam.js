// The beam search tree of an explore record as an SVG: one column per step, one row per place in the
// beam (rank); the kept and finished hypotheses above the dashed line, the pruned runners-up below it.
// Edges join each hypothesis to the one it extends; the returned translation's path is drawn thick.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const BEAM_COL = 92;
const BEAM_ROW = 40;
const BEAM_BOX = { w: 76, h: 32 };
const BEAM_PAD = 28;

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function shorten(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
}

function beamNodeAt(node) {
  return { x: BEAM_PAD + (node.step + 1) * BEAM_COL, y: BEAM_PAD + (node.rank || 0) * BEAM_ROW };
}

// Counts per status, for the line above the tree.
function beamCounts(beam) {
  const counts = { kept: 0, finished: 0, pruned: 0 };
  for (const n of beam.nodes) if (n.status in counts) counts[n.status] += 1;
  return counts;
}

function drawBeam(wrap, beam, units) {
  wrap.replaceChildren();
  const byId = new Map(beam.nodes.map((n) => [n.id, n]));
  const best = new Set(beam.best || []);
  const steps = Math.max(...beam.nodes.map((n) => n.step)) + 2;
  const ranks = Math.max(...beam.nodes.map((n) => n.rank || 0)) + 1;
  const width = BEAM_PAD * 2 + steps * BEAM_COL;
  const height = BEAM_PAD * 2 + ranks * BEAM_ROW;
  const root = svg("svg", { id: "beam-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  root.appendChild(svg("title", {}, t("tab_beam")));

  const grid = svg("g", { class: "beam-grid" });
  for (let s = 0; s < steps; s++) {
    const x = BEAM_PAD + s * BEAM_COL + BEAM_BOX.w / 2;
    grid.appendChild(svg("text", { x, y: 14, class: "beam-step" }, s === 0 ? "" : String(s)));
  }
  const lineY = BEAM_PAD + beam.size * BEAM_ROW - (BEAM_ROW - BEAM_BOX.h) / 2;
  if (ranks > beam.size) grid.appendChild(svg("line", { x1: 0, x2: width, y1: lineY, y2: lineY, class: "beam-cut" }));
  root.appendChild(grid);

  const edges = svg("g", { class: "beam-edges" });
  const nodes = svg("g", { class: "beam-nodes" });
  for (const node of beam.nodes) {
    const at = beamNodeAt(node);
    const parent = node.parent === null ? null : byId.get(node.parent);
    if (parent) {
      const from = beamNodeAt(parent);
      const x1 = from.x + BEAM_BOX.w;
      const y1 = from.y + BEAM_BOX.h / 2;
      const y2 = at.y + BEAM_BOX.h / 2;
      const mid = (x1 + at.x) / 2;
      const onBest = best.has(node.id) && best.has(parent.id);
      edges.appendChild(svg("path", {
        d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${at.x},${y2}`,
        class: `beam-edge ${node.status}${onBest ? " best" : ""}`,
      }));
    }
    nodes.appendChild(beamNode(node, at, best.has(node.id), units));
  }
  root.appendChild(edges);
  root.appendChild(nodes);
  wrap.appendChild(root);
}

function beamNode(node, at, onBest, units) {
  const g = svg("g", {
    class: `node ${node.status}${onBest ? " best" : ""}${node.forced ? " forced" : ""}${node.piece === UNK ? " unk" : ""}`,
    transform: `translate(${at.x},${at.y})`,
  });
  g.dataset.id = String(node.id);
  g.dataset.step = String(node.step);
  g.dataset.status = node.status;
  const label = pieceLabel(node.piece, units);
  const finished = node.status === "finished" && node.score !== undefined && node.score !== null;
  const detail = [label, t("beam_tip_logp", { x: fmt(node.log_prob) })];
  if (node.token_log_prob !== undefined) detail.push(t("beam_tip_word", { x: fmt(node.token_log_prob) }));
  if (finished) detail.push(t("beam_tip_score", { x: fmt(node.score) }));
  if (node.piece === UNK) detail.push(t("unk_title"));
  detail.push(t(node.status) + (node.forced ? `, ${t("forced")}` : ""));
  g.appendChild(svg("title", {}, detail.join("\n")));
  g.appendChild(svg("rect", { width: BEAM_BOX.w, height: BEAM_BOX.h, rx: 5 }));
  g.appendChild(svg("text", { x: BEAM_BOX.w / 2, y: 13, class: "piece" }, shorten(label, 10)));
  // a finished box shows its final score, every other one the log prob so far: two kinds, each named
  const sub = finished ? t("beam_score", { x: fmt(node.score) }) : t("beam_logp", { x: fmt(node.log_prob) });
  g.appendChild(svg("text", { x: BEAM_BOX.w / 2, y: 26, class: finished ? "logp score" : "logp" },
                    node.status === "root" ? "" : sub));
  return g;
}

function fmt(x) {
  return x === null || x === undefined ? t("n_a") : Number(x).toFixed(2);
}
