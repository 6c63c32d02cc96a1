package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runstream/runstream/workflow"
)

// BenchmarkReplay measures a follower's replay of stored events from
// cursor 0, server side only (the response goes to a discarding writer).
func BenchmarkReplay(b *testing.B) {
	env := newWorkflowEnv(b, StreamConfig{})
	defer env.srv.Close()
	const n = 20000
	batch := make([]workflow.NewEvent, 0, 1000)
	for len(batch) < cap(batch) {
		batch = append(batch, workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: "w", NodeRunID: "nr",
			Data: json.RawMessage(`{"channel":"text","delta":"` + strings.Repeat("x", 170) + `"}`)})
	}
	for i := 0; i < n/len(batch); i++ {
		if _, err := env.log.Append(b.Context(), workflow.AppendParams{RunID: env.run.ID, Events: batch}); err != nil {
			b.Fatal(err)
		}
	}
	env.complete(b)
	for b.Loop() {
		rec := &discardRecorder{header: http.Header{}}
		env.api.ServeHTTP(rec, httptest.NewRequest("GET", "/api/workflows/runs/"+env.run.ID+"/stream", nil))
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// discardRecorder is a ResponseWriter that keeps the status and drops
// the body.
type discardRecorder struct {
	header http.Header
	code   int
}

func (r *discardRecorder) Header() http.Header         { return r.header }
func (r *discardRecorder) WriteHeader(code int)        { r.code = code }
func (r *discardRecorder) Write(b []byte) (int, error) { return io.Discard.Write(b) }

// BenchmarkIngestBatch100 measures a POST of 100 events of about 200
// bytes to the thread ingest, server side only, on the memory store: the
// handler's decoding, checks, redaction, preparation and answer.
func BenchmarkIngestBatch100(b *testing.B) {
	env := newThreadEnv(b)
	event := `{"event_type":"run.start","content":{"chain":"1780000000000000000 ` + strings.Repeat("x", 150) + `"},"metadata":{"caller":"bench"}}`
	body := `{"events":[` + strings.TrimSuffix(strings.Repeat(event+",", 100), ",") + `]}`
	for b.Loop() {
		req := httptest.NewRequest("POST", eventsPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := &discardRecorder{header: http.Header{}}
		env.api.ServeHTTP(rec, req)
		if rec.code != http.StatusCreated {
			b.Fatalf("status %d, want 201", rec.code)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "events/s")
}
