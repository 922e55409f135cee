// Text to DOM: replies with their fenced code blocks highlighted (highlight.js), nothing else
// interpreted, so a model's output can never inject markup.

import hljs from "./vendor/highlight.min.js";

export { hljs };

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A highlighted <code> for `text`; `language` is a hint (a name or file extension). */
export function codeBlock(text, language) {
  const code = el("code", { class: "hljs" });
  const lang = language && hljs.getLanguage(language) ? language : null;
  // highlight.js returns escaped HTML: the only place markup is built from model text.
  code.innerHTML = lang
    ? hljs.highlight(text, { language: lang, ignoreIllegals: true }).value
    : hljs.highlightAuto(text).value;
  return code;
}

const FENCE = /^```([\w+.-]*)[^\n]*\n([\s\S]*?)(?:^```[ \t]*$|(?![\s\S]))/gm;
const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/;

/** Prose with the little markdown small models write: headings, **bold** and `code`, as DOM nodes. */
function prose(text) {
  const block = el("div", { class: "prose" });
  text.split("\n").forEach((line, i) => {
    if (i) block.append("\n");
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    const target = heading ? block.appendChild(el("strong", { class: "heading" })) : block;
    for (const part of (heading ? heading[1] : line).split(INLINE)) {
      if (!part) continue;
      if (part.startsWith("`") && part.endsWith("`") && part.length > 2) target.append(el("code", { class: "inline", text: part.slice(1, -1) }));
      else if (part.startsWith("**") && part.endsWith("**") && part.length > 4) target.append(el("strong", { text: part.slice(2, -2) }));
      else target.append(part);
    }
  });
  return block;
}

/** A reply as prose and highlighted code blocks (an unclosed block still streams). */
export function renderReply(text) {
  const frag = document.createDocumentFragment();
  let at = 0;
  for (const m of text.matchAll(FENCE)) {
    const before = text.slice(at, m.index).replace(/^\n+/, "").replace(/\n+$/, "");
    if (before) frag.append(prose(before));
    frag.append(el("pre", { class: "code" }, codeBlock(m[2].replace(/\n$/, ""), m[1] || undefined)));
    at = m.index + m[0].length;
  }
  const rest = text.slice(at).replace(/^\n+/, "");
  if (rest) frag.append(prose(rest));
  return frag;
}

const EXTENSIONS = { py: "python", js: "javascript", mjs: "javascript", ts: "typescript", rs: "rust", sh: "bash", md: "markdown", yml: "yaml", toml: "ini", h: "c", hpp: "cpp", cc: "cpp" };

/** The highlight.js language for a file path, or undefined to guess. */
export function languageOf(path) {
  const ext = (path.split(".").pop() || "").toLowerCase();
  const name = EXTENSIONS[ext] || ext;
  return hljs.getLanguage(name) ? name : undefined;
}

export function formatMs(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "–";
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}
