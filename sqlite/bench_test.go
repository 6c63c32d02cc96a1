//go:build unix

package sqlite

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// These benchmarks complement runeventstest's: they report the CPU time spent
// per event (by every goroutine of the process), which, unlike events/s,
// does not depend on how busy the machine's other processes keep the
// cores, and how many write requests a group transaction carried.

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchContent = json.RawMessage(`"` + strings.Repeat("lorem ipsum ", 20) + `"`)

// benchEvent returns the i-th event of a thread, in one of runs runs.
func benchEvent(i, runs int) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "bench", RunID: fmt.Sprint("run-", i%runs), UserID: "alice",
		EventType: runevents.EventSubagentStep, Category: runevents.CategorySubagent, Content: benchContent,
		Metadata: json.RawMessage(`{"task_id":"task-1","message_index":` + fmt.Sprint(i) + `}`)}
}

// reportWrites reports cpu-µs/event, events/s and requests/txn since the
// given starting points.
func reportWrites(b *testing.B, db *DB, events int, cpu0 time.Duration, tx0, req0 int64) {
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(events), "cpu-µs/event")
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	tx, req := db.stats.transactions.Load()-tx0, db.stats.requests.Load()-req0
	b.ReportMetric(float64(req)/float64(max(tx, 1)), "requests/txn")
}

