package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/runstream/runstream/contracts"
)

// The DeerFlow deployment the import tests read, written by hand from
// shared/reference/deerflow_behavior.md: its rows (§1.1, §1.2), run rows
// (§3.8) and feedback, stored as DeerFlow's JSONL store (§1.8) and SQL
// schema (§1.7, §1.6) store them.

// dfRow is one run_events row. file, when set, is the JSONL file that
// holds it (DeerFlow's multi-run batch bug, §8.1 #1, puts seeded rows of
// several runs in the first one's file).
type dfRow struct {
	thread, run, user string
	seq               int64
	typ, cat          string
	content           any
	meta              map[string]any
	at                time.Time
	file              string
}

// importSecret is a credential in the source: the import stores it
// redacted, as the ingest would.
var importSecret = "sk-" + strings.Repeat("Zq7", 16)

type dfRun struct {
	thread, run, user, status, model string
	meta, byModel, kwargs            string
	in, out, total, lead, sub        int64
	created, updated                 time.Time
}

type dfFeedback struct {
	id, thread, run, user, comment, tags string
	rating                               int
}

func at(hms string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05.000000", "2026-03-01 "+hms)
	if err != nil {
		panic(err)
	}
	return t
}

func msgContent(typ, text, id string, extra ...any) map[string]any {
	m := map[string]any{"type": typ, "content": text, "id": id}
	if typ == "ai" {
		m["tool_calls"] = []any{}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func lead(extra ...any) map[string]any {
	m := map[string]any{"caller": "lead_agent"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func usage(n int) map[string]any {
	return map[string]any{"input_tokens": n, "output_tokens": n, "total_tokens": 2 * n}
}

// deerflowFixture returns the deployment's rows, run rows and feedback.
// workspace is the metadata of the workspace_changes row.
func deerflowFixture(t *testing.T) ([]dfRow, []dfRun, []dfFeedback) {
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/run_events/workspace_changes.json")
	if err != nil {
		t.Fatal(err)
	}
	var ws struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &ws); err != nil {
		t.Fatal(err)
	}
	seed := func(extra ...any) map[string]any {
		return lead(append([]any{"branch_seed", true, "branch_parent_thread_id", "t1"}, extra...)...)
	}
	const b1, b2 = "branch-seed-t-branch-1", "branch-seed-t-branch-2"
	rows := []dfRow{
		// t1, run r1: a tool call, a middleware title call, the answer.
		{"t1", "r1", "local", 1, "run.start", "trace", map[string]any{"chain": "lead_agent"}, lead(), at("10:00:00.000000"), ""},
		{"t1", "r1", "local", 2, "llm.human.input", "message", msgContent("human", "What is 2+2?", "h1"), lead(), at("10:00:00.100000"), ""},
		{"t1", "r1", "local", 3, "llm.ai.response", "message", msgContent("ai", "", "a1", "tool_calls", []any{map[string]any{"name": "calc", "args": map[string]any{"x": "2+2"}, "id": "call1"}}),
			lead("usage", usage(5), "latency_ms", 120, "llm_call_index", 1), at("10:00:01.000000"), ""},
		{"t1", "r1", "local", 4, "llm.tool.result", "message", msgContent("tool", "4", "tool1", "tool_call_id", "call1", "artifact", "key "+importSecret), map[string]any{}, at("10:00:02.000000"), ""},
		{"t1", "r1", "local", 5, "llm.ai.response", "message", msgContent("ai", "Arithmetic", "m1"),
			map[string]any{"caller": "middleware:title", "usage": map[string]any{}, "latency_ms": nil, "llm_call_index": 2}, at("10:00:03.000000"), ""},
		{"t1", "r1", "local", 6, "llm.ai.response", "message", msgContent("ai", "4", "a2"), lead("usage", usage(10), "latency_ms", 80, "llm_call_index", 3), at("10:00:04.000000"), ""},
		{"t1", "r1", "local", 7, "run.end", "outputs", map[string]any{"messages": []any{"final answer"}}, map[string]any{"status": "success"}, at("10:00:06.000000"), ""},
		// t1, run r2: a subagent task, a legacy ai_message answer, workspace changes.
		{"t1", "r2", "local", 8, "llm.human.input", "message", msgContent("human", "Summarise", "h2"), lead(), at("10:01:00.000000"), ""},
		{"t1", "r2", "local", 9, "subagent.start", "subagent", map[string]any{"task_id": "task-A", "description": "research"}, map[string]any{"task_id": "task-A"}, at("10:01:01.000000"), ""},
		{"t1", "r2", "local", 10, "subagent.step", "subagent", map[string]any{"task_id": "task-A", "message_index": 1, "kind": "ai", "text": "looking", "truncated": false, "tool_calls": []any{}},
			map[string]any{"task_id": "task-A", "message_index": 1}, at("10:01:02.000000"), ""},
		{"t1", "r2", "local", 11, "subagent.end", "subagent", map[string]any{"task_id": "task-A", "status": "completed"}, map[string]any{"task_id": "task-A"}, at("10:01:03.000000"), ""},
		{"t1", "r2", "local", 12, "ai_message", "message", msgContent("ai", "Done: summary", "a3"), map[string]any{"model_name": "gpt-4o", "finish_reason": "stop"}, at("10:01:04.000000"), ""},
		{"t1", "r2", "local", 13, "workspace_changes", "workspace", "1 file changed +1 -0", ws.Metadata, at("10:01:04.500000"), ""},
		// t-branch: two seeded turns, then a live run regenerating the second.
		{"t-branch", b1, "local", 1, "llm.human.input", "message", msgContent("human", "q1", "h1"), seed(), at("11:00:00.000000"), b1},
		{"t-branch", b1, "local", 2, "llm.ai.response", "message", msgContent("ai", "a1", "a1"), seed(), at("11:00:00.000000"), b1},
		{"t-branch", b2, "local", 3, "llm.human.input", "message", msgContent("human", "q2", "h2"), seed(), at("11:00:00.000000"), b1},
		{"t-branch", b2, "local", 4, "llm.ai.response", "message", msgContent("ai", "a2", "a2"), seed(), at("11:00:00.000000"), b1},
		{"t-branch", "live", "local", 5, "llm.human.input", "message", msgContent("human", "q2", "h2"), lead(), at("11:01:00.000000"), ""},
		{"t-branch", "live", "local", 6, "llm.ai.response", "message", msgContent("ai", "a2, again", "a2-new"), lead("usage", usage(3), "latency_ms", 40, "llm_call_index", 1), at("11:01:02.000000"), ""},
		// t-bob: another user's thread.
		{"t-bob", "rb", "bob", 1, "llm.human.input", "message", msgContent("human", "bob's question", "hb"), lead(), at("12:00:00.000000"), ""},
		// t-bad: a thread with a row runstream cannot take (written per source).
		{"t-bad", "rx", "local", 1, "llm.human.input", "message", msgContent("human", "hello", "hx"), lead(), at("13:00:00.000000"), ""},
		{"t-bad", "rx", "local", 3, "llm.ai.response", "message", msgContent("ai", "hi", "ax"), lead("usage", usage(1), "latency_ms", 5, "llm_call_index", 1), at("13:00:01.000000"), ""},
	}
	runs := []dfRun{
		{"t1", "r1", "local", "success", "gpt-4o", `{}`, `{"gpt-4o":{"input_tokens":25,"output_tokens":15,"total_tokens":40}}`, `{"input":{"messages":[]}}`, 25, 15, 40, 40, 0, at("10:00:00.000000"), at("10:00:07.000000")},
		{"t1", "r2", "local", "success", "gpt-4o", `{}`, `{}`, `{"config":{"note":"key ` + importSecret + `"}}`, 60, 40, 100, 80, 20, at("10:01:00.000000"), at("10:01:05.000000")},
		{"t-branch", b1, "local", "success", "gpt-4o", `{}`, `{}`, `{}`, 0, 0, 0, 0, 0, at("11:00:00.000000"), at("11:00:00.000000")},
		{"t-branch", b2, "local", "success", "gpt-4o", `{}`, `{}`, `{}`, 0, 0, 0, 0, 0, at("11:00:00.000000"), at("11:00:00.000000")},
		{"t-branch", "live", "local", "success", "gpt-4o", `{"regenerate_from_run_id":"` + b2 + `"}`, `{}`, `{}`, 3, 3, 6, 6, 0, at("11:01:00.000000"), at("11:01:03.000000")},
		{"t-bob", "rb", "bob", "success", "gpt-4o", `{}`, `{}`, `{}`, 0, 0, 0, 0, 0, at("12:00:00.000000"), at("12:00:01.000000")},
		{"t-bad", "rx", "local", "success", "gpt-4o", `{}`, `{}`, `{}`, 0, 0, 0, 0, 0, at("13:00:00.000000"), at("13:00:02.000000")},
	}
	feedback := []dfFeedback{
		{"fb-1", "t1", "r1", "local", "wrong", `["incorrect"]`, -1},
		{"fb-2", "t1", "r2", "local", "good", ``, 1},
	}
	return rows, runs, feedback
}

// writeJSONL writes rows as DeerFlow's JSONL store under dir, with a line
// that is not a record in t-bad (between its seqs 1 and 3).
func writeJSONL(t *testing.T, dir string, rows []dfRow) {
	t.Helper()
	files := map[string]*strings.Builder{}
	var order []string
	for _, r := range rows {
		file := r.file
		if file == "" {
			file = r.run
		}
		path := filepath.Join(dir, "threads", r.thread, "runs", file+".jsonl")
		if files[path] == nil {
			files[path] = &strings.Builder{}
			order = append(order, path)
		}
		line, err := json.Marshal(struct {
			ThreadID  string         `json:"thread_id"`
			RunID     string         `json:"run_id"`
			EventType string         `json:"event_type"`
			Category  string         `json:"category"`
			Content   any            `json:"content"`
			Metadata  map[string]any `json:"metadata"`
			Seq       int64          `json:"seq"`
			CreatedAt string         `json:"created_at"`
		}{r.thread, r.run, r.typ, r.cat, r.content, r.meta, r.seq, r.at.Format("2006-01-02T15:04:05.000000-07:00")})
		if err != nil {
			t.Fatal(err)
		}
		files[path].Write(line)
		files[path].WriteString("\n")
		if r.thread == "t-bad" && r.seq == 1 {
			files[path].WriteString(`{"thread_id":"t-bad","run_id":"rx","seq":2,` + "\n") // a torn line
		}
	}
	for _, path := range order {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(files[path].String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// deerflowDDL is DeerFlow's schema (§1.7 and its ORM models), for SQLite
// and PostgreSQL.
func deerflowDDL(pg bool) []string {
	id, ts, js := "INTEGER PRIMARY KEY AUTOINCREMENT", "DATETIME", "JSON"
	if pg {
		id, ts, js = "SERIAL PRIMARY KEY", "TIMESTAMP WITH TIME ZONE", "JSON"
	}
	return []string{
		`CREATE TABLE run_events (id ` + id + `, thread_id VARCHAR(64) NOT NULL, run_id VARCHAR(64) NOT NULL,
			user_id VARCHAR(64), event_type VARCHAR(32) NOT NULL, category VARCHAR(16) NOT NULL, content TEXT NOT NULL DEFAULT '',
			event_metadata ` + js + ` NOT NULL, seq INTEGER NOT NULL, created_at ` + ts + ` NOT NULL,
			CONSTRAINT uq_events_thread_seq UNIQUE (thread_id, seq))`,
		`CREATE TABLE runs (run_id VARCHAR(64) PRIMARY KEY, thread_id VARCHAR(64) NOT NULL, assistant_id VARCHAR(128),
			user_id VARCHAR(64), status VARCHAR(20), model_name VARCHAR(128), multitask_strategy VARCHAR(20),
			metadata_json ` + js + `, kwargs_json ` + js + `, error TEXT, stop_reason VARCHAR(50), message_count INTEGER,
			first_human_message TEXT, last_ai_message TEXT, total_input_tokens INTEGER, total_output_tokens INTEGER,
			total_tokens INTEGER, llm_call_count INTEGER, lead_agent_tokens INTEGER, subagent_tokens INTEGER,
			middleware_tokens INTEGER, token_usage_by_model ` + js + `, follow_up_to_run_id VARCHAR(64),
			created_at ` + ts + `, updated_at ` + ts + `)`,
		`CREATE TABLE feedback (feedback_id VARCHAR(64) PRIMARY KEY, run_id VARCHAR(64) NOT NULL, thread_id VARCHAR(64) NOT NULL,
			user_id VARCHAR(64), message_id VARCHAR(64), rating INTEGER NOT NULL, comment TEXT, tags ` + js + `,
			created_at ` + ts + `, CONSTRAINT uq_feedback_thread_run_user UNIQUE (thread_id, run_id, user_id))`,
	}
}

// writeSQL creates DeerFlow's tables in db and fills them as its SQL
// stores write (§1.6): string content verbatim, other content as JSON
// text with content_is_json (and content_is_dict for objects); SQLite
// timestamps as naive UTC text. With events false only runs and feedback
// are written (a deployment whose run events are in JSONL files). Row 1
// of t1 has no user_id (a write without a user context): it belongs to
// its run row's owner. t-bad's seq 2 is an event type runstream does not
// know (ai_tool_call, of DeerFlow's old journal).
func writeSQL(t *testing.T, db *sql.DB, pg, events bool, rows []dfRow, runs []dfRun, feedback []dfFeedback) {
	t.Helper()
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if pg {
			n := 0
			q = rewrite(q, func() string { n++; return fmt.Sprintf("$%d", n) })
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	stamp := func(ts time.Time) any {
		if pg {
			return ts
		}
		return ts.UTC().Format("2006-01-02 15:04:05.000000")
	}
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	for _, q := range deerflowDDL(pg) {
		exec(q)
	}
	if events {
		for _, r := range rows {
			content, meta := encodeContent(t, r.content, r.meta)
			user := r.user
			if r.thread == "t1" && r.seq == 1 {
				user = ""
			}
			exec(`INSERT INTO run_events (thread_id, run_id, user_id, event_type, category, content, event_metadata, seq, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.thread, r.run, null(user), r.typ, r.cat, content, meta, r.seq, stamp(r.at))
		}
		exec(`INSERT INTO run_events (thread_id, run_id, user_id, event_type, category, content, event_metadata, seq, created_at)
			VALUES ('t-bad', 'rx', 'local', 'ai_tool_call', 'message', '{"type":"ai"}', '{"content_is_json":true}', 2, ?)`, stamp(at("13:00:00.500000")))
	}
	for _, r := range runs {
		exec(`INSERT INTO runs (run_id, thread_id, assistant_id, user_id, status, model_name, multitask_strategy, metadata_json, kwargs_json,
			message_count, first_human_message, last_ai_message, total_input_tokens, total_output_tokens, total_tokens, llm_call_count,
			lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, created_at, updated_at)
			VALUES (?, ?, 'lead_agent', ?, ?, ?, 'reject', ?, ?, 2, NULL, NULL, ?, ?, ?, 1, ?, ?, 0, ?, ?, ?)`,
			r.run, r.thread, r.user, r.status, r.model, r.meta, r.kwargs, r.in, r.out, r.total, r.lead, r.sub, r.byModel, stamp(r.created), stamp(r.updated))
	}
	for i, f := range feedback {
		exec(`INSERT INTO feedback (feedback_id, run_id, thread_id, user_id, message_id, rating, comment, tags, created_at)
			VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?)`, f.id, f.run, f.thread, f.user, f.rating, f.comment, null(f.tags), stamp(at("10:02:00.000000").Add(time.Duration(i)*time.Minute)))
	}
}

// rewrite replaces each ? of q with next().
func rewrite(q string, next func() string) string {
	var b strings.Builder
	for _, c := range q {
		if c == '?' {
			b.WriteString(next())
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// encodeContent stores content as DeerFlow's SQL store does.
func encodeContent(t *testing.T, content any, meta map[string]any) (string, string) {
	t.Helper()
	m := map[string]any{}
	for k, v := range meta {
		m[k] = v
	}
	text, ok := content.(string)
	if !ok {
		raw, err := json.Marshal(content)
		if err != nil {
			t.Fatal(err)
		}
		text = string(raw)
		m["content_is_json"] = true
		if _, isDict := content.(map[string]any); isDict {
			m["content_is_dict"] = true
		}
	}
	rawMeta, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return text, string(rawMeta)
}

func openSQLiteFixture(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// importVariant is one DeerFlow deployment and the runstream store it is
// imported into.
type importVariant struct {
	name string
	// from are the --from values; badLoc is where the refused row of t-bad
	// is; store the serve/import flags of the target.
	from   []string
	badLoc string
	store  []string
	// rewriteT1 changes a row of t1 in the source, for the conflict check;
	// grow adds seq 7 to t-branch (DeerFlow went on writing).
	rewriteT1, grow func(t *testing.T)
}

// grownRow is the row grow adds.
var grownRow = dfRow{"t-branch", "live", "local", 7, "llm.human.input", "message", msgContent("human", "q3", "h3"), lead(), at("11:02:00.000000"), ""}

// sqlGrow inserts grownRow into a DeerFlow database (events: into
// run_events too) and moves the updated_at of its run on.
func sqlGrow(db *sql.DB, pg, events bool) func(t *testing.T) {
	return func(t *testing.T) {
		update := `UPDATE runs SET updated_at = ?, message_count = 3 WHERE run_id = 'live'`
		var updated any = at("11:02:01.000000").Format("2006-01-02 15:04:05.000000")
		if pg {
			update, updated = strings.Replace(update, "?", "$1", 1), at("11:02:01.000000")
		}
		if _, err := db.Exec(update, updated); err != nil {
			t.Fatal(err)
		}
		if !events {
			return
		}
		content, meta := encodeContent(t, grownRow.content, grownRow.meta)
		q := `INSERT INTO run_events (thread_id, run_id, user_id, event_type, category, content, event_metadata, seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
		var created any = grownRow.at.Format("2006-01-02 15:04:05.000000")
		if pg {
			n := 0
			q = rewrite(q, func() string { n++; return fmt.Sprintf("$%d", n) })
			created = grownRow.at
		}
		r := grownRow
		if _, err := db.Exec(q, r.thread, r.run, r.user, r.typ, r.cat, content, meta, r.seq, created); err != nil {
			t.Fatal(err)
		}
	}
}

func importVariants(t *testing.T) []importVariant {
	rows, runs, feedback := deerflowFixture(t)
	var out []importVariant

	// JSONL run events, run rows and feedback in SQLite; runstream's run
	// events in JSONL too.
	jdir := t.TempDir()
	dir := jdir
	writeJSONL(t, filepath.Join(dir, "deer-flow"), rows)
	runsDB := openSQLiteFixture(t, filepath.Join(dir, "deerflow-runs.db"))
	writeSQL(t, runsDB, false, false, rows, runs, feedback)
	out = append(out, importVariant{
		name:   "jsonl",
		from:   []string{filepath.Join(dir, "deer-flow"), filepath.Join(dir, "deerflow-runs.db")},
		badLoc: "threads/t-bad/runs/rx.jsonl:2",
		store:  []string{"--store", "sqlite:" + filepath.Join(dir, "rs.db"), "--run-events", "jsonl:" + filepath.Join(dir, "rs-events")},
		rewriteT1: func(t *testing.T) {
			path := filepath.Join(jdir, "deer-flow", "threads", "t1", "runs", "r1.jsonl")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(data), "What is 2+2?", "What is 3+3?", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		grow: func(t *testing.T) {
			sqlGrow(runsDB, false, false)(t)
			grown := filepath.Join(t.TempDir(), "grown")
			writeJSONL(t, grown, []dfRow{grownRow})
			line, err := os.ReadFile(filepath.Join(grown, "threads", "t-branch", "runs", "live.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(filepath.Join(jdir, "deer-flow", "threads", "t-branch", "runs", "live.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(line); err != nil {
				t.Fatal(err)
			}
		},
	})

	// Everything in DeerFlow's SQLite database.
	dir = t.TempDir()
	dbPath := filepath.Join(dir, "deerflow.db")
	db := openSQLiteFixture(t, dbPath)
	writeSQL(t, db, false, true, rows, runs, feedback)
	out = append(out, importVariant{
		name:   "sqlite",
		from:   []string{dbPath},
		badLoc: "run_events id=" + fmt.Sprint(len(rows)+1),
		store:  []string{"--store", "sqlite:" + filepath.Join(dir, "rs.db")},
		rewriteT1: func(t *testing.T) {
			if _, err := db.Exec(`UPDATE run_events SET content = replace(content, '2+2', '3+3') WHERE thread_id = 't1' AND seq = 2`); err != nil {
				t.Fatal(err)
			}
		},
		grow: sqlGrow(db, false, true),
	})

	// Everything in DeerFlow's PostgreSQL database, imported into
	// runstream on PostgreSQL.
	pgURL := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if pgURL == "" {
		t.Log("RUNSTREAM_TEST_POSTGRES_URL is not set: the PostgreSQL variants of the import test are skipped")
		return out
	}
	stamp := time.Now().UnixNano()
	source, target := fmt.Sprintf("df_import_src_%d", stamp), fmt.Sprintf("rs_import_dst_%d", stamp)
	t.Cleanup(func() { dropSchema(t, pgURL, source); dropSchema(t, pgURL, target) })
	admin, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec("CREATE SCHEMA " + source); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", source)
	u.RawQuery = q.Encode()
	pg, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	pg.SetMaxOpenConns(1)
	writeSQL(t, pg, true, true, rows, runs, feedback)
	out = append(out, importVariant{
		name:   "postgres",
		from:   []string{u.String()},
		badLoc: "run_events id=" + fmt.Sprint(len(rows)+1),
		store:  []string{"--store", pgURL, "--postgres-schema", target},
		rewriteT1: func(t *testing.T) {
			if _, err := pg.Exec(`UPDATE run_events SET content = replace(content, '2+2', '3+3') WHERE thread_id = 't1' AND seq = 2`); err != nil {
				t.Fatal(err)
			}
		},
		grow: sqlGrow(pg, true, true),
	})
	return out
}

// runImport runs "runstream import deerflow" and returns its error and
// stderr.
func runImport(t *testing.T, v importVariant, extra ...string) (error, string) {
	t.Helper()
	args := []string{"import", "deerflow"}
	for _, f := range v.from {
		args = append(args, "--from", f)
	}
	args = append(append(args, v.store...), extra...)
	var stdout, stderr syncBuffer
	err := (&Main{Getenv: func(string) string { return "" }}).Run(context.Background(), args, &stdout, &stderr)
	return err, stderr.String()
}

// TestImportDeerFlow imports the fixture deployment from each of its
// forms, then reads every page and projection over HTTP from serve on the
// target store and compares them with what the reference describes for
// the same rows; a second import adds nothing; a changed source row is a
// conflict; the row runstream cannot take is reported with its location.
func TestImportDeerFlow(t *testing.T) {
	t.Parallel()
	for _, v := range importVariants(t) {
		t.Run(v.name, func(t *testing.T) {
			err, stderr := runImport(t, v, "--progress-every", "5")
			if err == nil || exitCode(err) != 1 {
				t.Fatalf("first import: %v, want exit status 1 for t-bad's row\n%s", err, stderr)
			}
			for _, want := range []string{
				"deerflow import: " + v.badLoc + ": ",
				"deerflow import: thread t-bad: not imported",
				"threads: 3 imported, 0 extended, 0 unchanged, 1 left out",
				"runs: 7 imported, 0 updated, 0 unchanged; feedback: 2 imported, 0 unchanged; 0 conflicts",
				"deerflow import: 23 rows read, 20 imported, 3 threads imported, 0 unchanged", // progress, its last line
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("first import: stderr lacks %q:\n%s", want, stderr)
				}
			}

			// Idempotent: the second import adds nothing.
			err, stderr = runImport(t, v)
			if err == nil || !strings.Contains(stderr, "threads: 0 imported, 0 extended, 3 unchanged, 1 left out; rows: 23 read, 0 imported; runs: 0 imported, 0 updated, 7 unchanged; feedback: 0 imported, 2 unchanged; 0 conflicts, 2 problems") {
				t.Errorf("second import: %v\n%s", err, stderr)
			}

			dataDir := t.TempDir()
			p := runServe(t, nil, append(v.store, "--data-dir", dataDir)...)
			checkImportedReads(t, p.base)
			if err := p.stop(); err != nil {
				t.Fatal(err)
			}

			// A source row that changed since is a conflict, reported; the
			// thread is left as it is.
			v.rewriteT1(t)
			err, stderr = runImport(t, v)
			if err == nil || !strings.Contains(stderr, "deerflow import: thread t1: conflict: runstream holds 14 rows of this thread, the source 13, first different at seq 2") ||
				!strings.Contains(stderr, "1 conflicts") {
				t.Errorf("import of a changed row: %v\n%s", err, stderr)
			}

			// Rows DeerFlow wrote since, after those imported, are
			// imported: the thread is extended.
			v.grow(t)
			err, stderr = runImport(t, v)
			if !strings.Contains(stderr, "threads: 0 imported, 1 extended, 1 unchanged, 1 left out; rows: 24 read, 1 imported; runs: 0 imported, 1 updated, 6 unchanged") {
				t.Errorf("import of a grown thread: %v\n%s", err, stderr)
			}

			// --skip-bad-rows imports t-bad without its bad row.
			err, stderr = runImport(t, v, "--skip-bad-rows")
			if !strings.Contains(stderr, "threads: 1 imported, 0 extended, 2 unchanged, 0 left out") {
				t.Errorf("import with --skip-bad-rows: %v\n%s", err, stderr)
			}
			p = runServe(t, nil, append(v.store, "--data-dir", dataDir)...)
			page := getPage(t, p.base+"/api/threads/t-bad/messages/page")
			if got := pageSeqs(page); fmt.Sprint(got) != "[1 3]" {
				t.Errorf("t-bad after --skip-bad-rows: seqs %v, want [1 3]", got)
			}
			page = getPage(t, p.base+"/api/threads/t-branch/runs/live/messages")
			if got := pageSeqs(page); fmt.Sprint(got) != "[5 6 7]" || path(page.Data[2], "content", "id") != "h3" {
				t.Errorf("t-branch's live run after its growth: seqs %v, want [5 6 7]", got)
			}
			if _, body, _ := get(t, p.base+"/api/threads/t-branch/runs/live"); !strings.Contains(body, `"message_count":3`) || !strings.Contains(body, `"updated_at":"2026-03-01T11:02:01`) {
				t.Errorf("t-branch's live run row after its growth: %s", body)
			}
		})
	}
}

// importedPage is a page of /messages/page or of run messages.
type importedPage struct {
	Data          []map[string]any `json:"data"`
	HasMore       bool             `json:"has_more"`
	NextBeforeSeq *float64         `json:"next_before_seq"`
}

func getPage(t *testing.T, url string) importedPage {
	t.Helper()
	code, body, _ := get(t, url)
	if code != 200 {
		t.Fatalf("GET %s = %d %s", url, code, body)
	}
	var p importedPage
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return p
}

func pageSeqs(p importedPage) []int {
	return rowSeqs(p.Data)
}

func rowSeqs(rows []map[string]any) []int {
	out := []int{}
	for _, r := range rows {
		out = append(out, int(r["seq"].(float64)))
	}
	return out
}

// path reads a value of a decoded JSON document by keys.
func path(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// checkImportedReads reads the imported fixture over HTTP as the local
// user and compares with the reference's answers for the same rows.
func checkImportedReads(t *testing.T, base string) {
	t.Helper()
	// §2.2: the page hides the middleware AI row (seq 5); the run's last
	// visible AI row carries its feedback, ai_message included; each
	// run's last AI row in the page gets turn_duration (§2.10: 7 s, 5 s).
	page := getPage(t, base+"/api/threads/t1/messages/page?limit=50")
	if got := pageSeqs(page); fmt.Sprint(got) != "[2 3 4 6 8 12]" || page.HasMore || page.NextBeforeSeq != nil {
		t.Errorf("t1 page: seqs %v has_more %v next %v, want [2 3 4 6 8 12] false null", got, page.HasMore, page.NextBeforeSeq)
	}
	for _, r := range page.Data {
		seq := int(r["seq"].(float64))
		fb, _ := r["feedback"].(map[string]any)
		switch seq {
		case 6:
			if fb["feedback_id"] != "fb-1" || fb["rating"] != -1.0 || fb["comment"] != "wrong" || fmt.Sprint(fb["tags"]) != "[incorrect]" {
				t.Errorf("seq 6 feedback %v, want fb-1, rating -1, comment wrong, tags [incorrect]", r["feedback"])
			}
			if d := path(r, "content", "additional_kwargs", "turn_duration"); d != 7.0 {
				t.Errorf("seq 6 turn_duration %v, want 7", d)
			}
			if path(r, "metadata", "latency_ms") != 80.0 || path(r, "metadata", "content_is_json") != nil {
				t.Errorf("seq 6 metadata %v, want the journal's, without DeerFlow's SQL markers", r["metadata"])
			}
		case 12:
			if fb["feedback_id"] != "fb-2" || fb["rating"] != 1.0 || fb["comment"] != "good" {
				t.Errorf("seq 12 feedback %v, want fb-2, rating 1, comment good", r["feedback"])
			}
			if r["event_type"] != "ai_message" || path(r, "metadata", "finish_reason") != "stop" {
				t.Errorf("seq 12 = %v, want the legacy ai_message row as written", r)
			}
			if d := path(r, "content", "additional_kwargs", "turn_duration"); d != 5.0 {
				t.Errorf("seq 12 turn_duration %v, want 5", d)
			}
		default:
			if r["feedback"] != nil {
				t.Errorf("seq %d feedback %v, want null", seq, r["feedback"])
			}
		}
		if seq == 2 && (r["created_at"] != "2026-03-01T10:00:00.100000+00:00" || path(r, "content", "content") != "What is 2+2?" || r["user_id"] != "local") {
			t.Errorf("seq 2 = %v, want its content, created_at and owner kept", r)
		}
	}
	page = getPage(t, base+"/api/threads/t1/messages/page?limit=2")
	if got := pageSeqs(page); fmt.Sprint(got) != "[8 12]" || !page.HasMore || page.NextBeforeSeq == nil || *page.NextBeforeSeq != 8 {
		t.Errorf("t1 page of 2: seqs %v has_more %v next %v, want [8 12] true 8", got, page.HasMore, page.NextBeforeSeq)
	}
	page = getPage(t, base+"/api/threads/t1/messages/page?limit=50&before_seq=8")
	if got := pageSeqs(page); fmt.Sprint(got) != "[2 3 4 6]" || page.HasMore {
		t.Errorf("t1 page before 8: seqs %v has_more %v, want [2 3 4 6] false", got, page.HasMore)
	}

	// §2.1: the legacy feed keeps the middleware AI row.
	code, body, _ := get(t, base+"/api/threads/t1/messages?limit=50")
	var feed []map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &feed) != nil || fmt.Sprint(rowSeqs(feed)) != "[2 3 4 5 6 8 12]" {
		t.Errorf("t1 /messages = %d %s, want seqs [2 3 4 5 6 8 12]", code, body)
	}

	// §2.3: a run's message rows, nothing filtered.
	page = getPage(t, base+"/api/threads/t1/runs/r1/messages")
	if got := pageSeqs(page); fmt.Sprint(got) != "[2 3 4 5 6]" || page.HasMore {
		t.Errorf("r1 messages: seqs %v has_more %v, want [2 3 4 5 6] false", got, page.HasMore)
	}

	// §2.5: a run's events of every category; a subagent task's steps.
	code, body, _ = get(t, base+"/api/threads/t1/runs/r1/events")
	var events []map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &events) != nil || fmt.Sprint(rowSeqs(events)) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("r1 events = %d %s", code, body)
	}
	if path(events[0], "content", "chain") != "lead_agent" || events[0]["created_at"] != "2026-03-01T10:00:00.000000+00:00" || events[0]["user_id"] != "local" {
		t.Errorf("run.start = %v, want its content, created_at and its run's owner (SQL: user_id NULL)", events[0])
	}
	if fmt.Sprint(path(events[6], "content", "messages")) != "[final answer]" {
		t.Errorf("run.end = %v", events[6])
	}
	code, body, _ = get(t, base+"/api/threads/t1/runs/r2/events?event_types=subagent.step&task_id=task-A")
	if code != 200 || json.Unmarshal([]byte(body), &events) != nil || fmt.Sprint(rowSeqs(events)) != "[10]" {
		t.Errorf("task-A steps = %d %s, want seq 10", code, body)
	}

	// §2.6: the run's workspace changes.
	code, body, _ = get(t, base+"/api/threads/t1/runs/r2/workspace-changes")
	var ws map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &ws) != nil || ws["available"] != true || path(ws, "summary", "created") != 1.0 {
		t.Errorf("workspace changes = %d %s", code, body)
	}

	// §2.7: token usage from the run rows.
	code, body, _ = get(t, base+"/api/threads/t1/token-usage")
	var usage map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &usage) != nil {
		t.Fatalf("token usage = %d %s", code, body)
	}
	if usage["total_tokens"] != 140.0 || usage["total_input_tokens"] != 85.0 || usage["total_output_tokens"] != 55.0 || usage["total_runs"] != 2.0 ||
		path(usage, "by_model", "gpt-4o", "tokens") != 140.0 || path(usage, "by_model", "gpt-4o", "runs") != 2.0 ||
		path(usage, "by_caller", "lead_agent") != 120.0 || path(usage, "by_caller", "subagent") != 20.0 || path(usage, "by_caller", "middleware") != 0.0 {
		t.Errorf("token usage = %s", body)
	}

	// The run row keeps its id, owner's view, times and fields.
	code, body, _ = get(t, base+"/api/threads/t1/runs/r1")
	var run map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &run) != nil || !strings.HasPrefix(fmt.Sprint(run["created_at"]), "2026-03-01T10:00:00") ||
		!strings.HasPrefix(fmt.Sprint(run["updated_at"]), "2026-03-01T10:00:07") || run["assistant_id"] != "lead_agent" || run["status"] != "success" ||
		run["multitask_strategy"] != "reject" || run["message_count"] != 2.0 || path(run, "kwargs", "input") == nil {
		t.Errorf("run r1 = %d %s", code, body)
	}

	// §2.4: the stateless run messages.
	page = getPage(t, base+"/api/runs/r1/messages?limit=2")
	if got := pageSeqs(page); fmt.Sprint(got) != "[5 6]" || !page.HasMore {
		t.Errorf("/api/runs/r1/messages?limit=2: seqs %v has_more %v, want [5 6] true", got, page.HasMore)
	}

	// Secrets in the source are redacted, in rows as in run rows.
	for _, u := range []string{"/api/threads/t1/runs/r2", "/api/threads/t1/runs/r1/messages", "/api/threads/t1/messages/page"} {
		if _, body, _ := get(t, base+u); strings.Contains(body, importSecret) || !strings.Contains(body, "key ") {
			t.Errorf("GET %s holds the source's secret, or lost its text: %s", u, body)
		}
	}

	// Feedback of the run.
	code, body, _ = get(t, base+"/api/runs/r2/feedback")
	if code != 200 || !strings.Contains(body, `"feedback_id":"fb-2"`) || !strings.Contains(body, `"comment":"good"`) || !strings.Contains(body, `"created_at":"2026-03-01T10:03:00`) {
		t.Errorf("r2 feedback = %d %s, want fb-2 of 10:03", code, body)
	}

	// §2.2 branch-seed regression (#4458): the live run supersedes the
	// second seeded turn only.
	page = getPage(t, base+"/api/threads/t-branch/messages/page")
	var ids []string
	for _, r := range page.Data {
		ids = append(ids, fmt.Sprint(path(r, "content", "id")))
	}
	if fmt.Sprint(ids) != "[h1 a1 h2 a2-new]" {
		t.Errorf("t-branch page ids %v, want [h1 a1 h2 a2-new]", ids)
	}
	// The seeded rows of run 2, in run 1's JSONL file at the source, are
	// run 2's.
	page = getPage(t, base+"/api/threads/t-branch/runs/branch-seed-t-branch-2/messages")
	if got := pageSeqs(page); fmt.Sprint(got) != "[3 4]" {
		t.Errorf("seeded run 2 messages: seqs %v, want [3 4]", got)
	}

	// Bob's thread is not the local user's: it reads as an empty one.
	code, body, _ = get(t, base+"/api/threads/t-bob/messages/page")
	if code != 200 || body != `{"data":[],"has_more":false,"next_before_seq":null}`+"\n" {
		t.Errorf("bob's thread as local = %d %q", code, body)
	}
	// t-bad was left out.
	if got := pageSeqs(getPage(t, base+"/api/threads/t-bad/messages/page")); len(got) != 0 {
		t.Errorf("t-bad page seqs %v, want none", got)
	}

	// New writes continue after the imported seqs.
	code, out := postJSON(t, base+"/api/threads/t1/runs/r3/events",
		`{"events":[{"event_type":"llm.human.input","content":{"type":"human","content":"next"},"metadata":{"caller":"lead_agent"}}]}`)
	if code != 201 || fmt.Sprint(path(out, "events")) == "" || !strings.Contains(fmt.Sprint(out), "seq:14") {
		t.Errorf("append after the import = %d %v, want seq 14", code, out)
	}
}
