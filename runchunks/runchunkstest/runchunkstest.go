// Package runchunkstest is the conformance suite every runchunks.Store
// backend runs: the push rules (duplicate, gap, epoch, end in one
// transaction with the thread run row), the cap, cancel requests, the
// lease sweeper's push and retention.
package runchunkstest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
)

// Harness opens stores for the suite.
type Harness struct {
	// Open returns a new, empty chunk store and the run store whose
	// thread run rows its pushes write.
	Open func(t *testing.T) (runchunks.Store, runevents.RunStore)
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("PushAndRead", func(t *testing.T) { testPushAndRead(t, h) })
	t.Run("DuplicateAndOverlap", func(t *testing.T) { testDuplicate(t, h) })
	t.Run("Gap", func(t *testing.T) { testGap(t, h) })
	t.Run("Epoch", func(t *testing.T) { testEpoch(t, h) })
	t.Run("EndWithThreadRunRow", func(t *testing.T) { testEnd(t, h) })
	t.Run("OtherOwner", func(t *testing.T) { testOtherOwner(t, h) })
	t.Run("Cap", func(t *testing.T) { testCap(t, h) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, h) })
	t.Run("Expire", func(t *testing.T) { testExpire(t, h) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, h) })
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func chunks(from, n int) []runchunks.Chunk {
	out := make([]runchunks.Chunk, n)
	for i := range out {
		out[i] = runchunks.Chunk{Event: "messages", Data: json.RawMessage(fmt.Sprintf(`[{"content":"c%d"},{}]`, from+i))}
	}
	return out
}

func push(first int64, cs []runchunks.Chunk) runchunks.Push {
	return runchunks.Push{RunID: "run-1", ThreadID: "thread-1", OwnerID: "alice", Epoch: 1, FirstIndex: first, Chunks: cs, Now: t0, Lease: time.Minute}
}

func mustPush(t *testing.T, s runchunks.Store, p runchunks.Push) runchunks.Result {
	t.Helper()
	res, err := s.Push(context.Background(), p)
	if err != nil {
		t.Fatalf("Push(first %d, %d chunks): %v", p.FirstIndex, len(p.Chunks), err)
	}
	return res
}

func wantCode(t *testing.T, err error, code runstream.ErrorCode) *runstream.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %s", code)
	}
	e := runstream.AsError(err)
	if e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return e
}

