package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
	"github.com/runstream/runstream/workflow"
)

// stores are the two stores of one backend, and how to simulate a crash
// and restart: close them and open new ones over the same data (nil for
// memory, which keeps nothing).
type stores struct {
	events    runevents.Store
	workflows workflow.Store
	close     func() error
	reopen    func() (stores, error)
}

type backend struct {
	name string
	open func(t *testing.T) stores
}

var backends = []backend{
	{"memory", func(*testing.T) stores {
		e, w := memory.NewRunEventStore(), memory.NewWorkflowStore()
		return stores{events: e, workflows: w, close: func() error { e.Close(); return w.Close() }}
	}},
	{"sqlite", func(t *testing.T) stores {
		st, err := openSQLite(filepath.Join(t.TempDir(), "runstream.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"postgres", func(t *testing.T) stores {
		url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
		}
		schema := fmt.Sprintf("rs_lifecycle_%d", time.Now().UnixNano())
		t.Cleanup(func() { dropSchema(t, url, schema) })
		st, err := openPostgres(url, schema)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

func openSQLite(path string) (stores, error) {
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Synchronous: "NORMAL"})
	if err != nil {
		return stores{}, err
	}
	return stores{events: db.RunEvents(), workflows: db.Workflows(), close: db.Close,
		reopen: func() (stores, error) { return openSQLite(path) }}, nil
}

func openPostgres(url, schema string) (stores, error) {
	db, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		return stores{}, err
	}
	return stores{events: db.RunEvents(), workflows: db.Workflows(), close: func() error { db.Close(); return nil },
		reopen: func() (stores, error) { return openPostgres(url, schema) }}, nil
}

func dropSchema(t *testing.T, url, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// TestLifecycle runs rapid's checks (100 by default; -rapid.checks=N for
// more) per backend. Each check uses a thread and a workflow run of its
// own in the backend's one store, which crashes carry over.
func TestLifecycle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			cur := b.open(t)
			t.Cleanup(func() { cur.close() })
			rapid.Check(t, func(rt *rapid.T) {
				m := newMachine(rt, &cur)
				rt.Repeat(m.actions())
			})
		})
	}
}

var lastID atomic.Int64

func newID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), lastID.Add(1))
}

// keyed is an idempotent append the model remembers: its body and the
// response it got.
type keyed struct {
	body     []runevents.NewEvent
	hash     []byte
	response string
}

// machine drives the stores and keeps the reference model.
type machine struct {
	st  *stores
	ctx context.Context

	// The model of the thread: the content of each row, seq = index+1.
	thread   string
	rows     []string
	keys     map[string]keyed
	keyNames []string
	counter  int

	// The model of the workflow run.
	runID   string
	status  workflow.RunStatus
	events  []workflow.EventType // seq = index+1
	pending string               // the secret of the pending resume token
	used    []string
}

func newMachine(rt *rapid.T, st *stores) *machine {
	m := &machine{st: st, ctx: context.Background(), thread: newID("t"), keys: map[string]keyed{}}
	w := workflow.Workflow{ID: newID("wf"), OwnerID: "alice", Name: "lifecycle"}
	v := workflow.Version{ID: newID("wv"), Definition: json.RawMessage(`{"name":"lifecycle","nodes":[{"id":"ask","type":"human_input"}]}`)}
	if _, _, err := st.workflows.CreateWorkflow(m.ctx, w, v); err != nil {
		rt.Fatalf("CreateWorkflow: %v", err)
	}
	run, _, err := st.workflows.CreateRun(m.ctx, workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice",
		Input: json.RawMessage(`{}`)}, []workflow.NewEvent{ev(workflow.EventRunCreated, "", `{"version":1}`), ev(workflow.EventRunQueued, "", `{"queue":"default"}`)})
	if err != nil {
		rt.Fatalf("CreateRun: %v", err)
	}
	m.runID, m.status = run.ID, workflow.StatusQueued
	m.events = []workflow.EventType{workflow.EventRunCreated, workflow.EventRunQueued}
	m.appendRun(rt, nil, ev(workflow.EventRunStarted, "", ""))
	return m
}

func ev(typ workflow.EventType, node, data string) workflow.NewEvent {
	e := workflow.NewEvent{Event: typ}
	if node != "" {
		e.NodeID, e.NodeRunID = node, node+"-r1"
	}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func (m *machine) batch(n int) []runevents.NewEvent {
	out := make([]runevents.NewEvent, n)
	for i := range out {
		m.counter++
		out[i] = runevents.NewEvent{ThreadID: m.thread, RunID: "r1", UserID: "alice", EventType: runevents.EventRunStart, Category: runevents.CategoryTrace,
			Content: json.RawMessage(fmt.Sprintf(`{"n":%d}`, m.counter))}
	}
	return out
}

func contents(events []runevents.NewEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, string(e.Content))
	}
	return out
}

