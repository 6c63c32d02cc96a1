// The UI's entry point: client-side routes, sign-in, the first page, the
// workflows and the runs.
import {h, clear, api, errorBox, badge, fmtTime, fmtDuration, link, recentThreads, ApiError,
  storedUser, signedIn, forgetUser, USER_KEY, liveStreams, pauseStreams, resumeStreams} from "./util.js";
import {schemaForm} from "./forms.js";
import {runPage} from "./run.js";
import {threadPage, threadsPage} from "./thread.js";

const main = document.getElementById("main");
// cleanup holds the current page's teardown (closing streams, timers).
let cleanup = null;

export const EXAMPLES = [
  {file: "approval.yaml", name: "approval", about: "A scripted model drafts a reply, a person approves or rejects it.", input: {customer: "Ada", topic: "a broken kettle"}},
  {file: "research.yaml", name: "research", about: "An HTTP fetch, a tool call and a markdown report artifact.", input: {url: "https://example.com"}},
  {file: "long.yaml", name: "long", about: "A minute of delays with progress bars: one to cancel.", input: {}},
  {file: "failing.yaml", name: "failing", about: "A SQL node the policy denies: how a failure looks.", input: {}},
];

export function navigate(path) {
  history.pushState(null, "", path);
  render();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  // API paths and files (such as /examples/long.yaml) load natively.
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || /\.[a-z]+$/i.test(url.pathname)) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", render);
// A 401 (from an API call or a stream) shows the sign-in form. A page that
// follows streams is kept under it, its streams paused: signed in again
// as the same user, the page comes back as it was and its streams resume
// from their last events.
window.addEventListener("runstream:signin", () => { if (!signingIn) signIn(ended(), liveStreams() > 0); });

let signingIn = false;
// user is who signed in in this browser (null: unknown, or no sign-in).
let user = storedUser();
// kept is the page kept under the sign-in form: its nodes, title and path.
let kept = null;

const here = () => location.pathname + location.search;
const ended = () => user ? "Your session has ended: sign in again to go on." : undefined;

function showSignOut() {
  const who = document.getElementById("who");
  if (!user) { clear(who); return; }
  clear(who, h("span", {id: "who-user"}, user), " ", h("button", {type: "button", id: "sign-out", onclick: signOut}, "Sign out"));
}

// signOut ends the session and forgets everything of the user's that the
// page and this browser keep: the page and its streams, the stored user
// and the threads they opened (in every tab: see the storage listener).
async function signOut() {
  if (cleanup) { cleanup(); cleanup = null; }
  kept = null;
  forgetUser();
  user = null;
  showSignOut();
  clear(main, h("p", {class: "muted"}, "Signing out…"));
  history.replaceState(null, "", "/");
  let ok = false;
  try { ok = (await fetch("/api/auth/session", {method: "DELETE", credentials: "same-origin"})).ok; } catch { ok = false; }
  signIn(ok ? "Signed out." : "Signed out of this page, but the server did not answer: the session may last until it expires.");
}

// Another tab of this browser signed out, or in as someone else: what
// this tab shows is the previous user's.
window.addEventListener("storage", (e) => {
  if (e.storageArea !== localStorage || (e.key !== null && e.key !== USER_KEY)) return;
  const now = storedUser();
  if (now === user) return;
  if (cleanup) { cleanup(); cleanup = null; }
  kept = null;
  if (user !== null) history.replaceState(null, "", "/");
  user = now;
  showSignOut();
  if (now) render();
  else signIn("Signed out in another tab.");
});

