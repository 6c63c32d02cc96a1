package runeventstest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// BenchHarness opens stores for the shared benchmarks.
type BenchHarness struct {
	// Open returns a new, empty store with default options; the benchmark
	// closes it.
	Open func(b *testing.B) runevents.Store
	// Dir is where the store keeps its data, for the fsync probe; "" when
	// the store has no files (the probe is then skipped).
	Dir string
}

// Sizes of the benchmark workloads.
const (
	benchEventBytes = 300       // approximate size of one event's content and metadata
	bigThreadRows   = 1_000_000 // rows of the thread the page reads run on
	bigRunRows      = 100_000   // rows per run of that thread
	bigBatch        = 1000      // rows per PutBatch while building it
	bigMessageEvery = 10        // every 10th row of it is a message
)

// BenchmarkRunEventStore runs the shared benchmarks against the stores h
// opens:
//
//   - PutBatch100: PutBatch of 100 events on one thread; reports events/s.
//   - PutConcurrent64: Put from 64 goroutines on one thread; events/s.
//   - 1M/ListEventsAfterSeq500: ListEvents pages of 500 at random after_seq
//     on a run of a 1,000,000-row thread; reports p50-ms.
//   - 1M/ListMessagesLatest: the latest 50 messages of that thread; p50-ms.
//   - FsyncProbe: fsync latency of the disk under h.Dir (p50-µs, p99-µs),
//     so that write numbers can be read against the disk they ran on.
//
// Events are about 300 bytes. The 1M thread is built once per run with
// PutBatch of 1000 rows: a few seconds on memory, longer on durable
// backends (its build time is logged).
func BenchmarkRunEventStore(b *testing.B, h BenchHarness) {
	if h.Open == nil {
		b.Fatal("runeventstest: BenchHarness.Open is nil")
	}
	b.Run("PutBatch100", func(b *testing.B) { benchPutBatch(b, openBench(b, h), 100) })
	b.Run("PutConcurrent64", func(b *testing.B) { benchPutConcurrent(b, openBench(b, h), 64) })
	b.Run("1M", func(b *testing.B) {
		s := openBench(b, h)
		buildBigThread(b, s)
		b.Run("ListEventsAfterSeq500", func(b *testing.B) { benchListEvents(b, s) })
		b.Run("ListMessagesLatest", func(b *testing.B) { benchListMessagesLatest(b, s) })
	})
	b.Run("FsyncProbe", func(b *testing.B) {
		if h.Dir == "" {
			b.Skip("BenchHarness.Dir is empty: the store has no files")
		}
		var p50, p99 time.Duration
		for b.Loop() {
			p50, p99 = MeasureFsync(b, h.Dir)
		}
		b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	})
}

