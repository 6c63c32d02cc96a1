package postgres

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
)

// chunkInstance is one server of LangGraph run streams over a shared
// schema: its hub (whose periodic poll is too slow to matter), woken by
// its listener's chunk notifications, and the service's HTTP endpoints.
type chunkInstance struct {
	url string
}

func newChunkInstance(t *testing.T, db *DB) *chunkInstance {
	t.Helper()
	store := db.Chunks()
	hub := live.New(live.Config{Poll: langgraph.Poller(store, nil), PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		hub.Run(ctx)
	}()
	svc := langgraph.New(store, hub, langgraph.Config{})
	startListener(t, db.NewListener(func(string, int64) {}).OnChunkAppends(svc.Wake))
	api := httpapi.New(httpapi.Config{}, nil, nil)
	svc.Mount(langgraph.HTTP{Mount: api.Mount, User: httpapi.User, WriteError: api.WriteError, Kit: httpapi.ThreadKit(), AcquireStream: api.AcquireStream})
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		svc.Shutdown()
		srv.Close()
		cancel()
		<-stopped
	})
	return &chunkInstance{url: srv.URL}
}

func (in *chunkInstance) push(t *testing.T, run string, first int, events []string, end bool) {
	t.Helper()
	var chunks []string
	for i, e := range events {
		chunks = append(chunks, fmt.Sprintf(`{"event":%q,"data":{"i":%d}}`, e, first+i))
	}
	body := fmt.Sprintf(`{"thread_id":"t1","epoch":1,"first_index":%d,"chunks":[%s]`, first, strings.Join(chunks, ","))
	if end {
		body += `,"end":{"status":"success"}`
	}
	resp, err := http.Post(in.url+"/api/runs/"+run+"/stream-chunks", "application/json", strings.NewReader(body+"}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push %d: status %d", first, resp.StatusCode)
	}
}

// follow joins run on in from the start and returns its frames as "event
// id", closed at the end of the stream.
func (in *chunkInstance) follow(t *testing.T, run string) <-chan string {
	t.Helper()
	resp := apitest.Get(t, in.url+"/api/threads/t1/runs/"+run+"/stream", "Last-Event-ID", "-1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("join: status %d", resp.StatusCode)
	}
	out := make(chan string, 256)
	go func() {
		defer close(out)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			id := ""
			if ev.HasID {
				id = ev.ID
			}
			out <- ev.Event + " " + id
		}
	}()
	return out
}

func nextChunkFrame(t *testing.T, frames <-chan string) string {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("the stream ended")
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame in 10 s")
	}
	return ""
}

// TestTwoInstancesChunks: joiners on instances A and B of one PostgreSQL
// get every chunk pushed through either instance exactly once, in index
// order, and the end, at NOTIFY latency: the hubs poll once an hour, so
// without the chunk notifications nothing pushed through the other
// instance would arrive.
func TestTwoInstancesChunks(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := newChunkInstance(t, openDB(t, schema)), newChunkInstance(t, openDB(t, schema))
	run := uniqueID("r")
	a.push(t, run, 0, []string{"values"}, false)
	onA, onB := a.follow(t, run), b.follow(t, run)
	for _, frames := range []<-chan string{onA, onB} {
		if got := nextChunkFrame(t, frames) + "," + nextChunkFrame(t, frames); got != "metadata ,values 0" {
			t.Fatalf("replay: %s", got)
		}
	}
	for i := 1; i <= 20; i++ {
		in := a
		if i%2 == 0 {
			in = b // the producer's pushes reach either instance
		}
		events := []string{"messages"}
		if i%5 == 0 {
			events = append(events, "updates|sub:1", "values")
		}
		first := i
		if i > 5 {
			first = i + 2*((i-1)/5) // the earlier batches of three
		}
		in.push(t, run, first, events, false)
		for k, e := range events {
			want := fmt.Sprintf("%s %d", e, first+k)
			if got := nextChunkFrame(t, onA); got != want {
				t.Fatalf("A: %s, want %s", got, want)
			}
			if got := nextChunkFrame(t, onB); got != want {
				t.Fatalf("B: %s, want %s", got, want)
			}
		}
	}
	b.push(t, run, 28, nil, true)
	for name, frames := range map[string]<-chan string{"A": onA, "B": onB} {
		if got := nextChunkFrame(t, frames); got != "end " {
			t.Fatalf("%s: %s, want the end", name, got)
		}
		if f, ok := <-frames; ok {
			t.Fatalf("%s: %s after the end", name, f)
		}
	}
}