function signIn(message, keep = false) {
  signingIn = true;
  if (keep && cleanup) {
    pauseStreams();
    kept = {nodes: [...main.childNodes], title: document.title, path: here()};
  } else {
    kept = null;
    if (cleanup) { cleanup(); cleanup = null; }
  }
  const input = h("input", {type: "password", id: "token", autocomplete: "off", required: true});
  const out = h("div");
  const form = h("form", {class: "card", onsubmit: async (e) => {
    e.preventDefault();
    const r = await fetch("/api/auth/session", {method: "POST", headers: {Authorization: "Bearer " + input.value}, credentials: "same-origin"});
    let body = {};
    try { body = await r.json(); } catch { body = {}; }
    if (!r.ok) { clear(out, errorBox(new ApiError(r.status, body))); return; }
    input.value = "";
    signedIn(body.user); // forgets another user's state
    const before = user;
    user = body.user;
    signingIn = false;
    showSignOut();
    const page = kept;
    kept = null;
    if (page && before === user && page.path === here()) {
      clear(main, ...page.nodes);
      document.title = page.title;
      resumeStreams();
      return;
    }
    // Someone else: nothing of the previous user's page, not even its path.
    if (before !== null && before !== user) history.replaceState(null, "", "/");
    render();
  }}, h("label", {for: "token"}, "Access token"), input, h("p", {class: "muted"}, "The token is exchanged once for an HttpOnly session cookie; it is not stored by the page."),
  h("button", {class: "primary", type: "submit"}, "Sign in"), out);
  clear(main, h("h1", {}, "Sign in to runstream"), message ? h("p", {}, message) : null, form);
  document.title = "Sign in · runstream";
  input.focus();
}

async function render() {
  if (cleanup) { cleanup(); cleanup = null; }
  signingIn = false;
  kept = null;
  const path = location.pathname;
  const q = new URLSearchParams(location.search);
  let m;
  clear(main, h("p", {class: "muted"}, "Loading…"));
  try {
    if (path === "/" || path === "/index.html") cleanup = await home();
    else if (path === "/workflows") cleanup = await workflowsPage(q);
    else if ((m = path.match(/^\/workflows\/([^/]+)$/))) cleanup = await workflowPage(decodeURIComponent(m[1]), q);
    else if (path === "/runs") cleanup = await runsPage(q);
    else if ((m = path.match(/^\/runs\/([^/]+)$/))) cleanup = await runPage(main, decodeURIComponent(m[1]));
    else if (path === "/threads") cleanup = await threadsPage(main);
    else if ((m = path.match(/^\/threads\/([^/]+)$/))) cleanup = await threadPage(main, decodeURIComponent(m[1]));
    else clear(main, h("h1", {}, "Not found"), h("p", {}, "No page at " + path + ". ", link("/", "Home")));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return signIn(ended());
    clear(main, h("h1", {}, "Something went wrong"), errorBox(err));
  }
  document.querySelectorAll(".top nav a").forEach((a) => a.toggleAttribute("aria-current", path.startsWith(a.getAttribute("href"))));
}

// publishExample publishes an example as a workflow, or finds the one
// already published under its name.
async function publishExample(ex) {
  const page = await api("/api/workflows?limit=100");
  const found = page.workflows.find((w) => w.name === ex.name);
  if (found) return found.workflowId;
  const yaml = await (await fetch("/examples/" + ex.file)).text();
  const wf = await api("/api/workflows", {method: "POST", body: yaml, type: "application/yaml"});
  return wf.workflowId;
}

