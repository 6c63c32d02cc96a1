package metrics_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/metrics"
	"github.com/runstream/runstream/runevents"
)

// BenchmarkThreadAppend measures a one-event thread append through the
// event log over a memory store, without and with the metrics observer:
// the difference is what the metrics cost an append.
func BenchmarkThreadAppend(b *testing.B) {
	validator, err := contracts.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	event := runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventLLMAIResponse,
		Content:  json.RawMessage(`{"type":"ai","content":"hello","tool_calls":[]}`),
		Metadata: json.RawMessage(`{"caller":"lead_agent","usage":{},"latency_ms":5,"llm_call_index":1}`)}
	for _, observed := range []bool{false, true} {
		name := "plain"
		if observed {
			name = "metrics"
		}
		b.Run(name, func(b *testing.B) {
			store := memory.NewRunEventStore()
			defer store.Close()
			log := eventlog.NewThreadLog(store, validator, live.New(live.Config{}), eventlog.ThreadLimits{})
			if observed {
				log.Observer = metrics.New(prometheus.NewRegistry(), "memory").Append
			}
			ctx := context.Background()
			for b.Loop() {
				if _, err := log.Append(ctx, "u", []runevents.NewEvent{event}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
