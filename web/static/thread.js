// The thread pages: history, subagents, run events, workspace review and
// token usage, live from the thread's stream.
import {h, clear, api, errorBox, badge, fmtTime, fmtBytes, json, recentThreads, follow} from "./util.js";

const TYPES = ["run.start", "run.end", "run.delivery", "run.error", "llm.human.input", "llm.ai.response", "llm.tool.result", "llm.error",
  "context:memory", "subagent.start", "subagent.step", "subagent.end", "workspace_changes"];

export async function threadsPage(main) {
  document.title = "Threads · runstream";
  const input = h("input", {id: "thread-id", required: true, pattern: "[A-Za-z0-9_\\-]{1,64}"});
  clear(main, h("h1", {}, "Threads"),
    h("p", {}, "Agent threads are written by your agents through the ingest API; open one by its id."),
    h("form", {class: "row", onsubmit: (e) => { e.preventDefault(); history.pushState(null, "", "/threads/" + encodeURIComponent(input.value)); dispatchEvent(new PopStateEvent("popstate")); }},
      h("div", {}, h("label", {for: "thread-id"}, "Thread id"), input), h("button", {class: "primary", type: "submit"}, "Open")),
    h("h2", {}, "Opened in this browser"),
    recentThreads().length ? h("ul", {}, recentThreads().map((t) => h("li", {}, h("a", {href: "/threads/" + encodeURIComponent(t)}, t)))) : h("p", {class: "muted"}, "None yet."));
}

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => typeof p === "string" ? p : p && p.text != null ? p.text : JSON.stringify(p)).join("\n");
  return content == null ? "" : JSON.stringify(content, null, 2);
}

function message(row) {
  const c = row.content && typeof row.content === "object" && !Array.isArray(row.content) ? row.content : {content: row.content};
  const kind = c.type === "human" ? "human" : c.type === "ai" ? "ai" : row.event_type === "llm.tool.result" || c.type === "tool" ? "tool" : "ai";
  const who = {human: "Human", ai: "AI", tool: "Tool"}[kind] + (row.metadata && row.metadata.caller ? " · " + row.metadata.caller : "") + " · #" + row.seq + " · " + fmtTime(row.created_at);
  const calls = Array.isArray(c.tool_calls) ? c.tool_calls : [];
  return h("article", {class: "msg " + kind, "data-seq": row.seq},
    h("div", {class: "who"}, who),
    h("div", {class: "text"}, text(c.content)),
    calls.map((tc) => h("details", {}, h("summary", {}, "Tool call " + (tc.name || tc.function?.name || "?")), h("pre", {}, json(tc.args ?? tc.function?.arguments ?? tc)))),
    kind === "tool" && c.tool_call_id ? h("div", {class: "muted"}, "result of " + c.tool_call_id) : null);
}

