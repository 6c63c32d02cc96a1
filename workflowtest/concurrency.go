package workflowtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var concurrencyTests = []test{
	{"ConditionalAppendsRace", func(t *testing.T, s workflow.Store) {
		// 20 callers that read the run queued each append
		// run.cancel_requested if it is still queued: one must win.
		const callers = 20
		run := newRun(t, s, nil)
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, IfStatus: workflow.StatusQueued,
					Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelRequested, fmt.Sprintf(`{"requestedBy":"u%d"}`, g))}})
				switch runstream.ErrorCodeOf(err) {
				case "":
					wins.Add(1)
				case runstream.CodeConflict:
					conflicts.Add(1)
				default:
					t.Errorf("caller %d: Append: %v", g, err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != callers-1 {
			t.Errorf("%d appends won and %d met a conflict, want 1 and %d", wins.Load(), conflicts.Load(), callers-1)
		}
		if got := seqsOf(allEvents(t, s, run.ID)); !slices.Equal(got, span(1, 3)) {
			t.Errorf("seqs %v, want 1..3: one run.cancel_requested", got)
		}
	}},
	{"AppendOneRun", func(t *testing.T, s workflow.Store) {
		// 100 writers append 20 events each to one run, alternating
		// batches of 1 and 3 events: the seqs must be 3..2002, each once,
		// every batch contiguous, and the stored events those returned.
		const writers, batches = 100, 10
		run := newRun(t, s, nil)
		returned := make([][]workflow.Envelope, writers)
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() {
				i := 0
				for b := range batches {
					size := 1 + 2*(b%2)
					batch := make([]workflow.NewEvent, size)
					for k := range batch {
						batch[k] = nodeEvent(workflow.EventNodeProgress, fmt.Sprintf("n%d", g), fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))
						i++
					}
					envs, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: batch})
					if err != nil {
						t.Errorf("writer %d: Append: %v", g, err)
						return
					}
					if len(envs) != size {
						t.Errorf("writer %d: %d envelopes for %d events", g, len(envs), size)
						return
					}
					for k := 1; k < size; k++ {
						if envs[k].Seq != envs[0].Seq+int64(k) {
							t.Errorf("writer %d: batch seqs %v are not contiguous", g, seqsOf(envs))
						}
					}
					returned[g] = append(returned[g], envs...)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		const total = 2 + writers*batches*2
		stored := allEvents(t, s, run.ID)
		if got := seqsOf(stored); !slices.Equal(got, span(1, total)) {
			t.Fatalf("stored seqs are not 1..%d: %d events, first %v", total, len(got), got[:min(len(got), 10)])
		}
		seen := map[int64]int{}
		for g, envs := range returned {
			for k, e := range envs {
				if k > 0 && e.Seq <= envs[k-1].Seq {
					t.Errorf("writer %d: seq %d after %d", g, e.Seq, envs[k-1].Seq)
				}
				seen[e.Seq]++
				if e.Seq >= 1 && e.Seq <= total {
					sameEnvelope(t, fmt.Sprintf("writer %d event %d as stored", g, k), stored[e.Seq-1], e)
				}
				var d struct{ G, I int }
				if err := json.Unmarshal(e.Data, &d); err != nil || d.G != g || d.I != k {
					t.Errorf("writer %d event %d: data %s", g, k, e.Data)
				}
			}
		}
		for seq := int64(3); seq <= total; seq++ {
			if seen[seq] != 1 {
				t.Errorf("seq %d returned %d times, want once", seq, seen[seq])
			}
		}
		if got := getRun(t, s, run.ID).LastSeq; got != total {
			t.Errorf("LastSeq %d, want %d", got, total)
		}
	}},
	{"ManyRuns", func(t *testing.T, s workflow.Store) {
		// 20 writers each create a run and append to it while the others
		// do the same: every run counts its own seqs from 1.
		const writers, events = 20, 10
		w, v := newWorkflow(t, s, alice)
		ids := make([]string, writers)
		var wg sync.WaitGroup
		for g := range writers {
			ids[g] = newID("run")
			wg.Go(func() {
				r := workflow.Run{ID: ids[g], WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice}
				if _, _, err := s.CreateRun(t.Context(), r, initialEvents()); err != nil {
					t.Errorf("writer %d: CreateRun: %v", g, err)
					return
				}
				for i := range events {
					if _, err := s.Append(t.Context(), workflow.AppendParams{RunID: r.ID, Events: []workflow.NewEvent{progress(i)}}); err != nil {
						t.Errorf("writer %d: Append: %v", g, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if got := seqsOf(allEvents(t, s, id)); !slices.Equal(got, span(1, 2+events)) {
				t.Errorf("run %s: seqs %v, want 1..%d", id, got, 2+events)
			}
		}
	}},
}
