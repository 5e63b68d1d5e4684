// latch playground: syntax highlighting of the editors' text. tokens(kind, text)
// returns [class, text] pairs whose texts concatenate to exactly text; the editor
// wraps each in a span. Both schema languages (SpiceDB's and Permify's) share one
// tokenizer, relationships and checks another, the YAML sections a third.
"use strict";

const SCHEMA_KEYWORDS = new Set([
  // SpiceDB
  "definition", "caveat", "relation", "permission", "with", "use", "import", "partial", "expiration", "nil",
  // Permify
  "entity", "attribute", "rule", "action", "or", "and", "not",
]);
const SCHEMA_TYPES = new Set([
  "int", "uint", "bool", "string", "double", "bytes", "duration", "timestamp", "list", "map", "any", "ipaddress",
  "boolean", "integer", "true", "false",
]);
// Words after which an identifier names what is declared.
const DECLARES = new Set(["definition", "caveat", "entity", "rule", "relation", "permission", "attribute", "action"]);

const SCHEMA_TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|("(?:[^"\\\n]|\\.)*"?)|([A-Za-z_][A-Za-z0-9_/]*)|(\d+(?:\.\d+)?)|(->)|([{}()[\]])|([^\sA-Za-z0-9_"{}()[\]/]+|\/)|(\s+)/y;

function schemaTokens(text) {
  const out = [];
  let prev = "";
  SCHEMA_TOKEN.lastIndex = 0;
  while (SCHEMA_TOKEN.lastIndex < text.length) {
    const at = SCHEMA_TOKEN.lastIndex;
    const m = SCHEMA_TOKEN.exec(text);
    if (!m) {
      out.push(["", text.slice(at)]);
      break;
    }
    const [all, comment, str, word, num, arrow, bracket, op] = m;
    let cls = "";
    if (comment) cls = "comment";
    else if (str) cls = "string";
    else if (word) {
      if (SCHEMA_KEYWORDS.has(word) && !DECLARES.has(prev)) cls = "keyword";
      else if (DECLARES.has(prev)) cls = prev === "relation" || prev === "attribute" ? "relation" : "name";
      else if (SCHEMA_TYPES.has(word)) cls = "type";
      else cls = "ident";
      prev = word;
    } else if (num) cls = "number";
    else if (arrow || op) cls = "op";
    else if (bracket) cls = "br";
    if (!/^\s+$/.test(all) && !word) prev = "";
    out.push([cls, all]);
  }
  return out;
}

// A relationship (`document:readme#viewer@group:eng#member[caveat:{...}]`), a Permify
// attribute (`document:readme$is_public|boolean:true`) or a check (`... with {...}`).
const REL_LINE = /^(\s*)([^\s:#@$]+)(:)([^\s#@$]+)(?:(#)([^\s@]+)(@)([^\s:#[]+)(:)([^\s#[]+)(?:(#)([^\s[]+))?|(\$)([^\s|]+)(\|)([^\s:]+)(:)(.*))(.*)$/;
const REL_CLASSES = ["", "type", "op", "id", "op", "relation", "op", "type", "op", "id", "op", "relation", "op", "relation", "op", "type", "op", "string"];

function relationshipLine(line) {
  if (/^\s*\/\//.test(line)) return [["comment", line]];
  const m = REL_LINE.exec(line);
  if (!m) return [["", line]];
  const out = [];
  for (let i = 1; i < m.length - 1; i++) {
    if (m[i]) out.push([REL_CLASSES[i - 1], m[i]]);
  }
  // The rest: a caveat in brackets, an expiration, or a check's `with {context}`.
  const rest = m[m.length - 1];
  const w = /^(\s+with\s+)(.*)$/.exec(rest);
  if (w) out.push(["keyword", w[1]], ["string", w[2]]);
  else if (rest) {
    for (const [, br, body] of rest.matchAll(/([[\]])|([^[\]]+)/g)) out.push(br ? ["br", br] : ["caveat", body]);
  }
  return out;
}

// The YAML sections: keys, list dashes, strings, comments; list items that are
// relationships are highlighted as such.
function yamlLine(line) {
  const m = /^(\s*)(- )?(?:([A-Za-z_][\w.:#@-]*)(:)(?=\s|$))?(.*)$/.exec(line);
  const out = [];
  const [, indent, dash, key, colon, rest] = m;
  if (indent) out.push(["", indent]);
  if (dash) out.push(["op", "-"], ["", " "]);
  if (key) out.push(["key", key], ["op", colon]);
  const comment = /^(.*?)(\s#.*|^#.*)?$/.exec(rest);
  const value = comment[1];
  if (/^\s*"/.test(value)) out.push(["string", value]);
  else if (/^\s*(true|false|\d+)\s*$/.test(value)) out.push(["type", value]);
  else if (value.includes("@") || value.includes("$")) out.push(...relationshipLine(value));
  else if (value) out.push(["", value]);
  if (comment[2]) out.push(["comment", comment[2]]);
  return out;
}

function byLine(text, fn) {
  const out = [];
  text.split("\n").forEach((line, i) => {
    if (i > 0) out.push(["", "\n"]);
    out.push(...fn(line));
  });
  return out;
}

function tokens(kind, text) {
  switch (kind) {
    case "schema":
      return schemaTokens(text);
    case "relationships":
    case "checks":
      return byLine(text, relationshipLine);
    default:
      return byLine(text, yamlLine);
  }
}

// matchBracket returns the offset of the bracket matching the one at offset at in
// text, or -1.
function matchBracket(text, at) {
  const pairs = { "{": "}", "(": ")", "[": "]" };
  const open = text[at];
  const close = pairs[open];
  const closing = Object.keys(pairs).find((k) => pairs[k] === open);
  if (!close && !closing) return -1;
  const step = close ? 1 : -1;
  const [mine, theirs] = close ? [open, close] : [open, closing];
  let depth = 0;
  for (let i = at; i >= 0 && i < text.length; i += step) {
    if (text[i] === mine) depth++;
    else if (text[i] === theirs && --depth === 0) return i;
  }
  return -1;
}
