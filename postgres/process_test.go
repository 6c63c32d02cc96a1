package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/runevents"
)

// Environment of TestHelperProcess, set by TestTwoProcessesOneThread.
const (
	helperEnv       = "RUNSTREAM_PG_HELPER"        // "1" in a helper process
	helperSchemaEnv = "RUNSTREAM_PG_HELPER_SCHEMA" // schema to write to
	helperRunEnv    = "RUNSTREAM_PG_HELPER_RUN"    // run id of this process's events
	helperGateEnv   = "RUNSTREAM_PG_HELPER_GATE"   // advisory lock key to wait on
)

const (
	helperWriters = 8  // goroutines per helper process
	helperRounds  = 40 // each writes one Put and one PutBatch of 4 per round
	helperBatch   = 4
	helperEvents  = helperWriters * helperRounds * (1 + helperBatch)
)

// TestHelperProcess is the body of the writer processes of
// TestTwoProcessesOneThread; it does nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process of TestTwoProcessesOneThread")
	}
	ctx := t.Context()
	url := testURL(t)
	gate, err := strconv.ParseInt(os.Getenv(helperGateEnv), 10, 64)
	if err != nil {
		t.Fatalf("gate key: %v", err)
	}
	db, err := Open(ctx, Config{URL: url, Schema: os.Getenv(helperSchemaEnv), MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	// Wait until the parent opens the gate, so that both processes write at
	// the same time.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1)", gate); err != nil {
		t.Fatalf("wait for the gate: %v", err)
	}
	conn.Close(ctx)

	s, run := db.RunEvents(), os.Getenv(helperRunEnv)
	var wg sync.WaitGroup
	for w := range helperWriters {
		wg.Go(func() {
			for i := range helperRounds {
				e := helperEvent(run, w, i*(1+helperBatch))
				if _, err := s.Put(ctx, e); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				var batch []runevents.NewEvent
				for j := range helperBatch {
					batch = append(batch, helperEvent(run, w, i*(1+helperBatch)+1+j))
				}
				if _, err := s.PutBatch(ctx, batch); err != nil {
					t.Errorf("PutBatch: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func helperEvent(run string, writer, i int) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "shared", RunID: run, EventType: runevents.EventRunStart,
		Category: runevents.CategoryTrace, UserID: "u",
		Metadata: json.RawMessage(fmt.Sprintf(`{"writer":%d,"i":%d}`, writer, i))}
}

// TestTwoProcessesOneThread runs two OS processes that write one thread at
// once, each from several goroutines with Put and PutBatch: the thread
// must hold seqs 1..2N with no gap and no duplicate, and each writer's
// events must have increasing seqs (commit order is seq order).
func TestTwoProcessesOneThread(t *testing.T) {
	url := testURL(t)
	schema := newSchema(t)
	db := openDB(t, schema)
	ctx := t.Context()

	gate := rand.Int64N(1<<31) + 1
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", gate); err != nil {
		t.Fatalf("close the gate: %v", err)
	}

	runs := []string{"proc-a", "proc-b"}
	var procs []*exec.Cmd
	var outputs []*strings.Builder
	for _, run := range runs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=1", helperSchemaEnv+"="+schema,
			helperRunEnv+"="+run, helperGateEnv+"="+strconv.FormatInt(gate, 10))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start helper: %v", err)
		}
		procs, outputs = append(procs, cmd), append(outputs, out)
	}
	// Open the gate once both processes wait on it.
	for waiting := 0; waiting < len(runs); {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, gate).Scan(&waiting); err != nil {
			t.Fatalf("count waiting helpers: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", gate); err != nil {
		t.Fatalf("open the gate: %v", err)
	}
	for i, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %s: %v\n%s", runs[i], err, outputs[i])
		}
	}

	var all []int64
	for _, run := range runs {
		rows, err := db.RunEvents().ListEvents(ctx, runevents.ListEventsParams{ThreadID: "shared", RunID: run, Owner: runevents.AnyOwner, Limit: 10 * helperEvents})
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(rows) != helperEvents {
			t.Errorf("run %s: %d rows, want %d", run, len(rows), helperEvents)
		}
		last := map[int]int{} // writer -> its last event seen; rows are ascending by seq
		for _, r := range rows {
			var m struct{ Writer, I int }
			if err := json.Unmarshal(r.Metadata, &m); err != nil {
				t.Fatalf("metadata %s: %v", r.Metadata, err)
			}
			if prev, ok := last[m.Writer]; ok && m.I <= prev {
				t.Errorf("run %s writer %d: event %d at seq %d follows event %d", run, m.Writer, m.I, r.Seq, prev)
			}
			last[m.Writer] = m.I
			all = append(all, r.Seq)
		}
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != int64(i+1) {
			t.Fatalf("seqs of the thread: position %d holds %d, want %d (gap or duplicate)", i, seq, i+1)
		}
	}
	if len(all) != 2*helperEvents {
		t.Errorf("%d rows in the thread, want %d", len(all), 2*helperEvents)
	}
}
