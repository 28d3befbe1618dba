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

// A busy server (429) is asked again after its Retry-After, this many times in all.
const BUSY_TRIES = 4;

async function api(method, path, params = {}, body = undefined, tries = BUSY_TRIES) {
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
  if (response.status === 429 && tries > 1) { // its work queue is full: wait, then again
    const wait = Math.min(Number(response.headers.get("retry-after")) || 1, 10);
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    return api(method, path, params, body, tries - 1);
  }
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

// ---------------------------------------------------------------- photos

// thumbnails: twice as many pixels on a dense screen
const THUMB = (window.devicePixelRatio || 1) > 1.5 ? 512 : 256;
const thumbUrl = (id, size = THUMB) => `/images/${id}/thumbnail?size=${size}`;

function aspect(hit) {
  // width / height as shown, from the photo's metadata (4:3 when unknown)
  const r = hit.width && hit.height ? hit.width / hit.height : 4 / 3;
  return Math.min(3, Math.max(1 / 3, r));
}

function photoImg(hit, size = THUMB) {
  const caption = (hit.captions && hit.captions[0]) || hit.file || `photo ${hit.id}`;
  return el("img", {
    src: thumbUrl(hit.id, size), alt: caption, loading: "lazy", decoding: "async",
    width: hit.width || 400, height: hit.height || 300,
    onerror: (e) => e.target.classList.add("broken"),
  });
}

function hitCard(hit) {
  // a search hit: the photo (click: its details), score, relevance, captions, actions
  remember(hit);
  const caption = (hit.captions && hit.captions[0]) || hit.file || `image ${hit.id}`;
  const others = (hit.captions || []).slice(1).map((c) => el("li", {}, c));
  return el("figure", { class: "hit", dataset: { id: hit.id } },
    el("div", { class: "hit-img", tabindex: "0", role: "button", title: "Details",
      onclick: () => showDetails(hit), onkeydown: activate(() => showDetails(hit)) },
    photoImg(hit),
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

function tile(hit) {
  // a photo of the library (or of a date-ordered search): sized by its aspect before it
  // loads, so the rows do not move
  remember(hit);
  const r = aspect(hit);
  return el("figure", {
    class: "hit tile", dataset: { id: hit.id }, tabindex: "0", role: "button",
    style: `--ar:${r.toFixed(4)}`, title: tileTitle(hit),
    onclick: () => showDetails(hit), onkeydown: activate(() => showDetails(hit)),
  }, photoImg(hit), hit.relevance !== undefined && hit.relevance !== null
    ? el("span", { class: "tile-tag" }, percent(hit.relevance)) : null);
}

function tileTitle(hit) {
  const when = hit.taken ? formatTaken(hit.taken) : "no date";
  return [(hit.captions && hit.captions[0]) || hit.file, when].filter(Boolean).join("\n");
}

function renderGrid(container, data) {
  // a single answer (arithmetic): results (good matches), weak (below min_relevance), no_match
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

const activate = (fn) => (e) => {
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); fn(); }
};

// ---------------------------------------------------------------- dates

function dayOf(taken) {
  // the calendar day as the photo says it (its own clock, not this browser's zone)
  return taken ? taken.slice(0, 10) : null;
}

function groupKey(hit, by) {
  const day = dayOf(hit.taken);
  if (!day) return "none";
  return by === "month" ? day.slice(0, 7) : day;
}

function groupLabel(key, by) {
  if (key === "none") return "No date";
  const [y, m, d] = key.split("-").map(Number);
  const date = new Date(Date.UTC(y, m - 1, d || 1));
  const options = by === "month"
    ? { year: "numeric", month: "long", timeZone: "UTC" }
    : { weekday: "long", year: "numeric", month: "long", day: "numeric", timeZone: "UTC" };
  return date.toLocaleDateString(undefined, options);
}

function formatTaken(taken) {
  // "2024-07-01T18:03:05+02:00" → the date and time as the camera says them
  const [day, rest] = taken.split("T");
  const time = rest ? rest.slice(0, 5) : "";
  const offset = rest && /[+-]\d\d:\d\d$|Z$/.test(rest) ? rest.slice(8) : "";
  return `${groupLabel(day, "day")}${time ? " " + time : ""}${offset ? " (UTC" + offset.replace("Z", "+00:00") + ")" : ""}`;
}

// ---------------------------------------------------------------- the grid: modes and pages

// What #results shows: the library by date, or the hits of a search (text, photo,
// similar), a page at a time; `seq` drops the answers of a mode left since.
const view = {
  seq: 0, mode: "library", label: "", fetchPage: null, cursor: null, done: true,
  loading: false, order: "-date", by: "day", total: null, shown: 0, good: 0, weak: 0,
  ids: new Set(), group: null, strong: null, weakGrid: null, guesses: false,
};
const PAGE = { library: 60, search: 24 };
const known = new Map(); // id → the last hit seen of it (for details and arrows)
// The photo filters as the server declares them (GET /filters): the form is made from
// them, and each text filter suggests the values seen on hits (a hit's folder, camera).
let FILTERS = [];
const suggested = new Map(); // text filter → the values offered

async function buildFilters() {
  FILTERS = await api("GET", "/filters");
  const box = $("#filter-fields");
  for (const f of FILTERS) {
    const id = `f-${f.name}`;
    let input;
    if (f.kind === "choice") {
      input = el("select", { id }, el("option", { value: "" }, "all"),
        f.choices.map((c) => el("option", { value: c }, c)));
    } else if (f.kind === "date") {
      input = el("input", { id, type: "date" });
    } else if (f.kind === "km") {
      input = el("input", { id, type: "number", min: "0.1", max: "20000", step: "any", placeholder: "1" });
    } else {
      const list = f.kind === "text" ? `values-${f.name}` : null;
      input = el("input", { id, type: "text", list, placeholder: f.example });
    }
    input.title = f.help;
    input.addEventListener("change", rerun); // on Enter, a choice or leaving the field
    const size = { text: "field wide", km: "field narrow" }[f.kind] || "field";
    box.append(el("div", { class: size }, el("label", { for: id }, f.label), input));
    if (f.kind === "text") {
      box.append(el("datalist", { id: `values-${f.name}` }));
      suggested.set(f.name, new Set());
    }
  }
}

function remember(hit) {
  known.set(hit.id, hit);
  for (const [name, values] of suggested) {
    const value = hit[name];
    if (value && !values.has(value)) {
      values.add(value);
      $(`#values-${name}`).append(el("option", { value }));
    }
  }
}

function filterParams() {
  // the filters as /search, /images and /images/{id}/similar read them
  const p = {};
  for (const f of FILTERS) {
    let value = $(`#f-${f.name}`).value.trim();
    if (!value) continue;
    if (f.name === "before") { // the form's "to" is inclusive: before the next day
      const next = new Date(value + "T00:00:00Z");
      next.setUTCDate(next.getUTCDate() + 1);
      value = next.toISOString().slice(0, 10);
    }
    p[f.name] = value;
  }
  return p;
}

function filtersActive() {
  return Object.keys(filterParams()).length > 0;
}

function searchOrder() {
  const chosen = $("#f-order").value;
  return chosen === "auto" ? "relevance" : chosen;
}

function start(mode, label, fetchPage, order) {
  // a new mode: the grid emptied at once (no stale photo stays), the first page asked
  view.seq += 1;
  Object.assign(view, {
    mode, label, fetchPage, order, cursor: null, done: false, loading: false, total: null,
    shown: 0, good: 0, weak: 0, ids: new Set(), group: null, strong: null, weakGrid: null,
    guesses: false, by: $("#f-group").value,
  });
  const results = $("#results");
  results.className = order === "relevance" ? "grid" : "library";
  results.replaceChildren();
  $("#more-btn").hidden = true;
  $("#search-layout").classList.toggle("browsing", mode !== "text");
  $("#mode-bar").hidden = mode === "library";
  $("#mode-text").textContent = label;
  if (mode !== "photo") { $("#mode-photo").hidden = true; }
  $("#search-status").textContent = mode === "library" ? "Loading…" : "Searching…";
  return loadMore();
}

async function loadMore() {
  if (view.loading || view.done || !view.fetchPage) return;
  const seq = view.seq;
  view.loading = true;
  $("#results").setAttribute("aria-busy", "true");
  try {
    const data = await view.fetchPage(view.cursor);
    if (seq !== view.seq) return; // another mode started meanwhile
    view.cursor = data.next;
    view.done = !data.next;
    if (view.total === null) view.total = data.total ?? null;
    append(data);
    status(data);
  } catch (exc) {
    if (seq !== view.seq) return;
    view.done = true;
    if (view.shown === 0) {
      $("#results").replaceChildren();
      $("#search-status").textContent = "";
      if (view.mode === "text") $("#tree").replaceChildren(el("p", { class: "empty" }, "No tree for this query."));
    }
    showError(exc);
    return;
  } finally {
    if (seq === view.seq) {
      view.loading = false;
      $("#results").removeAttribute("aria-busy");
    }
  }
  moreControls();
  // a short page may leave the end in view: the observer fires only on a change
  requestAnimationFrame(() => { if (autoLoads() && nearEnd()) loadMore(); });
}

function autoLoads() {
  // pages load by themselves while they bring photos to see: the library, a date order,
  // and a ranking's good matches; its guesses wait for a click
  if (view.done) return false;
  if (view.order !== "relevance") return true;
  return view.total === null || view.good < view.total;
}

function moreControls() {
  const button = $("#more-btn");
  button.hidden = view.done || autoLoads();
  button.textContent = view.good || view.weak ? "Show more guesses" : "Show more";
}

function nearEnd() {
  const box = $("#more").getBoundingClientRect();
  return box.top < window.innerHeight + 800;
}

function append(data) {
  const results = $("#results");
  const fresh = (list) => list.filter((h) => !view.ids.has(h.id) && view.ids.add(h.id));
  const strong = fresh(data.results || []), weak = fresh(data.weak || []);
  if (view.order !== "relevance") {
    for (const hit of strong) {
      const key = groupKey(hit, view.by);
      if (!view.group || view.group.key !== key) {
        const grid = el("div", { class: "day-grid" });
        results.append(el("section", { class: "day", dataset: { date: key } },
          el("h3", { class: "date-header" }, groupLabel(key, view.by)), grid));
        view.group = { key, grid };
      }
      view.group.grid.append(tile(hit));
    }
  } else {
    // good matches as cards of #results, the guesses apart below them
    const firstApart = results.querySelector(":scope > :not(.hit)");
    for (const hit of strong) results.insertBefore(hitCard(hit), firstApart);
    if (weak.length) {
      if (!view.weakGrid) {
        view.weakGrid = el("div", { class: "grid weak-grid" });
        results.append(el("section", { class: "weak-hits", "aria-label": "Weak matches" },
          weakHeading(data), view.weakGrid));
      }
      view.weakGrid.append(...weak.map(hitCard));
    }
  }
  view.good += view.order === "relevance" ? strong.length : 0;
  view.weak += weak.length;
  view.shown += strong.length + weak.length;
  const note = results.querySelector(":scope > .no-match");
  if (view.mode !== "library" && data.no_match && !note) {
    const box = noMatchNote({ no_match: true, weak: view.order === "relevance" ? weak : [] }, "in the gallery");
    if (view.order !== "relevance") {
      box.append(" ", el("button", { type: "button", class: "small", onclick: () => { $("#f-order").value = "auto"; rerun(); } }, "Show the closest guesses"));
    }
    results.insertBefore(box, results.querySelector(":scope > .weak-hits"));
  }
  if (!view.shown) {
    const what = view.mode === "library"
      ? (filtersActive() ? "No photo passes these filters." : "The gallery has no photos yet: index a folder (groundsearch index PATH) or upload one.")
      : "No photo passes these filters.";
    if (!results.querySelector(".no-match")) results.append(el("p", { class: "empty" }, what));
  }
}

function status(data) {
  const line = $("#search-status");
  if (view.mode === "library") {
    const order = view.order === "date" ? "oldest first" : "newest first";
    line.textContent = `${view.total} photo${view.total === 1 ? "" : "s"}` +
      (filtersActive() ? " pass the filters" : "") + ` — ${order}` +
      (view.done ? "" : ` · ${view.shown} shown`);
    return;
  }
  const counted = `${view.shown} photos` + (view.order === "relevance" && view.weak ? ` (${view.good} good, ${view.weak} weak)` : "");
  const of = view.total !== null && view.order !== "relevance" ? ` of ${view.total}` : "";
  const time = data.timings_ms ? ` — ${timings(data.timings_ms)}` : "";
  line.textContent = `${counted}${of} ${view.label}${time}`;
}

function libraryPage(order) {
  return (cursor) => api("GET", "/images", { ...filterParams(), order, k: PAGE.library, cursor });
}

function browse() {
  const order = $("#f-order").value === "date" ? "date" : "-date";
  return start("library", "", libraryPage(order), order);
}

// ---------------------------------------------------------------- search + tree

let lastQuery = null; // what the grid shows: {kind: "text"|"photo"|"similar", ...}

async function search(event) {
  if (event) event.preventDefault();
  const text = $("#query").value;
  clearError();
  lastQuery = { kind: "text", text };
  await busy($("#search-btn"), "Searching…", async () => {
    const order = searchOrder();
    const fetchPage = (cursor) => api("POST", "/search", { text, ...filterParams(), order, k: PAGE.search, cursor });
    const tree = explainSoon(text);
    await start("text", `for “${text}”`, fetchPage, order);
    if (view.shown || view.total === 0) await tree();
  });
}

function explainSoon(text) {
  // the tree, after the hits (the parse is cached by then)
  return () => explain(text);
}

async function searchByPhoto(file) {
  if (!file) return;
  clearError();
  lastQuery = { kind: "photo", file };
  const order = searchOrder();
  const fetchPage = (cursor) => {
    const body = new FormData();
    body.append("image", file, file.name);
    return api("POST", "/search/image", { ...filterParams(), order, k: PAGE.search, cursor }, body);
  };
  const preview = $("#mode-photo");
  if (preview.src.startsWith("blob:")) URL.revokeObjectURL(preview.src);
  await start("photo", `like ${file.name}`, fetchPage, order);
  preview.src = URL.createObjectURL(file);
  preview.alt = "Searching by this photo: " + file.name;
  preview.hidden = false;
}

async function similar(id) {
  clearError();
  lastQuery = { kind: "similar", id };
  const order = searchOrder();
  const fetchPage = (cursor) => api("GET", `/images/${id}/similar`, { ...filterParams(), order, k: PAGE.search, cursor });
  $("#library-section").scrollIntoView({ behavior: "smooth", block: "start" });
  await start("similar", `similar to #${id}`, fetchPage, order);
  const preview = $("#mode-photo");
  preview.src = thumbUrl(id, 128);
  preview.alt = `Photos similar to #${id}`;
  preview.hidden = false;
}

function rerun() {
  // the filters or the order changed: the same view again
  clearError();
  if (!lastQuery) return browse();
  if (lastQuery.kind === "text") return search();
  if (lastQuery.kind === "photo") return searchByPhoto(lastQuery.file);
  return similar(lastQuery.id);
}

function backToLibrary() {
  lastQuery = null;
  $("#query").value = "";
  $("#tree").replaceChildren(el("p", { class: "empty" }, "Search for a sentence to see its tree."));
  clearError();
  return browse();
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
        ? el("img", { src: thumbUrl(c.image_id), alt: c.text, class: "caption-thumb", title: `gallery image #${c.image_id}` })
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
  showArithPreview(thumbUrl(id), `gallery image #${id}`);
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

// ---------------------------------------------------------------- a photo's details

let detailsSeq = 0;
let detailsHit = null;

function metaRow(term, ...value) {
  return [el("dt", {}, term), el("dd", {}, ...value)];
}

function placeLink(place) {
  const lat = place.lat.toFixed(5), lon = place.lon.toFixed(5);
  // a plain link: the page itself fetches no map
  const href = `https://www.openstreetmap.org/?mlat=${lat}&mlon=${lon}#map=15/${lat}/${lon}`;
  return [`${lat}, ${lon} `, el("a", { href, target: "_blank", rel: "noopener noreferrer", class: "osm" }, "map ↗")];
}

function showDetails(hit) {
  const dialog = $("#details");
  const seq = ++detailsSeq;
  detailsHit = hit;
  $("#details-title").textContent = hit.file || `Photo #${hit.id}`;
  const img = $("#details-img");
  img.src = thumbUrl(hit.id, 1024);
  img.alt = (hit.captions && hit.captions[0]) || hit.file || `photo ${hit.id}`;
  img.style.aspectRatio = String(aspect(hit));
  $("#details-full").href = hit.url || `/images/${hit.id}`;
  const rows = [
    metaRow("Taken", hit.taken ? formatTaken(hit.taken) : "unknown",
      hit.taken_source === "file" ? el("span", { class: "muted" }, " (the file's time)") : null),
    metaRow("Camera", hit.camera || el("span", { class: "muted" }, "unknown")),
    metaRow("Place", ...(hit.place ? placeLink(hit.place) : [el("span", { class: "muted" }, "no GPS")])),
    metaRow("Folder", hit.folder || el("span", { class: "muted" }, hit.source === "upload" ? "uploaded" : "unknown")),
    metaRow("Size", hit.width && hit.height ? `${hit.width} × ${hit.height}` : "unknown"),
    metaRow("Gallery id", `#${hit.id}`),
  ];
  $("#details-meta").replaceChildren(...rows.flat());
  const captions = hit.captions || [];
  $("#details-captions").replaceChildren(...(captions.length
    ? captions.map((c) => el("li", {}, c))
    : [el("li", { class: "muted" }, "No captions of its own.")]));
  const written = $("#details-written");
  written.replaceChildren(el("p", { class: "muted" }, writes ? "Writing…" : "Looking…"));
  $("#details-similar").replaceChildren(el("p", { class: "muted" }, "Finding similar photos…"));
  if (!dialog.open) dialog.showModal();
  dialog.dataset.id = hit.id;
  describeInDetails(hit.id, seq);
  similarInDetails(hit.id, seq);
}

async function describeInDetails(id, seq) {
  const box = $("#details-written");
  try {
    const data = await api("GET", `/images/${id}/describe`, { k: 3, sentences: writes ? "generated" : "retrieved" });
    if (seq !== detailsSeq) return;
    const parts = [];
    if (data.generated && data.generated.length) {
      parts.push(el("p", { class: "written-text", title: "decoder score " + data.generated[0].score.toFixed(3) }, data.generated[0].text));
    } else {
      parts.push(el("p", { class: "muted" }, "This server writes no sentences (no caption decoder)."));
    }
    // what the classifier saw, one chip a word (its classes in the tooltip)
    const words = new Map();
    for (const c of data.concepts || []) {
      const word = c.word || c.imagenet_class;
      if (!words.has(word)) words.set(word, { p: c.word ? c.word_probability : c.probability, classes: [] });
      words.get(word).classes.push(`${c.imagenet_class} ${percent(c.probability)}`);
    }
    if (words.size) {
      parts.push(el("p", { class: "concepts" }, "The CNN sees: ",
        ...[...words].map(([word, w]) => el("span", { class: "chip concept", title: w.classes.join(", ") }, `${word} ${percent(w.p)}`))));
    }
    box.replaceChildren(...parts);
  } catch (exc) {
    if (seq !== detailsSeq) return;
    box.replaceChildren(el("p", { class: "muted" }, "No sentence: " + exc.message));
  }
}

async function similarInDetails(id, seq) {
  const strip = $("#details-similar");
  try {
    const data = await api("GET", `/images/${id}/similar`, { k: 8 });
    if (seq !== detailsSeq) return;
    const hits = [...(data.results || []), ...(data.weak || []).map((h) => ({ ...h, weakHit: true }))];
    strip.replaceChildren(...hits.map((h) => {
      remember(h);
      return el("button", {
        type: "button", class: "strip-item" + (h.weakHit ? " weak" : ""), dataset: { id: h.id },
        title: `#${h.id}` + (h.relevance != null ? ` — relevance ${percent(h.relevance)}` : ""),
        onclick: () => showDetails(known.get(h.id) || h),
      }, el("img", { src: thumbUrl(h.id, 256), alt: (h.captions && h.captions[0]) || h.file, loading: "lazy", width: 120, height: 90 }));
    }));
    if (!hits.length) strip.replaceChildren(el("p", { class: "muted" }, "No other photo in the gallery."));
  } catch (exc) {
    if (seq === detailsSeq) strip.replaceChildren(el("p", { class: "muted" }, "No similar photos: " + exc.message));
  }
}

function stepDetails(delta) {
  // the photo before or after this one in the grid
  if (!detailsHit) return;
  const cards = [...document.querySelectorAll("#results .hit")];
  const i = cards.findIndex((c) => Number(c.dataset.id) === detailsHit.id);
  const next = cards[i + delta];
  if (i < 0 || !next) return;
  const hit = known.get(Number(next.dataset.id));
  if (hit) {
    showDetails(hit);
    next.scrollIntoView({ block: "nearest" });
  }
}

function setupDetails() {
  const dialog = $("#details");
  $("#details-close").addEventListener("click", () => dialog.close());
  $("#details-prev").addEventListener("click", () => stepDetails(-1));
  $("#details-next").addEventListener("click", () => stepDetails(1));
  dialog.addEventListener("click", (e) => { if (e.target === dialog) dialog.close(); }); // the backdrop
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") stepDetails(-1);
    if (e.key === "ArrowRight") stepDetails(1);
  });
  dialog.addEventListener("close", () => { detailsSeq += 1; detailsHit = null; });
  $("#details-similar-btn").addEventListener("click", () => {
    const id = detailsHit && detailsHit.id;
    dialog.close();
    if (id) similar(id);
  });
  $("#details-use").addEventListener("click", () => {
    const id = detailsHit && detailsHit.id;
    dialog.close();
    if (id) useImage(id);
  });
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  $("#search-form").addEventListener("submit", search);
  $("#error-close").addEventListener("click", clearError);
  for (const chip of document.querySelectorAll("[data-example]")) {
    chip.addEventListener("click", () => { $("#query").value = chip.textContent; search(); });
  }
  $("#search-photo").addEventListener("change", (e) => {
    const file = e.target.files[0];
    e.target.value = ""; // the same photo chosen again searches again
    searchByPhoto(file);
  });
  $("#back-to-library").addEventListener("click", backToLibrary);
  $("#filters").addEventListener("submit", (e) => { e.preventDefault(); rerun(); });
  for (const id of ["#f-order", "#f-group"]) $(id).addEventListener("change", rerun);
  $("#f-clear").addEventListener("click", () => {
    $("#filters").reset();
    rerun();
  });
  $("#more-btn").addEventListener("click", () => loadMore());
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && autoLoads()) loadMore();
  }, { rootMargin: "800px 0px" }).observe($("#more"));
  setupDetails();
  setupDropzone();
  $("#arith-form").addEventListener("submit", arithmetic);
  $("#arith-image-id").addEventListener("input", (e) => {
    const id = e.target.value.trim();
    $("#arith-upload").value = "";
    showArithPreview(id ? thumbUrl(id) : null, `gallery image #${id}`);
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
  api("GET", "/ready").then((r) => {
    writes = /\(beam \d+\)$/.test(r.decoder || "");
    $("#library-count").textContent = `${r.images} photo${r.images === 1 ? "" : "s"} in the gallery`;
  }).catch(() => {});
  buildFilters().catch(showError).then(() => {
    browse();
    document.body.classList.add("ready");
  });
});
