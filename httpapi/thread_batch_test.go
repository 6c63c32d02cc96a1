package httpapi

import (
	"strings"
	"testing"

	"github.com/runstream/runstream"
)

// inRun returns an event's JSON with run_id added, for POST
// /api/threads/{thread_id}/events.
func inRun(run, event string) string { return `{"run_id":"` + run + `",` + event[1:] }

// A thread batch goes through the run route's path: redaction, the
// Idempotency-Key replay, the singleton write and another user's thread.
func TestThreadBatch(t *testing.T) { forEachThreadBackend(t, testThreadBatch) }

func testThreadBatch(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	const path = "/api/threads/t1/events"
	secret := `{"event_type":"llm.human.input","content":{"type":"human","content":"key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"},"metadata":{"caller":"lead_agent"}}`
	body := batch(inRun("r1", startJSON), inRun("r2", secret))
	first := env.do(t, "POST", path, body, IdempotencyKeyHeader, "seed-1")
	if first.Code != 201 || strings.Contains(first.Body.String(), "sk-proj") || !strings.Contains(first.Body.String(), `"run_id":"r2"`) {
		t.Fatalf("thread batch = %d %s; want 201, r2's row, the key redacted", first.Code, first.Body)
	}
	again := env.do(t, "POST", path, body, IdempotencyKeyHeader, "seed-1")
	if again.Code != 201 || again.Body.String() != first.Body.String() || again.Header().Get("Idempotency-Replayed") != "true" {
		t.Errorf("retry = %d %s (replayed %q); want the first response again", again.Code, again.Body, again.Header().Get("Idempotency-Replayed"))
	}
	if rows := env.snapshot(t, "t1"); strings.Count(rows, `"seq"`) != 2 || strings.Contains(rows, "sk-proj") {
		t.Errorf("stored rows after a retry: %s", rows)
	}
	// The singleton write, per run.
	for i, want := range []int{201, 200} {
		rec := env.do(t, "POST", path+"?if_absent=true", batch(inRun("r2", deliveryJSON)))
		if rec.Code != want {
			t.Errorf("singleton write %d = %d %s, want %d", i, rec.Code, rec.Body, want)
		}
	}
	wantError(t, env.do(t, "POST", path+"?if_absent=true", batch(inRun("r1", deliveryJSON), inRun("r2", deliveryJSON))), 422, runstream.CodeValidationFailed)
	// Another user's thread: NOT_FOUND, nothing stored.
	before := env.snapshot(t, "t1")
	wantError(t, env.do(t, "POST", path, batch(inRun("r9", startJSON)), testUserHeader, "bob"), 404, runstream.CodeNotFound)
	// A bad run id, a missing one, one on the run route: each refused where it is.
	for body, at := range map[string]string{
		batch(inRun("r1", startJSON), inRun("bad id", startJSON)): "/events/1/run_id",
		batch(inRun("r1", startJSON), startJSON):                  "/events/1/run_id",
	} {
		problems, _ := wantError(t, env.do(t, "POST", path, body), 422, runstream.CodeValidationFailed).Details["problems"].([]any)
		if got, _ := problemAt(problems, 0); got != at {
			t.Errorf("%s: problem at %q, want %q", body, got, at)
		}
	}
	problems, _ := wantError(t, env.do(t, "POST", eventsPath, batch(inRun("r1", startJSON))), 422, runstream.CodeValidationFailed).Details["problems"].([]any)
	if got, _ := problemAt(problems, 0); got != "/events/0/run_id" {
		t.Errorf("run_id on the run route: problem at %q", got)
	}
	if after := env.snapshot(t, "t1"); after != before {
		t.Errorf("refused batches changed the thread")
	}
}

// FastAPI's detail rides on the thread API's errors only.
func TestThreadErrorDetail(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t)
	for _, tc := range []struct {
		method, path, body string
		header             []string
		want               string
	}{
		{"GET", "/api/threads/t1/runs/nope", "", nil, `"detail":"Run nope not found"`},
		{"GET", "/api/threads/t.1/messages", "", nil, `"detail":[{"loc":["path","thread_id"],`},
		{"GET", "/api/threads/t1/messages?limit=0", "", nil, `"detail":[{"loc":["query","limit"],`},
		{"POST", eventsPath, batch(startJSON), []string{IdempotencyKeyHeader, "a\x01b"}, `"detail":[{"loc":["header","Idempotency-Key"],`},
		{"POST", eventsPath, `{"events":[{"event_type":"run.start","category":"message","content":{"chain":null},"metadata":{"caller":"lead_agent"}}]}`, nil, `"detail":[{"loc":["body","events",0,"category"],"msg":"must be \"trace\" for event type run.start","type":"value_error"}]`},
		{"POST", eventsPath, `{"events":[{"category":"trace"}]}`, nil, `"detail":[{"loc":["body","events",0,"event_type"],"msg":"required","type":"missing"}]`},
		{"PUT", "/api/threads/t1/runs/r1", `{"status":"done"}`, nil, `"detail":[{"loc":["body","status"],`},
		{"PUT", "/api/threads/t1/runs/r1", `{"status":"running","colour":"red"}`, nil, `"detail":[{"loc":["body","colour"],`},
		{"POST", eventsPath, `{"events":[{"event_type":"run.start","seq":4}]}`, nil, `"detail":[{"loc":["body","events",0,"seq"],`},
		{"PATCH", "/api/threads/t1/runs/r1", "", nil, `"detail":"method`},
		{"POST", "/api/threads", `{}`, nil, `"detail":"`},
	} {
		rec := env.do(t, tc.method, tc.path, tc.body, tc.header...)
		if !strings.Contains(rec.Body.String(), tc.want) || !strings.Contains(rec.Body.String(), `"code":`) {
			t.Errorf("%s %s = %d %s; want %s beside the unified members", tc.method, tc.path, rec.Code, rec.Body, tc.want)
		}
	}
	// A batch failing in more places than an answer lists counts them.
	many := `{"events":[` + strings.TrimSuffix(strings.Repeat(`{"event_type":"run.start","category":"message","content":{"chain":null},"metadata":{"caller":"lead_agent"}},`, 30), ",") + `]}`
	body := wantError(t, env.do(t, "POST", eventsPath, many), 422, runstream.CodeValidationFailed)
	if problems, _ := body.Details["problems"].([]any); len(problems) != 20 || body.Details["problems_total"] != float64(30) {
		t.Errorf("a batch failing in 30 places: %d problems listed, problems_total %v", len(problems), body.Details["problems_total"])
	}
	for _, path := range []string{"/api/workflows/wf_missing", "/api/workflows/runs/run_missing", "/api/nothing"} {
		if rec := env.do(t, "GET", path, ""); rec.Code != 404 || strings.Contains(rec.Body.String(), `"detail"`) {
			t.Errorf("GET %s = %d %s; want 404 without detail", path, rec.Code, rec.Body)
		}
	}
}
