package threadsvc

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
)

// envelopeReader is a ThreadJSONReader over a memory store that counts
// the scans made through it.
type envelopeReader struct {
	*memory.RunEventStore
	scans int
}

func (r *envelopeReader) ScanThreadJSON(ctx context.Context, p runevents.ListThreadEventsParams, fn func(int64, string, []byte) error) error {
	r.scans++
	recs, err := r.ListThreadEvents(ctx, p)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := fn(rec.Seq, string(rec.EventType), rec.AppendJSON(nil)); err != nil {
			return err
		}
	}
	return nil
}

// A stream over a store that writes its rows' envelopes reads them that
// way, and its pages are the frames of the Records path: the view's rows
// (its owner, run and category) after the cursor, with their count and
// last seq.
func TestReadAfterCopiesStoredEnvelopes(t *testing.T) {
	store := memory.NewRunEventStore()
	var events []runevents.NewEvent
	for i, e := range []struct{ user, run, category string }{
		{"alice", "r1", "message"}, {"bob", "r1", "message"}, {"alice", "r2", "trace"}, {"alice", "r1", "trace"}, {"alice", "r1", "message"},
	} {
		events = append(events, runevents.NewEvent{ThreadID: "t-1", RunID: e.run, UserID: e.user, EventType: "step", Category: runevents.Category(e.category),
			Content: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
	}
	if _, err := store.PutBatch(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	envelopes := &envelopeReader{RunEventStore: store}
	plain := New(nil, store, nil, nil, live.New(live.Config{}), Config{})
	copying := New(nil, envelopes, nil, nil, live.New(live.Config{}), Config{})
	for _, view := range []struct {
		run      string
		category runevents.Category
		after    int64
		limit    int
	}{{"", "", 0, 10}, {"", "", 1, 2}, {"r1", "", 0, 10}, {"", "message", 0, 10}, {"r1", "trace", 0, 10}, {"r2", "message", 0, 10}} {
		open := func(s *Service) ([]byte, int, int64) {
			st, err := s.OpenStream(t.Context(), "alice", "t-1", view.run, view.category)
			if err != nil {
				t.Fatalf("OpenStream: %v", err)
			}
			buf, n, last, terminal, err := st.ReadAfter(t.Context(), []byte("x"), view.after, view.limit)
			if err != nil || terminal {
				t.Fatalf("ReadAfter %+v: terminal %v, %v", view, terminal, err)
			}
			return buf, n, last
		}
		scans := envelopes.scans
		wantBuf, wantN, wantLast := open(plain)
		gotBuf, gotN, gotLast := open(copying)
		if envelopes.scans != scans+1 {
			t.Fatalf("view %+v: %d envelope scans, want 1", view, envelopes.scans-scans)
		}
		if string(gotBuf) != string(wantBuf) || gotN != wantN || gotLast != wantLast {
			t.Errorf("view %+v: %d frames to seq %d:\n%s\nwant %d to seq %d:\n%s", view, gotN, gotLast, gotBuf, wantN, wantLast, wantBuf)
		}
	}
}
