// groundsearch web page: vanilla JS against the HTTP API of docs/API.md.
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// ---------------------------------------------------------------- errors and calls

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

function detailText(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    // FastAPI validation errors: [{loc, msg, type}, ...]
    return detail
      .map((d) => {
        const where = Array.isArray(d.loc) ? d.loc.filter((p) => p !== "query" && p !== "body") : [];
        return (where.length ? where.join(".") + ": " : "") + (d.msg || JSON.stringify(d));
      })
      .join("; ");
  }
  return JSON.stringify(detail);
}

async function api(method, path, params = {}, body = undefined) {
  const qs = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (Array.isArray(value)) value.forEach((v) => qs.append(key, v));
    else if (value !== undefined && value !== null) qs.append(key, value);
  }
  const query = qs.toString();
  let response;
  try {
    response = await fetch(path + (query ? "?" + query : ""), { method, body });
  } catch (exc) {
    throw new ApiError(0, "The server cannot be reached (" + exc.message + ").");
  }
  let data = null;
  const type = response.headers.get("content-type") || "";
  if (type.includes("json")) data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = data && data.detail !== undefined ? detailText(data.detail) : response.statusText;
    throw new ApiError(response.status, detail || "request failed");
  }
  return data;
}

function showError(exc) {
  const box = $("#error");
  const status = exc instanceof ApiError && exc.status ? exc.status + " — " : "";
  $("#error-text").textContent = status + (exc.message || String(exc));
  box.hidden = false;
  box.classList.remove("flash");
  void box.offsetWidth; // restart the animation
  box.classList.add("flash");
}

function clearError() {
  $("#error").hidden = true;
  $("#error-text").textContent = "";
}

async function busy(button, label, work) {
  const original = button.textContent;
  button.disabled = true;
  button.textContent = label;
  button.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    button.disabled = false;
    button.textContent = original;
    button.removeAttribute("aria-busy");
  }
}

function timings(t) {
  if (!t) return "";
  const parts = Object.entries(t).map(([stage, ms]) => `${stage} ${Number(ms).toFixed(ms < 10 ? 1 : 0)} ms`);
  return parts.join(" · ");
}

function percent(share) {
  const text = (share * 100).toFixed(0);
  return (text === "-0" ? "0" : text.replace("-", "−")) + "%";
}

function scoreBar(score) {
  // cosine-like scores in [-1, 1]; the bar shows the positive part
  const pct = Math.max(0, Math.min(1, score)) * 100;
  return el("span", { class: "score", title: "score " + score.toFixed(4) },
    el("span", { class: "score-bar", "aria-hidden": "true" },
      el("span", { class: "score-fill", style: `width:${pct.toFixed(1)}%` })),
    el("span", { class: "score-num" }, score.toFixed(3)));
}

function relevanceTag(relevance) {
  // the calibrated probability that the hit matches (null: the server has no model)
  if (relevance === null || relevance === undefined) return null;
  return el("span", { class: "relevance", title: "relevance: the calibrated probability that it matches" },
    "relevance " + percent(relevance));
}

function noMatchNote(data, what) {
  // "no good match": nothing reached min_relevance; the weak hits, if any, are shown apart
  if (!data.no_match) return null;
  const weak = (data.weak || []).length;
  return el("p", { class: "no-match", role: "status" },
    `No good match ${what}` + (weak ? ` — the ${weak} closest, below, are guesses.` : "."));
}

function weakHeading(data) {
  const cut = data.min_relevance === null || data.min_relevance === undefined ? "" : ` (relevance below ${percent(data.min_relevance)})`;
  return el("h3", { class: "weak-title" }, "Weak matches" + cut);
}

// ---------------------------------------------------------------- image grids

