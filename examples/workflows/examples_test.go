package workflows_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"github.com/runstream/runstream/engine/enginetest"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/workflow"
)

// TestExamples runs every example end to end over the HTTP API, following
// the SSE stream and asserting the complete event sequence of each run:
// pause → resume (approval), retry after a transient failure, tool calls
// and an artifact (research), a SQL policy denial (failing), cancel
// mid-stream and a run taken over after its instance was killed (long).
// Across them, every one of the 18 event types is asserted.
func TestExamples(t *testing.T) {
	cov := &coverage{seen: map[workflow.EventType]bool{}}
	t.Run("Flows", func(t *testing.T) {
		t.Run("ApprovalPauseResume", func(t *testing.T) { t.Parallel(); testApproval(t, cov) })
		t.Run("ResearchRetryToolsArtifact", func(t *testing.T) { t.Parallel(); testResearch(t, cov) })
		t.Run("FailingSQLPolicy", func(t *testing.T) { t.Parallel(); testFailing(t, cov) })
		t.Run("LongCancelMidStream", func(t *testing.T) { t.Parallel(); testLongCancel(t, cov) })
		t.Run("LongTakeover", func(t *testing.T) { t.Parallel(); testLongTakeover(t, cov) })
	})
	if t.Failed() {
		return
	}
	var missing []string
	for _, typ := range workflow.Events() {
		if !cov.seen[typ] {
			missing = append(missing, string(typ))
		}
	}
	if len(missing) > 0 || len(workflow.Events()) != 18 {
		t.Errorf("event types no example run asserted: %v (of %d types)", missing, len(workflow.Events()))
	}
}

func testApproval(t *testing.T, cov *coverage) {
	s := newServer(t, nil)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publishExample(t, "approval.yaml")
	// The input schema is checked.
	s.call(t, "POST", "/api/workflows/"+wf+"/runs", `{"input":{"customer":"Ada"}}`, http.StatusUnprocessableEntity)
	run := s.startRun(t, wf, `{"customer":"Ada","topic":"a broken kettle"}`)
	st := s.follow(t, run)
	awaiting := st.Until(t, workflow.EventRunAwaitingInput, "approval")
	var req struct {
		Actions     []string
		ResumeToken string
	}
	json.Unmarshal(awaiting.Data, &req)
	if !slices.Equal(req.Actions, []string{"approve", "reject"}) {
		t.Errorf("actions %v", req.Actions)
	}
	path := "/api/workflows/runs/" + run + "/resume"
	s.call(t, "POST", path, `{"resumeToken":"`+req.ResumeToken+`","action":"approve","values":{"note":"`+strings.Repeat("x", 300)+`"}}`, http.StatusUnprocessableEntity)
	s.call(t, "POST", path, `{"resumeToken":"`+req.ResumeToken+`","action":"approve","values":{"note":"ship it"}}`, http.StatusOK)
	events := st.Rest(t)
	cov.checkSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:draft", "node.started:draft", "node.output.delta:draft", "node.completed:draft",
		"node.queued:approval", "node.started:approval", "run.awaiting_input:approval",
		"run.resumed:approval", "node.completed:approval",
		"node.queued:decision", "node.started:decision", "node.completed:decision",
		"run.completed")
	var text strings.Builder
	for _, e := range events {
		if e.Event == workflow.EventNodeOutputDelta {
			var d struct{ Channel, Delta string }
			json.Unmarshal(e.Data, &d)
			text.WriteString(d.Delta)
		}
	}
	wantReply := "Dear Ada, thank you for writing to us about a broken kettle. We are sorry for the trouble and will ship a replacement today."
	if text.String() != wantReply {
		t.Errorf("streamed %q", text.String())
	}
	var done struct {
		Output struct {
			Approved    bool
			Note, Reply string
		}
	}
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &done)
	if !done.Output.Approved || done.Output.Note != "ship it" || done.Output.Reply != wantReply {
		t.Errorf("output %+v", done.Output)
	}
	var resumed struct{ Action string }
	enginetest.Data(t, events, workflow.EventRunResumed, "approval", 0, &resumed)
	if resumed.Action != "approve" {
		t.Errorf("run.resumed %+v", resumed)
	}
}

