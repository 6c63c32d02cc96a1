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
// last seq. (The fake store's envelopes are Record.AppendJSON's: the
// stores' own envelopes are checked against it in their packages.)
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

// A stream's head is the thread's newest seq when it opened, and a range
// read has the view's rows after its start up to and with its end, by
// either read path.
func TestStreamHeadAndRanges(t *testing.T) {
	store := memory.NewRunEventStore()
	var events []runevents.NewEvent
	for i := range 9 {
		user := "alice"
		if i%3 == 2 {
			user = "bob"
		}
		events = append(events, runevents.NewEvent{ThreadID: "t-1", RunID: "r1", UserID: user, EventType: "step", Category: "trace"})
	}
	if _, err := store.PutBatch(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []runevents.ThreadReader{store, &envelopeReader{RunEventStore: store}} {
		s := New(nil, reader, nil, nil, live.New(live.Config{}), Config{})
		st, err := s.OpenStream(t.Context(), "alice", "t-1", "", "")
		if err != nil {
			t.Fatal(err)
		}
		if st.Head() != 9 {
			t.Errorf("%T: head %d, want 9", reader, st.Head())
		}
		_, n, last, _, err := st.ReadRange(t.Context(), nil, 1, 5, 10)
		if err != nil || n != 3 || last != 5 { // 2, 4, 5: 3 is bob's
			t.Errorf("%T: range (1, 5]: %d rows to %d, %v; want 3 to 5", reader, n, last, err)
		}
		for _, through := range []int64{6, 0, -1} {
			if _, n, _, _, err := st.ReadRange(t.Context(), nil, 6, through, 10); err != nil || n != 0 {
				t.Errorf("%T: the empty range (6, %d]: %d rows, %v", reader, through, n, err)
			}
		}
	}
}
