// The run page, live from the run's event stream.
import {h, clear, api, errorBox, badge, fmtTime, fmtDuration, fmtBytes, json, follow, ApiError} from "./util.js";
import {schemaForm} from "./forms.js";

const EVENTS = ["run.created", "run.queued", "run.started", "node.queued", "node.started", "node.progress", "node.output.delta",
  "node.tool.started", "node.tool.finished", "artifact.created", "node.completed", "node.failed", "run.awaiting_input",
  "run.resumed", "run.cancel_requested", "run.cancelled", "run.completed", "run.failed"];
const TERMINAL = new Set(["run.completed", "run.failed", "run.cancelled"]);
const SVGNS = "http://www.w3.org/2000/svg";

export async function runPage(main, runId) {
  const base = "/api/workflows/runs/" + encodeURIComponent(runId);
  const run = await api(base);
  document.title = runId + " · runstream";
  let def = null;
  try {
    const wf = await api("/api/workflows/" + encodeURIComponent(run.workflowId));
    if (wf.latestVersion && wf.latestVersion.versionId === run.versionId) def = wf.latestVersion.definition;
    run.workflowName = wf.name;
  } catch { /* the DAG is then built from node.queued events */ }

  // The status when the page loaded, from the stream's response header.
  let loadStatus = run.status, refused = false;
  try {
    const ctl = new AbortController();
    const r = await fetch(base + "/stream?after=" + run.lastSeq, {signal: ctl.signal, headers: {Accept: "text/event-stream"}, credentials: "same-origin"});
    loadStatus = r.headers.get("X-Workflow-Run-Status") || run.status;
    refused = r.status === 401;
    ctl.abort();
  } catch { /* keep run.status */ }
  if (refused) throw new ApiError(401, {}); // the session ended just now: the sign-in form

  const state = {status: loadStatus, applied: 0, nodes: new Map(), order: [], awaiting: null, output: undefined, error: null, artifacts: [], events: []};
  if (def) for (const n of def.nodes || []) node(n.id, n.type, n.needs || []);

  function node(id, type, needs) {
    let n = state.nodes.get(id);
    if (!n) {
      n = {id, type: type || "", needs: needs || [], state: "pending", attempts: [], text: {}, earlier: [], tools: new Map(), progress: null, errors: [], artifacts: [], output: undefined};
      state.nodes.set(id, n);
      state.order.push(id);
    }
    if (type) n.type = type;
    if (needs && needs.length) n.needs = needs;
    return n;
  }

  // apply folds one envelope into the state, once: seqs at or below the
  // last applied one are duplicates (a replay after a reconnect).
  function apply(env) {
    if (env.seq <= state.applied) return false;
    state.applied = env.seq;
    state.events.push(env);
    const d = env.data || {};
    const n = env.nodeId ? node(env.nodeId) : null;
    const t = Date.parse(env.timestamp);
    const attempt = () => n.attempts[n.attempts.length - 1];
    switch (env.event) {
      case "run.started": state.status = "running"; break;
      case "run.queued": if (state.status !== "running") state.status = "queued"; break;
      case "node.queued": node(env.nodeId, d.nodeType, d.needs); n.state = "queued"; break;
      case "node.started":
        // A new attempt streams its output afresh: the earlier attempts'
        // text is kept apart, folded.
        if (Object.keys(n.text).length) n.earlier.push({attempt: attempt() ? attempt().attempt : n.attempts.length, text: n.text});
        n.text = {};
        n.state = "running"; n.attempts.push({attempt: d.attempt, start: t, end: null, state: "running"}); state.status = "running";
        break;
      case "node.progress": n.progress = d; break;
      case "node.output.delta": n.text[d.channel] = (n.text[d.channel] || "") + d.delta; break;
      case "node.tool.started": n.tools.set(d.toolCallId, {name: d.name, input: d.inputSummary, status: "running"}); break;
      case "node.tool.finished": {
        const c = n.tools.get(d.toolCallId) || {name: d.name};
        n.tools.set(d.toolCallId, {...c, status: d.status, output: d.outputSummary});
        break;
      }
      case "artifact.created": (n ? n.artifacts : state.artifacts).push(d); break;
      case "node.completed": n.state = "completed"; n.output = d.outputSummary; if (attempt()) Object.assign(attempt(), {end: t, state: "completed"}); break;
      case "node.failed": {
        // An attempt a server's graceful shutdown interrupted is not the
        // node's failure: it starts again where the run continues, unless
        // the node may not run twice.
        const e = d.error || {};
        const interrupted = e.code === "WORKFLOW_WORKER_LOST" && e.details && e.details.reason === "shutdown";
        n.errors.push({...e, attempt: d.attempt, interrupted, willRetry: d.willRetry});
        n.state = d.willRetry ? "queued" : "failed";
        if (attempt()) Object.assign(attempt(), {end: t, state: interrupted ? "interrupted" : "failed"});
        break;
      }
      case "run.awaiting_input":
        state.status = "awaiting_input";
        if (n) n.state = "awaiting_input";
        state.awaiting = {nodeId: env.nodeId, ...d};
        break;
      case "run.resumed": state.status = "running"; state.awaiting = null; if (n) n.state = "running"; break;
      case "run.cancel_requested": state.status = "cancelling"; break;
      case "run.cancelled": state.status = "cancelled"; state.awaiting = null; finish(t, "cancelled"); break;
      case "run.completed": state.status = "completed"; state.output = d.output; finish(t, "completed"); break;
      case "run.failed": state.status = "failed"; state.error = d.error; finish(t, "failed"); break;
    }
    return true;
  }

  function finish(t, how) {
    for (const n of state.nodes.values()) {
      if (["running", "queued", "awaiting_input"].includes(n.state)) n.state = how === "completed" ? n.state : "cancelled";
      for (const a of n.attempts) if (a.end == null) { a.end = t; a.state = how === "failed" ? "failed" : "cancelled"; }
    }
  }

  // The page.
  const statusEl = h("span", {id: "run-status", "aria-live": "polite"});
  const conn = h("div", {id: "conn", "aria-live": "assertive"});
  const cancelBtn = h("button", {class: "danger", id: "cancel", onclick: async () => {
    cancelBtn.disabled = true;
    try { await api(base + "/cancel", {method: "POST"}); } catch (err) { conn.append(errorBox(err)); cancelBtn.disabled = false; }
  }}, "Cancel run");
  const dag = h("div", {class: "dag", role: "img", "aria-label": "Graph of the run's nodes"});
  const gantt = h("div", {class: "dag", role: "img", "aria-label": "Timeline of node attempts"});
  const formArea = h("div", {id: "awaiting"});
  const summary = h("div");
  const nodesEl = h("div", {id: "nodes"});
  const logBody = h("tbody");
  const overview = h("section", {id: "tab-overview", role: "tabpanel", "aria-labelledby": "t-overview"}, formArea, summary, h("h2", {}, "Graph"), dag, h("h2", {}, "Timeline"), gantt, h("h2", {}, "Nodes"), nodesEl);
  const logPanel = h("section", {id: "tab-log", role: "tabpanel", "aria-labelledby": "t-log", hidden: true},
    h("div", {class: "table-wrap"}, h("table", {id: "event-log"}, h("thead", {}, h("tr", {}, h("th", {}, "seq"), h("th", {}, "type"), h("th", {}, "node"), h("th", {}, "time"), h("th", {}, "data"))), logBody)));
  const tabBtn = (id, label, panel, other, otherBtn) => h("button", {id, role: "tab", "aria-selected": id === "t-overview" ? "true" : "false", "aria-controls": panel.id, onclick: (e) => {
    panel.hidden = false; other().hidden = true; e.target.setAttribute("aria-selected", "true"); otherBtn().setAttribute("aria-selected", "false");
  }}, label);
  let tOverview, tLog;
  tOverview = tabBtn("t-overview", "Overview", overview, () => logPanel, () => tLog);
  tLog = tabBtn("t-log", "Event log", logPanel, () => overview, () => tOverview);
  clear(main,
    h("h1", {}, "Run ", runId),
    h("p", {}, statusEl, " · workflow ", h("a", {href: "/workflows/" + encodeURIComponent(run.workflowId)}, run.workflowName || run.workflowId),
      " · created " + fmtTime(run.createdAt), " · status at load: ", h("code", {id: "load-status"}, loadStatus)),
    h("div", {class: "row"}, cancelBtn), conn,
    h("div", {class: "tabs", role: "tablist"}, tOverview, tLog), overview, logPanel);

  let scheduled = false;
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; draw(); });
  };
  let formFor = null;

  function draw() {
    clear(statusEl, badge(state.status));
    cancelBtn.hidden = ["completed", "failed", "cancelled"].includes(state.status);
    drawDag();
    drawGantt();
    drawForm();
    clear(summary,
      state.error ? h("div", {class: "error", id: "run-error"}, "Run failed: " + state.error.code + ": " + state.error.message) : null,
      state.status === "completed" ? h("div", {id: "run-output"}, h("h2", {}, "Output"), h("pre", {}, json(state.output))) : null,
      state.artifacts.length ? artifactList(state.artifacts) : null);
    clear(nodesEl, state.order.map((id) => nodeCard(state.nodes.get(id))));
  }

  function artifactList(list) {
    return h("ul", {class: "artifacts"}, list.map((a) => h("li", {}, h("a", {href: base + "/artifacts/" + encodeURIComponent(a.artifactId), download: a.name}, "Download " + a.name), " · " + a.mimeType + " · " + fmtBytes(a.sizeBytes))));
  }

  function nodeCard(n) {
    const p = n.progress;
    return h("section", {class: "card node-card", id: "node-" + n.id, "aria-label": "Node " + n.id},
      h("h3", {}, n.id, " ", h("span", {class: "muted"}, n.type), " ", badge(n.state)),
      p ? h("div", {}, h("div", {class: "muted"}, p.phase + ": " + p.message + (p.percent != null ? " (" + Math.round(p.percent) + "%)" : "")),
        p.percent != null ? h("div", {class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(p.percent), "aria-label": n.id + " progress"}, h("div", {style: "width:" + p.percent + "%"})) : null) : null,
      Object.entries(n.text).map(([ch, text]) => h("div", {}, h("div", {class: "muted"}, "output · " + ch), h("pre", {class: "out", "data-node": n.id, "data-channel": ch}, text))),
      n.earlier.map((e) => h("details", {class: "earlier"}, h("summary", {}, "Output of attempt " + e.attempt),
        Object.entries(e.text).map(([ch, text]) => h("pre", {"data-channel": ch}, text)))),
      [...n.tools.entries()].map(([id, c]) => h("details", {class: "tool"}, h("summary", {}, "Tool " + (c.name || "?") + " · " + c.status),
        h("div", {class: "muted"}, "call " + id), h("div", {}, "input"), h("pre", {}, json(c.input)), c.output !== undefined ? [h("div", {}, "output"), h("pre", {}, json(c.output))] : null)),
      n.errors.map((e) => {
        if (!e.interrupted) return h("div", {class: "error"}, (e.code || "ERROR") + ": " + (e.message || ""));
        const which = e.attempt ? "Attempt " + e.attempt : "An attempt";
        return e.willRetry
          ? h("div", {class: "note"}, which + " was interrupted by a server shutdown; the node starts again.")
          : h("div", {class: "error"}, which + " was interrupted by a server shutdown, and the node may not run again: " + (e.message || ""));
      }),
      n.artifacts.length ? artifactList(n.artifacts) : null,
      n.output !== undefined && !Object.keys(n.text).length ? h("details", {}, h("summary", {}, "Output"), h("pre", {}, json(n.output))) : null);
  }

  function drawForm() {
    const a = state.awaiting;
    if (!a) { if (formFor) { clear(formArea); formFor = null; } return; }
    if (formFor === a.resumeToken) return;
    formFor = a.resumeToken;
    const form = schemaForm(a.formSchema || {type: "object"});
    const out = h("div", {"aria-live": "polite"});
    const submit = async (action) => {
      try {
        const values = form.value();
        await api(base + "/resume", {method: "POST", body: {resumeToken: a.resumeToken, action, values}});
        clear(out, h("p", {class: "muted"}, "Sent “" + action + "”."));
        formArea.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      } catch (err) { clear(out, errorBox(err)); }
    };
    clear(formArea, h("form", {class: "card", id: "resume-form", onsubmit: (e) => e.preventDefault()},
      h("h2", {}, "Input needed at " + (a.nodeId || "the run")), form.el, out,
      h("div", {class: "row"}, (a.actions || []).map((act, i) => h("button", {type: "button", class: i === 0 ? "primary" : "", "data-action": act, onclick: () => submit(act)}, act)))));
  }

  function layers() {
    const depth = new Map();
    const get = (id, seen = new Set()) => {
      if (depth.has(id)) return depth.get(id);
      if (seen.has(id)) return 0;
      seen.add(id);
      const n = state.nodes.get(id);
      const d = n && n.needs.length ? 1 + Math.max(...n.needs.map((x) => state.nodes.has(x) ? get(x, seen) : 0)) : 0;
      depth.set(id, d);
      return d;
    };
    const cols = [];
    for (const id of state.order) (cols[get(id)] ||= []).push(id);
    return cols;
  }

  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    for (const k of kids) el.append(k);
    return el;
  }

  function drawDag() {
    const cols = layers();
    const W = 150, H = 40, GX = 60, GY = 24;
    const pos = new Map();
    cols.forEach((col, x) => col.forEach((id, y) => pos.set(id, {x: 10 + x * (W + GX), y: 10 + y * (H + GY)})));
    const width = 20 + cols.length * (W + GX) - GX, height = 20 + Math.max(1, ...cols.map((c) => c.length)) * (H + GY) - GY;
    const s = svg("svg", {width: Math.max(width, 10), height, viewBox: `0 0 ${Math.max(width, 10)} ${height}`, id: "dag"});
    for (const [id, n] of state.nodes) for (const need of n.needs) {
      const a = pos.get(need), b = pos.get(id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      s.append(svg("path", {class: "edge", d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`}));
      s.append(svg("path", {class: "edge", d: `M${x2 - 6},${y2 - 4} L${x2},${y2} L${x2 - 6},${y2 + 4}`}));
    }
    for (const [id, p] of pos) {
      const n = state.nodes.get(id);
      const g = svg("g", {"data-node": id, "data-state": n.state});
      g.append(svg("title", {}, id + ": " + n.state));
      g.append(svg("rect", {x: p.x, y: p.y, width: W, height: H, rx: 6, class: "n-" + n.state}));
      g.append(svg("text", {x: p.x + 8, y: p.y + 17, class: n.state === "pending" ? "" : "on"}, id.length > 20 ? id.slice(0, 19) + "…" : id));
      g.append(svg("text", {x: p.x + 8, y: p.y + 32, class: n.state === "pending" ? "" : "on"}, n.state.replace("_", " ")));
      s.append(g);
    }
    clear(dag, s);
  }

  function drawGantt() {
    const rows = [];
    for (const id of state.order) for (const a of state.nodes.get(id).attempts) rows.push({id, ...a});
    if (!rows.length) { clear(gantt, h("p", {class: "muted", style: "padding:8px"}, "No attempt started yet.")); return; }
    const t0 = Math.min(...rows.map((r) => r.start));
    const now = Date.now();
    const t1 = Math.max(...rows.map((r) => r.end ?? now), t0 + 1);
    const L = 130, W = 520, RH = 22;
    const s = svg("svg", {width: L + W + 70, height: rows.length * RH + 10, viewBox: `0 0 ${L + W + 70} ${rows.length * RH + 10}`, id: "gantt"});
    rows.forEach((r, i) => {
      const x = L + (r.start - t0) / (t1 - t0) * W;
      const w = Math.max(2, ((r.end ?? now) - r.start) / (t1 - t0) * W);
      s.append(svg("text", {x: 4, y: 5 + i * RH + 14}, r.id + " #" + r.attempt));
      s.append(svg("rect", {x, y: 5 + i * RH + 3, width: w, height: RH - 8, rx: 3, class: "n-" + r.state}));
      s.append(svg("text", {x: Math.min(x + w + 4, L + W + 4), y: 5 + i * RH + 14}, fmtDuration((r.end ?? now) - r.start)));
    });
    clear(gantt, s);
  }

  function logRow(env) {
    logBody.append(h("tr", {}, h("td", {}, String(env.seq)), h("td", {}, env.event), h("td", {}, env.nodeId || ""), h("td", {}, fmtTime(env.timestamp)),
      h("td", {}, h("details", {}, h("summary", {}, "JSON"), h("pre", {}, JSON.stringify(env, null, 2))))));
  }

  // The stream: the browser's EventSource reconnects by itself with
  // Last-Event-ID, and after a sign-in follow resumes it from the last
  // event; apply drops what it already has.
  draw();
  window.runstreamRun = state; // for tests and curious people
  const stream = follow(base + "/stream", {types: EVENTS, on: (type, e) => {
    let env;
    try { env = JSON.parse(e.data); } catch { return; }
    if (apply(env)) { logRow(env); schedule(); }
    if (TERMINAL.has(type)) { stream.close(); clear(conn); schedule(); }
  }, conn});
  const tick = setInterval(() => { if (state.status === "running") schedule(); }, 1000);
  return () => { stream.close(); clearInterval(tick); delete window.runstreamRun; };
}
