// Small helpers shared by the pages: DOM building, API calls, formatting.

// h builds an element: h("a", {href: "/x", onclick: f}, "text", child).
export function h(tag, attrs, ...children) {
  const el = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k in el && !(el instanceof SVGElement) && k !== "list") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// ApiError carries the unified error body.
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.code + ": " + body.message : "HTTP " + status);
    this.status = status;
    this.body = body || {};
  }
}

// api calls the public API; a 401 fires "runstream:signin".
export async function api(path, {method = "GET", body, type = "application/json", headers = {}} = {}) {
  const init = {method, headers: {...headers}, credentials: "same-origin"};
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["Content-Type"] = type;
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = {message: text}; }
  }
  if (!r.ok) {
    if (r.status === 401) window.dispatchEvent(new Event("runstream:signin"));
    throw new ApiError(r.status, data);
  }
  return data;
}

export function errorBox(err) {
  const b = err && err.body ? err.body : {};
  const parts = [err.message || String(err)];
  if (b.nodeId) parts.push("node: " + b.nodeId);
  if (b.details) parts.push("details: " + JSON.stringify(b.details, null, 1));
  return h("div", {class: "error", role: "alert"}, parts.join("\n"));
}

export function badge(status) {
  return h("span", {class: "badge s-" + status}, (status || "unknown").replace("_", " "));
}

export function fmtTime(s) {
  if (!s) return "—";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString();
}

export function fmtDuration(ms) {
  if (ms == null || isNaN(ms)) return "—";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
}

export function fmtBytes(n) {
  if (n == null) return "—";
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

export function json(v) {
  return typeof v === "string" ? v : JSON.stringify(v, null, 2);
}

export function link(href, ...children) {
  return h("a", {href}, ...children);
}

// recentThreads remembers the thread pages this browser opened: the API
// has no list of threads.
export function recentThreads(add) {
  let list = [];
  try { list = JSON.parse(localStorage.getItem("runstream.threads") || "[]"); } catch { list = []; }
  if (add) {
    list = [add, ...list.filter((x) => x !== add)].slice(0, 10);
    localStorage.setItem("runstream.threads", JSON.stringify(list));
  }
  return list;
}