async function home() {
  document.title = "runstream";
  const [runs, wfs] = await Promise.all([api("/api/workflows/runs?limit=5"), api("/api/workflows?limit=100")]);
  const status = h("div", {"aria-live": "polite"});
  const threads = recentThreads();
  clear(main,
    h("h1", {}, "runstream"),
    h("p", {}, "An event backbone for AI agent and workflow runs: every run is an ordered, durable stream of events you can follow live, resume after a dropped connection (Last-Event-ID), steer (approve, cancel) and review afterwards."),
    h("h2", {}, "Example workflows"),
    status,
    h("div", {class: "cards"}, EXAMPLES.map((ex) => h("div", {class: "card"},
      h("h3", {}, ex.name), h("p", {class: "muted"}, ex.about),
      h("div", {class: "row"},
        h("button", {class: "primary", "aria-label": "Run example " + ex.name, onclick: async (e) => {
          e.target.disabled = true;
          try {
            const id = await publishExample(ex);
            const run = await api("/api/workflows/" + encodeURIComponent(id) + "/runs", {method: "POST", body: {input: ex.input}});
            navigate("/runs/" + encodeURIComponent(run.runId));
          } catch (err) {
            clear(status, errorBox(err));
            e.target.disabled = false;
          }
        }}, "Run"),
        h("a", {href: "/examples/" + ex.file, class: "button", "aria-label": "View " + ex.file}, "YAML"))))),
    h("h2", {}, "Recent runs"),
    runsTable(runs.runs, workflowLabels(wfs.workflows)),
    h("p", {}, link("/runs", "All runs →")),
    h("h2", {}, "Recent threads"),
    threads.length ? h("ul", {}, threads.map((t) => h("li", {}, link("/threads/" + encodeURIComponent(t), t)))) : h("p", {class: "muted"}, "No thread opened in this browser yet. ", link("/threads", "Open a thread")),
  );
}

// workflowLabels maps each workflow's id to the label a list shows: its
// name, followed by the end of its id when another workflow has the same
// name (publishing a file twice makes two workflows).
function workflowLabels(workflows) {
  const count = {};
  for (const w of workflows) count[w.name] = (count[w.name] || 0) + 1;
  return Object.fromEntries(workflows.map((w) => [w.workflowId, count[w.name] > 1 ? w.name + " (…" + w.workflowId.slice(-6) + ")" : w.name]));
}

function runsTable(runs, names = {}, empty = "No runs yet.") {
  if (!runs.length) return h("p", {class: "muted"}, empty);
  return h("div", {class: "table-wrap"}, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Run"), h("th", {}, "Status"), h("th", {}, "Workflow"), h("th", {class: "hide-narrow"}, "Started"), h("th", {}, "Duration"))),
    h("tbody", {}, runs.map((r) => {
      const start = r.startedAt ? Date.parse(r.startedAt) : null;
      const end = r.finishedAt ? Date.parse(r.finishedAt) : Date.now();
      return h("tr", {}, h("td", {}, link("/runs/" + encodeURIComponent(r.runId), r.runId)), h("td", {}, badge(r.status)),
        h("td", {}, link("/workflows/" + encodeURIComponent(r.workflowId), names[r.workflowId] || r.workflowId)),
        h("td", {class: "hide-narrow"}, fmtTime(r.startedAt || r.createdAt)), h("td", {}, start ? fmtDuration(end - start) : "—"));
    }))));
}

const STATUSES = ["queued", "running", "awaiting_input", "cancelling", "completed", "failed", "cancelled"];

