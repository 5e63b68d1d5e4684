// latch playground: the graph view. schemaModel reads the definitions of a schema in
// either language (the server has already said whether it compiles); drawSchema lays
// them out as boxes of relations and permissions with arrows to the types they allow
// and the relations they follow; drawPath draws a check's trace as a tree. Everything
// is drawn here, in SVG, from what the page already holds.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// schemaModel returns [{name, members: [{kind, name, targets: [{type, relation}],
// refs: [{via, relation}]}]}]: a relation's allowed subject types, and the relations
// a permission's expression reads (via names the relation an arrow walks).
function schemaModel(text) {
  const src = text.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/\/\/[^\n]*/g, "");
  const defs = [];
  const head = /\b(definition|entity)\s+([A-Za-z_][\w/]*)\s*\{/g;
  let m;
  while ((m = head.exec(src))) {
    let depth = 1;
    let i = head.lastIndex;
    for (; i < src.length && depth > 0; i++) {
      if (src[i] === "{") depth++;
      else if (src[i] === "}") depth--;
    }
    defs.push({ name: m[2], members: members(src.slice(head.lastIndex, i - 1)) });
    head.lastIndex = i;
  }
  return defs;
}

function members(body) {
  const out = [];
  // A member runs from its keyword to the next one.
  const parts = body.split(/\b(?=(?:relation|permission|attribute|action)\s)/);
  for (const part of parts) {
    const m = /^(relation|permission|attribute|action)\s+([A-Za-z_]\w*)\s*([\s\S]*)$/.exec(part.trim());
    if (!m) continue;
    const [, kind, name, rest] = m;
    const member = { kind: kind === "action" ? "permission" : kind, name, targets: [], refs: [] };
    if (kind === "relation") {
      for (const t of rest.matchAll(/@?([A-Za-z_][\w/]*)(?::\*)?(?:#([A-Za-z_]\w*))?(?:\s+with\s+[\w/]+(?:\s+and\s+expiration)?)?/g)) {
        const target = { type: t[1], relation: t[2] || "" };
        if (["with", "and", "expiration"].includes(t[1])) continue;
        if (!member.targets.some((x) => x.type === target.type && x.relation === target.relation)) member.targets.push(target);
      }
    } else if (kind !== "attribute") {
      const expr = rest.replace(/^=/, "");
      for (const r of expr.matchAll(/([A-Za-z_]\w*)(?:\s*(?:->|\.)\s*(?:(?:any|all)\s*\(\s*)?([A-Za-z_]\w*))?(\s*\()?/g)) {
        if (["or", "and", "not", "nil"].includes(r[1]) || (r[3] && !r[2])) continue; // operators, rule calls
        member.refs.push(r[2] ? { via: r[1], relation: r[2] } : { via: "", relation: r[1] });
      }
    }
    out.push(member);
  }
  return out;
}

const BOX_W = 170;
const ROW_H = 20;
const HEAD_H = 26;
const COL_GAP = 70;
const BOX_GAP = 24;

// drawSchema returns an SVG of the schema's definitions; highlight is a set of
// "type#relation" drawn emphasised (the steps of a check).
function drawSchema(defs, highlight) {
  const byName = new Map(defs.map((d) => [d.name, d]));
  const rank = new Map();
  const rankOf = (d, seen) => {
    if (rank.has(d.name)) return rank.get(d.name);
    if (seen.has(d.name)) return 0;
    seen.add(d.name);
    let r = 0;
    for (const mem of d.members) {
      for (const t of mem.targets) {
        const target = byName.get(t.type);
        if (target && target !== d) r = Math.max(r, rankOf(target, seen) + 1);
      }
    }
    rank.set(d.name, r);
    return r;
  };
  const columns = [];
  for (const d of defs) {
    const r = rankOf(d, new Set());
    (columns[r] = columns[r] || []).push(d);
  }
  const pos = new Map();
  let height = 0;
  // The definitions that use others come first, from the left: arrows point right,
  // towards the types they allow (user, usually, on the far right).
  columns.forEach((col, c) => {
    let y = 10;
    for (const d of col || []) {
      pos.set(d.name, { x: 10 + (columns.length - 1 - c) * (BOX_W + COL_GAP), y });
      y += HEAD_H + d.members.length * ROW_H + BOX_GAP;
    }
    height = Math.max(height, y);
  });
  const width = 20 + columns.length * (BOX_W + COL_GAP) - COL_GAP;
  const root = svg("svg", { class: "graph schema-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  root.append(svg("title", {}, "Schema diagram: definitions, their relations and permissions, and arrows to the types and relations they use"));
  root.append(arrowMarker());
  const rowY = (def, relation) => {
    const p = pos.get(def);
    const i = byName.get(def).members.findIndex((m) => m.name === relation);
    return i < 0 ? p.y + HEAD_H / 2 : p.y + HEAD_H + i * ROW_H + ROW_H / 2;
  };
  const edges = svg("g", { class: "edges" });
  const boxes = svg("g", { class: "boxes" });
  for (const d of defs) {
    const p = pos.get(d.name);
    const g = svg("g", { class: "def", "data-def": d.name });
    g.append(svg("rect", { x: p.x, y: p.y, width: BOX_W, height: HEAD_H + d.members.length * ROW_H, rx: 6, class: "box" }));
    g.append(svg("text", { x: p.x + 8, y: p.y + 17, class: "def-name" }, d.name));
    d.members.forEach((mem, i) => {
      const y = p.y + HEAD_H + i * ROW_H;
      const on = highlight && highlight.has(d.name + "#" + mem.name);
      g.append(svg("rect", { x: p.x + 1, y, width: BOX_W - 2, height: ROW_H, class: "row " + mem.kind + (on ? " on" : "") }));
      g.append(svg("text", { x: p.x + 8, y: y + 14, class: "member " + mem.kind, "data-member": d.name + "#" + mem.name }, `${mem.kind === "permission" ? "◆" : mem.kind === "attribute" ? "▪" : "●"} ${mem.name}`));
      // An arrow leaves the side of the box facing its target.
      const from = (tx) => ({ x: tx < p.x ? p.x : p.x + BOX_W, y: y + ROW_H / 2 });
      const into = (tp) => tp.x + (tp.x > p.x ? 0 : BOX_W);
      for (const t of mem.targets) {
        if (!pos.has(t.type)) continue;
        const tp = pos.get(t.type);
        edges.append(curve(from(tp.x), { x: into(tp), y: rowY(t.type, t.relation) }, "edge type-edge"));
      }
      for (const r of mem.refs) {
        if (!r.via) {
          // A relation of the same definition: a short loop on the box's left side.
          const ty = rowY(d.name, r.relation);
          edges.append(svg("path", { d: `M${p.x} ${y + ROW_H / 2} C${p.x - 26} ${y + ROW_H / 2} ${p.x - 26} ${ty} ${p.x} ${ty}`, class: "edge ref-edge", "marker-end": "url(#arrow)" }));
          continue;
        }
        const via = d.members.find((x) => x.name === r.via);
        for (const t of via ? via.targets : []) {
          const target = byName.get(t.type);
          if (!target || !target.members.some((x) => x.name === r.relation)) continue;
          const tp = pos.get(t.type);
          edges.append(curve(from(tp.x), { x: into(tp), y: rowY(t.type, r.relation) }, "edge arrow-edge"));
        }
      }
    });
    boxes.append(g);
  }
  root.append(edges, boxes);
  return root;
}

// curve is an arrow from a to b leaving and entering horizontally: rightwards when b
// lies to the right, leftwards otherwise, and in a loop when both are on one side.
function curve(a, b, cls) {
  const dir = b.x > a.x ? 1 : -1;
  const dx = Math.max(30, Math.abs(b.x - a.x) / 2);
  const d = a.x === b.x
    ? `M${a.x} ${a.y} C${a.x + 40} ${a.y} ${b.x + 40} ${b.y} ${b.x} ${b.y}`
    : `M${a.x} ${a.y} C${a.x + dir * dx} ${a.y} ${b.x - dir * dx} ${b.y} ${b.x} ${b.y}`;
  return svg("path", { d, class: cls, "marker-end": "url(#arrow)" });
}

function arrowMarker() {
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0 0 L10 5 L0 10 z", class: "arrowhead" }));
  defs.append(marker);
  return defs;
}

const NODE_W = 230;
const NODE_H = 34;
const LEVEL_GAP = 60;

// drawPath draws a check's trace as a tree from left to right: each step a box
// coloured by its answer, arrows to the steps it asked.
function drawPath(check, resultOf) {
  const placed = [];
  let leaves = 0;
  const place = (n, depth) => {
    const kids = (n.children || []).map((c) => place(c, depth + 1));
    const y = kids.length ? (kids[0].y + kids[kids.length - 1].y) / 2 : 10 + leaves++ * (NODE_H + 12);
    const node = { n, depth, y, kids };
    placed.push(node);
    return node;
  };
  const root = place(check.trace, 0);
  const depth = Math.max(...placed.map((p) => p.depth)) + 1;
  const width = depth * (NODE_W + LEVEL_GAP);
  const height = Math.max(leaves, 1) * (NODE_H + 12) + 10;
  const out = svg("svg", { class: "graph path-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  out.append(svg("title", {}, "The path of check " + check.text));
  out.append(arrowMarker());
  const x = (p) => 10 + p.depth * (NODE_W + LEVEL_GAP);
  for (const p of placed) {
    for (const k of p.kids) out.append(curve({ x: x(p) + NODE_W, y: p.y + NODE_H / 2 }, { x: x(k), y: k.y + NODE_H / 2 }, "edge"));
  }
  for (const p of placed) {
    const ids = p.n.results.map((r) => r.id);
    const kind = resultOf(p.n.results);
    const g = svg("g", { class: "step-node " + kind, "data-step": `${p.n.type}#${p.n.relation}` });
    g.append(svg("rect", { x: x(p), y: p.y, width: NODE_W, height: NODE_H, rx: 6 }));
    const label = `${p.n.type}:${ids.length === 1 ? ids[0] : "{" + ids.join(",") + "}"}#${p.n.relation}`;
    g.append(svg("text", { x: x(p) + 8, y: p.y + 14, class: "step-label" }, label.length > 34 ? label.slice(0, 33) + "…" : label));
    g.append(svg("text", { x: x(p) + 8, y: p.y + 28, class: "step-meta" }, (p.n.permission ? "permission" : "relation") + " · " + kind));
    g.append(svg("title", {}, label + (p.n.expression ? " = " + p.n.expression : "")));
    out.append(g);
  }
  return out;
}
