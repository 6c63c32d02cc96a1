package threadsvc

import (
	"context"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

// ThreadStream is one follower's view of a thread: its hub subscription
// and its stored rows as SSE frames (id: thread seq, event: event type,
// data: the record). Its seqs have gaps (other users', runs' or
// categories' rows); a live frame after a gap makes the follower read the
// store, which finds it. A thread has no terminal event: End never ends
// the stream.
type ThreadStream struct {
	reader runevents.ThreadReader
	hub    *live.Hub
	view   streams.ThreadStream
}

// OpenStream opens the user's view of a thread, optionally of one run
// and one category (empty: all), for a follower. The thread must exist for
// the user (NOT_FOUND); a service without a hub answers UNAVAILABLE.
func (s *Service) OpenStream(ctx context.Context, user, threadID, runID string, category runevents.Category) (*ThreadStream, error) {
	if s.hub == nil {
		return nil, unavailable("live hub")
	}
	if err := s.RequireThread(ctx, user, threadID); err != nil {
		return nil, err
	}
	view := streams.ThreadStream{ThreadID: threadID, UserID: user, RunID: runID, Category: category}
	return &ThreadStream{reader: s.threads, hub: s.hub, view: view}, nil
}

// Subscribe subscribes to the view's live rows after cursor. A user's
// view of a thread skips other users' rows: its seqs have gaps.
func (st *ThreadStream) Subscribe(cursor int64) *live.Subscription {
	return st.hub.SubscribeView(st.view.Key(), cursor)
}

// ReadAfter appends to buf the frames of up to limit stored rows of the
// view after seq after, and returns them with their count and the last
// seq read; no row is terminal.
func (st *ThreadStream) ReadAfter(ctx context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	recs, err := streams.ReadThreadStream(ctx, st.reader, st.view, after, limit)
	if err != nil || len(recs) == 0 {
		return buf, 0, after, false, err
	}
	for _, rec := range recs {
		if buf, err = streams.AppendThreadFrame(buf, rec); err != nil {
			return buf, 0, after, false, err
		}
	}
	return buf, len(recs), recs[len(recs)-1].Seq, false, nil
}

// End never ends a thread stream: threads have no terminal event.
func (st *ThreadStream) End(context.Context, int64) ([]byte, bool, bool, error) {
	return nil, false, false, nil
}
