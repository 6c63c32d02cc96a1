package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
)

// The isolation matrix: {owner, other user, no credential, expired
// credential, wrong signature} × {every route of the OpenAPI document the
// server serves} × {own id, other user's id, random id}, through serve
// --auth jwt on every backend. Only the owner gets 2xx with data on an
// owner's resource; another user's id and a random id answer alike (404,
// or the same empty page, or a thread stream that opens empty), ids and
// request id aside. A route of the document
// without a row fails the test.

// isolationFlow parks each run at a human input after writing an
// artifact, so one run has an artifact, a resume token and a cancel.
const isolationFlow = `{"definition":{"name":"isolation","nodes":[
	{"id":"report","type":"transform","artifact":{"name":"report.md","mimeType":"text/markdown"},"config":{"expression":"'# report'"}},
	{"id":"ask","type":"human_input","needs":["report"],"config":{"actions":["approve"]}}],
	"output":"report"}}`

// matrixFixture names one user's resources (or, for the random column,
// ids nobody has).
type matrixFixture struct {
	token                               string // the resume token
	workflowID, runID, artifactID       string
	threadID, threadRunID, contractName string
	feedbackID                          string // the feedback on the thread run
}

// rowKind says what a route is and how the matrix checks it.
type rowKind int

const (
	// owned routes act on a user's resource named by the path (or query).
	owned rowKind = iota
	// ownedWrite routes write to a client-named thread: an unknown id is a
	// new thread (the owner's status), another user's id is NOT_FOUND.
	ownedWrite
	// create routes make a new resource of the caller's.
	create
	// list routes list the caller's resources, which must not include
	// another user's.
	list
	// public routes hold no user data and need no credential.
	public
	// sessionOpen exchanges a credential for a session cookie.
	sessionOpen
	// sessionClose deletes the cookie and needs no credential.
	sessionClose
)

// matrixRow is how the matrix calls one route.
type matrixRow struct {
	kind rowKind
	// status is the owner's expected status.
	status int
	// body is the request body for a fixture; nil: none.
	body func(f matrixFixture) string
	// query is appended to the path for a fixture.
	query func(f matrixFixture) string
	// mutates: the route changes its resource, so every check of it gets
	// fresh fixtures and the owner calls last.
	mutates bool
	// stream: the owner's answer is an open SSE stream (status only).
	stream bool
}

