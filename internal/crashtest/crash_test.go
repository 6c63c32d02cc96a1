package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream/sse"
)

// iterations is how many kill-and-restart rounds each crash test runs per
// backend: RUNSTREAM_CRASH_ITERATIONS, 2 by default (CI).
func iterations(t *testing.T) int {
	n := 2
	if v := os.Getenv("RUNSTREAM_CRASH_ITERATIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("RUNSTREAM_CRASH_ITERATIONS=%q: want a positive integer", v)
		}
	}
	return n
}

// The shape of the thread crash test: 50 producers on 10 threads, each
// appending batches of 3 events under Idempotency-Keys.
const (
	producers       = 50
	threads         = 10
	batchesPerProd  = 8
	eventsPerBatch  = 3
	producerTimeout = 90 * time.Second // a producer still retrying then is stuck
)

// TestCrashThreadIngest kills the server with SIGKILL at a random moment
// while 50 producers append, restarts it, and lets the producers retry
// with the same key and body. Then: every acknowledged event is stored
// once with the content it was acknowledged with; each thread's seqs are
// exactly 1..N; every batch is stored once (no retry applied twice); no
// producer is left stuck; each follower's transcript (SSE, resumed with
// Last-Event-ID across the crash) is the thread's rows, without gap or
// duplicate. Backends: sqlite, postgres, and jsonl (serve with
// --run-events jsonl:DIR, the keys committed with the rows in the files).
func TestCrashThreadIngest(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres", "jsonl"} {
		t.Run(backend, func(t *testing.T) {
			for i := range iterations(t) {
				t.Run(fmt.Sprintf("iteration-%d", i+1), func(t *testing.T) { crashThreadIngest(t, backend) })
			}
		})
	}
}

// ack is an acknowledged record, as a producer's 201 answer holds it.
type ack struct {
	thread string
	seq    int64
	record map[string]any
}

func crashThreadIngest(t *testing.T, backend string) {
	dir := t.TempDir()
	args := append(backendArgs(t, backend, dir), "--workers", "0", "--max-streams-per-user", "-1")
	addr := freePort(t)
	srv := startServer(t, dir, addr, args...)
	base := srv.Base()

	acked.Store(0)
	replayed.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followers := make([]*follower, threads)
	var fwg sync.WaitGroup
	for i := range followers {
		followers[i] = &follower{url: fmt.Sprintf("%s/api/threads/t%d/stream", base, i)}
		fwg.Go(func() { followers[i].run(ctx) })
	}

	var (
		mu    sync.Mutex
		acks  []ack
		stuck []string
		fails []string
	)
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Go(func() {
			got, err := produce(base, p)
			mu.Lock()
			defer mu.Unlock()
			acks = append(acks, got...)
			if err != nil {
				if err == errStuck {
					stuck = append(stuck, fmt.Sprintf("producer %d", p))
				} else {
					fails = append(fails, fmt.Sprintf("producer %d: %v", p, err))
				}
			}
		})
	}
	// SIGKILL at a random moment of the load (after 5 to 90 % of the
	// batches were acknowledged), then restart on the same address and
	// store.
	total := producers * batchesPerProd
	killAt := int64(total/20 + rand.IntN(total*85/100))
	killDeadline := time.Now().Add(producerTimeout)
	for acked.Load() < killAt && time.Now().Before(killDeadline) {
		time.Sleep(time.Millisecond)
	}
	srv.Kill()
	ackedAtKill := acked.Load()
	killedLog := srv.Log()
	srv = startServer(t, dir, addr, args...)
	pwg.Wait()
	t.Logf("%s: killed after %d of %d batches were acknowledged; %d retries answered with the first response (replayed)",
		backend, ackedAtKill, total, replayed.Load())
	if len(fails) > 0 || len(stuck) > 0 {
		t.Fatalf("failed producers %v, stuck producers %v\nlog before the kill:\n%s\nlog after:\n%s", fails, stuck, killedLog, srv.Log())
	}

	// The store: every batch once, seqs 1..N, acknowledged records as
	// acknowledged.
	rows := make([][]map[string]any, threads)
	for i := range threads {
		rows[i] = threadRows(t, base, fmt.Sprintf("t%d", i))
		want := producers / threads * batchesPerProd * eventsPerBatch
		if len(rows[i]) != want {
			t.Errorf("thread t%d holds %d rows; want %d (each batch once)", i, len(rows[i]), want)
		}
		seen := map[string]bool{}
		for j, row := range rows[i] {
			if seq := int64(row["seq"].(float64)); seq != int64(j+1) {
				t.Fatalf("thread t%d row %d has seq %d; want seqs 1..N", i, j, seq)
			}
			id := fmt.Sprint(row["content"])
			if seen[id] {
				t.Errorf("thread t%d stores %s twice", i, id)
			}
			seen[id] = true
		}
	}
	if len(acks) != producers*batchesPerProd*eventsPerBatch {
		t.Errorf("%d acknowledged events; want %d", len(acks), producers*batchesPerProd*eventsPerBatch)
	}
	for _, a := range acks {
		var i int
		fmt.Sscanf(a.thread, "t%d", &i)
		if a.seq < 1 || a.seq > int64(len(rows[i])) {
			t.Fatalf("acknowledged %s seq %d is not stored", a.thread, a.seq)
		}
		if stored := rows[i][a.seq-1]; !sameRecord(stored, a.record) {
			t.Fatalf("%s seq %d was acknowledged as %v, is stored as %v", a.thread, a.seq, a.record, stored)
		}
	}

	// The followers: each transcript is its thread's rows.
	deadline := time.Now().Add(60 * time.Second)
	for i, f := range followers {
		for f.count() < len(rows[i]) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	fwg.Wait()
	for i, f := range followers {
		if err := f.check(rows[i]); err != nil {
			t.Errorf("follower of t%d: %v", i, err)
		}
	}
}

