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

// The UI's per-user state is kept in this browser's storage under keys
// starting with "runstream.": who signed in here last and the threads
// they opened. None is a secret (the session is an HttpOnly cookie the
// page never sees); forgetUser clears it all at sign-out, and signedIn
// when someone else signs in.
const PREFIX = "runstream.";
export const USER_KEY = PREFIX + "user";

// storedUser is the user who signed in last in this browser, or null.
export function storedUser() {
  try { return localStorage.getItem(USER_KEY); } catch { return null; }
}

// signedIn records that user signed in. When the browser's state belonged
// to anyone else (another user, or nobody known), it is forgotten first.
// It returns the user stored before, or null.
export function signedIn(user) {
  const before = storedUser();
  if (before !== user) forgetUser();
  try { localStorage.setItem(USER_KEY, user); } catch { /* storage off: nothing kept */ }
  return before;
}

// forgetUser removes every per-user key of localStorage and sessionStorage.
export function forgetUser() {
  for (const kind of ["localStorage", "sessionStorage"]) {
    try {
      const s = window[kind];
      for (let i = s.length - 1; i >= 0; i--) {
        const k = s.key(i);
        if (k && k.startsWith(PREFIX)) s.removeItem(k);
      }
    } catch { /* storage off */ }
  }
}

// recentThreads remembers the thread pages this browser opened: the API
// has no list of threads. The list is the signed-in user's: it goes at
// sign-out and when another user signs in.
export function recentThreads(add) {
  let list = [];
  try { list = JSON.parse(localStorage.getItem(PREFIX + "threads") || "[]"); } catch { list = []; }
  if (add) {
    list = [add, ...list.filter((x) => x !== add)].slice(0, 10);
    try { localStorage.setItem(PREFIX + "threads", JSON.stringify(list)); } catch { /* storage off */ }
  }
  return list;
}

// The live streams of the page. follow opens an EventSource on path (a
// …/stream URL) from the cursor after and calls on(type, event) for each
// event of types. conn shows the connection's state: nothing while open
// (onopen is called at each opening), "reconnecting…" while the browser
// reconnects by itself with Last-Event-ID, and an error with a Reconnect
// button when the server answers something other than a stream. A 401
// fires "runstream:signin" instead: the page then pauses its streams
// under the sign-in form and, signed in again, resumes them from the last
// event each delivered (resumeStreams), so nothing is missed or repeated.
const live = new Set();

export function follow(path, {types, after = 0, on, conn, onopen = () => {}}) {
  let es = null, last = String(after), ended = false;
  const url = () => path + (path.includes("?") ? "&" : "?") + "after=" + encodeURIComponent(last);
  const open = () => {
    const cur = es = new EventSource(url());
    cur.onopen = () => {
      if (cur !== es) return;
      clear(conn);
      onopen();
    };
    cur.onerror = async () => {
      if (cur !== es) return;
      if (cur.readyState === EventSource.CONNECTING) {
        clear(conn, h("div", {class: "banner", id: "reconnecting"}, "reconnecting…"));
        return;
      }
      // EventSource gave up without saying why: ask the URL again.
      const status = await streamStatus(url());
      if (cur !== es) return; // paused or closed meanwhile
      es = null;
      if (status === 401) { window.dispatchEvent(new Event("runstream:signin")); return; }
      clear(conn, h("div", {class: "error", id: "stream-closed"}, "The stream closed" + (status ? " (HTTP " + status + ")" : "") + ". ",
        h("button", {type: "button", onclick: () => { clear(conn); s.resume(); }}, "Reconnect")));
    };
    for (const t of types) cur.addEventListener(t, (e) => {
      if (cur !== es) return;
      if (e.lastEventId) last = e.lastEventId;
      on(t, e);
    });
  };
  const s = {
    pause() { const c = es; es = null; if (c) c.close(); },
    resume() { if (!ended && !es) open(); },
    close() { ended = true; s.pause(); live.delete(s); },
  };
  live.add(s);
  open();
  return s;
}

// streamStatus is the status a stream URL answers now (0: no answer); an
// open stream is dropped as soon as its headers arrive.
export async function streamStatus(url) {
  const ctl = new AbortController();
  try {
    const r = await fetch(url, {signal: ctl.signal, headers: {Accept: "text/event-stream"}, credentials: "same-origin", cache: "no-store"});
    ctl.abort();
    return r.status;
  } catch { return 0; }
}

export function liveStreams() { return live.size; }
export function pauseStreams() { for (const s of live) s.pause(); }
export function resumeStreams() { for (const s of live) s.resume(); }