func matrixRows() map[string]matrixRow {
	def := func(matrixFixture) string { return isolationFlow }
	events := func(matrixFixture) string { return `{"events":[` + runEventFixture("llm.human.input") + `]}` }
	runRow := func(matrixFixture) string { return `{"status":"success","model_name":"gpt-4o","total_tokens":7}` }
	return map[string]matrixRow{
		"GET /healthz":                               {kind: public, status: 200},
		"GET /readyz":                                {kind: public, status: 200},
		"GET /metrics":                               {kind: public, status: 200},
		"GET /api/contracts":                         {kind: public, status: 200},
		"GET /api/contracts/{name}":                  {kind: public, status: 200},
		"GET /api/openapi.json":                      {kind: public, status: 200},
		"POST /api/auth/session":                     {kind: sessionOpen, status: 200},
		"DELETE /api/auth/session":                   {kind: sessionClose, status: 204},
		"POST /api/workflows":                        {kind: create, status: 201, body: def},
		"GET /api/workflows":                         {kind: list, status: 200},
		"GET /api/workflows/runs":                    {kind: owned, status: 200, query: func(f matrixFixture) string { return "?workflowId=" + f.workflowID }},
		"GET /api/workflows/{workflow_id}":           {kind: owned, status: 200},
		"POST /api/workflows/{workflow_id}/versions": {kind: owned, status: 201, body: func(matrixFixture) string { return isolationFlow }, mutates: true},
		"POST /api/workflows/{workflow_id}/runs":     {kind: owned, status: 201, body: func(matrixFixture) string { return `{"input":{}}` }, mutates: true},
		"GET /api/workflows/runs/{run_id}":           {kind: owned, status: 200},
		"POST /api/workflows/runs/{run_id}/cancel":   {kind: owned, status: 202, mutates: true},
		"POST /api/workflows/runs/{run_id}/resume": {kind: owned, status: 200, mutates: true, body: func(f matrixFixture) string {
			return `{"resumeToken":"` + f.token + `","action":"approve","values":{}}`
		}},
		"GET /api/workflows/runs/{run_id}/events":                      {kind: owned, status: 200},
		"GET /api/workflows/runs/{run_id}/stream":                      {kind: owned, status: 200, stream: true},
		"GET /api/workflows/runs/{run_id}/artifacts/{artifact_id}":     {kind: owned, status: 200},
		"POST /api/threads/{thread_id}/runs/{run_id}/events":           {kind: ownedWrite, status: 201, body: events, mutates: true},
		"GET /api/threads/{thread_id}/runs/{run_id}/events":            {kind: owned, status: 200},
		"DELETE /api/threads/{thread_id}/runs/{run_id}/events":         {kind: owned, status: 200, mutates: true},
		"DELETE /api/threads/{thread_id}/events":                       {kind: owned, status: 200, mutates: true},
		"PUT /api/threads/{thread_id}/runs/{run_id}":                   {kind: ownedWrite, status: 200, body: runRow, mutates: true},
		"GET /api/threads/{thread_id}/runs/{run_id}":                   {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/runs":                            {kind: owned, status: 200},
		"PUT /api/threads/{thread_id}/runs/{run_id}/feedback":          {kind: owned, status: 200, body: func(matrixFixture) string { return `{"rating":1,"comment":"good"}` }, mutates: true},
		"GET /api/runs/{run_id}/feedback":                              {kind: owned, status: 200},
		"DELETE /api/threads/{thread_id}/runs/{run_id}/feedback":       {kind: owned, status: 200, mutates: true},
		"GET /api/threads/{thread_id}/messages":                        {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/messages/page":                   {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/runs/{run_id}/messages":          {kind: owned, status: 200},
		"GET /api/runs/{run_id}/messages":                              {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes": {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/token-usage":                     {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/stream":                          {kind: owned, status: 200, stream: true},
		"POST /api/threads/{thread_id}/events": {kind: ownedWrite, status: 201, mutates: true, body: func(f matrixFixture) string {
			return `{"events":[{"run_id":"` + f.threadRunID + `",` + runEventFixture("llm.human.input")[1:] + `]}`
		}},
		"POST /api/threads/{thread_id}/runs/{run_id}/feedback":                 {kind: owned, status: 200, body: func(matrixFixture) string { return `{"rating":-1,"message_id":"m1"}` }, mutates: true},
		"GET /api/threads/{thread_id}/runs/{run_id}/feedback":                  {kind: owned, status: 200},
		"GET /api/threads/{thread_id}/runs/{run_id}/feedback/stats":            {kind: owned, status: 200},
		"DELETE /api/threads/{thread_id}/runs/{run_id}/feedback/{feedback_id}": {kind: owned, status: 200, mutates: true},
		"POST /api/threads/{thread_id}/runs/{run_id}/cancel":                   {kind: owned, status: 409},
		"GET /api/threads/{thread_id}/runs/{run_id}/join":                      {kind: owned, status: 409},
		"GET /api/threads/{thread_id}/runs/{run_id}/stream":                    {kind: owned, status: 409},
		"POST /api/threads/{thread_id}/runs/{run_id}/stream":                   {kind: owned, status: 409},
		// The LangGraph run stream: a push to a new run of the caller's
		// thread creates it; the fixture's run is a row without a chunk
		// stream, whose control poll is NOT_FOUND for its owner too.
		"POST /api/runs/{run_id}/stream-chunks": {kind: ownedWrite, status: 200, mutates: true, body: func(f matrixFixture) string {
			return `{"thread_id":"` + f.threadID + `","epoch":1}`
		}},
		"GET /api/runs/{run_id}/stream-control": {kind: owned, status: 404},
	}
}

// streamForStrangers is the status of a stream on another user's id (and
// on a random one): a workflow run's stream is NOT_FOUND; a thread's
// stream opens and waits for the caller's first write, as a chat
// subscribes before the agent writes, and shows nothing of the owner's.
var streamForStrangers = map[string]int{
	"GET /api/workflows/runs/{run_id}/stream": http.StatusNotFound,
	"GET /api/threads/{thread_id}/stream":     http.StatusOK,
}

// runEventFixture is the ingest form of a contract fixture.
func runEventFixture(name string) string {
	raw, err := fs.ReadFile(contracts.FS(), "fixtures/run_events/"+name+".json")
	if err != nil {
		panic(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		panic(err)
	}
	ev, _ := json.Marshal(map[string]any{"event_type": rec["event_type"], "content": rec["content"], "metadata": rec["metadata"]})
	return string(ev)
}

// matrixBackends are the stores the matrix runs on: the serve flags of
// each, given a temporary directory (PostgreSQL: skipped without
// RUNSTREAM_TEST_POSTGRES_URL).
var matrixBackends = []struct {
	name  string
	flags func(t *testing.T, dir string) []string
}{
	{"memory", func(*testing.T, string) []string { return []string{"--store", "memory:"} }},
	{"sqlite", func(_ *testing.T, dir string) []string {
		return []string{"--store", "sqlite:" + filepath.Join(dir, "db"), "--data-dir", dir}
	}},
	{"jsonl", func(_ *testing.T, dir string) []string {
		return []string{"--store", "sqlite:" + filepath.Join(dir, "db"), "--run-events", "jsonl:" + filepath.Join(dir, "events"), "--data-dir", dir}
	}},
	{"postgres", func(t *testing.T, dir string) []string {
		url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
		}
		schema := fmt.Sprintf("rs_isolation_%d", time.Now().UnixNano())
		t.Cleanup(func() { dropSchema(t, url, schema) })
		return []string{"--store", url, "--postgres-schema", schema, "--data-dir", dir}
	}},
}

func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	for _, b := range matrixBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			flags := b.flags(t, dir)
			keys := newJWTKeys(t)
			p := runServe(t, nil, append(flags, "--auth", "jwt", "--jwt-keys-file", keys.file, "--workers", "2", "--append-rate", "0")...)
			m := &matrix{base: p.base, keys: keys,
				alice: keys.token("alice", time.Hour), bob: keys.token("bob", time.Hour)}
			m.run(t)
		})
	}
}