function hitCard(hit) {
  const caption = (hit.captions && hit.captions[0]) || hit.file || `image ${hit.id}`;
  const img = el("img", {
    src: hit.url, alt: caption, decoding: "async",
    onerror: (e) => e.target.classList.add("broken"),
  });
  const others = (hit.captions || []).slice(1).map((c) => el("li", {}, c));
  return el("figure", { class: "hit", dataset: { id: hit.id }, tabindex: "0" },
    el("div", { class: "hit-img" }, img,
      el("span", { class: "hit-id", title: "gallery id" }, "#" + hit.id)),
    el("figcaption", {},
      scoreBar(hit.score),
      relevanceTag(hit.relevance),
      el("p", { class: "hit-caption", title: (hit.captions || []).join("\n") }, caption),
      others.length ? el("details", {}, el("summary", {}, `${others.length} more caption${others.length > 1 ? "s" : ""}`), el("ul", {}, others)) : null,
      el("div", { class: "hit-actions" },
        el("button", { type: "button", class: "small use-this", onclick: () => useImage(hit.id) }, "use this"),
        el("button", { type: "button", class: "small ghost", onclick: () => similar(hit.id) }, "similar"))));
}

function renderGrid(container, data) {
  // data: an answer with results (good matches), weak (below min_relevance) and no_match
  const strong = data.results || [], weak = data.weak || [];
  container.replaceChildren(...strong.map(hitCard));
  if (!strong.length && !weak.length) {
    container.append(el("p", { class: "empty" }, "No photos in the gallery."));
    return;
  }
  const note = noMatchNote(data, "in the gallery");
  if (note) container.append(note);
  if (weak.length) {
    container.append(el("section", { class: "weak-hits", "aria-label": "Weak matches" },
      weakHeading(data), el("div", { class: "grid weak-grid" }, ...weak.map(hitCard))));
  }
}

function counted(data, noun) {
  // "8 photos (3 good, 5 weak)": the k hits, then how min_relevance split them
  const strong = data.results.length, weak = (data.weak || []).length;
  return `${strong + weak} ${noun}` + (weak ? ` (${strong} good, ${weak} weak)` : "");
}

// ---------------------------------------------------------------- search + tree

async function search(event) {
  if (event) event.preventDefault();
  const text = $("#query").value;
  clearError();
  await busy($("#search-btn"), "Searching…", async () => {
    try {
      const data = await api("POST", "/search", { text, k: 12 });
      renderGrid($("#results"), data);
      $("#search-status").textContent =
        `${counted(data, "photos")} for “${data.query ?? text}” — ${timings(data.timings_ms)}`;
    } catch (exc) {
      $("#results").replaceChildren();
      $("#search-status").textContent = "";
      $("#tree").replaceChildren(el("p", { class: "empty" }, "No tree for this query."));
      showError(exc);
      return;
    }
    explain(text);
  });
}

