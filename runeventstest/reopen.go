package runeventstest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// reopenThreads are the threads testReopen writes, with their runs.
var reopenThreads = map[string][]string{"t1": {"ra", "rb"}, "t2": {"ra", "rb", "rc"}, "t3": {"ra"}}

func testReopen(t *testing.T, h Harness) {
	if h.OpenReopenable == nil {
		t.Log("Harness.OpenReopenable is nil: the backend is not durable, reopen not tested")
		return
	}
	s, reopenFn := h.OpenReopenable(t)
	if s == nil || reopenFn == nil {
		t.Fatal("runeventstest: Harness.OpenReopenable returned nil")
	}
	cur := s
	t.Cleanup(func() {
		if err := cur.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	reopen := func() runevents.Store {
		t.Helper()
		next := reopenFn()
		if next == nil {
			t.Fatal("runeventstest: reopen returned nil")
		}
		cur = next
		return next
	}

	at := time.Date(2024, 6, 1, 12, 0, 0, 654321000, time.FixedZone("", 8*3600))
	var t1 []runevents.NewEvent
	for i, c := range []string{`"text\u2028\u0000😀"`, `{"b":[1,2.5e-7,null],"a":true}`, `12345678901234567890`, `null`, ``} {
		e := withMeta(msg("t1", twoRuns[i%2]), `{"caller":"lead_agent","n":1}`)
		e.Content = json.RawMessage(c)
		e.UserID = []string{alice, bob, ""}[i%3]
		if i%2 == 0 {
			e.CreatedAt = at.Add(time.Duration(i) * time.Second)
		}
		t1 = append(t1, e, trace("t1", twoRuns[i%2]))
	}
	t1 = append(t1, ev("t1", "rb", runevents.EventRunStart, runevents.CategoryTrace, mustJSON(strings.Repeat("z", 12000))))
	putBatch(t, cur, t1)
	for _, run := range reopenThreads["t2"] {
		put(t, cur, msg("t2", run))
		put(t, cur, trace("t2", run))
	}
	first, created, err := cur.PutIfAbsent(t.Context(), delivery("t3", "ra", `"once"`))
	if err != nil || !created {
		t.Fatalf("PutIfAbsent: created %v, %v", created, err)
	}

	views := func(s runevents.Store) map[string]threadView {
		out := map[string]threadView{}
		for thread, runs := range reopenThreads {
			out[thread] = viewThread(t, s, thread, runs, runevents.AnyOwner)
		}
		return out
	}
	before := views(cur)
	s = reopen()
	for thread, v := range views(s) {
		sameView(t, "thread "+thread+" after reopen", v, before[thread])
	}
	if got, created, err := s.PutIfAbsent(t.Context(), delivery("t3", "ra", `"twice"`)); err != nil || created {
		t.Errorf("PutIfAbsent after reopen: created %v, %v; want the existing row", created, err)
	} else {
		sameRecord(t, "PutIfAbsent after reopen", got, first)
	}
	if got := put(t, s, trace("t1", "rc")).Seq; got != int64(len(t1)+1) {
		t.Errorf("Put on t1 after reopen: seq %d, want %d", got, len(t1)+1)
	}

	// Deleting the rows that hold a thread's highest seqs must not make
	// the reopened store reuse them.
	if n, err := s.DeleteByRun(t.Context(), "t2", "rc", runevents.AnyOwner); err != nil || n != 2 {
		t.Fatalf("DeleteByRun(t2, rc) = %d, %v; want 2", n, err)
	}
	if n, err := s.DeleteByThread(t.Context(), "t3", runevents.AnyOwner); err != nil || n != 1 {
		t.Fatalf("DeleteByThread(t3) = %d, %v; want 1", n, err)
	}
	s = reopen()
	if v := viewThread(t, s, "t2", reopenThreads["t2"], runevents.AnyOwner); v.rows() != 4 || len(v.runs["rc"]) != 0 {
		t.Errorf("t2 after delete and reopen: %d rows, %d in rc; want 4 and 0", v.rows(), len(v.runs["rc"]))
	}
	if got := put(t, s, trace("t2", "rc")).Seq; got != 7 {
		t.Errorf("Put on t2 after deleting its newest run and reopening: seq %d, want 7", got)
	}
	if got := put(t, s, trace("t3", "ra")).Seq; got != 2 {
		t.Errorf("Put on t3 after deleting it and reopening: seq %d, want 2", got)
	}
	s = reopen()
	for thread, want := range map[string]int64{"t1": int64(len(t1) + 2), "t2": 8, "t3": 3} {
		if got := put(t, s, trace(thread, "rd")).Seq; got != want {
			t.Errorf("Put on %s after a third reopen: seq %d, want %d", thread, got, want)
		}
	}
}
