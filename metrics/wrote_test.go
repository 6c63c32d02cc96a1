package metrics_test

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream/metrics"
)

// Wrote counts each kind's frames and bytes under its own label, from
// concurrent writers.
func TestStreamsWroteCountsByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "sqlite")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				m.Streams.Wrote("thread", 2, 300)
				m.Streams.Wrote("workflow", 1, 50)
				m.Streams.Wrote("thread", 0, 20) // a heartbeat: bytes, no frame
			}
		})
	}
	wg.Wait()
	want := map[string]float64{
		"runstream_sse_frames_total thread":   800,
		"runstream_sse_frames_total workflow": 400,
		"runstream_sse_bytes_total thread":    128000,
		"runstream_sse_bytes_total workflow":  20000,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()+" thread"]; !ok {
			continue
		}
		for _, mt := range mf.GetMetric() {
			got[mf.GetName()+" "+mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	if len(got) != len(want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// BenchmarkStreamsWrote is the metrics' share of each write to a follower.
func BenchmarkStreamsWrote(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry(), "sqlite")
	for b.Loop() {
		m.Streams.Wrote("thread", 1, 200)
	}
}