async function similar(id) {
  clearError();
  try {
    const data = await api("GET", `/images/${id}/similar`, { k: 12 });
    renderGrid($("#results"), data);
    $("#search-status").textContent = `${counted(data, "photos")} similar to #${id}`;
    $("#search-section").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (exc) {
    showError(exc);
  }
}

async function explain(text) {
  const tree = $("#tree");
  try {
    const data = await api("GET", "/explain", { text });
    renderTree(tree, data);
  } catch (exc) {
    tree.replaceChildren(el("p", { class: "empty" }, "No tree: " + exc.message));
  }
}

function renderTree(container, data) {
  const nodes = data.nodes || [];
  const children = new Map();
  for (const n of nodes) {
    if (!children.has(n.head)) children.set(n.head, []);
    children.get(n.head).push(n);
  }
  for (const list of children.values()) list.sort((a, b) => a.index - b.index);
  const maxShare = Math.max(1e-9, ...nodes.map((n) => Math.abs(n.share)));

  const renderNode = (n) => {
    const width = (Math.abs(n.share) / maxShare) * 100;
    const kids = children.get(n.index) || [];
    return el("li", { class: "node", dataset: { index: n.index, word: n.word, head: n.head } },
      el("div", { class: "node-row" },
        el("span", { class: "node-label" },
          el("span", { class: "word" }, n.word),
          el("span", { class: "deprel", title: `universal POS: ${n.upos}` }, n.deprel),
          el("span", { class: "size", title: "words under this node" }, "ℓ=" + n.size)),
        el("span", { class: "share", title: `share of the sentence vector: ${(n.share * 100).toFixed(1)}%` },
          el("span", { class: "share-bar" + (n.share < 0 ? " negative" : ""), style: `width:${width.toFixed(1)}%` })),
        el("span", { class: "share-num" }, percent(n.share))),
      kids.length ? el("ul", {}, kids.map(renderNode)) : null);
  };

  const roots = children.get(0) || [];
  const sentence = el("p", { class: "tree-sentence" },
    nodes.slice().sort((a, b) => a.index - b.index).map((n) => el("span", { class: "tok", title: n.deprel }, n.word, " ")));
  container.replaceChildren(
    sentence,
    el("ul", { class: "tree-root", role: "tree", "aria-label": "Dependency tree" }, roots.map(renderNode)),
    data.encoder ? el("p", { class: "hint" }, `encoder: ${data.encoder}` + (data.timings_ms ? ` — ${timings(data.timings_ms)}` : "")) : null);
}

// ---------------------------------------------------------------- written sentences

// whether the server has a caption decoder (from /ready): arithmetic asks for a sentence
let writes = false;

function writtenBlock(container, sentences, label) {
  if (!sentences || !sentences.length) { container.replaceChildren(); container.hidden = true; return; }
  const [best, ...others] = sentences;
  container.replaceChildren(
    el("p", { class: "written-label" }, label),
    el("p", { class: "written-text", title: "decoder score " + best.score.toFixed(3) }, best.text),
    others.length ? el("details", {}, el("summary", {}, `${others.length} more from the beam`),
      el("ul", {}, ...others.map((s) => el("li", { title: "decoder score " + s.score.toFixed(3) }, s.text)))) : null);
  container.hidden = false;
}

// ---------------------------------------------------------------- describe

async function describe(file) {
  if (!file) return;
  clearError();
  const preview = $("#upload-preview");
  if (preview.src.startsWith("blob:")) URL.revokeObjectURL(preview.src);
  preview.src = URL.createObjectURL(file);
  preview.alt = "The photo to describe: " + file.name;
  preview.hidden = false;
  $("#dropzone").classList.add("has-image");
  const status = $("#describe-status");
  status.textContent = "Describing…";
  const form = new FormData();
  form.append("image", file, file.name);
  try {
    const data = await api("POST", "/describe", { k: 5 }, form);
    writtenBlock($("#written"), data.generated, "Written for this photo");
    const item = (c, weak) => el("li", { class: weak ? "caption weak" : "caption", dataset: { id: c.id ?? "", imageId: c.image_id ?? "", source: c.source } },
      c.image_url
        ? el("img", { src: c.image_url, alt: c.text, class: "caption-thumb", title: `gallery image #${c.image_id}` })
        : el("span", { class: "caption-thumb caption-bank", title: "from the caption bank (no gallery photo)" }, "bank"),
      el("div", { class: "caption-body" },
        el("p", { class: "caption-text" }, c.text),
        scoreBar(c.score), relevanceTag(c.relevance)));
    const weak = data.weak || [];
    const note = noMatchNote(data, "among the captions");
    $("#captions").replaceChildren(...data.results.map((c) => item(c, false)),
      ...(note ? [el("li", { class: "no-match-item" }, note)] : []),
      ...(weak.length ? [el("li", { class: "weak-title-item" }, weakHeading(data))] : []),
      ...weak.map((c) => item(c, true)));
    status.textContent = `${counted(data, "captions")} — ${timings(data.timings_ms)}`;
  } catch (exc) {
    $("#captions").replaceChildren();
    writtenBlock($("#written"), []);
    status.textContent = "";
    showError(exc);
  }
}

function setupDropzone() {
  const zone = $("#dropzone");
  const input = $("#upload");
  input.addEventListener("change", () => describe(input.files[0]));
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (e) => { e.preventDefault(); zone.classList.add("over"); });
  }
  for (const type of ["dragleave", "drop"]) {
    zone.addEventListener(type, () => zone.classList.remove("over"));
  }
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    const file = e.dataTransfer && e.dataTransfer.files[0];
    if (file) describe(file);
  });
  // a photo dropped anywhere else on the page must not navigate away from it
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => e.preventDefault());
}

