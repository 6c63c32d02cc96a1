package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// dataFlowFamilies are the metric families of the data flow (issue 19):
// after acceptance-style traffic each has a non-zero value.
var dataFlowFamilies = []string{
	// append
	"runstream_append_events_total",
	"runstream_append_batches_total",
	"runstream_append_duration_seconds",
	"runstream_store_group_commit_size",
	"runstream_idempotency_total",
	"runstream_append_checks_total",
	"runstream_redactions_total",
	// live
	"runstream_live_streams",
	"runstream_live_subscriptions",
	"runstream_sse_streams_open",
	"runstream_sse_streams_closed_total",
	"runstream_sse_frames_total",
	"runstream_sse_bytes_total",
	"runstream_sse_store_reads_total",
	"runstream_sse_catchups_total",
	"runstream_live_cuts_total",
	"runstream_live_polls_total",
	// engine
	"runstream_workflow_runs",
	"runstream_workflow_run_transitions_total",
	"runstream_engine_queue_depth",
	"runstream_engine_runs_executing",
	"runstream_engine_claims_total",
	"runstream_engine_lease_renewals_total",
	"runstream_engine_lease_takeovers_total",
	"runstream_engine_node_retries_total",
	"runstream_engine_node_duration_seconds",
	"runstream_workflow_operations_total",
	// store
	"runstream_store_operation_duration_seconds",
	"runstream_store_errors_total",
	"runstream_store_pool_connections",
}

// postgresFamilies have a non-zero value on PostgreSQL only: nothing
// wakes the hub of a single SQLite instance (no NOTIFY), and there is no
// listener.
var postgresFamilies = []string{
	"runstream_live_wakeups_total",
	"runstream_postgres_notifications_total",
	"runstream_postgres_listener_connected",
}

// TestMetricsAfterAcceptanceTraffic runs a server on SQLite (and on
// PostgreSQL when RUNSTREAM_TEST_POSTGRES_URL is set) through workflow
// runs (a retried http node, a human input resumed, a run cancelled, a
// run queued behind a busy worker), thread ingest (a redacted secret, an
// idempotent replay, a key conflict, a refused event, a batch larger than
// a follower's buffer) and followers (one that stops reading and is cut),
// then checks that /metrics has a non-zero value in every family of the
// data flow, and that no label value is an id, a key or a secret of the
// traffic. (metrics.TestDashboardNamesExportedMetrics checks the Grafana
// dashboard's queries.)
func TestMetricsAfterAcceptanceTraffic(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := []string{"--data-dir", dir, "--workers", "1", "--lease-duration", "3s",
				"--stream-write-timeout", "300ms", "--http-node-allow", "127.0.0.0/8"}
			families := dataFlowFamilies
			if backend == "sqlite" {
				args = append(args, "--store", "sqlite:"+filepath.Join(dir, "runstream.db"))
			} else {
				pgURL := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
				if pgURL == "" {
					t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
				}
				schema := fmt.Sprintf("rs_cmd_metrics_%d", time.Now().UnixNano())
				t.Cleanup(func() { dropSchema(t, pgURL, schema) })
				args = append(args, "--store", pgURL, "--postgres-schema", schema)
				families = append(families[:len(families):len(families)], postgresFamilies...)
			}
			nodes := newNodeServer(t)
			srv := runServe(t, nil, args...)
			t.Cleanup(nodes.release) // before the server stops: its engine waits for the blocked node
			secrets := acceptanceTraffic(t, srv.base, nodes)

			mfs := scrape(t, srv.base)
			for _, name := range families {
				mf, ok := mfs[name]
				if !ok {
					t.Errorf("/metrics has no family %s", name)
					continue
				}
				if familyTotal(mf) == 0 {
					t.Errorf("%s is zero after the traffic", name)
				}
			}
			for _, want := range []struct{ family, label, value string }{
				{"runstream_idempotency_total", "outcome", "replayed"},
				{"runstream_idempotency_total", "outcome", "conflict"},
				{"runstream_redactions_total", "rule", "key"},
				{"runstream_live_cuts_total", "reason", "buffer_full"},
				{"runstream_sse_streams_closed_total", "reason", "write_timeout"},
				{"runstream_sse_catchups_total", "reason", "cut"},
				{"runstream_engine_claims_total", "status", "running"},
				{"runstream_workflow_operations_total", "operation", "resume"},
				{"runstream_workflow_operations_total", "operation", "cancel"},
				{"runstream_append_checks_total", "outcome", "VALIDATION_FAILED"},
			} {
				if labeledTotal(mfs[want.family], want.label, want.value) == 0 {
					t.Errorf("%s{%s=%q} is zero after the traffic", want.family, want.label, want.value)
				}
			}
			if backend == "postgres" && labeledTotal(mfs["runstream_postgres_listener_connected"], "", "") != 1 {
				t.Errorf("runstream_postgres_listener_connected is not 1")
			}
			checkLabelsAreBounded(t, mfs, secrets)
		})
	}
}