export async function threadPage(main, threadId) {
  document.title = threadId + " · runstream";
  const tbase = "/api/threads/" + encodeURIComponent(threadId);
  const first = await api(tbase + "/messages/page?limit=20");
  recentThreads(threadId);
  const seen = new Set(); // seqs of the messages shown
  const msgs = h("div", {id: "messages", "aria-live": "polite"});
  let oldest = null, newest = 0;
  const olderBtn = h("button", {id: "load-older", onclick: async () => {
    olderBtn.disabled = true;
    try {
      const page = await api(tbase + "/messages/page?limit=20&before_seq=" + oldest);
      addMessages(page, true);
    } catch (err) { msgs.prepend(errorBox(err)); }
    olderBtn.disabled = false;
  }}, "Load older messages");
  function addMessages(page, older) {
    const rows = page.data.filter((r) => !seen.has(r.seq));
    rows.forEach((r) => { seen.add(r.seq); newest = Math.max(newest, r.seq); });
    if (page.data.length) oldest = Math.min(oldest ?? Infinity, page.data[0].seq);
    if (older) msgs.prepend(...rows.map(message));
    else msgs.append(...rows.map(message));
    if (older || oldest === null || page === first) olderBtn.hidden = !page.has_more;
    if (page.has_more && page.next_before_seq) oldest = page.next_before_seq;
  }

  const conn = h("div", {"aria-live": "assertive"});
  const runSel = h("select", {id: "run-select"});
  const subagents = h("div", {id: "subagents"});
  const typeIn = h("input", {id: "ev-types", placeholder: "e.g. subagent.step,llm.ai.response", list: "ev-type-list"});
  const taskIn = h("input", {id: "ev-task", placeholder: "task id"});
  const evBody = h("div", {id: "run-events"});
  const ws = h("div", {id: "workspace"});
  const usage = h("div", {id: "usage"});

  clear(main, h("h1", {}, "Thread ", threadId), conn,
    h("h2", {}, "Messages"), olderBtn, msgs,
    h("h2", {}, "Run"), h("div", {class: "row"}, h("div", {}, h("label", {for: "run-select"}, "Run of the thread"), runSel)),
    h("h2", {}, "Subagents"), subagents,
    h("h2", {}, "Run events"),
    h("form", {class: "row", id: "ev-filter", onsubmit: (e) => { e.preventDefault(); loadEvents(); }},
      h("div", {}, h("label", {for: "ev-types"}, "Event types"), typeIn), h("datalist", {id: "ev-type-list"}, TYPES.map((t) => h("option", {value: t}))),
      h("div", {}, h("label", {for: "ev-task"}, "Task id"), taskIn), h("button", {type: "submit"}, "Filter")),
    evBody,
    h("h2", {}, "Workspace"), ws,
    h("h2", {}, "Token usage"), usage);
  addMessages(first, false);
  msgs.scrollTop = msgs.scrollHeight;
  if (!first.data.length) msgs.append(h("p", {class: "muted", id: "no-messages"}, "No messages yet."));

  const run = () => runSel.value;
  const runPath = () => tbase + "/runs/" + encodeURIComponent(run());

  async function loadRuns() {
    const runs = await api(tbase + "/runs");
    const keep = run();
    clear(runSel, runs.map((r) => h("option", {value: r.run_id}, r.run_id + " · " + r.status)));
    if (runs.some((r) => r.run_id === keep)) runSel.value = keep;
    else if (runs.length) runSel.value = runs[0].run_id; // the newest
  }

  async function loadSubagents() {
    if (!run()) { clear(subagents, h("p", {class: "muted"}, "No run.")); return; }
    const rows = await api(runPath() + "/events?event_types=subagent.start,subagent.end&limit=2000");
    const tasks = new Map();
    for (const r of rows) {
      const c = r.content || {};
      const t = tasks.get(c.task_id) || {id: c.task_id, description: "", status: "running"};
      if (r.event_type === "subagent.start") t.description = c.description || "";
      else t.status = c.status || "ended";
      tasks.set(c.task_id, t);
    }
    if (!tasks.size) { clear(subagents, h("p", {class: "muted"}, "No subagent in this run.")); return; }
    clear(subagents, h("div", {class: "cards"}, [...tasks.values()].map((t) => {
      const steps = h("div");
      const d = h("details", {class: "card", "data-task": t.id, ontoggle: async () => {
        if (!d.open || steps.dataset.loaded) return;
        steps.dataset.loaded = "1";
        try {
          const rs = await api(runPath() + "/events?event_types=subagent.step&task_id=" + encodeURIComponent(t.id) + "&limit=200");
          clear(steps, rs.length ? h("ol", {}, rs.map((s) => h("li", {}, h("span", {class: "muted"}, (s.content?.kind || "") + (s.content?.tool_name ? " " + s.content.tool_name : "") + " "), text(s.content?.text),
            (s.content?.tool_calls || []).map((tc) => h("details", {}, h("summary", {}, "Tool call " + (tc.name || "?")), h("pre", {}, json(tc.args))))))) : h("p", {class: "muted"}, "No steps."));
        } catch (err) { clear(steps, errorBox(err)); }
      }}, h("summary", {}, h("strong", {}, t.id), " ", badge(t.status === "running" ? "running" : t.status), h("div", {class: "muted"}, t.description)), steps);
      return d;
    })));
  }

  async function loadEvents() {
    if (!run()) { clear(evBody); return; }
    const p = new URLSearchParams({limit: "500"});
    if (typeIn.value.trim()) p.set("event_types", typeIn.value.trim());
    if (taskIn.value.trim()) p.set("task_id", taskIn.value.trim());
    try {
      const rows = await api(runPath() + "/events?" + p);
      clear(evBody, h("div", {class: "table-wrap"}, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "seq"), h("th", {}, "type"), h("th", {}, "category"), h("th", {}, "task"), h("th", {class: "hide-narrow"}, "time"), h("th", {}, "content"))),
        h("tbody", {}, rows.map((r) => h("tr", {"data-type": r.event_type}, h("td", {}, String(r.seq)), h("td", {}, r.event_type), h("td", {}, r.category),
          h("td", {}, r.metadata?.task_id || ""), h("td", {class: "hide-narrow"}, fmtTime(r.created_at)),
          h("td", {}, h("details", {}, h("summary", {}, text(r.content?.text ?? r.content?.content ?? r.content).slice(0, 60) || "…"), h("pre", {}, json(r.content))))))))),
        h("p", {class: "muted"}, rows.length + " events"));
    } catch (err) { clear(evBody, errorBox(err)); }
  }

  async function loadWorkspace() {
    if (!run()) { clear(ws); return; }
    const w = await api(runPath() + "/workspace-changes?include_files=true&include_diff=true");
    if (!w.available) { clear(ws, h("p", {class: "muted"}, "No workspace changes recorded for this run.")); return; }
    const sum = w.summary || {};
    clear(ws, h("p", {class: "muted"}, ["created", "modified", "deleted", "additions", "deletions"].filter((k) => sum[k] != null).map((k) => k + " " + sum[k]).join(" · ")),
      (w.files || []).map((f) => typeof f !== "object" || !f ? null : h("details", {class: "card", style: "margin:6px 0", "data-path": f.path},
        h("summary", {}, h("code", {}, f.path || "?"), " ", h("span", {class: "badge s-" + ({created: "completed", modified: "running", deleted: "failed"}[f.status] || "queued")}, f.status || "changed"),
          " · " + size(f), f.additions != null ? " · +" + f.additions + " −" + (f.deletions ?? 0) : "",
          f.binary ? " · binary" : "", f.sensitive ? " · sensitive" : "", f.symlink ? " · symlink → " + (f.symlink_target_after ?? "") : ""),
        f.diff_unavailable_reason ? h("p", {class: "muted"}, "No diff: " + f.diff_unavailable_reason) : null,
        f.diff_truncated ? h("p", {class: "muted"}, "The diff is truncated.") : null,
        f.diff ? h("pre", {class: "diff"}, String(f.diff).split("\n").map((l) => h("span", {class: l.startsWith("@@") ? "hunk" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : null}, l || " "))) : h("p", {class: "muted"}, "No diff."))));
  }

  function size(f) {
    if (f.size_before == null && f.size_after == null) return fmtBytes(f.size);
    if (f.size_before == null) return fmtBytes(f.size_after);
    if (f.size_after == null) return fmtBytes(f.size_before) + " → deleted";
    return fmtBytes(f.size_before) + " → " + fmtBytes(f.size_after);
  }

  async function loadUsage() {
    const u = await api(tbase + "/token-usage?include_active=true");
    const bars = (title, entries) => {
      const max = Math.max(1, ...entries.map(([, v]) => v));
      return h("div", {}, h("h3", {}, title), h("table", {class: "bars"}, h("tbody", {}, entries.map(([k, v]) => h("tr", {},
        h("th", {scope: "row"}, k), h("td", {}, h("div", {class: "bar", style: "width:" + (v / max * 100) + "%", role: "img", "aria-label": k + ": " + v + " tokens"})), h("td", {}, String(v)))))));
    };
    clear(usage, h("p", {}, u.total_tokens + " tokens (" + u.total_input_tokens + " in, " + u.total_output_tokens + " out) over " + u.total_runs + " runs"),
      bars("By model", Object.entries(u.by_model || {}).map(([k, v]) => [k, v.tokens])),
      bars("By caller", ["lead_agent", "subagent", "middleware"].map((k) => [k, (u.by_caller || {})[k] || 0])));
  }

  const refreshRun = async () => {
    try { await Promise.all([loadSubagents(), loadEvents(), loadWorkspace()]); } catch (err) { conn.append(errorBox(err)); }
  };
  runSel.addEventListener("change", refreshRun);
  await loadRuns();
  await Promise.all([refreshRun(), loadUsage().catch((err) => clear(usage, errorBox(err)))]);

  // Live: the thread stream from the newest message shown; messages are
  // appended once (by seq), other rows refresh the run's sections.
  let timer = null;
  const refreshSoon = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try { await loadRuns(); await refreshRun(); await loadUsage(); } catch (err) { conn.append(errorBox(err)); }
    }, 300);
  };
  window.runstreamThread = {seen, get newest() { return newest; }};
  const onRow = (type, e) => {
    let row;
    try { row = JSON.parse(e.data); } catch { return; }
    if (row.category === "message") {
      if (seen.has(row.seq) || (oldest !== null && row.seq < oldest)) return;
      seen.add(row.seq);
      newest = Math.max(newest, row.seq);
      document.getElementById("no-messages")?.remove();
      const atEnd = msgs.scrollTop + msgs.clientHeight >= msgs.scrollHeight - 40;
      msgs.append(message(row));
      if (atEnd) msgs.scrollTop = msgs.scrollHeight;
    }
    refreshSoon();
  };
  // Opened again (a reconnection, a sign-in), the stream resumes after
  // its last event, and the run's sections load what they missed.
  let opened = false;
  const stream = follow(tbase + "/stream", {types: [...TYPES, "message"], after: newest, on: onRow, conn, onopen: () => {
    if (opened) refreshSoon();
    opened = true;
  }});
  return () => { stream.close(); clearTimeout(timer); delete window.runstreamThread; };
}