// matrix is one server under test and the callers' tokens.
type matrix struct {
	base       string
	keys       jwtKeys
	alice, bob string
}

// caller is one row of the matrix's first axis.
type matrixCaller struct {
	name, token string
}

func (m *matrix) run(t *testing.T) {
	rows := matrixRows()
	routes := documentedRoutes(t, m.base)
	for _, route := range routes {
		if _, ok := rows[route]; !ok {
			t.Errorf("route %s of the OpenAPI document has no row in the isolation matrix: add one to matrixRows", route)
		}
	}
	for route := range rows {
		if !slices.Contains(routes, route) {
			t.Errorf("the isolation matrix has a row for %s, which the OpenAPI document does not list", route)
		}
	}
	if t.Failed() {
		return
	}
	strangers := []matrixCaller{
		{"no credential", ""},
		{"expired credential", m.keys.token("alice", -time.Hour)},
		{"wrong signature", jwtKeys{secret: []byte(strings.Repeat("w", 40))}.token("alice", time.Hour)},
		{"sub named twice", m.keys.twiceNamed("bob", "alice")},
	}
	shared := [2]matrixFixture{m.fixture(t, m.alice), m.fixture(t, m.bob)}
	for _, route := range routes {
		row := rows[route]
		method, path, _ := strings.Cut(route, " ")
		t.Run(strings.ReplaceAll(route, "/", "_"), func(t *testing.T) {
			fx := shared
			if row.mutates {
				fx = [2]matrixFixture{m.fixture(t, m.alice), m.fixture(t, m.bob)}
			}
			ids := []matrixFixture{fx[0], fx[1], lookalikeFixture(fx[0])}
			switch row.kind {
			case public:
				for _, c := range append(strangers, matrixCaller{"alice", m.alice}) {
					if code, body, _ := m.send(t, method, path, row, fx[0], c.token); code != row.status {
						t.Errorf("%s: %d %s, want %d", c.name, code, body, row.status)
					}
				}
			case sessionOpen, create:
				for _, c := range strangers {
					m.wantUnauthenticated(t, c, method, path, row, fx[0])
				}
				for _, c := range []matrixCaller{{"alice", m.alice}, {"bob", m.bob}} {
					if code, body, _ := m.send(t, method, path, row, fx[0], c.token); code != row.status {
						t.Errorf("%s: %d %s, want %d", c.name, code, body, row.status)
					}
				}
			case sessionClose:
				for _, c := range append(strangers, matrixCaller{"alice", m.alice}) {
					if code, body, _ := m.send(t, method, path, row, fx[0], c.token); code != row.status {
						t.Errorf("%s: %d %s, want %d", c.name, code, body, row.status)
					}
				}
			case list:
				for _, c := range strangers {
					m.wantUnauthenticated(t, c, method, path, row, fx[0])
				}
				for i, c := range []matrixCaller{{"alice", m.alice}, {"bob", m.bob}} {
					code, body, _ := m.send(t, method, path, row, fx[i], c.token)
					if code != row.status || !bytes.Contains(body, []byte(fx[i].workflowID)) || bytes.Contains(body, []byte(fx[1-i].workflowID)) {
						t.Errorf("%s lists: %d %s; want %d with %s and without %s", c.name, code, body, row.status, fx[i].workflowID, fx[1-i].workflowID)
					}
				}
			case owned, ownedWrite:
				for _, c := range strangers {
					for _, f := range ids {
						m.wantUnauthenticated(t, c, method, path, row, f)
					}
				}
				// Each user on the other's id and on a random id: the same
				// answer, and no 2xx but for a write that creates.
				for i, c := range []matrixCaller{{"alice", m.alice}, {"bob", m.bob}} {
					foreign := ids[1-i]
					// A random id of each caller's own: a write may create it.
					random := lookalikeFixture(foreign)
					fc, fb, _ := m.send(t, method, path, row, foreign, c.token)
					rc, rb, _ := m.send(t, method, path, row, random, c.token)
					if row.kind == ownedWrite {
						if fc != http.StatusNotFound || rc != row.status {
							t.Errorf("%s writes to the other user's id: %d %s (want 404); to a new id: %d %s (want %d)", c.name, fc, fb, rc, rb, row.status)
						}
						continue
					}
					fn, rn := normalize(fb, foreign, matrixFixture{}), normalize(rb, random, matrixFixture{})
					if fc != rc || fn != rn {
						t.Errorf("%s: the other user's id answers %d %s,\n  a random id %d %s", c.name, fc, fb, rc, rb)
					}
					if fc/100 == 2 && !row.stream && !emptyPage(fb) {
						t.Errorf("%s: the other user's id answers %d with data: %s", c.name, fc, fb)
					}
					if row.stream && fc != streamForStrangers[route] {
						t.Errorf("%s: the other user's stream answers %d, want %d", c.name, fc, streamForStrangers[route])
					}
				}
				// The owners last: the foreign calls changed nothing they own.
				for i, c := range []matrixCaller{{"alice", m.alice}, {"bob", m.bob}} {
					if code, body, _ := m.send(t, method, path, row, ids[i], c.token); code != row.status {
						t.Errorf("%s on their own id: %d %s, want %d", c.name, code, body, row.status)
					}
				}
			}
		})
	}
}