func seqsResponse(recs []runevents.Record, _ bool) (runevents.IdempotentResponse, error) {
	var seqs []int64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
	}
	body, err := json.Marshal(seqs)
	return runevents.IdempotentResponse{Status: 201, Body: body}, err
}

// appendRun appends events to the run and updates the model with the
// status the last one implies, or checks the refusal of a run that ended.
func (m *machine) appendRun(rt *rapid.T, tok *workflow.ResumeToken, events ...workflow.NewEvent) {
	_, err := m.st.workflows.Append(m.ctx, workflow.AppendParams{RunID: m.runID, Events: events, ResumeToken: tok})
	if m.status.Terminal() {
		if runstream.ErrorCodeOf(err) != runstream.CodeConflict {
			rt.Fatalf("append to a %s run: %v; want CONFLICT", m.status, err)
		}
		return
	}
	if err != nil {
		rt.Fatalf("append %v: %v", events, err)
	}
	for _, e := range events {
		m.events = append(m.events, e.Event)
		if s, ok := workflow.StatusAfter(e.Event); ok {
			m.status = s
		}
	}
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"append": func(rt *rapid.T) {
			events := m.batch(rapid.IntRange(1, 4).Draw(rt, "n"))
			recs, err := m.st.events.PutBatch(m.ctx, events)
			if err != nil {
				rt.Fatalf("PutBatch: %v", err)
			}
			for i, r := range recs {
				if r.Seq != int64(len(m.rows)+i+1) {
					rt.Fatalf("PutBatch seq %d; want %d", r.Seq, len(m.rows)+i+1)
				}
			}
			m.rows = append(m.rows, contents(events)...)
		},
		"appendKeyed": func(rt *rapid.T) {
			a, ok := m.st.events.(runevents.IdempotentAppender)
			if !ok {
				rt.Skip("no idempotent appends")
			}
			key := newID("k")
			events := m.batch(rapid.IntRange(1, 4).Draw(rt, "n"))
			res, err := a.AppendIdempotent(m.ctx, runevents.IdempotentAppend{UserID: "alice", Key: key, RequestHash: hashOf(key), Events: events, Response: seqsResponse})
			if err != nil || res.Replayed {
				rt.Fatalf("AppendIdempotent with a new key: replayed %v, %v", res.Replayed, err)
			}
			var want []int64
			for i := range events {
				want = append(want, int64(len(m.rows)+i+1))
			}
			if got, _ := json.Marshal(want); string(got) != string(res.Response.Body) {
				rt.Fatalf("response %s; want seqs %s", res.Response.Body, got)
			}
			m.rows = append(m.rows, contents(events)...)
			m.keys[key] = keyed{body: events, hash: hashOf(key), response: string(res.Response.Body)}
			m.keyNames = append(m.keyNames, key)
		},
		"retryKeyed": func(rt *rapid.T) {
			if len(m.keyNames) == 0 {
				rt.Skip("no key yet")
			}
			a := m.st.events.(runevents.IdempotentAppender)
			key := rapid.SampledFrom(m.keyNames).Draw(rt, "key")
			k := m.keys[key]
			hash := k.hash
			other := rapid.Bool().Draw(rt, "other body")
			if other {
				hash = hashOf(key + "/other")
			}
			res, err := a.AppendIdempotent(m.ctx, runevents.IdempotentAppend{UserID: "alice", Key: key, RequestHash: hash, Events: k.body, Response: seqsResponse})
			switch {
			case other && runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed:
				rt.Fatalf("retry with another body: %v; want VALIDATION_FAILED", err)
			case !other && (err != nil || !res.Replayed || string(res.Response.Body) != k.response):
				rt.Fatalf("retry = replayed %v %s, %v; want the first response %s", res.Replayed, res.Response.Body, err, k.response)
			}
		},
		"pause": func(rt *rapid.T) {
			if m.status != workflow.StatusRunning {
				rt.Skip("pause needs a running run")
			}
			secret := newID("secret")
			tok := &workflow.ResumeToken{NodeID: "ask", NodeRunID: "ask-r1", Hash: hashOf(secret), Actions: []string{"approve"},
				FormSchema: json.RawMessage(`{"type":"object"}`), ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)}
			m.appendRun(rt, tok, ev(workflow.EventRunAwaitingInput, "ask", `{"actions":["approve"],"resumeToken":"`+secret+`"}`))
			m.pending = secret
		},
		"resume": func(rt *rapid.T) {
			kind := rapid.SampledFrom([]string{"valid", "used", "wrong"}).Draw(rt, "token")
			var secret string
			switch kind {
			case "valid":
				if m.pending == "" || m.status != workflow.StatusAwaitingInput {
					rt.Skip("no pending token")
				}
				secret = m.pending
			case "used":
				if len(m.used) == 0 {
					rt.Skip("no used token")
				}
				secret = rapid.SampledFrom(m.used).Draw(rt, "used")
			case "wrong":
				secret = newID("wrong")
			}
			_, err := m.st.workflows.Resume(m.ctx, workflow.ResumeParams{RunID: m.runID, Owner: runstream.OwnedBy("alice"), Hash: hashOf(secret),
				Now: time.Now(), Events: []workflow.NewEvent{ev(workflow.EventRunResumed, "ask", `{"action":"approve"}`)}})
			want := map[string]runstream.ErrorCode{"used": runstream.CodeWorkflowResumeTokenUsed, "wrong": runstream.CodeWorkflowResumeTokenInvalid}[kind]
			if kind != "valid" {
				if runstream.ErrorCodeOf(err) != want {
					rt.Fatalf("resume with a %s token: %v; want %s", kind, err, want)
				}
				return
			}
			if err != nil {
				rt.Fatalf("resume with the pending token: %v", err)
			}
			m.events = append(m.events, workflow.EventRunResumed)
			m.status = workflow.StatusRunning
			m.used, m.pending = append(m.used, m.pending), ""
		},
		"cancel": func(rt *rapid.T) {
			m.appendRun(rt, nil, ev(workflow.EventRunCancelRequested, "", `{}`), ev(workflow.EventRunCancelled, "", `{}`))
		},
		"complete": func(rt *rapid.T) {
			m.appendRun(rt, nil, ev(workflow.EventRunCompleted, "", `{"output":1}`))
		},
		"follow": func(rt *rapid.T) {
			after := rapid.IntRange(0, len(m.events)).Draw(rt, "run cursor")
			envs, err := m.st.workflows.ListEvents(m.ctx, m.runID, int64(after), workflow.MaxEventPageLimit)
			if err != nil {
				rt.Fatalf("ListEvents: %v", err)
			}
			var got []workflow.EventType
			for i, e := range envs {
				if e.Seq != int64(after+i+1) {
					rt.Fatalf("run event %d after %d has seq %d", i, after, e.Seq)
				}
				got = append(got, e.Event)
			}
			if !slices.Equal(got, m.events[after:]) {
				rt.Fatalf("run events after %d = %v; want %v", after, got, m.events[after:])
			}
			cursor := rapid.IntRange(0, len(m.rows)).Draw(rt, "thread cursor")
			recs, err := m.st.events.(runevents.ThreadReader).ListThreadEvents(m.ctx, runevents.ListThreadEventsParams{
				ThreadID: m.thread, Owner: runevents.AnyOwner, AfterSeq: int64(cursor), Limit: 10000})
			if err != nil {
				rt.Fatalf("ListThreadEvents: %v", err)
			}
			var rows []string
			for i, r := range recs {
				if r.Seq != int64(cursor+i+1) {
					rt.Fatalf("thread row %d after %d has seq %d", i, cursor, r.Seq)
				}
				rows = append(rows, string(r.Content))
			}
			if !slices.Equal(rows, m.rows[cursor:]) {
				rt.Fatalf("thread rows after %d = %v; want %v", cursor, rows, m.rows[cursor:])
			}
		},
		"crash": func(rt *rapid.T) {
			if m.st.reopen == nil {
				rt.Skip("the backend keeps nothing over a restart")
			}
			if err := m.st.close(); err != nil {
				rt.Fatalf("close: %v", err)
			}
			next, err := m.st.reopen()
			if err != nil {
				rt.Fatalf("reopen: %v", err)
			}
			*m.st = next
		},
		"": func(rt *rapid.T) {
			run, err := m.st.workflows.GetRun(m.ctx, m.runID, runstream.OwnedBy("alice"))
			if err != nil {
				rt.Fatalf("GetRun: %v", err)
			}
			if run.Status != m.status || run.LastSeq != int64(len(m.events)) {
				rt.Fatalf("run is %s at seq %d; the model %s at %d", run.Status, run.LastSeq, m.status, len(m.events))
			}
		},
	}
}