func BenchmarkPutBatch100(b *testing.B) {
	for _, sync := range []string{SynchronousFull, SynchronousNormal} {
		b.Run(sync, func(b *testing.B) {
			s := openStore(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
			defer s.Close()
			events := make([]runevents.NewEvent, 100)
			for i := range events {
				events[i] = benchEvent(i, 1) // as runeventstest's PutBatch100
			}
			cpu0, tx0, req0 := cpuTime(), s.db.stats.transactions.Load(), s.db.stats.requests.Load()
			n := 0
			for b.Loop() {
				if _, err := s.PutBatch(b.Context(), events); err != nil {
					b.Fatal(err)
				}
				n += len(events)
			}
			reportWrites(b, s.db, n, cpu0, tx0, req0)
		})
	}
}

func BenchmarkPutConcurrent(b *testing.B) {
	for _, sync := range []string{SynchronousFull, SynchronousNormal} {
		b.Run(sync, func(b *testing.B) {
			s := openStore(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
			defer s.Close()
			cpu0, tx0, req0 := cpuTime(), s.db.stats.transactions.Load(), s.db.stats.requests.Load()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ { // 8 runs, as runeventstest's PutConcurrent64
					if _, err := s.Put(b.Context(), benchEvent(i, 8)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportWrites(b, s.db, b.N, cpu0, tx0, req0)
		})
	}
}

// BenchmarkListEvents500 reads pages of 500 rows at random cursors of a
// 200,000-row thread (10 runs, built run after run), as runeventstest's 1M
// benchmark does on a thread five times as big.
func BenchmarkListEvents500(b *testing.B) {
	const rows, runs, page = 200_000, 10, 500
	s := openStore(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: SynchronousNormal})
	defer s.Close()
	events := make([]runevents.NewEvent, 1000)
	for i := 0; i < rows; i += len(events) {
		for j := range events {
			events[j] = benchEvent(0, 1)
			events[j].RunID = fmt.Sprint("run-", (i+j)/(rows/runs))
		}
		if _, err := s.PutBatch(b.Context(), events); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	cpu0 := cpuTime()
	for b.Loop() {
		r := rng.IntN(runs)
		after := int64(r*(rows/runs) + rng.IntN(rows/runs-page))
		start := time.Now()
		recs, err := s.ListEvents(b.Context(), runevents.ListEventsParams{ThreadID: "bench", RunID: fmt.Sprint("run-", r),
			Owner: runevents.OwnedBy("alice"), AfterSeq: &after, Limit: page})
		lat = append(lat, time.Since(start))
		if err != nil || len(recs) != page || recs[0].Seq != after+1 {
			b.Fatalf("ListEvents after %d: %d rows, %v", after, len(recs), err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(len(lat))/1000, "cpu-ms/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkListThreadEvents500 reads pages of 500 rows of a 20,000-row
// thread, as a follower's catch-up does, with the packed row (two columns,
// as ListThreadEvents reads) and, to compare in the same run, the nine
// columns scanned one by one (as reads did before).
func BenchmarkListThreadEvents500(b *testing.B) {
	const rows, page = 20_000, 500
	s := openBenchThread(b, rows)
	nineColumns := func(after int64) ([]runevents.Record, error) {
		q := listThreadEventsQuery(runevents.ListThreadEventsParams{ThreadID: "bench", Owner: runevents.AnyOwner, AfterSeq: after, Limit: page})
		q.sql = strings.Replace(q.sql, packedRecordColumns, recordColumns, 1)
		rows, err := s.db.reads.query(b.Context(), q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []runevents.Record
		for rows.Next() {
			rec, err := scanRecord(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		return out, rows.Err()
	}
	packed := func(after int64) ([]runevents.Record, error) {
		return s.ListThreadEvents(b.Context(), runevents.ListThreadEventsParams{ThreadID: "bench", Owner: runevents.AnyOwner, AfterSeq: after, Limit: page})
	}
	// Both read the same rows alike.
	want, err := nineColumns(100)
	if err != nil {
		b.Fatal(err)
	}
	if got, err := packed(100); err != nil || !reflect.DeepEqual(got, want) {
		b.Fatalf("packed rows differ from the nine columns (%v)", err)
	}
	for _, bc := range []struct {
		name string
		read func(after int64) ([]runevents.Record, error)
	}{{"NineColumns", nineColumns}, {"Packed", packed}} {
		b.Run(bc.name, func(b *testing.B) {
			after := int64(0)
			cpu0 := cpuTime()
			for b.Loop() {
				recs, err := bc.read(after)
				if err != nil || len(recs) != page || recs[0].Seq != after+1 {
					b.Fatalf("after %d: %d rows, %v", after, len(recs), err)
				}
				after = (after + page) % (rows - page)
			}
			b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*page), "cpu-ns/row")
		})
	}
}

// openBenchThread opens a store (closed when b ends) holding rows events
// of the thread "bench", written in batches of 1,000.
func openBenchThread(b *testing.B, rows int) ownedStore {
	s := openStore(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: SynchronousNormal})
	b.Cleanup(func() { s.Close() })
	events := make([]runevents.NewEvent, 1000)
	for i := 0; i < rows; i += len(events) {
		for j := range events {
			events[j] = benchEvent(i+j, 1)
		}
		if _, err := s.PutBatch(b.Context(), events); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkThreadEnvelopes500 reads pages of 500 rows of a 20,000-row
// thread as JSON envelopes: with ScanThreadJSON and, to compare in the
// same run, with ListThreadEvents and Record.AppendJSON.
func BenchmarkThreadEnvelopes500(b *testing.B) {
	const rows, page = 20_000, 500
	s := openBenchThread(b, rows)
	var buf []byte
	records := func(p runevents.ListThreadEventsParams) (int, error) {
		recs, err := s.ListThreadEvents(b.Context(), p)
		buf = buf[:0]
		for _, r := range recs {
			buf = r.AppendJSON(buf)
		}
		return len(recs), err
	}
	envelopes := func(p runevents.ListThreadEventsParams) (int, error) {
		n := 0
		buf = buf[:0]
		err := s.ScanThreadJSON(b.Context(), p, func(_ int64, _ string, envelope []byte) error {
			buf = append(buf, envelope...)
			n++
			return nil
		})
		return n, err
	}
	for _, bc := range []struct {
		name string
		read func(runevents.ListThreadEventsParams) (int, error)
	}{{"Records", records}, {"Envelopes", envelopes}} {
		b.Run(bc.name, func(b *testing.B) {
			after := int64(0)
			cpu0 := cpuTime()
			for b.Loop() {
				n, err := bc.read(runevents.ListThreadEventsParams{ThreadID: "bench", Owner: runevents.AnyOwner, AfterSeq: after, Limit: page})
				if err != nil || n != page {
					b.Fatalf("after %d: %d rows, %v", after, n, err)
				}
				after = (after + page) % (rows - page)
			}
			b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*page), "cpu-ns/row")
		})
	}
}

// BenchmarkThreadOwner reads the owner of a thread's first row, as the
// thread service's ownership check does before every append: with
// FirstThreadOwner (one column) and, to compare in the same run, with
// ListThreadEvents of one row (as the check did before).
func BenchmarkThreadOwner(b *testing.B) {
	s := openStore(b, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: SynchronousNormal})
	defer s.Close()
	events := make([]runevents.NewEvent, 100)
	for j := range events {
		events[j] = benchEvent(j, 1)
	}
	if _, err := s.PutBatch(b.Context(), events); err != nil {
		b.Fatal(err)
	}
	b.Run("FirstThreadOwner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if user, ok, err := s.FirstThreadOwner(b.Context(), "bench"); err != nil || !ok || user != "alice" {
				b.Fatalf("FirstThreadOwner = %q, %v, %v", user, ok, err)
			}
		}
	})
	b.Run("ListThreadEvents1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rows, err := s.ListThreadEvents(b.Context(), runevents.ListThreadEventsParams{ThreadID: "bench", Owner: runevents.AnyOwner, Limit: 1})
			if err != nil || len(rows) != 1 || rows[0].UserID != "alice" {
				b.Fatalf("ListThreadEvents = %d rows, %v", len(rows), err)
			}
		}
	})
}