func testResearch(t *testing.T, cov *coverage) {
	var hits atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "Pears ripen from the inside out.")
	}))
	t.Cleanup(site.Close)
	s := newServer(t, nil)
	s.StartEngine(t, context.Background(), nil)
	run := s.startRun(t, s.publishExample(t, "research.yaml"), `{"url":"`+site.URL+`/pears"}`)
	events := s.follow(t, run).Rest(t)
	cov.checkSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:fetch", "node.started:fetch", "node.failed:fetch", "node.started:fetch", "node.completed:fetch",
		"node.queued:research", "node.started:research", "node.tool.started:research", "node.tool.finished:research",
		"node.output.delta:research", "node.completed:research",
		"node.queued:report", "node.started:report", "artifact.created:report", "node.completed:report",
		"run.completed")
	if a := enginetest.Attempts(t, events, "fetch"); !slices.Equal(a, []int{1, 2}) {
		t.Errorf("fetch attempts %v", a)
	}
	var failed struct {
		Error struct {
			Code      runstream.ErrorCode
			Retryable bool
			Details   struct{ Status int }
		}
		Attempt   int
		WillRetry bool
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, "fetch", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowHTTPNodeError || !failed.Error.Retryable || failed.Error.Details.Status != 503 || !failed.WillRetry || failed.Attempt != 1 {
		t.Errorf("node.failed of fetch %+v", failed)
	}
	var tool struct {
		ToolCallID, Name, Status string
		OutputSummary            struct{ Status int }
	}
	enginetest.Data(t, events, workflow.EventNodeToolFinished, "research", 0, &tool)
	if tool.ToolCallID != "call_page" || tool.Name != "http_get" || tool.Status != "ok" || tool.OutputSummary.Status != 200 {
		t.Errorf("node.tool.finished %+v", tool)
	}
	var art struct {
		ArtifactID, Name, MimeType, SHA256 string
		SizeBytes                          int64
	}
	enginetest.Data(t, events, workflow.EventArtifactCreated, "report", 0, &art)
	var done struct {
		Artifacts []struct{ ArtifactID, NodeID string }
	}
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &done)
	if len(done.Artifacts) != 1 || done.Artifacts[0].ArtifactID != art.ArtifactID || done.Artifacts[0].NodeID != "report" {
		t.Errorf("run.completed artifacts %+v", done.Artifacts)
	}
	status, header, body := s.request(t, "GET", "/api/workflows/runs/"+run+"/artifacts/"+art.ArtifactID, "", nil)
	sum := sha256.Sum256(body)
	if status != 200 || header.Get("Content-Type") != "text/markdown" || !strings.HasPrefix(header.Get("Content-Disposition"), "attachment") ||
		hex.EncodeToString(sum[:]) != art.SHA256 || int64(len(body)) != art.SizeBytes {
		t.Fatalf("artifact: %d %v", status, header)
	}
	report := string(body)
	for _, want := range []string{"# Research report", "Source: " + site.URL + "/pears", "answered 200 with 32 characters", "Pears ripen from the inside out."} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("the site was asked %d times, want 3 (a failure, the retry, the tool call)", n)
	}
}

func testFailing(t *testing.T, cov *coverage) {
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, created_at TEXT); INSERT INTO orders VALUES (1, '2001-01-01')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	dbs, err := sqlnode.Open(sqlnode.Spec{Name: "shop", Dialect: sqlnode.SQLite, Location: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	s := newServer(t, dbs)
	s.StartEngine(t, context.Background(), nil)
	run := s.startRun(t, s.publishExample(t, "failing.yaml"), `{"days":7}`)
	events := s.follow(t, run).Rest(t)
	cov.checkSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:plan", "node.started:plan", "node.completed:plan",
		"node.queued:cleanup", "node.started:cleanup", "node.failed:cleanup",
		"run.failed")
	type errorData struct {
		Error struct {
			Code      runstream.ErrorCode
			Retryable bool
			NodeID    string
			Details   struct{ Rule, Reason string }
		}
		WillRetry    bool
		FailedNodeID string
	}
	for _, typ := range []workflow.EventType{workflow.EventNodeFailed, workflow.EventRunFailed} {
		var d errorData
		enginetest.Data(t, events, typ, "", 0, &d)
		e := d.Error
		if e.Code != runstream.CodeWorkflowSQLPolicyDenied || e.Retryable || d.WillRetry || e.NodeID != "cleanup" || e.Details.Rule != sqlnode.RuleSingleReadStatement || e.Details.Reason != sqlnode.ReasonReadOnly {
			t.Errorf("%s: %+v", typ, d)
		}
		if typ == workflow.EventRunFailed && d.FailedNodeID != "cleanup" {
			t.Errorf("failedNodeId %q", d.FailedNodeID)
		}
	}
	view := s.call(t, "GET", "/api/workflows/runs/"+run, "", http.StatusOK)
	if view["status"] != "failed" {
		t.Errorf("run view %v", view)
	}
	db, _ = sql.Open("sqlite", "file:"+path+"?mode=ro")
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM orders").Scan(&n); err != nil || n != 1 {
		t.Errorf("orders after the run: %d (%v)", n, err)
	}
}