// nodeServer is the endpoint of the workflows' http nodes: /flaky fails
// its first call (503, retried) and answers the next; /block answers once
// release is called.
type nodeServer struct {
	*httptest.Server
	flaky   atomic.Int32
	blocked chan struct{} // receives when /block is entered
	unblock chan struct{}
	release func()
}

func newNodeServer(t *testing.T) *nodeServer {
	s := &nodeServer{blocked: make(chan struct{}, 8), unblock: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.unblock) })
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if s.flaky.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/block":
			s.blocked <- struct{}{}
			select {
			case <-s.unblock:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(s.Close)
	t.Cleanup(s.release) // before s.Close: a blocked request ends
	return s
}

// acceptanceTraffic drives the server at base and returns the ids, keys
// and secrets it sent, none of which may be a label value.
func acceptanceTraffic(t *testing.T, base string, nodes *nodeServer) []string {
	t.Helper()
	publish := func(body string) string {
		code, wf := postJSON(t, base+"/api/workflows", body)
		if code != http.StatusCreated {
			t.Fatalf("publish: %d %v", code, wf)
		}
		return wf["workflowId"].(string)
	}
	start := func(workflowID string) string {
		code, run := postJSON(t, base+"/api/workflows/"+workflowID+"/runs", `{"input":{}}`)
		if code != http.StatusCreated {
			t.Fatalf("start run: %d %v", code, run)
		}
		return run["runId"].(string)
	}
	approval := publish(`{"name":"metrics-approval","nodes":[
		{"id":"fetch","type":"http","retry":{"maxAttempts":3,"backoffMs":10},"config":{"method":"GET","url":"` + nodes.URL + `/flaky"}},
		{"id":"ask","type":"human_input","needs":["fetch"],"config":{"actions":["approve","reject"]}},
		{"id":"done","type":"transform","needs":["ask"],"config":{"expression":"nodes.ask.output.action"}}],"output":"done"}`)
	blocking := publish(`{"name":"metrics-block","nodes":[
		{"id":"wait","type":"http","retry":{"maxAttempts":5,"backoffMs":10},"config":{"method":"GET","url":"` + nodes.URL + `/block","timeoutMs":30000}}],"output":"wait"}`)

	// A run with a retried node, parked at a human input and resumed: the
	// engine claims it again (a takeover of a running run).
	approved := start(approval)
	token := awaitToken(t, base, approved)
	if code, body := postJSON(t, base+"/api/workflows/runs/"+approved+"/resume", `{"resumeToken":"`+token+`","action":"approve"}`); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	if events := followRun(t, base, approved); len(events) == 0 || events[len(events)-1].Event != "run.completed" {
		t.Fatalf("the approved run did not complete: %v", eventTypes(events))
	}
	// The one worker is busy with a blocked run: the next runs stay
	// queued; one of them is cancelled, one waits while /metrics is read.
	busy := start(blocking)
	select {
	case <-nodes.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking run did not reach its http node")
	}
	queued, cancelled := start(blocking), start(approval)
	if code, body := postJSON(t, base+"/api/workflows/runs/"+cancelled+"/cancel", `{}`); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("cancel: %d %v", code, body)
	}

	thread, key := "thr-metrics-7f3a9c", "key-metrics-5c21e8"
	secret := "sk-metrics-" + strings.Repeat("Q7", 20)
	ingest := base + "/api/threads/" + thread + "/runs/run-metrics-1/events"
	middleware := func(tag, changes string) string {
		return `{"event_type":"middleware:` + tag + `","content":{"name":"metrics","hook":"after","action":"set","changes":` + changes + `}}`
	}
	redacted := `{"events":[` + middleware("metrics", `{"api_key":"`+secret+`"}`) + `]}`
	for range 2 { // the second is a replay of the first
		if code, body := postWithKey(t, ingest, key, redacted); code != http.StatusCreated {
			t.Fatalf("idempotent append: %d %s", code, body)
		}
	}
	if code, body := postWithKey(t, ingest, key, `{"events":[`+middleware("metrics", `{"other":"request"}`)+`]}`); code < 400 {
		t.Fatalf("a key reused for another request: %d %s", code, body)
	}
	if code, body := postJSON(t, ingest, `{"events":[{"event_type":"no.such.event","content":""}]}`); code < 400 {
		t.Fatalf("an unknown event type: %d %v", code, body)
	}
	// An attentive follower of the thread stays open while /metrics is
	// read; a follower that never reads is cut.
	attentive := openStream(t, base+"/api/threads/"+thread+"/stream")
	slow := openUnreadStream(t, base, "/api/threads/"+thread+"/stream")
	defer slow.Close()
	attentive.waitFrames(t, 1)
	// One batch larger than a subscription's buffer (1 MiB) cuts every
	// follower of the thread: the attentive one catches up from the store,
	// the one that does not read is then cut for its write timeout.
	big := middleware("bulk", `{"note":"`+strings.Repeat("x", 20<<10)+`"}`)
	batch := `{"events":[` + strings.TrimSuffix(strings.Repeat(big+",", 60), ",") + `]}`
	if code, body := postJSON(t, ingest, batch); code != http.StatusCreated {
		t.Fatalf("bulk append: %d %v", code, body)
	}
	attentive.waitFrames(t, 61)
	// The kernel's socket buffers take megabytes: more batches, until the
	// follower that does not read is closed for its write timeout.
	for i := 0; labeledTotal(scrape(t, base)["runstream_sse_streams_closed_total"], "reason", "write_timeout") == 0; i++ {
		if i == 40 {
			t.Fatalf("the follower that does not read was not cut after %d MB: %v", 40*6/5, scrape(t, base)["runstream_sse_streams_closed_total"])
		}
		if code, body := postJSON(t, ingest, batch); code != http.StatusCreated {
			t.Fatalf("bulk append: %d %v", code, body)
		}
	}

	// Wait for what happens in the background: the lease of the blocked
	// run is renewed, the slow follower's write times out, the hub polls.
	for _, w := range []struct{ family, label, value string }{
		{"runstream_engine_lease_renewals_total", "outcome", "ok"},
		{"runstream_live_polls_total", "", ""},
	} {
		waitMetric(t, base, w.family, w.label, w.value)
	}
	return []string{approval, blocking, approved, busy, queued, cancelled, thread, key, secret, "run-metrics-1", token}
}

