package chunkpush_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/chunkpush"
	"github.com/runstream/runstream/langgraph"
)

// BenchmarkPushRun pushes runs of 1000 "messages" chunks of about 300
// bytes each (a token stream) through chunkpush to the real push API over
// memory stores, and ends them: the client's batching and the server's
// push path, without a disk.
func BenchmarkPushRun(b *testing.B) {
	s := newRealServer(b, langgraph.Config{})
	token := strings.Repeat("x", 200)
	const chunks = 1000
	n := 0
	for b.Loop() {
		n++
		p, err := chunkpush.Open(context.Background(), chunkpush.Config{URL: s.url, ThreadID: "bench", RunID: fmt.Sprintf("run-%d", n),
			ControlWait: -1, Linger: time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		for i := range chunks {
			if _, err := p.Push(context.Background(), "messages", []any{map[string]any{"type": "AIMessageChunk", "id": "ai", "content": token}, map[string]any{"langgraph_node": "model", "i": i}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := p.End(context.Background(), chunkpush.StatusSuccess, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*chunks)/b.Elapsed().Seconds(), "chunks/s")
}
