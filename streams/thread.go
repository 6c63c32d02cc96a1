package streams

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
)

// ThreadStream names a followed view of a thread in the hub: the thread's
// rows visible to UserID, optionally only those of one run and of one
// category. An empty UserID means every row (internal followers).
//
// The hub delivers every frame of a key to every follower of it, so each
// view has its own key and eventlog.ThreadLog publishes a record under
// every view that shows it (ThreadKeysOf): with and without its owner, its
// run and its category.
// Seqs within a view have gaps; a follower fills them from the store.
type ThreadStream struct {
	ThreadID string
	UserID   string
	RunID    string
	Category runevents.Category
}

// ThreadStreamKey is the hub key of every row of a thread.
func ThreadStreamKey(threadID string) string { return ThreadStream{ThreadID: threadID}.Key() }

// Key returns the hub key of the view: "thread:" and the thread id, then
// the filters as a URL query ("thread:t1?category=message&user=alice").
func (s ThreadStream) Key() string {
	q := url.Values{}
	if s.UserID != "" {
		q.Set("user", s.UserID)
	}
	if s.RunID != "" {
		q.Set("run_id", s.RunID)
	}
	if s.Category != "" {
		q.Set("category", string(s.Category))
	}
	if len(q) == 0 {
		return "thread:" + s.ThreadID
	}
	return "thread:" + s.ThreadID + "?" + q.Encode()
}

// Owner returns the owner the view reads the store with.
func (s ThreadStream) Owner() runevents.Owner {
	if s.UserID == "" {
		return runevents.AnyOwner
	}
	return runevents.OwnedBy(s.UserID)
}

// ParseThreadStreamKey parses a key made by ThreadStream.Key.
func ParseThreadStreamKey(key string) (ThreadStream, error) {
	rest, ok := strings.CutPrefix(key, "thread:")
	if !ok {
		return ThreadStream{}, fmt.Errorf("stream key %q: not a thread key", key)
	}
	threadID, query, _ := strings.Cut(rest, "?")
	s := ThreadStream{ThreadID: threadID}
	q, err := url.ParseQuery(query)
	if err != nil {
		return ThreadStream{}, fmt.Errorf("stream key %q: %w", key, err)
	}
	for name, values := range q {
		if len(values) != 1 || values[0] == "" {
			return ThreadStream{}, fmt.Errorf("stream key %q: want one non-empty %s", key, name)
		}
		switch name {
		case "user":
			s.UserID = values[0]
		case "run_id":
			s.RunID = values[0]
		case "category":
			s.Category = runevents.Category(values[0])
		default:
			return ThreadStream{}, fmt.Errorf("stream key %q: unknown filter %q", key, name)
		}
	}
	return s, nil
}

// ThreadKeysOf returns the keys of every view that shows rec: the views
// a record is published under.
func ThreadKeysOf(rec runevents.Record) []string {
	users := []string{""}
	if rec.UserID != "" {
		users = append(users, rec.UserID)
	}
	keys := make([]string, 0, 4*len(users))
	for _, user := range users {
		for _, run := range []string{"", rec.RunID} {
			for _, category := range []runevents.Category{"", rec.Category} {
				keys = append(keys, ThreadStream{ThreadID: rec.ThreadID, UserID: user, RunID: run, Category: category}.Key())
			}
		}
	}
	return keys
}

// ReadThreadStream reads up to limit rows of the view with seq > after,
// ascending.
func ReadThreadStream(ctx context.Context, threads runevents.ThreadReader, s ThreadStream, after int64, limit int) ([]runevents.Record, error) {
	return threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{
		ThreadID: s.ThreadID, Owner: s.Owner(), AfterSeq: after, Limit: limit, RunID: s.RunID, Category: s.Category,
	})
}

// pollThread is the poll function of thread keys.
func pollThread(ctx context.Context, threads runevents.ThreadReader, key string, after int64) ([]live.Event, error) {
	s, err := ParseThreadStreamKey(key)
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	recs, err := ReadThreadStream(ctx, threads, s, after, PollPage)
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
	return live.Event{Seq: rec.Seq, Frame: frame}, nil
}

// AppendThreadFrame appends the SSE frame of a stored record to dst: id =
// thread seq, event = event type, data = the record on one line
// (sse.AppendSeqFrame).
func AppendThreadFrame(dst []byte, rec runevents.Record) ([]byte, error) {
	if rec.EventType == "" {
		return dst, fmt.Errorf("frame seq %d: the record has no event type", rec.Seq)
	}
	dst, err := sse.AppendSeqFrame(dst, rec.Seq, string(rec.EventType), func(b []byte) ([]byte, error) {
		data, err := rec.MarshalJSON()
		return append(b, data...), err
	})
	if err != nil {
		return dst, fmt.Errorf("frame seq %d: %w", rec.Seq, err)
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
