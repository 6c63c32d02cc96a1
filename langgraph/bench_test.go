package langgraph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sqlite"
)

// BenchmarkPushSQLite pushes batches of 10 "messages" chunks of about 300
// bytes to one run on a SQLite file (synchronous=FULL) through the
// service, and reports chunks/s.
func BenchmarkPushSQLite(b *testing.B) {
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "rs.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	svc := langgraph.New(db.Chunks(), live.New(live.Config{}), langgraph.Config{})
	text := strings.Repeat("token ", 40)
	chunks := make([]langgraph.PushChunk, 10)
	for i := range chunks {
		chunks[i] = langgraph.PushChunk{Event: "messages", Data: json.RawMessage(fmt.Sprintf(`[{"type":"AIMessageChunk","id":"m1","content":%q},{"langgraph_node":"agent"}]`, text))}
	}
	epoch, first := int64(1), int64(0)
	ctx := context.Background()
	for b.Loop() {
		f := first
		if _, err := svc.Push(ctx, "local", "r1", langgraph.PushRequest{ThreadID: "t1", Epoch: &epoch, FirstIndex: &f, Chunks: chunks}); err != nil {
			b.Fatal(err)
		}
		first += int64(len(chunks))
	}
	b.ReportMetric(float64(first)/b.Elapsed().Seconds(), "chunks/s")
}
