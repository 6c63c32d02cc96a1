package streams

import (
	"context"
	"fmt"
	"strings"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
)

// ThreadStreamKey is the hub key of a thread: eventlog.ThreadLog publishes
// every row of the thread under it, once, and the hub polls it for every
// row. The Attrs of its events are ThreadAttrs, which followers of a view
// (ThreadStream) filter on: one fan-out per thread serves every view.
func ThreadStreamKey(threadID string) string { return "thread:" + threadID }

// ThreadAttrs are the Attrs of a thread row's live event: what a view
// filters on.
type ThreadAttrs struct {
	UserID   string
	RunID    string
	Category runevents.Category
}

// ThreadStream is a followed view of a thread: the thread's rows visible
// to UserID, optionally only those of one run and of one category. An
// empty UserID means every row (internal followers). Its followers take
// the thread's events from the hub (ThreadStreamKey) and keep those the
// view Shows; they read the view from the store (ListParams) only to
// catch up.
type ThreadStream struct {
	ThreadID string
	UserID   string
	RunID    string
	Category runevents.Category
}

// Key returns the hub key of the view's thread.
func (s ThreadStream) Key() string { return ThreadStreamKey(s.ThreadID) }

// Owner returns the owner the view reads the store with.
func (s ThreadStream) Owner() runevents.Owner {
	if s.UserID == "" {
		return runevents.AnyOwner
	}
	return runevents.OwnedBy(s.UserID)
}

// Shows reports whether ev, an event of the view's thread key, belongs to
// the view. An event without ThreadAttrs belongs to none.
func (s ThreadStream) Shows(ev live.Event) bool {
	a, ok := ev.Attrs.(*ThreadAttrs)
	return ok && (s.UserID == "" || s.UserID == a.UserID) &&
		(s.RunID == "" || s.RunID == a.RunID) &&
		(s.Category == "" || s.Category == a.Category)
}

// ListParams selects up to limit rows of the view with seq > after, and
// seq < before when before is positive.
func (s ThreadStream) ListParams(after, before int64, limit int) runevents.ListThreadEventsParams {
	return runevents.ListThreadEventsParams{
		ThreadID: s.ThreadID, Owner: s.Owner(), AfterSeq: after, BeforeSeq: before, Limit: limit, RunID: s.RunID, Category: s.Category,
	}
}

// pollThread is the poll function of thread keys: every row of the
// thread after seq after.
func pollThread(ctx context.Context, threads runevents.ThreadReader, key string, after int64) ([]live.Event, error) {
	threadID, _ := strings.CutPrefix(key, "thread:")
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return nil, fmt.Errorf("poll: stream key %q: not a thread key", key)
	}
	recs, err := threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{
		ThreadID: threadID, Owner: runevents.AnyOwner, AfterSeq: after, Limit: PollPage,
	})
	if err != nil {
		return nil, fmt.Errorf("poll %s: %w", key, err)
	}
	events, err := ThreadFrames(make([]live.Event, 0, len(recs)), recs)
	if err != nil {
		return nil, fmt.Errorf("poll %s: %w", key, err)
	}
	return events, nil
}

// ThreadFrame renders a stored record as a live event with its SSE frame:
// id = thread seq, event = event type, data = the record on one line.
func ThreadFrame(rec runevents.Record) (live.Event, error) {
	frame, err := AppendThreadFrame(make([]byte, 0, 240+len(rec.Content)+len(rec.Metadata)), rec)
	if err != nil {
		return live.Event{}, err
	}
	return live.Event{Seq: rec.Seq, Frame: frame, Attrs: &ThreadAttrs{UserID: rec.UserID, RunID: rec.RunID, Category: rec.Category}}, nil
}

// AppendThreadFrame appends the SSE frame of a stored record to dst: id =
// thread seq, event = event type, data = the record on one line
// (sse.AppendSeqFrame).
func AppendThreadFrame(dst []byte, rec runevents.Record) ([]byte, error) {
	return appendThreadFrame(dst, rec.Seq, string(rec.EventType), func(b []byte) ([]byte, error) {
		return rec.AppendJSON(b), nil
	})
}

// AppendEnvelopeFrame appends the SSE frame of the row of seq seq and
// type eventType whose JSON envelope is envelope (as a
// runevents.ThreadJSONReader reads it): the frame AppendThreadFrame
// appends of the row's record.
func AppendEnvelopeFrame(dst []byte, seq int64, eventType string, envelope []byte) ([]byte, error) {
	return appendThreadFrame(dst, seq, eventType, func(b []byte) ([]byte, error) {
		return append(b, envelope...), nil
	})
}

// appendThreadFrame appends the frame of the row of seq seq and type
// eventType whose data appendData appends.
func appendThreadFrame(dst []byte, seq int64, eventType string, appendData func([]byte) ([]byte, error)) ([]byte, error) {
	if eventType == "" {
		return dst, fmt.Errorf("frame seq %d: the record has no event type", seq)
	}
	dst, err := sse.AppendSeqFrame(dst, seq, eventType, appendData)
	if err != nil {
		return dst, fmt.Errorf("frame seq %d: %w", seq, err)
	}
	return dst, nil
}

// ThreadFrames appends the live events of recs to dst.
func ThreadFrames(dst []live.Event, recs []runevents.Record) ([]live.Event, error) {
	for _, rec := range recs {
		ev, err := ThreadFrame(rec)
		if err != nil {
			return dst, err
		}
		dst = append(dst, ev)
	}
	return dst, nil
}
