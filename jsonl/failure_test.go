package jsonl

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var errInjected = errors.New("injected I/O error")

func msgEvent(run, content string) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "t1", RunID: run, EventType: runevents.EventLLMHumanInput,
		Category: runevents.CategoryMessage, Content: json.RawMessage(content)}
}

func mustOpen(t *testing.T, dir string) *RunEventStore {
	t.Helper()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPut(t *testing.T, s *RunEventStore, e runevents.NewEvent) runevents.Record {
	t.Helper()
	rec, err := s.Put(t.Context(), e)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return rec
}

func allSeqs(t *testing.T, s *RunEventStore, run string) []int64 {
	t.Helper()
	recs, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: "t1", RunID: run, Owner: runevents.AnyOwner, Limit: 100})
	if err != nil {
		t.Fatalf("ListEvents(%s): %v", run, err)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func fileSize(t *testing.T, dir, run string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, "threads", "t1", "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestWriteErrorTruncatesAndIsSticky(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustPut(t, s, msgEvent("r1", `"one"`))
	mustPut(t, s, msgEvent("r2", `"two"`))
	size1, size2 := fileSize(t, dir, "r1"), fileSize(t, dir, "r2")

	// The write to r2 stores half its bytes and fails, after r1's write
	// went through.
	s.io.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		if strings.HasSuffix(f.Name(), "r2.jsonl") {
			n, _ := f.WriteAt(b[:len(b)/2], off)
			return n, errInjected
		}
		return f.WriteAt(b, off)
	}
	_, err := s.PutBatch(t.Context(), []runevents.NewEvent{msgEvent("r1", `"a"`), msgEvent("r2", `"b"`), msgEvent("r1", `"c"`)})
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable || !errors.Is(err, errInjected) {
		t.Fatalf("PutBatch with a failing write: %v, want CodeUnavailable", err)
	}
	if got1, got2 := fileSize(t, dir, "r1"), fileSize(t, dir, "r2"); got1 != size1 || got2 != size2 {
		t.Errorf("file sizes after the failed batch: r1 %d r2 %d, want %d %d", got1, got2, size1, size2)
	}
	if got := slices.Concat(allSeqs(t, s, "r1"), allSeqs(t, s, "r2")); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("rows after the failed batch: %v, want [1 2]", got)
	}

	s.io.writeAt = (*os.File).WriteAt // the disk is fine again; the store must still refuse
	for name, write := range map[string]func() error{
		"Put": func() error { _, err := s.Put(t.Context(), msgEvent("r1", `"x"`)); return err },
		"PutBatch": func() error {
			_, err := s.PutBatch(t.Context(), []runevents.NewEvent{msgEvent("r3", `"x"`)})
			return err
		},
		"PutIfAbsent": func() error {
			_, _, err := s.PutIfAbsent(t.Context(), runevents.NewEvent{ThreadID: "t1", RunID: "r1", EventType: runevents.EventRunEnd, Category: runevents.CategoryOutputs})
			return err
		},
		"DeleteByRun": func() error { _, err := s.DeleteByRun(t.Context(), "t1", "r1", runevents.AnyOwner); return err },
	} {
		if err := write(); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
			t.Errorf("%s after a write error: %v, want CodeUnavailable", name, err)
		}
	}
	if got := allSeqs(t, s, "r1"); !slices.Equal(got, []int64{1}) {
		t.Errorf("reads after the failure: %v, want [1]", got)
	}

	s.Close()
	s = mustOpen(t, dir)
	if rec := mustPut(t, s, msgEvent("r1", `"again"`)); rec.Seq != 3 {
		t.Errorf("Put after reopen: seq %d, want 3", rec.Seq)
	}
}