func openBench(b *testing.B, h BenchHarness) runevents.Store {
	b.Helper()
	s := h.Open(b)
	if s == nil {
		b.Fatal("runeventstest: BenchHarness.Open returned nil")
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
	return s
}

// benchContent is a JSON string that makes an event of about
// benchEventBytes with its envelope.
var benchContent = json.RawMessage(`"` + strings.Repeat("lorem ipsum ", (benchEventBytes-60)/12) + `"`)

func benchEvent(thread, run string, i int) runevents.NewEvent {
	e := runevents.NewEvent{
		ThreadID: thread, RunID: run, UserID: alice,
		EventType: runevents.EventSubagentStep, Category: runevents.CategorySubagent,
		Content:  benchContent,
		Metadata: json.RawMessage(`{"task_id":"task-1","message_index":` + fmt.Sprint(i) + `}`),
	}
	if i%bigMessageEvery == 0 {
		e.EventType, e.Category, e.Metadata = runevents.EventLLMAIResponse, runevents.CategoryMessage, json.RawMessage(`{"caller":"lead_agent"}`)
	}
	return e
}

func benchPutBatch(b *testing.B, s runevents.Store, size int) {
	events := make([]runevents.NewEvent, size)
	for i := range events {
		events[i] = benchEvent("bench-batch", "run-1", i)
	}
	for b.Loop() {
		if _, err := s.PutBatch(b.Context(), events); err != nil {
			b.Fatalf("PutBatch: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
}

// benchPutConcurrent runs Put from a fixed pool of workers that share the
// b.Loop budget; events/s is measured on the wall clock including the drain.
func benchPutConcurrent(b *testing.B, s runevents.Store, workers int) {
	work := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	for range workers {
		wg.Go(func() {
			for i := range work {
				if _, err := s.Put(b.Context(), benchEvent("bench-concurrent", fmt.Sprintf("run-%d", i%8), i)); err != nil {
					failed.Do(func() { b.Errorf("Put: %v", err) })
				}
			}
		})
	}
	var start time.Time
	n := 0
	for b.Loop() {
		if n == 0 {
			start = time.Now()
		}
		work <- n
		n++
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}

const bigThread = "bench-big"

func bigRun(i int) string { return fmt.Sprintf("run-%02d", i/bigRunRows) }

// buildBigThread writes bigThreadRows rows to bigThread, bigRunRows per run.
func buildBigThread(b *testing.B, s runevents.Store) {
	b.Helper()
	start := time.Now()
	events := make([]runevents.NewEvent, bigBatch)
	for i := 0; i < bigThreadRows; i += bigBatch {
		for j := range events {
			events[j] = benchEvent(bigThread, bigRun(i+j), i+j)
		}
		if _, err := s.PutBatch(b.Context(), events); err != nil {
			b.Fatalf("building the 1M-row thread: PutBatch at row %d: %v", i, err)
		}
	}
	b.Logf("built a %d-row thread in %s", bigThreadRows, time.Since(start).Round(time.Millisecond))
}

func benchListEvents(b *testing.B, s runevents.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	for b.Loop() {
		// Seqs are 1-based and rows are laid out run after run.
		r := rng.IntN(bigThreadRows / bigRunRows)
		after := int64(r*bigRunRows + rng.IntN(bigRunRows-500))
		start := time.Now()
		recs, err := s.ListEvents(b.Context(), runevents.ListEventsParams{
			ThreadID: bigThread, RunID: bigRun(r * bigRunRows), Owner: runevents.OwnedBy(alice),
			AfterSeq: &after, Limit: 500,
		})
		lat = append(lat, time.Since(start))
		if err != nil || len(recs) != 500 || recs[0].Seq != after+1 {
			b.Fatalf("ListEvents after %d: %d rows, %v; want 500 rows from %d", after, len(recs), err, after+1)
		}
	}
	b.ReportMetric(msOf(percentile(lat, 50)), "p50-ms")
}

func benchListMessagesLatest(b *testing.B, s runevents.Store) {
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		recs, err := s.ListMessages(b.Context(), runevents.ListMessagesParams{
			ThreadID: bigThread, Owner: runevents.OwnedBy(alice), Limit: 50,
		})
		lat = append(lat, time.Since(start))
		if err != nil || len(recs) != 50 || recs[49].Seq != bigThreadRows-bigMessageEvery+1 {
			b.Fatalf("ListMessages: %d rows, %v; want the latest 50", len(recs), err)
		}
	}
	b.ReportMetric(msOf(percentile(lat, 50)), "p50-ms")
}

// MeasureFsync measures the fsync latency of the disk under dir: it
// appends 4 KiB to a temporary file and fsyncs it 200 times, then returns
// the median and 99th percentile. The file is removed afterwards.
func MeasureFsync(b testing.TB, dir string) (p50, p99 time.Duration) {
	b.Helper()
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		b.Fatalf("fsync probe: %v", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	block := make([]byte, 4096)
	lat := make([]time.Duration, 0, 200)
	for range 200 {
		start := time.Now()
		if _, err := f.Write(block); err != nil {
			b.Fatalf("fsync probe: %v", err)
		}
		if err := f.Sync(); err != nil {
			b.Fatalf("fsync probe: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	return percentile(lat, 50), percentile(lat, 99)
}

// percentile returns the p-th percentile of d (nearest rank); it sorts d.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := (len(d)*p + 99) / 100
	return d[max(i-1, 0)]
}

func msOf(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
