// latch playground: editors whose problems show under their lines, checks answered
// as you type with their check trees, validation runs, YAML download and load, and a
// link holding the whole playground. Everything runs on the server's scratch API
// under ./api/; nothing here reaches the network otherwise.
"use strict";

const FIELDS = ["schema", "relationships", "checks", "assertions", "validation"];
const DEBOUNCE_MS = 300;

// ---- editor ---------------------------------------------------------------------

// Editor is an editable <pre> (plain text only) with a gutter of line numbers, its
// text highlighted as it is typed. Notes (diagnostics, answers) are blocks placed
// between lines inside the <pre>; they are not editable and are not part of the text.
// Tab indents and Shift+Tab dedents once the editor is being edited; a keyboard user
// who arrives by Tab leaves by Tab (and Escape releases Tab at any time).
class Editor {
  constructor(host, onInput) {
    this.host = host;
    this.kind = host.dataset.editor;
    this.gutter = document.createElement("div");
    this.gutter.className = "gutter";
    this.gutter.setAttribute("aria-hidden", "true");
    this.pre = document.createElement("pre");
    this.pre.className = "code";
    try {
      this.pre.contentEditable = "plaintext-only";
    } catch {
      // Browsers without plain-text editing: rich editing, read back as text.
      this.pre.contentEditable = "true";
    }
    this.pre.spellcheck = false;
    this.pre.tabIndex = 0;
    this.pre.setAttribute("role", "textbox");
    this.pre.setAttribute("aria-multiline", "true");
    this.pre.setAttribute("aria-label", host.dataset.label);
    this.pre.setAttribute("aria-description", "Tab indents while editing; Escape, then Tab, moves on");
    this.pre.setAttribute("autocapitalize", "off");
    this.pre.setAttribute("autocorrect", "off");
    host.append(this.gutter, this.pre);
    this.notes = [];
    this.notesKey = "";
    this.onInput = onInput;
    this.undo = [];
    this.redo = [];
    this.last = { text: "", caret: 0 };
    this.tabIndents = false;
    this.pre.addEventListener("input", (e) => {
      if (e.isComposing) return;
      this.changed();
    });
    this.pre.addEventListener("compositionend", () => this.changed());
    this.pre.addEventListener("keydown", (e) => this.key(e));
    this.pre.addEventListener("beforeinput", (e) => this.newLine(e));
    this.pre.addEventListener("pointerdown", () => { this.tabIndents = true; });
    this.pre.addEventListener("blur", () => { this.tabIndents = false; this.markBrackets(-1); });
    new ResizeObserver(() => this.fitNotes()).observe(host);
  }

  get text() {
    let out = "";
    const walk = (node) => {
      for (const n of node.childNodes) {
        if (n.nodeType === Node.TEXT_NODE) {
          out += n.data;
        } else if (n.nodeName === "BR") {
          if (!n.classList.contains("eol")) out += "\n";
        } else if (n.nodeType === Node.ELEMENT_NODE && !n.classList.contains("widget")) {
          // Browsers may wrap a new line in a <div> while editing.
          if (n.nodeName === "DIV" && out !== "" && !out.endsWith("\n")) out += "\n";
          walk(n);
        }
      }
    };
    walk(this.pre);
    return out;
  }

  set text(value) {
    this.notesKey = "";
    this.undo = [];
    this.redo = [];
    value = value.replace(/\r\n?/g, "\n");
    this.last = { text: value, caret: 0 };
    this.render(value, [], null);
  }

  // changed re-highlights the text after an edit, keeping the caret and the notes,
  // and records the text before it for undo.
  changed() {
    const text = this.text;
    const caret = this.caret();
    if (text === this.last.text) return;
    this.undo.push(this.last);
    if (this.undo.length > 200) this.undo.shift();
    this.redo = [];
    this.last = { text, caret: caret === null ? text.length : caret };
    this.tabIndents = true;
    this.render(text, this.notes, caret);
    this.onInput();
  }

  // edit replaces text[from:to] with insert, as if typed, and puts the caret at caret.
  edit(from, to, insert, caret) {
    const text = this.text;
    this.render(text.slice(0, from) + insert + text.slice(to), this.notes, null);
    this.setCaret(caret);
    this.changed();
  }

