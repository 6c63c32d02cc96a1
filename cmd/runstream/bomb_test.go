package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// rssBytes returns the process's resident set size, from /proc/self/status.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status (%v): the bomb test measures RSS on Linux only", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS: %q", rest)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestBombs runs each bomb of issue 13 through "runstream serve" (SQLite
// store, a SQLite database for sql nodes, and PostgreSQL's when
// RUNSTREAM_TEST_POSTGRES_URL is set): expression doubling, a 200 MB SQL
// value, a huge artifact and a progress flood. Each bomb's run fails with
// WORKFLOW_NODE_LIMIT_EXCEEDED (the flood's completes with few progress
// events), the process's RSS stays within 256 MiB of where it started,
// and /healthz answers throughout. Not parallel: it measures the
// process's memory.
func TestBombs(t *testing.T) {
	baseline := rssBytes(t)
	dir := t.TempDir()
	shop := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", "file:"+shop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	args := []string{"--store", "sqlite:" + filepath.Join(dir, "rs.db"), "--data-dir", filepath.Join(dir, "data"),
		"--sql-database", "shop=sqlite:" + shop}
	type bomb struct {
		name, def string
	}
	bombs := []bomb{
		{"doubling", `{"name":"doubling","nodes":[{"id":"n","type":"transform","retry":{"maxAttempts":3},
			"config":{"expression":"len(reduce(1..32, #acc + #acc, \"x\"))"}}]}`},
		{"sqlite repeat", `{"name":"sqlite-repeat","nodes":[{"id":"n","type":"sql",
			"config":{"database":"shop","query":"SELECT printf('%.*c', 200000000, 'x') AS big"}}]}`},
		{"huge artifact", `{"name":"artifact","nodes":[{"id":"n","type":"transform","artifact":{"name":"a.txt","mimeType":"text/plain"},
			"config":{"expression":"repeat(\"x\", 8000000)"}}]}`},
	}
	if url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL"); url != "" {
		args = append(args, "--sql-database", "wh="+url)
		bombs = append(bombs, bomb{"postgres repeat", `{"name":"pg-repeat","nodes":[{"id":"n","type":"sql",
			"config":{"database":"wh","query":"SELECT repeat('x', 200000000) AS big"}}]}`})
	} else {
		t.Log("RUNSTREAM_TEST_POSTGRES_URL is not set: the PostgreSQL SELECT repeat bomb is skipped")
	}
	base, _, stderr := startServe(t, nil, args...)

	// Watch RSS and /healthz until the bombs are done.
	var peak atomic.Int64
	var probeFailures atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		probe := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if rss := rssBytes(t); rss > peak.Load() {
				peak.Store(rss)
			}
			resp, err := probe.Get(base + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				probeFailures.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	})

	runBomb := func(def string) []workflow.Envelope {
		code, wf := postJSON(t, base+"/api/workflows", def)
		if code != http.StatusCreated {
			t.Fatalf("publish: %d %v", code, wf)
		}
		code, run := postJSON(t, base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", `{"input":{}}`)
		if code != http.StatusCreated {
			t.Fatalf("start run: %d %v", code, run)
		}
		return followRun(t, base, run["runId"].(string))
	}
	for _, b := range bombs {
		events := runBomb(b.def)
		last := events[len(events)-1]
		var failed struct {
			Error struct{ Code runstream.ErrorCode }
		}
		json.Unmarshal(last.Data, &failed)
		if last.Event != workflow.EventRunFailed || failed.Error.Code != runstream.CodeWorkflowNodeLimitExceeded {
			t.Errorf("%s: the run ended with %s %s, want run.failed %s", b.name, last.Event, last.Data, runstream.CodeWorkflowNodeLimitExceeded)
		}
		attempts := 0
		for _, e := range events {
			if e.Event == workflow.EventNodeStarted {
				attempts++
			}
		}
		if attempts != 1 {
			t.Errorf("%s: %d attempts, want 1", b.name, attempts)
		}
	}
	events := runBomb(`{"name":"flood","nodes":[{"id":"n","type":"delay","config":{"ms":1000,"progressEveryMs":1}}]}`)
	// The delay counts its 1 ms steps, so on a loaded machine it lasts
	// longer than a second: the bound is one report per 100 ms of the
	// node's own time, plus its first and final reports.
	progress := 0
	var started, completed time.Time
	for _, e := range events {
		switch e.Event {
		case workflow.EventNodeProgress:
			progress++
		case workflow.EventNodeStarted:
			started = e.Timestamp
		case workflow.EventNodeCompleted:
			completed = e.Timestamp
		}
	}
	allowed := int(completed.Sub(started)/(100*time.Millisecond)) + 2
	if last := events[len(events)-1].Event; last != workflow.EventRunCompleted || progress > allowed {
		t.Errorf("flood: ended with %s after %d node.progress events in %v, want run.completed and at most %d", last, progress, completed.Sub(started), allowed)
	}

	close(done)
	wg.Wait()
	grown := peak.Load() - baseline
	t.Logf("RSS: %d MiB before, peak %d MiB", baseline>>20, peak.Load()>>20)
	if grown > 256<<20 {
		t.Errorf("RSS grew by %d MiB during the bombs, want at most 256", grown>>20)
	}
	if n := probeFailures.Load(); n > 0 {
		t.Errorf("/healthz failed %d times during the bombs", n)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("the server log shows a panic:\n%s", stderr)
	}
}