// ---------------------------------------------------------------- arithmetic

function phrases(value) {
  return value.split(",").map((p) => p.trim()).filter(Boolean);
}

function useImage(id) {
  const input = $("#arith-image-id");
  input.value = id;
  $("#arith-upload").value = "";
  showArithPreview(`/images/${id}`, `gallery image #${id}`);
  $("#arith-section").scrollIntoView({ behavior: "smooth", block: "start" });
  $("#arith-minus").focus({ preventScroll: true });
}

function showArithPreview(src, alt) {
  const preview = $("#arith-preview");
  if (preview.src.startsWith("blob:")) URL.revokeObjectURL(preview.src);
  if (!src) { preview.hidden = true; preview.removeAttribute("src"); return; }
  preview.src = src;
  preview.alt = alt;
  preview.hidden = false;
}

async function arithmetic(event) {
  event.preventDefault();
  clearError();
  const id = $("#arith-image-id").value.trim();
  const file = $("#arith-upload").files[0];
  if (!id && !file) {
    showError(new Error("Pick a gallery image (use this / an id) or upload a photo first."));
    return;
  }
  const params = {
    plus: phrases($("#arith-plus").value),
    minus: phrases($("#arith-minus").value),
    k: 12,
    rerank: $("#arith-rerank").checked ? "true" : "false",
    sentence: writes ? "true" : "false",
  };
  let body;
  if (id) params.image_id = id;
  else {
    body = new FormData();
    body.append("image", file, file.name);
  }
  await busy($("#arith-btn"), "Computing…", async () => {
    try {
      const data = await api("POST", id ? "/arithmetic" : "/arithmetic/upload", params, body);
      renderGrid($("#arith-results"), data);
      writtenBlock($("#arith-written"), data.generated, "The result in words");
      const expr = [id ? `#${id}` : file.name, ...params.minus.map((m) => `− ${m}`), ...params.plus.map((p) => `+ ${p}`)].join(" ");
      $("#arith-status").textContent = `${expr} — ${data.results.length} photos — ${timings(data.timings_ms)}`;
    } catch (exc) {
      $("#arith-results").replaceChildren();
      writtenBlock($("#arith-written"), []);
      $("#arith-status").textContent = "";
      showError(exc);
    }
  });
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  $("#search-form").addEventListener("submit", search);
  $("#error-close").addEventListener("click", clearError);
  for (const chip of document.querySelectorAll("[data-example]")) {
    chip.addEventListener("click", () => { $("#query").value = chip.textContent; search(); });
  }
  setupDropzone();
  $("#arith-form").addEventListener("submit", arithmetic);
  $("#arith-image-id").addEventListener("input", (e) => {
    const id = e.target.value.trim();
    $("#arith-upload").value = "";
    showArithPreview(id ? `/images/${id}` : null, `gallery image #${id}`);
  });
  $("#arith-upload").addEventListener("change", (e) => {
    const file = e.target.files[0];
    if (!file) return;
    $("#arith-image-id").value = "";
    showArithPreview(URL.createObjectURL(file), "uploaded photo: " + file.name);
  });
  $("#arith-preview").addEventListener("error", (e) => { e.target.hidden = true; });
  // a photo this browser cannot show (a HEIC outside Safari) is still described
  $("#upload-preview").addEventListener("error", (e) => {
    e.target.hidden = true;
    $("#dropzone").classList.remove("has-image");
  });
  // "decoder.pt (beam 3)" when one is loaded; "none" or "off: …" otherwise
  api("GET", "/ready").then((r) => { writes = /\(beam \d+\)$/.test(r.decoder || ""); }).catch(() => {});
  document.body.classList.add("ready");
});