func readAll(t *testing.T, s runchunks.Store) []runchunks.Chunk {
	t.Helper()
	got, err := s.ReadChunks(context.Background(), "run-1", -1, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func checkIndexes(t *testing.T, got []runchunks.Chunk, first, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d chunks, want %d", len(got), n)
	}
	for i, c := range got {
		want := fmt.Sprintf(`[{"content":"c%d"},{}]`, first+i)
		if c.Index != int64(first+i) || string(c.Data) != want || c.Event != "messages" {
			t.Fatalf("chunk %d = %d %s %s, want %d %s", i, c.Index, c.Event, c.Data, first+i, want)
		}
	}
}

func testPushAndRead(t *testing.T, h Harness) {
	s, runs := h.Open(t)
	ctx := context.Background()
	res := mustPush(t, s, push(0, chunks(0, 3)))
	if !res.Created || res.Run.NextIndex != 3 || len(res.Appended) != 3 || res.Run.Status != runevents.RunRunning {
		t.Fatalf("first push = %+v", res)
	}
	mustPush(t, s, push(3, chunks(3, 2)))
	checkIndexes(t, readAll(t, s), 0, 5)
	page, err := s.ReadChunks(ctx, "run-1", 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, page, 2, 2)
	// A byte bound stops a page after the chunk that reaches it (each
	// chunk's data is 21 bytes here), and never empties it.
	for _, tc := range []struct{ after, limit, maxBytes, first, n int }{
		{-1, 10, 42, 0, 2}, {-1, 10, 43, 0, 3}, {-1, 10, 1, 0, 1}, {2, 10, 1000, 3, 2}, {0, 2, 1000, 1, 2},
	} {
		page, err := s.ReadChunks(ctx, "run-1", int64(tc.after), tc.limit, tc.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		checkIndexes(t, page, tc.first, tc.n)
	}
	run, err := s.GetRun(ctx, "run-1")
	if err != nil || run.NextIndex != 5 || run.FirstIndex != 0 || run.ThreadID != "thread-1" || run.Epoch != 1 || !run.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("GetRun = %+v, %v", run, err)
	}
	row, err := runs.GetRun(ctx, "thread-1", "run-1", runstream.OwnedBy("alice"))
	if err != nil || row.Status != runevents.RunRunning {
		t.Fatalf("thread run row = %+v, %v; want running", row, err)
	}
	if row.OperationKind != "run" {
		t.Fatalf("thread run row operation kind = %q, want run (token usage and supersession count only run rows)", row.OperationKind)
	}
	if _, err := s.GetRun(ctx, "nope"); runstream.AsError(err).Code != runstream.CodeNotFound {
		t.Fatalf("GetRun(unknown) err = %v, want NOT_FOUND", err)
	}
}

func testDuplicate(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	mustPush(t, s, push(0, chunks(0, 3)))
	res := mustPush(t, s, push(0, chunks(0, 3))) // a retry
	if len(res.Appended) != 0 || res.Run.NextIndex != 3 {
		t.Fatalf("retried push = %+v, want nothing appended", res)
	}
	res = mustPush(t, s, push(1, chunks(1, 4))) // overlaps: appends 3, 4
	if len(res.Appended) != 2 || res.Appended[0].Index != 3 || res.Run.NextIndex != 5 {
		t.Fatalf("overlapping push = %+v, want 3 and 4 appended", res)
	}
	checkIndexes(t, readAll(t, s), 0, 5)
}

func testGap(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	_, err := s.Push(context.Background(), push(2, chunks(2, 1)))
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["expected_index"] != int64(0) {
		t.Fatalf("details = %v, want expected_index 0", e.Details)
	}
	mustPush(t, s, push(0, chunks(0, 3)))
	_, err = s.Push(context.Background(), push(4, chunks(4, 1)))
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["expected_index"] != int64(3) {
		t.Fatalf("details = %v, want expected_index 3", e.Details)
	}
	checkIndexes(t, readAll(t, s), 0, 3)
}

func testEpoch(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	mustPush(t, s, push(0, chunks(0, 2)))
	p := push(2, chunks(2, 1))
	p.Epoch = 2 // a takeover
	if res := mustPush(t, s, p); res.Run.Epoch != 2 || res.Run.NextIndex != 3 {
		t.Fatalf("takeover = %+v", res.Run)
	}
	_, err := s.Push(context.Background(), push(3, chunks(3, 1))) // the old worker
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["current_epoch"] != int64(2) {
		t.Fatalf("details = %v, want current_epoch 2", e.Details)
	}
	// A takeover's chunks are new: starting below the next index they
	// would be skipped as duplicates, so the push is refused whole.
	p = push(1, chunks(1, 3))
	p.Epoch = 3
	_, err = s.Push(context.Background(), p)
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["expected_index"] != int64(3) {
		t.Fatalf("details = %v, want expected_index 3", e.Details)
	}
	// An empty takeover push learns the next index; a retry of the
	// takeover's own chunks, at its epoch, is a duplicate as usual.
	p = push(0, nil)
	p.Epoch = 3
	if res := mustPush(t, s, p); res.Run.Epoch != 3 || res.Run.NextIndex != 3 {
		t.Fatalf("empty takeover = %+v", res.Run)
	}
	p = push(3, chunks(3, 1))
	p.Epoch = 3
	if res := mustPush(t, s, p); len(res.Appended) != 1 || res.Appended[0].Index != 3 {
		t.Fatalf("first push of the new epoch = %+v, want 3 appended", res)
	}
	if res := mustPush(t, s, p); len(res.Appended) != 0 || res.Run.NextIndex != 4 {
		t.Fatalf("retried push of the new epoch = %+v, want nothing appended", res)
	}
	checkIndexes(t, readAll(t, s), 0, 4)
	// Nor is a takeover's chunk below the next index of an ended run a
	// duplicate.
	end := push(4, nil)
	end.Epoch = 3
	end.End = &runchunks.End{Status: runevents.RunSuccess}
	mustPush(t, s, end)
	p = push(3, chunks(3, 1))
	p.Epoch = 4
	_, err = s.Push(context.Background(), p)
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["status"] != "success" {
		t.Fatalf("details = %v, want status success", e.Details)
	}
	checkIndexes(t, readAll(t, s), 0, 4)
}

func testEnd(t *testing.T, h Harness) {
	s, runs := h.Open(t)
	ctx := context.Background()
	mustPush(t, s, push(0, chunks(0, 2)))
	// The producer writes the row's usage meanwhile; the end sets only
	// its status (and updated_at).
	usage, err := runs.GetRun(ctx, "thread-1", "run-1", runstream.AnyOwner)
	if err != nil {
		t.Fatal(err)
	}
	usage.Usage.TotalTokens, usage.ModelName = 45, "m"
	if _, err := runs.PutRun(ctx, usage); err != nil {
		t.Fatal(err)
	}
	p := push(2, nil)
	p.End = &runchunks.End{Status: runevents.RunError, Error: json.RawMessage(`{"message":"boom","name":"ValueError"}`)}
	res := mustPush(t, s, p)
	if !res.Ended || !res.Run.Ended() || res.Run.Status != runevents.RunError || len(res.Appended) != 1 ||
		res.Appended[0].Event != runchunks.ErrorEvent || res.Appended[0].Index != 2 || !res.Run.LeaseExpiresAt.IsZero() {
		t.Fatalf("end = %+v", res)
	}
	row, err := runs.GetRun(ctx, "thread-1", "run-1", runstream.AnyOwner)
	if err != nil || row.Status != runevents.RunError || row.Usage.TotalTokens != 45 || row.ModelName != "m" {
		t.Fatalf("thread run row = %+v, %v; want error, its usage and model kept", row, err)
	}
	if res := mustPush(t, s, p); res.Ended || len(res.Appended) != 0 || res.Run.NextIndex != 3 { // a retried end
		t.Fatalf("retried end = %+v", res)
	}
	if res := mustPush(t, s, push(0, chunks(0, 2))); len(res.Appended) != 0 {
		t.Fatalf("retried chunks after the end = %+v", res)
	}
	_, err = s.Push(ctx, push(3, chunks(3, 1)))
	if e := wantCode(t, err, runstream.CodeConflict); e.Details["status"] != "error" {
		t.Fatalf("details = %v", e.Details)
	}
	other := push(3, nil)
	other.End = &runchunks.End{Status: runevents.RunSuccess}
	_, err = s.Push(ctx, other)
	wantCode(t, err, runstream.CodeConflict)
	got := readAll(t, s)
	if len(got) != 3 || string(got[2].Data) != `{"message":"boom","name":"ValueError"}` {
		t.Fatalf("chunks = %+v", got)
	}
}

func testOtherOwner(t *testing.T, h Harness) {
	s, runs := h.Open(t)
	ctx := context.Background()
	mustPush(t, s, push(0, chunks(0, 1)))
	p := push(1, chunks(1, 1))
	p.OwnerID = "mallory"
	_, err := s.Push(ctx, p)
	wantCode(t, err, runstream.CodeNotFound)
	p = push(1, chunks(1, 1))
	p.ThreadID = "thread-2"
	_, err = s.Push(ctx, p)
	wantCode(t, err, runstream.CodeConflict)

	// A thread run row of another owner refuses the stream's creation.
	if _, err := runs.PutRun(ctx, runevents.ThreadRun{ThreadID: "thread-9", RunID: "run-9", OwnerID: "bob", Status: runevents.RunPending, OperationKind: "run"}); err != nil {
		t.Fatal(err)
	}
	p = push(0, chunks(0, 1))
	p.ThreadID, p.RunID = "thread-9", "run-9"
	_, err = s.Push(ctx, p)
	wantCode(t, err, runstream.CodeNotFound)
	if _, err := s.GetRun(ctx, "run-9"); runstream.AsError(err).Code != runstream.CodeNotFound {
		t.Fatalf("refused push left a run: %v", err)
	}
	// The owner's own pending row goes running.
	p.OwnerID = "bob"
	mustPush(t, s, p)
	row, err := runs.GetRun(ctx, "thread-9", "run-9", runstream.AnyOwner)
	if err != nil || row.Status != runevents.RunRunning {
		t.Fatalf("row = %+v, %v", row, err)
	}
}

func testCap(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	p := push(0, chunks(0, 4))
	p.MaxChunks = 3
	res := mustPush(t, s, p)
	if res.Run.FirstIndex != 1 || res.Run.NextIndex != 4 {
		t.Fatalf("capped run = %+v", res.Run)
	}
	p = push(4, chunks(4, 2))
	p.MaxChunks = 3
	if res := mustPush(t, s, p); res.Run.FirstIndex != 3 {
		t.Fatalf("capped run = %+v", res.Run)
	}
	checkIndexes(t, readAll(t, s), 3, 3)
}

func testCancel(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	ctx := context.Background()
	if _, err := s.RequestCancel(ctx, "run-1", "interrupt", t0); runstream.AsError(err).Code != runstream.CodeNotFound {
		t.Fatalf("cancel of no run: %v", err)
	}
	mustPush(t, s, push(0, chunks(0, 1)))
	run, err := s.RequestCancel(ctx, "run-1", "interrupt", t0.Add(time.Second))
	if err != nil || run.Cancel == nil || run.Cancel.Action != "interrupt" || !run.Cancel.RequestedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("cancel = %+v, %v", run, err)
	}
	// The same action keeps the first time; another one replaces it.
	run, err = s.RequestCancel(ctx, "run-1", "interrupt", t0.Add(1500*time.Millisecond))
	if err != nil || run.Cancel.Action != "interrupt" || !run.Cancel.RequestedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("repeated cancel = %+v, %v", run.Cancel, err)
	}
	run, err = s.RequestCancel(ctx, "run-1", "rollback", t0.Add(2*time.Second))
	if err != nil || run.Cancel.Action != "rollback" || !run.Cancel.RequestedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("second cancel = %+v, %v", run.Cancel, err)
	}
	res := mustPush(t, s, push(1, nil)) // a heartbeat sees it
	if res.Run.Cancel == nil || res.Run.Cancel.Action != "rollback" {
		t.Fatalf("push answer cancel = %+v", res.Run.Cancel)
	}
	end := push(1, nil)
	end.End = &runchunks.End{Status: runevents.RunInterrupted}
	mustPush(t, s, end)
	run, err = s.RequestCancel(ctx, "run-1", "interrupt", t0.Add(3*time.Second))
	if err != nil || !run.Ended() || run.Status != runevents.RunInterrupted {
		t.Fatalf("cancel of an ended run = %+v, %v", run, err)
	}
}