// wantUnauthenticated fails unless c's request is 401 UNAUTHENTICATED
// with a WWW-Authenticate challenge.
func (m *matrix) wantUnauthenticated(t *testing.T, c matrixCaller, method, path string, row matrixRow, f matrixFixture) {
	t.Helper()
	code, body, h := m.send(t, method, path, row, f, c.token)
	if code != http.StatusUnauthorized || !bytes.Contains(body, []byte(`"UNAUTHENTICATED"`)) || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s: %d %s (WWW-Authenticate %q), want 401 UNAUTHENTICATED", c.name, code, body, h.Get("WWW-Authenticate"))
	}
}

// send calls route for fixture f with token; a stream's body is not read.
func (m *matrix) send(t *testing.T, method, path string, row matrixRow, f matrixFixture, token string) (int, []byte, http.Header) {
	t.Helper()
	target := m.base + fillPath(path, f)
	if row.query != nil {
		target += row.query(f)
	}
	body := ""
	if row.body != nil {
		body = row.body(f)
	}
	if !row.stream {
		return call(t, method, target, token, body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	var out []byte
	if resp.StatusCode != http.StatusOK {
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		out = buf.Bytes()
	}
	return resp.StatusCode, out, resp.Header
}

// fillPath puts f's ids in the path's parameters. {run_id} is a workflow
// run under /api/workflows and a thread run elsewhere.
func fillPath(path string, f matrixFixture) string {
	run := f.threadRunID
	if strings.HasPrefix(path, "/api/workflows/") {
		run = f.runID
	}
	return strings.NewReplacer("{workflow_id}", f.workflowID, "{run_id}", run, "{artifact_id}", f.artifactID,
		"{thread_id}", f.threadID, "{name}", f.contractName, "{feedback_id}", f.feedbackID).Replace(path)
}

// normalize removes what may differ between two answers that tell the
// same thing: the request id, and the ids the request named.
func normalize(body []byte, f matrixFixture, _ matrixFixture) string {
	s := string(body)
	for _, id := range []string{f.workflowID, f.runID, f.artifactID, f.threadID, f.threadRunID, f.feedbackID} {
		if id != "" {
			s = strings.ReplaceAll(s, id, "{id}")
		}
	}
	var v map[string]any
	if json.Unmarshal([]byte(s), &v) == nil {
		delete(v, "requestId")
		out, _ := json.Marshal(v)
		return string(out)
	}
	return s
}

// emptyPage reports whether body is a page or list with nothing in it.
func emptyPage(body []byte) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, field := range v {
			if items, ok := field.([]any); ok && len(items) > 0 {
				return false
			}
		}
		return true
	}
	return false
}