// longHead is the long flow up to crunch's first progress.
var longHead = []string{
	"run.created", "run.queued", "run.started",
	"node.queued:warmup", "node.started:warmup", "node.progress:warmup", "node.completed:warmup",
	"node.queued:crunch", "node.started:crunch", "node.progress:crunch",
}

func testLongCancel(t *testing.T, cov *coverage) {
	s := newServer(t, nil)
	s.StartEngine(t, context.Background(), nil)
	run := s.startRun(t, s.publishExample(t, "long.yaml"), `{}`)
	st := s.follow(t, run)
	st.Until(t, workflow.EventNodeProgress, "crunch")
	body := s.call(t, "POST", "/api/workflows/runs/"+run+"/cancel", "", http.StatusAccepted)
	if body["status"] != "cancelling" {
		t.Errorf("cancel answered %v", body)
	}
	events := st.Rest(t)
	cov.checkSequence(t, events, append(slices.Clone(longHead), "run.cancel_requested", "run.cancelled")...)
	var percents []float64
	for _, e := range events {
		if e.Event == workflow.EventNodeProgress && e.NodeID == "warmup" {
			var d struct{ Percent float64 }
			json.Unmarshal(e.Data, &d)
			percents = append(percents, d.Percent)
		}
	}
	if !slices.Equal(percents, []float64{0, 25, 50, 75, 100}) {
		t.Errorf("warmup progress %v", percents)
	}
	var requested struct{ RequestedBy string }
	enginetest.Data(t, events, workflow.EventRunCancelRequested, "", 0, &requested)
	if requested.RequestedBy == "" {
		t.Errorf("run.cancel_requested without requestedBy")
	}
	s.call(t, "POST", "/api/workflows/runs/"+run+"/cancel", "", http.StatusConflict)
}

func testLongTakeover(t *testing.T, cov *coverage) {
	s := newServer(t, nil)
	ctxA, killA := context.WithCancel(context.Background())
	defer killA()
	a := s.StartEngine(t, ctxA, func(c *engine.Config) { c.WorkerID = "a" })
	run := s.startRun(t, s.publishExample(t, "long.yaml"), `{}`)
	st := s.follow(t, run)
	st.Until(t, workflow.EventNodeProgress, "crunch")
	killA()
	a.Stop(context.Background())
	if view := s.call(t, "GET", "/api/workflows/runs/"+run, "", http.StatusOK); view["status"] != "running" {
		t.Fatalf("after the kill: %v", view)
	}
	// b's clock is past a's lease.
	s.StartEngine(t, context.Background(), func(c *engine.Config) {
		c.WorkerID = "b"
		c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
	})
	st.Until(t, workflow.EventNodeStarted, "crunch")
	st.Until(t, workflow.EventNodeProgress, "crunch")
	s.call(t, "POST", "/api/workflows/runs/"+run+"/cancel", "", http.StatusAccepted)
	events := st.Rest(t)
	cov.checkSequence(t, events, append(slices.Clone(longHead),
		"node.failed:crunch", "node.started:crunch", "node.progress:crunch",
		"run.cancel_requested", "run.cancelled")...)
	if a := enginetest.Attempts(t, events, "crunch"); !slices.Equal(a, []int{1, 2}) {
		t.Errorf("crunch attempts %v", a)
	}
	var lost struct {
		Error struct {
			Code      runstream.ErrorCode
			Retryable bool
		}
		Attempt   int
		WillRetry bool
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, "crunch", 0, &lost)
	if lost.Error.Code != runstream.CodeWorkflowWorkerLost || !lost.Error.Retryable || !lost.WillRetry || lost.Attempt != 1 {
		t.Errorf("node.failed of crunch %+v", lost)
	}
	var started struct{ WorkerID string }
	enginetest.Data(t, events, workflow.EventRunStarted, "", 0, &started)
	if started.WorkerID != "a" {
		t.Errorf("run.started by %q", started.WorkerID)
	}
}