// acked counts acknowledged batches; replayed the answers to retries that
// carried Idempotency-Replayed.
var acked, replayed atomic.Int64

var errStuck = fmt.Errorf("still retrying after %v", producerTimeout)

// produce appends producer p's batches, retrying each with the same key
// and body until it is acknowledged (201), and returns the acknowledged
// records. Transport errors, 5xx and a key in progress are retried;
// anything else is an error.
func produce(base string, p int) ([]ack, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	thread := fmt.Sprintf("t%d", p%threads)
	deadline := time.Now().Add(producerTimeout)
	var acks []ack
	for b := range batchesPerProd {
		var events []string
		for e := range eventsPerBatch {
			events = append(events, fmt.Sprintf(`{"event_type":"run.start","content":{"chain":null,"p":%d,"b":%d,"e":%d},"metadata":{"caller":"lead_agent"}}`, p, b, e))
		}
		body := `{"events":[` + join(events) + `]}`
		key := fmt.Sprintf("p%d-b%d", p, b)
		for {
			if time.Now().After(deadline) {
				return acks, errStuck
			}
			req, _ := http.NewRequest("POST", base+"/api/threads/"+thread+"/runs/r1/events", bytes.NewReader([]byte(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			answer, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if resp.StatusCode >= 500 {
				if resp.Header.Get("Retry-After") == "" && resp.StatusCode == http.StatusServiceUnavailable {
					return acks, fmt.Errorf("503 without Retry-After: %s", answer)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if resp.StatusCode != http.StatusCreated {
				return acks, fmt.Errorf("batch %s: %d %s", key, resp.StatusCode, answer)
			}
			var out struct {
				Events []map[string]any `json:"events"`
			}
			if err := json.Unmarshal(answer, &out); err != nil || len(out.Events) != eventsPerBatch {
				return acks, fmt.Errorf("batch %s: answer %s (%v)", key, answer, err)
			}
			acked.Add(1)
			if resp.Header.Get("Idempotency-Replayed") == "true" {
				replayed.Add(1)
			}
			for _, rec := range out.Events {
				acks = append(acks, ack{thread: thread, seq: int64(rec["seq"].(float64)), record: rec})
			}
			break
		}
	}
	return acks, nil
}

func join(items []string) string {
	var b bytes.Buffer
	for i, s := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// threadRows reads every row of run r1 of thread, ascending.
func threadRows(t *testing.T, base, thread string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for {
		url := fmt.Sprintf("%s/api/threads/%s/runs/r1/events?limit=2000", base, thread)
		if len(rows) > 0 {
			url += fmt.Sprintf("&after_seq=%d", int64(rows[len(rows)-1]["seq"].(float64)))
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("list %s: %d %s (%v)", thread, resp.StatusCode, body, err)
		}
		var page []map[string]any
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return rows
		}
		rows = append(rows, page...)
	}
}

// sameRecord compares what identifies a record and its content.
func sameRecord(a, b map[string]any) bool {
	for _, k := range []string{"thread_id", "run_id", "seq", "event_type", "category", "content", "metadata", "created_at"} {
		if !reflect.DeepEqual(a[k], b[k]) {
			return false
		}
	}
	return true
}

// follower follows an SSE stream until its context ends, reconnecting
// with Last-Event-ID after any break, and keeps every frame it read.
type follower struct {
	url string

	mu     sync.Mutex
	frames []frame
}

type frame struct {
	id, event, data string
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.frames)
}

func (f *follower) lastID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frames) == 0 {
		return ""
	}
	return f.frames[len(f.frames)-1].id
}

func (f *follower) run(ctx context.Context) {
	for ctx.Err() == nil {
		f.once(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// once reads one connection of the stream until it breaks.
func (f *follower) once(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, "GET", f.url, nil)
	if err != nil {
		return
	}
	if id := f.lastID(); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return // the thread does not exist yet, or the server is starting
	}
	r := sse.NewReader(resp.Body)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		if !ev.HasID {
			continue
		}
		f.mu.Lock()
		f.frames = append(f.frames, frame{id: ev.ID, event: ev.Type(), data: ev.Data})
		f.mu.Unlock()
	}
}

// check compares the transcript with the stored rows: the same seqs in
// the same order, each once, with the same records.
func (f *follower) check(rows []map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frames) != len(rows) {
		return fmt.Errorf("read %d frames; the thread holds %d rows", len(f.frames), len(rows))
	}
	for i, fr := range f.frames {
		if want := strconv.Itoa(i + 1); fr.id != want {
			return fmt.Errorf("frame %d has id %s; want %s (no gap, no duplicate)", i, fr.id, want)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(fr.data), &rec); err != nil {
			return fmt.Errorf("frame %s: %v", fr.id, err)
		}
		if !sameRecord(rec, rows[i]) {
			return fmt.Errorf("frame %s is %v; the store holds %v", fr.id, rec, rows[i])
		}
	}
	return nil
}