// postWithKey posts body to url under an Idempotency-Key.
func postWithKey(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// sseFollower reads an SSE stream in the background, counting its event
// frames, until the test ends.
type sseFollower struct {
	frames atomic.Int64
}

func openStream(t *testing.T, url string) *sseFollower {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	f := &sseFollower{}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id:") {
				f.frames.Add(1)
			}
		}
	}()
	return f
}

// waitFrames waits until the follower has read n event frames.
func (f *sseFollower) waitFrames(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.frames.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the follower read %d frames, want %d", f.frames.Load(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openUnreadStream opens a stream on a connection with a small receive
// buffer and never reads it.
func openUnreadStream(t *testing.T, base, path string) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, u.Host)
	return conn
}

// scrape reads and parses /metrics.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// waitMetric waits until family has a non-zero value among the samples
// whose label is value (any sample when label is empty).
func waitMetric(t *testing.T, base, family, label, value string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for labeledTotal(scrape(t, base)[family], label, value) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s{%s=%q} is still zero after 30 s", family, label, value)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// familyTotal sums the values of a family's samples (counts of histograms).
func familyTotal(mf *dto.MetricFamily) float64 { return labeledTotal(mf, "", "") }

// labeledTotal sums the values of mf's samples whose label is value (all
// samples when label is empty); a histogram counts its observations.
func labeledTotal(mf *dto.MetricFamily, label, value string) float64 {
	if mf == nil {
		return 0
	}
	var total float64
	for _, m := range mf.GetMetric() {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// checkLabelsAreBounded fails when a label value of a runstream family
// holds one of the values the traffic sent.
func checkLabelsAreBounded(t *testing.T, mfs map[string]*dto.MetricFamily, sent []string) {
	t.Helper()
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "runstream_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, s := range sent {
					if s != "" && strings.Contains(l.GetValue(), s) {
						t.Errorf("%s has label %s=%q, a value of the request", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}