async function runsPage(q) {
  document.title = "Runs · runstream";
  const wfs = await api("/api/workflows?limit=100");
  const names = workflowLabels(wfs.workflows);
  const wfSel = h("select", {id: "f-wf"}, h("option", {value: ""}, "all"), wfs.workflows.map((w) => h("option", {value: w.workflowId, selected: q.get("workflowId") === w.workflowId}, names[w.workflowId])));
  const stSel = h("select", {id: "f-status"}, h("option", {value: ""}, "all"), STATUSES.map((s) => h("option", {value: s, selected: q.get("status") === s}, s)));
  const body = h("div", {"aria-live": "polite"});
  const pager = h("div", {class: "row"});
  let stack = []; // before cursors of the pages before this one
  let before = "";
  let timer = null;
  async function load() {
    const p = new URLSearchParams({limit: "20"});
    if (wfSel.value) p.set("workflowId", wfSel.value);
    if (stSel.value) p.set("status", stSel.value);
    if (before) p.set("before", before);
    try {
      const page = await api("/api/workflows/runs?" + p);
      clear(body, runsTable(page.runs, names, wfSel.value || stSel.value ? "No run matches the filters." : "No runs yet."));
      clear(pager,
        h("button", {disabled: stack.length === 0, onclick: () => { before = stack.pop(); load(); }}, "← Newer"),
        h("button", {disabled: !page.hasMore, onclick: () => { stack.push(before); before = page.nextBefore; load(); }}, "Older →"),
        h("span", {class: "muted"}, "Page " + (stack.length + 1) + " · refreshed " + new Date().toLocaleTimeString()));
    } catch (err) {
      clear(body, errorBox(err));
    }
  }
  const refilter = () => {
    stack = []; before = "";
    const p = new URLSearchParams();
    if (wfSel.value) p.set("workflowId", wfSel.value);
    if (stSel.value) p.set("status", stSel.value);
    history.replaceState(null, "", "/runs" + (p.size ? "?" + p : ""));
    load();
  };
  wfSel.addEventListener("change", refilter);
  stSel.addEventListener("change", refilter);
  clear(main, h("h1", {}, "Runs"),
    h("div", {class: "row"}, h("div", {}, h("label", {for: "f-wf"}, "Workflow"), wfSel), h("div", {}, h("label", {for: "f-status"}, "Status"), stSel)),
    body, pager);
  await load();
  timer = setInterval(load, 3000);
  return () => clearInterval(timer);
}

async function workflowsPage() {
  document.title = "Workflows · runstream";
  const list = h("div");
  let before = "";
  const more = h("button", {hidden: true, onclick: () => load()}, "More workflows");
  async function load() {
    const page = await api("/api/workflows?limit=50" + (before ? "&before=" + encodeURIComponent(before) : ""));
    list.append(...page.workflows.map((w) => h("div", {class: "card", style: "margin:8px 0"},
      h("h3", {}, link("/workflows/" + encodeURIComponent(w.workflowId), w.name)),
      h("p", {class: "muted"}, w.description || "", " · updated " + fmtTime(w.updatedAt)),
      h("a", {class: "button", href: "/workflows/" + encodeURIComponent(w.workflowId) + "?run=1"}, "Run " + w.name))));
    if (!list.children.length) list.append(h("p", {class: "muted"}, "No workflows yet: publish one below or run an example from the ", link("/", "first page"), "."));
    before = page.nextBefore || "";
    more.hidden = !page.hasMore;
  }
  clear(main, h("h1", {}, "Workflows"), list, more, h("h2", {}, "Publish a new workflow"), editor(null));
  await load();
}

