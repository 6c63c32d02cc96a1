package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8780", "/api", "ftp://host", "http://", "http://host/?q=1", "http://host/#x", "http://host:bad"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}

// pageServer serves the run view and pages of n events, pageSize a page
// whatever the limit asked, and records the query of each page request.
type pageServer struct {
	n, pageSize int64
	// stall makes every page have more without advancing.
	stall bool

	mu      sync.Mutex
	queries []string
	headers []http.Header
}

func (s *pageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	switch r.URL.EscapedPath() {
	case "/prefix/api/workflows/runs/run%2F1":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"runId":"run/1","workflowId":"wf_1","versionId":"wv_1","status":"running","input":{"q":1},` +
			`"output":null,"error":null,"lastSeq":7,"createdAt":"2026-08-26T10:00:00Z","updatedAt":"2026-08-26T10:00:02.5Z",` +
			`"startedAt":"2026-08-26T10:00:01+02:00","finishedAt":null}`))
	case "/prefix/api/workflows/runs/" + fakeRunID + "/events":
		s.mu.Lock()
		s.queries = append(s.queries, r.URL.RawQuery)
		s.mu.Unlock()
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, runstream.CodeWorkflowInvalidCursor)
			return
		}
		page := Page{Events: []workflow.Envelope{}, NextAfter: after}
		for seq := after + 1; seq <= min(s.n, after+s.pageSize); seq++ {
			page.Events = append(page.Events, envelope(seq, workflow.EventNodeProgress))
			page.NextAfter = seq
		}
		page.HasMore = page.NextAfter < s.n
		if s.stall {
			page = Page{Events: []workflow.Envelope{}, HasMore: true, NextAfter: after}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	default:
		writeError(w, http.StatusNotFound, runstream.CodeWorkflowRunNotFound)
	}
}

func newPageClient(t *testing.T, s *pageServer) *Client {
	t.Helper()
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL+"/prefix/", WithHeader("Authorization", "Bearer one"), WithHeader("Authorization", "Bearer two"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGetRun(t *testing.T) {
	t.Parallel()
	s := &pageServer{}
	c := newPageClient(t, s)
	run, err := c.GetRun(t.Context(), "run/1")
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "run/1" || run.WorkflowID != "wf_1" || run.VersionID != "wv_1" || run.Status != workflow.StatusRunning || run.LastSeq != 7 {
		t.Errorf("run = %+v", run)
	}
	if string(run.Input) != `{"q":1}` || run.Output != nil || run.Error != nil {
		t.Errorf("input, output, error = %s, %s, %s; want {\"q\":1}, nil, nil", run.Input, run.Output, run.Error)
	}
	if want := time.Date(2026, 8, 26, 8, 0, 1, 0, time.UTC); !run.StartedAt.Equal(want) || !run.FinishedAt.IsZero() {
		t.Errorf("startedAt, finishedAt = %v, %v; want %v and zero", run.StartedAt, run.FinishedAt, want)
	}
	if want := time.Date(2026, 8, 26, 10, 0, 2, 5e8, time.UTC); !run.UpdatedAt.Equal(want) {
		t.Errorf("updatedAt = %v, want %v", run.UpdatedAt, want)
	}
	if got := s.headers[0].Values("Authorization"); !slices.Equal(got, []string{"Bearer two"}) {
		t.Errorf("Authorization headers = %q, want the last WithHeader only", got)
	}
	if _, err := c.GetRun(t.Context(), ""); err == nil {
		t.Error("GetRun with an empty run id succeeded")
	}
}

func TestAPIError(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/workflows/runs/missing":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":"WORKFLOW_RUN_NOT_FOUND","message":"no run \"missing\"","retryable":false,` +
				`"nodeId":"n1","details":{"parameter":"run_id"},"requestId":"req_9"}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>bad gateway</html>\n"))
		}
	}))
	t.Cleanup(hs.Close)
	c, err := New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		runID string
		want  APIError
		text  string
	}{{
		runID: "missing",
		want: APIError{Status: 404, Code: runstream.CodeWorkflowRunNotFound, Message: `no run "missing"`, NodeID: "n1",
			Details: map[string]any{"parameter": "run_id"}, RequestID: "req_9"},
		text: `get run missing: WORKFLOW_RUN_NOT_FOUND (HTTP 404): no run "missing" (request req_9)`,
	}, {
		runID: "proxied",
		want:  APIError{Status: 502, Message: "<html>bad gateway</html>", Retryable: true},
		text:  "get run proxied: HTTP 502: <html>bad gateway</html>",
	}}
	for _, tt := range tests {
		_, err := c.GetRun(t.Context(), tt.runID)
		var apiErr *APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("GetRun(%q) error %v holds no *APIError", tt.runID, err)
		}
		if !reflect.DeepEqual(*apiErr, tt.want) {
			t.Errorf("GetRun(%q) error = %+v, want %+v", tt.runID, *apiErr, tt.want)
		}
		if err.Error() != tt.text {
			t.Errorf("error text = %q, want %q", err.Error(), tt.text)
		}
	}
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	s := &pageServer{n: 10, pageSize: 4}
	c := newPageClient(t, s)
	page, err := c.ListEvents(t.Context(), fakeRunID, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, env := range page.Events {
		seqs = append(seqs, env.Seq)
	}
	if !slices.Equal(seqs, []int64{3, 4, 5, 6}) || !page.HasMore || page.NextAfter != 6 {
		t.Errorf("page = %v hasMore %v nextAfter %d, want [3 4 5 6] true 6", seqs, page.HasMore, page.NextAfter)
	}
	if want := envelope(3, workflow.EventNodeProgress); !page.Events[0].Timestamp.Equal(want.Timestamp) || string(page.Events[0].Data) != string(want.Data) {
		t.Errorf("first event = %+v, want %+v", page.Events[0], want)
	}
	if _, err := c.ListEvents(t.Context(), fakeRunID, 0, 250); err != nil {
		t.Fatal(err)
	}
	if want := []string{"after=2", "after=0&limit=250"}; !slices.Equal(s.queries, want) {
		t.Errorf("queries = %q, want %q", s.queries, want)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		n, pageSize int64
		after       int64
		stopAt      int64 // the caller breaks after this seq; 0 never
		wantSeq     []int64
		wantQueries []string
	}{{
		name: "every page", n: 10, pageSize: 3,
		wantSeq:     seqRange(1, 10),
		wantQueries: []string{"after=0&limit=1000", "after=3&limit=1000", "after=6&limit=1000", "after=9&limit=1000"},
	}, {
		name: "pages end on a full page", n: 6, pageSize: 3,
		wantSeq:     seqRange(1, 6),
		wantQueries: []string{"after=0&limit=1000", "after=3&limit=1000"},
	}, {
		name: "after", n: 10, pageSize: 4, after: 5,
		wantSeq:     seqRange(6, 10),
		wantQueries: []string{"after=5&limit=1000", "after=9&limit=1000"},
	}, {
		name: "no events", n: 0, pageSize: 4,
		wantQueries: []string{"after=0&limit=1000"},
	}, {
		name: "the caller stops", n: 10, pageSize: 3, stopAt: 4,
		wantSeq:     seqRange(1, 4),
		wantQueries: []string{"after=0&limit=1000", "after=3&limit=1000"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &pageServer{n: tt.n, pageSize: tt.pageSize}
			c := newPageClient(t, s)
			var seqs []int64
			for env, err := range c.Events(t.Context(), fakeRunID, tt.after) {
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, env.Seq)
				if env.Seq == tt.stopAt {
					break
				}
			}
			if !slices.Equal(seqs, tt.wantSeq) {
				t.Errorf("seqs = %v, want %v", seqs, tt.wantSeq)
			}
			if !slices.Equal(s.queries, tt.wantQueries) {
				t.Errorf("queries = %q, want %q", s.queries, tt.wantQueries)
			}
		})
	}
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()
	c := newPageClient(t, &pageServer{stall: true})
	for _, runID := range []string{fakeRunID, "missing"} {
		var err error
		yields := 0
		for _, err = range c.Events(t.Context(), runID, 0) {
			yields++
		}
		if err == nil || yields != 1 {
			t.Errorf("Events(%q): %d yields ending with %v, want one error", runID, yields, err)
		}
	}
}
