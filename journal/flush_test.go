package journal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/runevents"
)

// record buffers middleware events named from to to-1.
func record(t *testing.T, j *journal.Journal, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := j.RecordMiddleware(t.Context(), "guardrail", fmt.Sprint(i), "h", "a", nil); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *fakeSink) names(t *testing.T) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		out = append(out, decode(t, e.Content)["name"].(string))
	}
	return out
}

func upTo(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func TestThresholdStartsBackgroundFlush(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 2})
	record(t, j, 0, 1)
	j.Wait()
	if sink.batches != 0 {
		t.Fatalf("flushed below the threshold")
	}
	record(t, j, 1, 2)
	j.Wait()
	if sink.batches != 1 || len(sink.events) != 2 {
		t.Fatalf("after the threshold: %d batches, %d events", sink.batches, len(sink.events))
	}
}

func TestDefaultThreshold(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	record(t, j, 0, 19)
	j.Wait()
	if len(sink.events) != 0 {
		t.Fatal("flushed before 20 events")
	}
	record(t, j, 19, 20)
	j.Wait()
	if len(sink.events) != 20 {
		t.Fatalf("%d events after 20", len(sink.events))
	}
}

func TestFailedBackgroundFlushIsRetriedInOrder(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 2})
	sink.failAppends = 1
	record(t, j, 0, 2) // this background flush fails: its batch goes back to the front
	j.Wait()
	if len(sink.events) != 0 || j.Pending() != 2 {
		t.Fatalf("after a failed flush: %d written, %d pending", len(sink.events), j.Pending())
	}
	record(t, j, 2, 3) // the next threshold crossing writes all three
	j.Wait()
	if got := sink.names(t); !slices.Equal(got, upTo(3)) {
		t.Fatalf("written %v, want %v", got, upTo(3))
	}
}

func TestCallbacksDoNotWaitForTheSink(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 2})
	sink.block = make(chan struct{})
	record(t, j, 0, 2) // a background flush starts and blocks in the sink
	record(t, j, 2, 7) // buffered while the first flush is in flight
	if got := j.Pending(); got != 5 {
		t.Fatalf("pending = %d, want 5", got)
	}
	sink.mu.Lock()
	close(sink.block)
	sink.block = nil
	sink.mu.Unlock()
	flush(t, j)
	if got := sink.names(t); !slices.Equal(got, upTo(7)) {
		t.Fatalf("written %v", got)
	}
}

func TestFinalFlushDrainsInChunksAndReturnsTheError(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 3})
	sink.failAppends = 1
	record(t, j, 0, 3) // background flush fails
	j.Wait()
	record(t, j, 3, 5) // the 4th event crosses the threshold: 0..3 are written
	j.Wait()
	record(t, j, 5, 8) // the 6th crosses it again: 4..6 are written
	j.Wait()
	sink.failAppends = 1
	record(t, j, 8, 9)
	if err := j.Flush(t.Context()); err == nil || j.Pending() != 2 {
		t.Fatalf("flush: %v with %d pending, want an error and 7, 8 kept", err, j.Pending())
	}
	flush(t, j)
	if got := sink.names(t); !slices.Equal(got, upTo(9)) {
		t.Fatalf("written %v", got)
	}
	for i, e := range sink.events {
		if e.ThreadID != "t1" || e.RunID != "r1" || e.CreatedAt.IsZero() {
			t.Fatalf("event %d = %+v", i, e)
		}
	}
}

func TestFinalFlushError(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 2})
	record(t, j, 0, 1)
	sink.failAppends = 1
	if err := j.Flush(t.Context()); err == nil {
		t.Fatal("no error")
	}
	if j.Pending() != 1 {
		t.Fatalf("pending = %d, want the failed chunk kept", j.Pending())
	}
	flush(t, j)
	if got := sink.names(t); !slices.Equal(got, upTo(1)) {
		t.Fatalf("written %v", got)
	}
}

func TestFlushHonoursContext(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{FlushThreshold: 1})
	sink.block = make(chan struct{})
	record(t, j, 0, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := j.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush = %v", err)
	}
	close(sink.block)
	j.Wait()
}

func usageEnd(t *testing.T, j *journal.Journal, id, text string, total int64) {
	t.Helper()
	j.LLMEnd(t.Context(), journal.LLMEnd{CallID: id, Generations: []*journal.Message{
		ai(text, &journal.Usage{InputTokens: total - 5, OutputTokens: 5, TotalTokens: total}, "m")}})
}

type reports struct {
	got []journal.Summary
	at  []time.Duration
}

func TestProgressImmediateWithZeroInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var r reports
		start := time.Now()
		j, _ := setup(t, journal.Options{ProgressInterval: -1, Progress: func(ctx context.Context, s journal.Summary) error {
			r.got = append(r.got, s)
			r.at = append(r.at, time.Since(start))
			return nil
		}})
		usageEnd(t, j, "a", "Answer", 15)
		flush(t, j)
		if len(r.got) != 1 {
			t.Fatalf("%d reports", len(r.got))
		}
		s := r.got[0]
		if s.TotalTokens != 15 || s.LLMCallCount != 1 || s.MessageCount != 1 || s.LastAIMessage != "Answer" {
			t.Errorf("snapshot = %+v", s)
		}
	})
}