// editor is the YAML/JSON definition editor; with wf it publishes a new
// version of it. Definition errors are shown at the failing node.
function editor(wf) {
  const start = wf ? JSON.stringify(wf.latestVersion?.definition ?? {}, null, 2) : "name: hello\ndescription: A first workflow.\ninputSchema:\n  type: object\n  properties:\n    who: {type: string}\nnodes:\n  - id: greet\n    type: llm\n    config:\n      provider: scripted\n      text: Hello {{ input.who }}!\noutput: greet\n";
  const ta = h("textarea", {id: "definition", rows: 18, spellcheck: false, value: start, "aria-describedby": "def-help"});
  const gutter = h("pre", {class: "gutter", "aria-hidden": "true"});
  const out = h("div", {"aria-live": "polite"});
  let bad = -1;
  const lines = () => {
    const n = ta.value.split("\n").length;
    clear(gutter, Array.from({length: n}, (_, i) => h("span", {class: i === bad ? "bad" : null}, String(i + 1) + "\n")));
    gutter.scrollTop = ta.scrollTop;
  };
  ta.addEventListener("input", () => { bad = -1; lines(); });
  ta.addEventListener("scroll", () => { gutter.scrollTop = ta.scrollTop; });
  lines();
  const publish = async (e) => {
    e.preventDefault();
    const text = ta.value;
    const type = text.trimStart().startsWith("{") ? "application/json" : "application/yaml";
    try {
      const res = await api(wf ? "/api/workflows/" + encodeURIComponent(wf.workflowId) + "/versions" : "/api/workflows", {method: "POST", body: text, type});
      const id = wf ? wf.workflowId : res.workflowId;
      navigate("/workflows/" + encodeURIComponent(id) + "?published=1");
    } catch (err) {
      bad = -1;
      const nodeId = err.body && err.body.nodeId;
      let where = null;
      if (nodeId) {
        const all = text.split("\n");
        const re = new RegExp("(^|[\\s{,-])\"?id\"?\\s*:\\s*[\"']?" + nodeId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "[\"']?\\s*(,|}|$)");
        bad = all.findIndex((l) => re.test(l));
        where = h("p", {class: "error", id: "def-error-node"}, "At node “" + nodeId + "”" + (bad >= 0 ? " (line " + (bad + 1) + ")" : ""));
        if (bad >= 0) {
          const offset = all.slice(0, bad).join("\n").length + (bad ? 1 : 0);
          ta.focus();
          ta.setSelectionRange(offset, offset + all[bad].length);
        }
      }
      lines();
      const problems = err.body && err.body.details && err.body.details.problems;
      clear(out, errorBox(err), where, problems ? h("ul", {}, problems.map((p) => h("li", {}, (p.path || "") + ": " + p.message))) : null);
    }
  };
  return h("form", {onsubmit: publish},
    h("label", {for: "definition"}, wf ? "Definition of a new version" : "Definition"),
    h("p", {class: "muted", id: "def-help"}, "YAML or JSON (a text starting with { is sent as JSON)."),
    h("div", {class: "editor-wrap"}, gutter, ta), out,
    h("p", {}, h("button", {class: "primary", type: "submit"}, wf ? "Publish version" : "Publish workflow")));
}

async function workflowPage(id, q) {
  const wf = await api("/api/workflows/" + encodeURIComponent(id));
  document.title = wf.name + " · runstream";
  const def = wf.latestVersion?.definition || {};
  const runArea = h("div");
  const openRun = () => {
    const form = schemaForm(def.inputSchema === true || !def.inputSchema ? {type: "object"} : def.inputSchema);
    const out = h("div", {"aria-live": "polite"});
    clear(runArea, h("form", {class: "card", id: "run-form", onsubmit: async (e) => {
      e.preventDefault();
      try {
        const input = form.value();
        const run = await api("/api/workflows/" + encodeURIComponent(id) + "/runs", {method: "POST", body: {input}});
        navigate("/runs/" + encodeURIComponent(run.runId));
      } catch (err) {
        clear(out, errorBox(err));
      }
    }}, h("h2", {}, "Run " + wf.name), form.el, out, h("p", {}, h("button", {class: "primary", type: "submit"}, "Start run"))));
    const first = runArea.querySelector("input, select, textarea, button");
    if (first) first.focus();
  };
  const runs = await api("/api/workflows/runs?limit=10&workflowId=" + encodeURIComponent(id));
  clear(main, h("h1", {}, wf.name),
    q.get("published") ? h("p", {class: "banner", role: "status", style: "background:var(--ok)"}, "Published version " + (wf.latestVersion?.version ?? "")) : null,
    h("p", {}, wf.description || ""),
    h("p", {class: "muted"}, "Version " + (wf.latestVersion?.version ?? "?") + " (" + wf.latestVersionId + ") · " + (def.nodes || []).length + " nodes"),
    h("p", {}, h("button", {class: "primary", onclick: openRun}, "Run")),
    runArea,
    h("h2", {}, "Recent runs"), runsTable(runs.runs, {[id]: wf.name}),
    h("details", {}, h("summary", {}, "Definition (version " + (wf.latestVersion?.version ?? "?") + ")"), h("pre", {}, JSON.stringify(def, null, 2))),
    h("h2", {}, "Publish a new version"), editor(wf));
  if (q.get("run")) openRun();
}

showSignOut();
render();