  key(e) {
    if (e.key === "Escape") {
      this.tabIndents = false;
      return;
    }
    const mod = e.ctrlKey || e.metaKey;
    if (mod && !e.altKey && (e.key === "z" || e.key === "Z" || e.key === "y")) {
      e.preventDefault();
      this.history(e.key === "y" || e.shiftKey ? this.redo : this.undo, e.key === "y" || e.shiftKey ? this.undo : this.redo);
      return;
    }
    if (mod || e.altKey) return;
    const [from, to] = this.selection();
    if (from === null) return;
    const text = this.text;
    const lineStart = text.lastIndexOf("\n", from - 1) + 1;
    if (e.key === "Tab" && this.tabIndents) {
      e.preventDefault();
      if (e.shiftKey) {
        const n = /^ {0,2}/.exec(text.slice(lineStart))[0].length;
        this.edit(lineStart, lineStart + n, "", Math.max(lineStart, from - n));
      } else if (from === to) {
        this.edit(from, to, "  ", from + 2);
      } else {
        // Indent every selected line.
        const block = text.slice(lineStart, to).replace(/^/gm, "  ");
        this.edit(lineStart, to, block, lineStart + block.length);
      }
    }
  }

  // newLine keeps the line's indentation on a new line, one step deeper after an
  // opening bracket. It acts on the line break being inserted rather than on the Enter
  // key, so that it runs once however the break arrives.
  newLine(e) {
    if (e.inputType !== "insertParagraph" && e.inputType !== "insertLineBreak" && !(e.inputType === "insertText" && e.data === "\n")) return;
    const [from, to] = this.selection();
    if (from === null) return;
    e.preventDefault();
    const text = this.text;
    const before = text.slice(text.lastIndexOf("\n", from - 1) + 1, from);
    const indent = /^[ \t]*/.exec(before)[0] + (/[{([]\s*$/.test(before) ? "  " : "");
    this.edit(from, to, "\n" + indent, from + 1 + indent.length);
  }

  history(from, to) {
    const prev = from.pop();
    if (!prev) return;
    to.push({ text: this.text, caret: this.caret() || 0 });
    this.last = prev;
    this.render(prev.text, this.notes, prev.caret);
    this.onInput();
  }

  // setNotes places notes ({line, message, kind}) under their lines, re-rendering only
  // when they changed, and keeps the caret where it was in the text.
  setNotes(notes) {
    const key = JSON.stringify(notes);
    if (key === this.notesKey) return;
    this.notesKey = key;
    const caret = this.caret();
    this.render(this.text, notes, caret);
  }

  render(text, notes, caret) {
    this.notes = notes;
    const lineCount = text.split("\n").length;
    const byLine = new Map();
    for (const n of notes) {
      const line = Math.min(Math.max(n.line, 1), lineCount);
      if (!byLine.has(line)) byLine.set(line, []);
      byLine.get(line).push(n);
    }
    const frag = document.createDocumentFragment();
    const widgets = (line) => {
      for (const n of byLine.get(line) || []) {
        const w = document.createElement("div");
        w.className = "widget " + n.kind;
        w.contentEditable = "false";
        w.dataset.line = String(line);
        w.textContent = n.message;
        frag.append(w);
      }
    };
    let line = 1;
    let at = 0;
    for (const [cls, tok] of tokens(this.kind, text)) {
      tok.split("\n").forEach((part, i) => {
        if (i > 0) {
          frag.append(document.createTextNode("\n"));
          widgets(line++);
          at++;
        }
        if (!part) return;
        if (!cls) {
          frag.append(document.createTextNode(part));
        } else {
          const span = document.createElement("span");
          span.className = "tok-" + cls;
          if (cls === "br") span.dataset.at = String(at);
          span.textContent = part;
          frag.append(span);
        }
        at += part.length;
      });
    }
    widgets(line);
    if (text === "" || text.endsWith("\n")) {
      // A trailing line break shows an empty last line only when something follows it.
      const br = document.createElement("br");
      br.className = "eol";
      frag.append(br);
    }
    this.pre.replaceChildren(frag);
    this.renderGutter();
    this.fitNotes();
    if (caret !== null) this.setCaret(caret);
  }

  // markBrackets emphasises the bracket next to the caret and its match.
  markBrackets(caret) {
    for (const b of this.pre.querySelectorAll(".tok-br.match")) b.classList.remove("match");
    if (caret < 0) return;
    const text = this.text;
    for (const at of [caret - 1, caret]) {
      const other = at >= 0 ? matchBracket(text, at) : -1;
      if (other < 0) continue;
      for (const i of [at, other]) {
        const b = this.pre.querySelector(`.tok-br[data-at="${i}"]`);
        if (b) b.classList.add("match");
      }
      return;
    }
  }

  // lineVisible scrolls the editor to line if it is out of view.
  revealLine(line) {
    const w = this.pre.querySelector(`.widget[data-line="${line}"]`);
    if (!w) return;
    const box = this.host.getBoundingClientRect();
    const r = w.getBoundingClientRect();
    if (r.top < box.top || r.bottom > box.bottom) {
      this.host.scrollTop += r.top - box.top - box.height / 3;
    }
  }

  renderGutter() {
    const lines = this.text.split("\n").length;
    const widgets = new Map();
    for (const w of this.pre.querySelectorAll(".widget")) {
      const line = Number(w.dataset.line);
      widgets.set(line, (widgets.get(line) || 0) + w.getBoundingClientRect().height + 4);
    }
    const frag = document.createDocumentFragment();
    for (let i = 1; i <= lines; i++) {
      const d = document.createElement("div");
      d.textContent = String(i);
      if (widgets.has(i) && this.notes.some((n) => n.line === i && n.kind === "error")) d.className = "bad";
      frag.append(d);
      if (widgets.has(i)) {
        const gap = document.createElement("div");
        gap.style.height = widgets.get(i) + "px";
        frag.append(gap);
      }
    }
    this.gutter.replaceChildren(frag);
  }

  // fitNotes keeps notes as wide as the visible part of the editor, however wide the
  // text scrolls.
  fitNotes() {
    const width = this.host.clientWidth - this.gutter.offsetWidth - 24;
    this.host.style.setProperty("--view-width", Math.max(width, 120) + "px");
  }

  caret() {
    return this.selection()[1];
  }

  // selection returns the text offsets of the selection's start and end (the end is
  // where the caret is), or nulls when the selection is elsewhere.
  selection() {
    const sel = window.getSelection();
    if (!sel.rangeCount || !this.pre.contains(sel.anchorNode)) return [null, null];
    const r = sel.getRangeAt(0);
    return [this.offset(r.startContainer, r.startOffset), this.offset(r.endContainer, r.endOffset)];
  }

  offset(node, off) {
    const r = document.createRange();
    r.setStart(this.pre, 0);
    r.setEnd(node, off);
    const holder = document.createElement("div");
    holder.append(r.cloneContents());
    return textOfFragment(holder);
  }

  setCaret(offset) {
    let left = offset;
    const walker = document.createTreeWalker(this.pre, NodeFilter.SHOW_TEXT, {
      acceptNode: (n) => (n.parentElement.closest(".widget") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
    });
    let node = walker.nextNode();
    while (node) {
      if (left <= node.data.length) {
        window.getSelection().collapse(node, left);
        return;
      }
      left -= node.data.length;
      node = walker.nextNode();
    }
    const r = document.createRange();
    r.selectNodeContents(this.pre);
    r.collapse(false);
    window.getSelection().removeAllRanges();
    window.getSelection().addRange(r);
  }

  focus() { this.pre.focus(); }
}

function textOfFragment(holder) {
  for (const w of holder.querySelectorAll(".widget, br.eol")) w.remove();
  for (const br of holder.querySelectorAll("br")) br.replaceWith("\n");
  return holder.textContent.length;
}

// ---- state and API ----------------------------------------------------------------

const $ = (id) => document.getElementById(id);
const editors = {};
const session = (() => {
  let id = sessionStorage.getItem("latch-playground-session");
  if (!id) {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    sessionStorage.setItem("latch-playground-session", id);
  }
  return id;
})();

function state() {
  const s = { language: $("language").value };
  for (const f of FIELDS) s[f] = editors[f].text;
  return s;
}

// load puts s into the editors, and clears what the last validation run found: its
// answers belong to the work it ran on.
function load(s) {
  $("language").value = s.language || "";
  for (const f of FIELDS) {
    if (typeof s[f] === "string") editors[f].text = s[f];
  }
  expectedAnswers = "";
  $("regenerate").disabled = true;
  $("validation-results").replaceChildren();
  pathCheck = null;
  languageChanged();
  save();
}

// The work is kept in the browser's local storage, so that it survives a reload.
const SAVED = "latch-playground-work";
let saveTimer = 0;

function save() {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(() => {
    try {
      localStorage.setItem(SAVED, JSON.stringify(state()));
    } catch {
      // Storage full or disabled: the work lives as long as the page.
    }
  }, 200);
}

function saved() {
  try {
    const s = JSON.parse(localStorage.getItem(SAVED) || "null");
    return s && typeof s.schema === "string" ? s : null;
  } catch {
    return null;
  }
}

// A playground served with a key (--playground-preshared-key) answers 401 until the
// page sends it; the key is asked for once and kept for the browser tab.
async function api(path, body) {
  let res = await post(path, body);
  if (res.status === 401) {
    const key = window.prompt("This playground needs its key:");
    if (key) {
      sessionStorage.setItem("latch-playground-key", key);
      res = await post(path, body);
    }
  }
  let out;
  try {
    out = await res.json();
  } catch {
    throw new Error(`${path}: HTTP ${res.status}`);
  }
  if (!res.ok) throw new Error(out.error || `${path}: HTTP ${res.status}`);
  return out;
}

function post(path, body) {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem("latch-playground-key");
  if (key) headers.Authorization = "Bearer " + key;
  return fetch("api/" + path, { method: "POST", headers, body: JSON.stringify({ session, ...body }) });
}

function setStatus(msg, isError) {
  const el = $("status");
  el.textContent = msg;
  el.classList.toggle("error", Boolean(isError));
}

// ---- checks -------------------------------------------------------------------------

let checkSeq = 0;
let checkTimer = 0;

function scheduleChecks() {
  clearTimeout(checkTimer);
  checkTimer = setTimeout(runChecks, DEBOUNCE_MS);
}

async function runChecks() {
  clearTimeout(checkTimer);
  const seq = ++checkSeq;
  const s = state();
  let out;
  try {
    out = await api("check", { language: s.language, schema: s.schema, relationships: s.relationships, checks: s.checks });
  } catch (e) {
    if (seq === checkSeq) setStatus(e.message, true);
    return;
  }
  if (seq !== checkSeq) return; // a newer run is on its way
  showAnalysis(out);
  showChecks(out.checks);
  const errors = out.schema.filter((d) => d.severity === "error").length + out.relationships.length;
  setStatus(errors ? `${errors} problem${errors > 1 ? "s" : ""} in the schema and relationships` : `${out.checks.length} check${out.checks.length === 1 ? "" : "s"} answered`, errors > 0);
}

function showAnalysis(out) {
  $("detected").textContent = $("language").value ? "" : `(${out.language === "permify" ? "Permify" : "SpiceDB"})`;
  setLanguageLabels(out.language);
  editors.schema.setNotes(out.schema.map((d) => ({
    line: d.line,
    kind: d.severity,
    message: `${d.severity === "warning" ? "warning" : "error"} ${d.line}:${d.col || 1}: ${d.message}`,
  })));
  editors.relationships.setNotes(out.relationships.map((d) => ({ line: d.line, kind: "error", message: d.message })));
  // The first schema error, wherever it is, is brought into view.
  const first = out.schema.find((d) => d.severity === "error");
  if (first && first.line !== shownError) editors.schema.revealLine(first.line);
  shownError = first ? first.line : 0;
  relationshipErrors = new Map(out.relationships.map((d) => [d.line, d.message]));
  if (!$("relationships-grid").hidden) renderGrid();
  if (!$("schema-graph").hidden) renderGraph();
}

let shownError = 0;

const RESULT_LABEL = {
  HAS_PERMISSION: ["has", "has permission"],
  NO_PERMISSION: ["no", "no permission"],
  CONDITIONAL_PERMISSION: ["conditional", "conditional"],
  DEPTH_EXCEEDED: ["depth", "depth exceeded"],
};

let lastChecks = [];

function showChecks(checks) {
  lastChecks = checks;
  editors.checks.setNotes(checks.map((c) => {
    if (c.error) return { line: c.line, kind: "error", message: c.error };
    const [kind, label] = RESULT_LABEL[c.result];
    const missing = c.missing ? ` (missing ${c.missing.join(", ")})` : "";
    return { line: c.line, kind, message: label + missing };
  }));
  const list = document.createElement("ul");
  list.className = "tree";
  for (const c of checks) {
    const li = document.createElement("li");
    if (c.error) {
      li.append(badge("error", "error"), `line ${c.line}: ${c.error}`);
    } else {
      const d = document.createElement("details");
      d.className = "check";
      const sum = document.createElement("summary");
      const [kind, label] = RESULT_LABEL[c.result];
      sum.append(badge(kind, label), code(c.text), pathButton(c));
      // The trace's first step is the check itself: its time goes in the summary and
      // its caveats and steps under it.
      const root = c.trace;
      if (root.children && root.children.length) {
        const meta = document.createElement("span");
        meta.className = "meta";
        meta.textContent = (root.expression ? ` = ${root.expression}` : "") + " · " + formatMicros(root.micros);
        sum.append(meta);
        d.append(sum, ...caveatLines(root), treeList(root.children));
      } else {
        d.append(sum, treeList([root]));
      }
      li.append(d);
    }
    list.append(li);
  }
  $("check-results").replaceChildren(...(checks.length ? [list] : []));
}

// pathButton shows the check's path in the graph view.
function pathButton(c) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "path-button";
  b.textContent = "graph";
  b.title = "Show this check's path as a graph beside the schema's";
  b.addEventListener("click", (e) => {
    e.preventDefault();
    pathCheck = c.text;
    showView("schema", "graph");
  });
  return b;
}

function badge(kind, text) {
  const b = document.createElement("span");
  b.className = "badge " + kind;
  b.textContent = text;
  return b;
}

function code(text) {
  const c = document.createElement("code");
  c.textContent = text;
  return c;
}

// treeList renders trace steps: each step's resources and answers, the caveats it
// evaluated and, folded, the steps it asked.
function treeList(nodes) {
  const ul = document.createElement("ul");
  for (const n of nodes || []) {
    const li = document.createElement("li");
    const head = document.createElement("span");
    const summary = summarize(n.results);
    head.append(badge(RESULT_LABEL[summary][0], RESULT_LABEL[summary][1]));
    const ids = n.results.map((r) => r.id);
    const step = document.createElement("span");
    step.className = "step";
    step.textContent = `${n.type}:${ids.length === 1 ? ids[0] : "{" + ids.join(", ") + "}"}#${n.relation}`;
    const meta = document.createElement("span");
    meta.className = "meta";
    const parts = [n.permission ? "permission" + (n.expression ? " = " + n.expression : "") : "relation"];
    if (n.cached) parts.push("cached");
    else parts.push(formatMicros(n.micros));
    if (n.expiresAt) parts.push("expires " + n.expiresAt);
    meta.textContent = " · " + parts.join(" · ");
    head.append(step, meta);
    if (ids.length > 1) {
      const per = document.createElement("span");
      per.className = "meta";
      per.textContent = " — " + n.results.map((r) => `${r.id}: ${RESULT_LABEL[r.result][1]}`).join(", ");
      head.append(per);
    }
    const extra = caveatLines(n);
    if (n.children && n.children.length) {
      const d = document.createElement("details");
      const s = document.createElement("summary");
      s.append(head);
      d.append(s, ...extra, treeList(n.children));
      li.append(d);
    } else {
      li.append(head, ...extra);
    }
    ul.append(li);
  }
  return ul;
}

// caveatLines describes the caveats a step evaluated: expression, context, outcome.
function caveatLines(n) {
  return (n.caveats || []).map((c) => {
    const cv = document.createElement("div");
    cv.className = "caveat";
    const missing = c.missing ? ` (missing ${c.missing.join(", ")})` : "";
    cv.textContent = `caveat ${c.caveat} on ${n.type}:${c.resourceId}: ${c.expression} with ${JSON.stringify(c.context)} → ${c.result}${missing}`;
    return cv;
  });
}

function summarize(results) {
  let out = "NO_PERMISSION";
  for (const r of results) {
    if (r.result === "HAS_PERMISSION") return r.result;
    if (r.result === "CONDITIONAL_PERMISSION") out = r.result;
  }
  if (results.length && results.every((r) => r.result === "DEPTH_EXCEEDED")) return "DEPTH_EXCEEDED";
  return out;
}

function formatMicros(us) {
  return us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(0) + " µs";
}

// ---- validation ---------------------------------------------------------------------

// expectedAnswers is the validation section as the last run's answers have it.
let expectedAnswers = "";

function regenerate() {
  if (!expectedAnswers) return;
  selectTab("validation");
  editors.validation.text = expectedAnswers;
  save();
  setStatus("expected relations rewritten from the answers; run the assertions to check them");
}

function permifyMode() {
  return $("tab-validation").hidden;
}

async function runValidation() {
  const s = state();
  let out;
  try {
    out = await api("validate", s);
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  const notes = { assertions: [], validation: [] };
  const list = document.createElement("ul");
  for (const f of out.failures) {
    const li = document.createElement("li");
    li.className = "failure";
    if (notes[f.editor] && f.line) {
      // Shown under its line; the list only points there.
      notes[f.editor].push({ line: f.line, kind: "error", message: f.message });
      const a = document.createElement("button");
      a.type = "button";
      a.className = "link";
      a.textContent = `${editorLabel(f.editor)} line ${f.line}`;
      a.addEventListener("click", () => {
        selectTab(f.editor);
        editors[f.editor].revealLine(f.line);
      });
      li.append(a, " " + firstLine(f.message));
    } else {
      li.textContent = (f.editor ? `${editorLabel(f.editor)}${f.line ? " line " + f.line : ""}: ` : "") + f.message;
    }
    list.append(li);
  }
  expectedAnswers = out.expected;
  $("regenerate").disabled = !expectedAnswers || permifyMode();
  editors.assertions.setNotes(notes.assertions);
  editors.validation.setNotes(notes.validation);
  const head = document.createElement("p");
  head.className = out.failures.length ? "failure" : "passed";
  head.id = "validation-summary";
  head.textContent = out.failures.length
    ? `${out.failures.length} failure${out.failures.length > 1 ? "s" : ""} (${out.checked} checked)`
    : `all ${out.checked} passed`;
  $("validation-results").replaceChildren(head, list);
  setStatus(head.textContent, out.failures.length > 0);
}

function firstLine(msg) {
  const line = msg.split("\n")[0];
  return line.length > 70 ? line.slice(0, 69) + "…" : line;
}

function editorLabel(name) {
  return editors[name] ? editors[name].host.dataset.label : name;
}

// ---- files and links ----------------------------------------------------------------

async function download() {
  let out;
  try {
    out = await api("export", state());
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  const url = URL.createObjectURL(new Blob([out.yaml], { type: "application/yaml" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = out.name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  setStatus(`downloaded ${out.name}`);
}

async function importYAML(text) {
  try {
    const out = await api("import", { file: text });
    load({ ...out, language: out.language === "permify" ? "permify" : "", checks: undefined });
    await runChecks();
    setStatus("loaded the validation file");
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function compress(text) {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function decompress(b64) {
  const bin = atob(b64.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Response(stream).text();
}

async function share() {
  const url = new URL(location.href);
  url.hash = "p=" + (await compress(JSON.stringify(state())));
  history.replaceState(null, "", url);
  const input = $("share-url");
  input.value = url.href;
  $("share-dialog").showModal();
  input.select();
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(url.href).then(() => setStatus("link copied"), () => {});
  }
}

async function fromLink() {
  const m = /^#p=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!m) return false;
  try {
    load(JSON.parse(await decompress(m[1])));
    return true;
  } catch {
    setStatus("the link's playground could not be read", true);
    return false;
  }
}

// ---- views: the relationships grid and the graph ------------------------------------

let relationshipErrors = new Map();
let pathCheck = null; // the text of the check whose path the graph view shows

// showView shows a panel's editor ("text") or its other view ("grid", "graph").
function showView(panel, view) {
  const other = panel === "schema" ? "schema-graph" : "relationships-grid";
  for (const b of document.querySelectorAll(`[data-panel=${panel}] [data-view]`)) {
    b.setAttribute("aria-pressed", String(b.dataset.view === view));
  }
  $(other).hidden = view === "text";
  editors[panel].host.hidden = view !== "text";
  if (view === "grid") renderGrid();
  if (view === "graph") renderGraph();
  if (view === "text") {
    editors[panel].fitNotes();
    editors[panel].renderGutter();
  }
}

// A relationship line split in the grid's columns: resource, relation, subject and
// the rest (caveat, expiration); a Permify attribute as entity, $name, type:value.
const GRID_LINE = /^\s*([^\s#@$]+)(?:#([^\s@]+)@([^\s[]+)(.*)|\$([^\s|]+)\|(.*))$/;

function renderGrid() {
  const lines = editors.relationships.text.split("\n");
  const body = document.createElement("tbody");
  lines.forEach((line, i) => {
    if (!line.trim() || line.trim().startsWith("//")) return;
    const tr = document.createElement("tr");
    const m = GRID_LINE.exec(line);
    const cells = !m ? [line] : m[5] !== undefined ? [m[1], "$" + m[5], m[6], ""] : [m[1], m[2], m[3], m[4].trim()];
    cells.forEach((value, c) => {
      const td = document.createElement("td");
      if (cells.length === 1) td.colSpan = 4;
      const input = document.createElement("input");
      input.value = value;
      input.spellcheck = false;
      input.setAttribute("aria-label", `line ${i + 1} ${["resource", "relation", "subject", "caveat"][c]}`);
      input.addEventListener("change", () => setGridLine(i, tr));
      td.append(input);
      tr.append(td);
    });
    const del = document.createElement("td");
    const x = document.createElement("button");
    x.type = "button";
    x.textContent = "×";
    x.title = "Delete line " + (i + 1);
    x.addEventListener("click", () => setGridLine(i, null));
    del.append(x);
    tr.append(del);
    if (relationshipErrors.has(i + 1)) {
      tr.className = "bad";
      tr.title = relationshipErrors.get(i + 1);
    }
    body.append(tr);
  });
  $("relationships-grid").querySelector("tbody").replaceWith(body);
}

// setGridLine writes row tr back into line i of the relationships (null deletes it).
function setGridLine(i, tr) {
  const lines = editors.relationships.text.split("\n");
  if (tr === null) {
    lines.splice(i, 1);
  } else {
    const v = Array.from(tr.querySelectorAll("input"), (e) => e.value.trim());
    if (v.length === 1) lines[i] = v[0];
    else if (v[1].startsWith("$")) lines[i] = `${v[0]}${v[1]}|${v[2]}`;
    else lines[i] = `${v[0]}#${v[1]}@${v[2]}${v[3]}`;
  }
  editors.relationships.text = lines.join("\n");
  renderGrid();
  scheduleChecks();
  save();
}

// renderGraph draws the schema's diagram and, when one was chosen, a check's path,
// with the schema's relations on that path emphasised.
function renderGraph() {
  const host = $("schema-graph");
  const check = pathCheck && lastChecks.find((c) => c.text === pathCheck && c.trace);
  const steps = new Set();
  const walk = (n) => {
    steps.add(n.type + "#" + n.relation);
    for (const c of n.children || []) walk(c);
  };
  if (check) walk(check.trace);
  const parts = [];
  const defs = schemaModel(editors.schema.text);
  if (check) {
    const h = document.createElement("h3");
    h.append("Path of ", code(check.text));
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "hide path";
    close.className = "link";
    close.addEventListener("click", () => {
      pathCheck = null;
      renderGraph();
    });
    h.append(" ", close);
    parts.push(h, drawPath(check, (rs) => RESULT_LABEL[summarize(rs)][0]));
  }
  const h = document.createElement("h3");
  h.textContent = defs.length ? "Schema" : "No definitions to draw yet";
  parts.push(h);
  if (defs.length) parts.push(drawSchema(defs, steps));
  host.replaceChildren(...parts);
}

// ---- wiring -------------------------------------------------------------------------

function setLanguageLabels(lang) {
  const permify = lang === "permify";
  $("tab-assertions").textContent = permify ? "Scenarios" : "Assertions";
  editors.assertions.host.dataset.label = permify ? "Scenarios" : "Assertions";
  editors.assertions.pre.setAttribute("aria-label", editors.assertions.host.dataset.label);
  $("tab-validation").hidden = permify;
  $("regenerate").hidden = permify;
  if (permify) selectTab("assertions");
}

function languageChanged() {
  const lang = $("language").value;
  if (lang) setLanguageLabels(lang);
  scheduleChecks();
}

function selectTab(name) {
  for (const t of ["assertions", "validation"]) {
    const on = t === name;
    $("tab-" + t).setAttribute("aria-selected", String(on));
    $("tab-" + t).tabIndex = on ? 0 : -1;
    $("pane-" + t).hidden = !on;
  }
  editors[name].fitNotes();
  editors[name].renderGutter();
}

function wire() {
  for (const host of document.querySelectorAll("[data-editor]")) {
    const name = host.dataset.editor;
    const validation = name === "assertions" || name === "validation";
    editors[name] = new Editor(host, () => {
      save();
      if (!validation) scheduleChecks();
    });
  }
  $("language").addEventListener("change", () => {
    languageChanged();
    save();
  });
  for (const [key, ex] of Object.entries(EXAMPLES)) $("example").append(new Option(ex.title, key));
  $("example").addEventListener("change", () => {
    const ex = EXAMPLES[$("example").value];
    $("example").value = "";
    if (!ex) return;
    load(ex);
    runChecks().then(() => setStatus(`loaded the example “${ex.title}”`));
  });
  for (const b of document.querySelectorAll("[data-view]")) {
    b.addEventListener("click", () => showView(b.closest(".panel").dataset.panel, b.dataset.view));
  }
  $("grid-add").addEventListener("click", () => {
    const text = editors.relationships.text;
    editors.relationships.text = text + (text && !text.endsWith("\n") ? "\n" : "") + "type:id#relation@type:id";
    renderGrid();
    scheduleChecks();
    save();
    const inputs = $("relationships-grid").querySelectorAll("tbody tr:last-child input");
    if (inputs.length) inputs[0].select();
  });
  document.addEventListener("selectionchange", () => {
    for (const ed of Object.values(editors)) {
      if (document.activeElement === ed.pre) ed.markBrackets(ed.caret() ?? -1);
    }
  });
  $("run-checks").addEventListener("click", runChecks);
  $("run-validation").addEventListener("click", runValidation);
  $("regenerate").addEventListener("click", regenerate);
  $("download").addEventListener("click", download);
  $("upload").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) await importYAML(await file.text());
    e.target.value = "";
  });
  $("paste").addEventListener("click", () => {
    $("paste-text").value = "";
    $("paste-dialog").showModal();
  });
  $("paste-dialog").addEventListener("close", () => {
    if ($("paste-dialog").returnValue === "load") importYAML($("paste-text").value);
  });
  $("share").addEventListener("click", share);
  for (const t of ["assertions", "validation"]) $("tab-" + t).addEventListener("click", () => selectTab(t));
  document.querySelector(".tabs").addEventListener("keydown", (e) => {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const next = $("tab-assertions").getAttribute("aria-selected") === "true" && !$("tab-validation").hidden ? "validation" : "assertions";
    selectTab(next);
    $("tab-" + next).focus();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || !(e.ctrlKey || e.metaKey)) return;
    e.preventDefault();
    const inValidation = document.activeElement && document.activeElement.closest("#validation-panel");
    (inValidation ? runValidation : runChecks)();
  });
  window.addEventListener("hashchange", async () => {
    if (await fromLink()) runChecks();
  });
}

async function start() {
  wire();
  if (!(await fromLink())) load(saved() || EXAMPLES.documents);
  await runChecks();
  document.body.dataset.ready = "true";
}

start();
