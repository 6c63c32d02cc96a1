package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// The two-process test re-executes the test binary as a child that writes
// to the same file (the helper-process pattern).
const (
	helperEnvPath  = "RUNSTREAM_SQLITE_HELPER_PATH"
	helperEnvCount = "RUNSTREAM_SQLITE_HELPER_COUNT"
	sharedThread   = "shared"
	putWorkers     = 8
)

// putConcurrently appends n trace events to sharedThread under run from
// putWorkers goroutines and returns the first error.
func putConcurrently(ctx context.Context, s *RunEventStore, run string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range putWorkers {
		wg.Go(func() {
			for i := w; i < n; i += putWorkers {
				_, err := s.Put(ctx, runevents.NewEvent{ThreadID: sharedThread, RunID: run,
					EventType: runevents.EventRunStart, Category: runevents.CategoryTrace, Content: []byte(strconv.Itoa(i))})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestHelperProcess is the child of TestTwoProcessesWriteOneThread. It
// does nothing in a normal test run.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnvPath)
	if path == "" {
		return
	}
	n, err := strconv.Atoi(os.Getenv(helperEnvCount))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(t.Context(), Config{Path: path, BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil { // "go"
		t.Fatal(err)
	}
	if err := putConcurrently(t.Context(), db.RunEvents(), "child", n); err != nil {
		t.Fatal(err)
	}
}

func TestTwoProcessesWriteOneThread(t *testing.T) {
	t.Parallel()
	const n = 300
	path := filepath.Join(t.TempDir(), "runstream.db")
	db := newDB(t, Config{Path: path, Synchronous: SynchronousNormal, BusyTimeout: time.Minute})
	s := db.RunEvents()

	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	child.Env = append(os.Environ(), helperEnvPath+"="+path, helperEnvCount+"="+strconv.Itoa(n))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v; want ready", line, err)
	}

	// Both processes start writing at once.
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := putConcurrently(t.Context(), s, "parent", n); err != nil {
		t.Fatalf("parent: %v", err)
	}
	rest, _ := io.ReadAll(out) // the child's test output, read before Wait closes the pipe
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, rest)
	}

	seen := map[int64]string{}
	for _, run := range []string{"parent", "child"} {
		rows, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: sharedThread, RunID: run, Owner: runevents.AnyOwner, Limit: 10 * n})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n {
			t.Errorf("run %s: %d rows, want %d", run, len(rows), n)
		}
		for _, r := range rows {
			if other, dup := seen[r.Seq]; dup {
				t.Errorf("seq %d written by %s and %s", r.Seq, other, run)
			}
			seen[r.Seq] = run
		}
	}
	switches := 0
	for seq := int64(1); seq <= 2*n; seq++ {
		if _, ok := seen[seq]; !ok {
			t.Errorf("seq %d missing", seq)
		}
		if seq > 1 && seen[seq] != seen[seq-1] {
			switches++
		}
	}
	if len(seen) != 2*n {
		t.Errorf("%d distinct seqs, want %d", len(seen), 2*n)
	}
	t.Logf("the writer changed %d times between processes along the thread", switches)
}