func TestProgressTrailingReport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var r reports
		start := time.Now()
		j, _ := setup(t, journal.Options{ProgressInterval: 10 * time.Millisecond, Progress: func(ctx context.Context, s journal.Summary) error {
			r.got = append(r.got, s)
			r.at = append(r.at, time.Since(start))
			return nil
		}})
		usageEnd(t, j, "a", "First", 15)
		synctest.Wait()
		usageEnd(t, j, "b", "Second", 30)
		usageEnd(t, j, "c", "Third", 0) // no usage: no report
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		if len(r.got) != 2 {
			t.Fatalf("%d reports, want 2", len(r.got))
		}
		last := r.got[1]
		if last.TotalTokens != 45 || last.LLMCallCount != 2 || last.LastAIMessage != "Third" {
			t.Errorf("trailing snapshot = %+v", last)
		}
		if r.at[1] != 10*time.Millisecond {
			t.Errorf("trailing report at %v, want 10ms", r.at[1])
		}
		flush(t, j)
	})
}

func TestFlushCancelsDelayedProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var r reports
		j, _ := setup(t, journal.Options{ProgressInterval: 10 * time.Second, Progress: func(ctx context.Context, s journal.Summary) error {
			r.got = append(r.got, s)
			return nil
		}})
		usageEnd(t, j, "a", "First", 15)
		usageEnd(t, j, "b", "Second", 30)
		start := time.Now()
		flush(t, j)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("flush waited %v", waited)
		}
		time.Sleep(time.Minute)
		if len(r.got) != 1 || r.got[0].TotalTokens != 15 || r.got[0].LastAIMessage != "First" {
			t.Errorf("reports = %+v", r.got)
		}
	})
}

func TestProgressFailureIsRetriedAfterNextUsage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		j, _ := setup(t, journal.Options{ProgressInterval: time.Second, Progress: func(ctx context.Context, s journal.Summary) error {
			calls++
			if calls == 1 {
				return errors.New("row store down")
			}
			return nil
		}})
		usageEnd(t, j, "a", "First", 15)
		synctest.Wait()
		usageEnd(t, j, "b", "Second", 15) // the failed report did not count: report now
		synctest.Wait()
		if calls != 2 {
			t.Fatalf("%d reports, want 2", calls)
		}
		flush(t, j)
	})
}

func TestRunRow(t *testing.T) {
	t.Parallel()
	j, sink := setup(t, journal.Options{})
	j.ChatModelStart(t.Context(), journal.ChatModelStart{CallID: "a", Prompts: [][]journal.Message{{human("Hi")}}})
	usageEnd(t, j, "a", "Hello", 15)
	base := runevents.ThreadRun{ThreadID: "t1", RunID: "r1", ModelName: "m", Metadata: []byte(`{"keep":"me"}`)}
	if err := j.Complete(t.Context(), base, runevents.RunSuccess); err != nil {
		t.Fatal(err)
	}
	row := sink.runs[0]
	if row.Status != runevents.RunSuccess || row.Usage.TotalTokens != 15 || row.Usage.ByModel["m"].TotalTokens != 15 || row.MessageCount != 2 {
		t.Errorf("row = %+v; want message_count 2 on the row", row)
	}
	// metadata.message_count stays, for readers of rows written before
	// the row had the field.
	if m := decode(t, row.Metadata); m["keep"] != "me" || m["message_count"] != 2.0 || m["first_human_message"] != "Hi" || m["last_ai_message"] != "Hello" {
		t.Errorf("metadata = %s", row.Metadata)
	}
}

func TestNoProgressAfterComplete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sink := &fakeSink{}
		progress := journal.RunRowProgress(sink, runevents.ThreadRun{ThreadID: "t1", RunID: "r1"})
		j2, err := journal.New(sink, journal.Options{ThreadID: "t1", RunID: "r1", ProgressInterval: time.Second, Progress: progress})
		if err != nil {
			t.Fatal(err)
		}
		usageEnd(t, j2, "a", "First", 15)
		usageEnd(t, j2, "b", "Second", 15) // a delayed report is pending
		if err := j2.Complete(t.Context(), runevents.ThreadRun{ThreadID: "t1", RunID: "r1"}, runevents.RunSuccess); err != nil {
			t.Fatal(err)
		}
		j2.RecordExternalUsage([]journal.ExternalUsage{{SourceRunID: "late", TotalTokens: 5}})
		time.Sleep(time.Minute)
		synctest.Wait()
		last := sink.runs[len(sink.runs)-1]
		if last.Status != runevents.RunSuccess || last.Usage.TotalTokens != 30 {
			t.Errorf("last row written = %+v", last)
		}
		if len(sink.runs) != 2 {
			t.Errorf("%d rows written, want the first report and the final row", len(sink.runs))
		}
	})
}