// documentedRoutes returns "METHOD /path" of every operation of the
// OpenAPI document the server serves.
func documentedRoutes(t *testing.T, base string) []string {
	t.Helper()
	code, body, _ := call(t, "GET", base+"/api/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("GET /api/openapi.json: %d", code)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				routes = append(routes, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(routes)
	if len(routes) < 30 {
		t.Fatalf("the OpenAPI document lists %d routes: %v", len(routes), routes)
	}
	return routes
}

// fixture creates a user's resources: a workflow and a run parked at a
// human input with an artifact, and a thread with events, a run row and
// feedback.
func (m *matrix) fixture(t *testing.T, token string) matrixFixture {
	t.Helper()
	f := matrixFixture{contractName: "errors.json", threadID: "thr_" + randomHex(8), threadRunID: "trun_" + randomHex(8)}
	var created struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
	}
	m.mustJSON(t, "POST", "/api/workflows", token, isolationFlow, 201, &created)
	f.workflowID = created.WorkflowID
	m.mustJSON(t, "POST", "/api/workflows/"+f.workflowID+"/runs", token, `{"input":{}}`, 201, &created)
	f.runID = created.RunID
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var run struct{ Status string }
		m.mustJSON(t, "GET", "/api/workflows/runs/"+f.runID, token, "", 200, &run)
		if run.Status == "awaiting_input" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, not awaiting input, after 30 s", f.runID, run.Status)
		}
	}
	var page struct {
		Events []struct {
			Event string
			Data  struct{ ArtifactID, ResumeToken string }
		}
	}
	m.mustJSON(t, "GET", "/api/workflows/runs/"+f.runID+"/events?limit=100", token, "", 200, &page)
	for _, e := range page.Events {
		switch e.Event {
		case "artifact.created":
			f.artifactID = e.Data.ArtifactID
		case "run.awaiting_input":
			f.token = e.Data.ResumeToken
		}
	}
	if f.artifactID == "" || f.token == "" {
		t.Fatalf("run %s has no artifact or resume token: %+v", f.runID, page)
	}
	thread := "/api/threads/" + f.threadID + "/runs/" + f.threadRunID
	m.mustJSON(t, "POST", thread+"/events", token, `{"events":[`+runEventFixture("llm.human.input")+`,`+runEventFixture("llm.ai.response")+`,`+runEventFixture("workspace_changes")+`]}`, 201, nil)
	m.mustJSON(t, "PUT", thread, token, `{"status":"success","model_name":"gpt-4o","total_tokens":7}`, 200, nil)
	var feedback struct {
		ID string `json:"feedback_id"`
	}
	m.mustJSON(t, "PUT", thread+"/feedback", token, `{"rating":1,"comment":"good"}`, 200, &feedback)
	f.feedbackID = feedback.ID
	return f
}

func (m *matrix) mustJSON(t *testing.T, method, path, token, body string, status int, v any) {
	t.Helper()
	code, out, _ := call(t, method, m.base+path, token, body)
	if code != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, out, status)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// lookalikeFixture returns ids of f's shapes that nobody has: the hex
// digits of each id's last 12 characters are redrawn.
func lookalikeFixture(f matrixFixture) matrixFixture {
	return matrixFixture{
		token:        strings.Repeat("A", len(f.token)),
		workflowID:   lookalike(f.workflowID),
		runID:        lookalike(f.runID),
		artifactID:   lookalike(f.artifactID),
		threadID:     lookalike(f.threadID),
		threadRunID:  lookalike(f.threadRunID),
		contractName: f.contractName,
		feedbackID:   lookalike(f.feedbackID),
	}
}

func lookalike(id string) string {
	b := []byte(id)
	r := []byte(randomHex(len(b)))
	for i := max(0, len(b)-12); i < len(b); i++ {
		if strings.IndexByte("0123456789abcdef", b[i]) >= 0 {
			b[i] = r[i]
		}
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