func TestFsyncErrorRollsBackAndIsSticky(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustPut(t, s, msgEvent("r1", `"one"`))
	size := fileSize(t, dir, "r1")
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping before the failure: %v", err)
	}

	s.io.sync = func(*os.File) error { return errInjected }
	if _, err := s.Put(t.Context(), msgEvent("r1", `"two"`)); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable || !errors.Is(err, errInjected) {
		t.Fatalf("Put with a failing fsync: %v, want CodeUnavailable", err)
	}
	if got := fileSize(t, dir, "r1"); got != size {
		t.Errorf("file size after the failed fsync: %d, want %d", got, size)
	}
	if got := allSeqs(t, s, "r1"); !slices.Equal(got, []int64{1}) {
		t.Errorf("rows after the failed fsync: %v, want [1]: an unacknowledged row must not be read", got)
	}
	s.io.sync = (*os.File).Sync
	if _, err := s.Put(t.Context(), msgEvent("r1", `"three"`)); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Put after a failed fsync: %v, want CodeUnavailable", err)
	}
	if err := s.Ping(t.Context()); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable || !errors.Is(err, errInjected) {
		t.Errorf("Ping after a failed fsync: %v, want CodeUnavailable with the cause", err)
	}

	s.Close()
	if err := s.Ping(t.Context()); runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Ping after Close: %v, want CodeUnavailable", err)
	}
	s = mustOpen(t, dir)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after reopen: %v", err)
	}
	if rec := mustPut(t, s, msgEvent("r1", `"again"`)); rec.Seq != 2 {
		t.Errorf("Put after reopen: seq %d, want 2", rec.Seq)
	}
}

func TestNewFileDirectorySynced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	var mu sync.Mutex
	var synced []string
	s.io.sync = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, f.Name())
		return f.Sync()
	}
	mustPut(t, s, msgEvent("r1", `"one"`))
	threads := filepath.Join(dir, "threads")
	want := []string{dir, threads, filepath.Join(threads, "t1"), filepath.Join(threads, "t1", "runs"),
		filepath.Join(threads, "t1", "runs", "r1.jsonl")}
	if !slices.Equal(synced, want) {
		t.Errorf("fsyncs of the first Put:\n%q\nwant every new directory's parent, the runs directory and the file:\n%q", synced, want)
	}
}

// blockSync makes the next fsync of a run file wait for release; entered
// is closed when it starts.
func blockSync(s *RunEventStore) (entered, release chan struct{}, count func() int) {
	entered, release = make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	s.io.sync = func(f *os.File) error {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		return f.Sync()
	}
	return entered, release, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

func TestRowsInvisibleUntilFsynced(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, t.TempDir())
	mustPut(t, s, msgEvent("r1", `"one"`))
	entered, release, _ := blockSync(s)
	done := make(chan error)
	go func() {
		_, err := s.Put(t.Context(), msgEvent("r1", `"two"`))
		done <- err
	}()
	<-entered
	if got := allSeqs(t, s, "r1"); !slices.Equal(got, []int64{1}) {
		t.Errorf("rows while the fsync runs: %v, want [1]", got)
	}
	if n, err := s.CountMessages(t.Context(), "t1", runevents.AnyOwner); n != 1 || err != nil {
		t.Errorf("CountMessages while the fsync runs: %d, %v; want 1", n, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := allSeqs(t, s, "r1"); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("rows after the fsync: %v, want [1 2]", got)
	}
}

func TestGroupCommitSharesFsync(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, t.TempDir())
	mustPut(t, s, msgEvent("r1", `"one"`)) // creates the file and its directories
	entered, release, count := blockSync(s)
	written := make(chan struct{}, 8)
	s.io.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		n, err := f.WriteAt(b, off)
		written <- struct{}{}
		return n, err
	}
	errs := make(chan error, 3)
	put := func() {
		_, err := s.Put(t.Context(), msgEvent("r1", `"x"`))
		errs <- err
	}
	go put()
	<-written
	<-entered // the first writer is fsyncing
	go put()
	go put()
	<-written
	<-written // both others have written and wait for an fsync
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 2 {
		t.Errorf("3 concurrent Puts made %d fsyncs, want 2: the two that waited must share one", n)
	}
	if got := allSeqs(t, s, "r1"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("rows: %v, want [1 2 3 4]", got)
	}
}