func testExpire(t *testing.T, h Harness) {
	s, runs := h.Open(t)
	ctx := context.Background()
	mustPush(t, s, push(0, chunks(0, 2)))
	expired, err := s.ExpiredRuns(ctx, t0.Add(30*time.Second), 10)
	if err != nil || len(expired) != 0 {
		t.Fatalf("expired before the lease = %+v, %v", expired, err)
	}
	expired, err = s.ExpiredRuns(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(expired) != 1 || expired[0].RunID != "run-1" {
		t.Fatalf("expired = %+v, %v", expired, err)
	}
	sweep := func(now time.Time) runchunks.Result {
		return mustPush(t, s, runchunks.Push{RunID: "run-1", ThreadID: "thread-1", OwnerID: "alice", Expire: true, Now: now,
			Chunks: []runchunks.Chunk{{Event: runchunks.ErrorEvent, Data: json.RawMessage(`{"message":"lost","name":"LeaseExpired"}`)}},
			End:    &runchunks.End{Status: runevents.RunError}})
	}
	if res := sweep(t0.Add(30 * time.Second)); !res.Skipped {
		t.Fatalf("sweep of a live lease = %+v, want skipped", res)
	}
	mustPush(t, s, runchunks.Push{RunID: "run-1", ThreadID: "thread-1", OwnerID: "alice", Epoch: 1, FirstIndex: 2, Now: t0.Add(50 * time.Second), Lease: time.Minute})
	if res := sweep(t0.Add(time.Minute)); !res.Skipped {
		t.Fatalf("sweep of a renewed lease = %+v, want skipped", res)
	}
	res := sweep(t0.Add(2 * time.Minute))
	if res.Skipped || !res.Ended || len(res.Appended) != 1 || res.Appended[0].Index != 2 || res.Run.Status != runevents.RunError || res.Run.Epoch != 2 {
		t.Fatalf("sweep = %+v", res)
	}
	row, err := runs.GetRun(ctx, "thread-1", "run-1", runstream.AnyOwner)
	if err != nil || row.Status != runevents.RunError {
		t.Fatalf("thread run row = %+v, %v", row, err)
	}
	if res := sweep(t0.Add(3 * time.Minute)); !res.Skipped {
		t.Fatalf("second sweep = %+v, want skipped", res)
	}
	if expired, _ := s.ExpiredRuns(ctx, t0.Add(time.Hour), 10); len(expired) != 0 {
		t.Fatalf("ended run still expired: %+v", expired)
	}
}

func testRetention(t *testing.T, h Harness) {
	s, _ := h.Open(t)
	ctx := context.Background()
	mustPush(t, s, push(0, chunks(0, 3)))
	if n, err := s.DeleteEndedChunks(ctx, t0.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("active run's chunks deleted: %d, %v", n, err)
	}
	end := push(3, nil)
	end.End = &runchunks.End{Status: runevents.RunSuccess}
	mustPush(t, s, end)
	if n, err := s.DeleteEndedChunks(ctx, t0); err != nil || n != 0 {
		t.Fatalf("deleted before the TTL: %d, %v", n, err)
	}
	if n, err := s.DeleteEndedChunks(ctx, t0.Add(time.Second)); err != nil || n != 3 {
		t.Fatalf("DeleteEndedChunks = %d, %v; want 3", n, err)
	}
	run, err := s.GetRun(ctx, "run-1")
	if err != nil || run.FirstIndex != 3 || run.NextIndex != 3 || run.Status != runevents.RunSuccess {
		t.Fatalf("run after retention = %+v, %v", run, err)
	}
	if got := readAll(t, s); len(got) != 0 {
		t.Fatalf("chunks left: %+v", got)
	}
}
