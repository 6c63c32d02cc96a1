package threadsvc

import (
	"context"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

// ThreadStream is one follower's view of a thread: its hub subscription
// and its stored rows as SSE frames (id: thread seq, event: event type,
// data: the record). The subscription is the thread's, shared by every
// view of it: the follower keeps the live events the view Shows, so a
// view's gaps (other users', runs' or categories' rows) cost no store
// read. A thread has no terminal event: End never ends the stream.
type ThreadStream struct {
	reader runevents.ThreadReader
	hub    *live.Hub
	view   streams.ThreadStream
	// head is the thread's newest seq when the stream opened, when the
	// store tells it (runevents.ThreadHead); else -1.
	head int64
}

// OpenStream opens the user's view of a thread, optionally of one run
// and one category (empty: all), for a follower. A thread the user has no
// rows of yet (unknown, empty or another user's) opens alike and waits for
// the user's first write; a service without a hub answers UNAVAILABLE.
func (s *Service) OpenStream(ctx context.Context, user, threadID, runID string, category runevents.Category) (*ThreadStream, error) {
	if s.hub == nil {
		return nil, unavailable("live hub")
	}
	st := &ThreadStream{reader: s.threads, hub: s.hub, head: -1,
		view: streams.ThreadStream{ThreadID: threadID, UserID: user, RunID: runID, Category: category}}
	if h, ok := s.threads.(runevents.ThreadHead); ok {
		head, err := s.readHead(ctx, h, threadID)
		if err != nil {
			return nil, err
		}
		st.head = head
	}
	return st, nil
}

// readHead reads the thread's newest seq, once for the streams of the
// thread opening at the same time: the followers of a thread reconnecting
// at once (after a restart, say) make one store read rather than one each,
// and do not queue on the store's pool while holding their requests. An
// opening stops waiting when ctx ends. Every shared read ends before its
// openings subscribe, so the head is one the store held before they
// subscribe: the rows after it that were published before are read from
// the store by the catch-up, as they are when a row commits between a
// stream's own read and its subscription.
func (s *Service) readHead(ctx context.Context, h runevents.ThreadHead, threadID string) (int64, error) {
	read := s.heads.DoChan(threadID, func() (any, error) {
		// Not cancelled with the first opening: the others wait on it.
		return h.LastThreadSeq(context.WithoutCancel(ctx), threadID)
	})
	select {
	case res := <-read:
		if res.Err != nil {
			return 0, res.Err
		}
		return res.Val.(int64), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Subscribe subscribes to the thread's live rows: after the thread's
// newest seq when the stream opened (the follower reads the rows up to it
// from the store), else after cursor.
func (st *ThreadStream) Subscribe(cursor int64) *live.Subscription {
	after := cursor
	if st.head >= 0 {
		after = st.head
	}
	return st.hub.Subscribe(st.view.Key(), after)
}

// Shows reports whether a live event of the thread belongs to the view.
// The thread's subscription hands the follower every row in order (or is
// cut), so the rows the view skips are no gap to read from the store.
func (st *ThreadStream) Shows(ev live.Event) bool { return st.view.Shows(ev) }

// Kind is the stream's kind for metrics (ssestream.Source).
func (st *ThreadStream) Kind() string { return streams.KindThread }

// Dense is false: a view's seqs have gaps.
func (st *ThreadStream) Dense() bool { return false }

// ReadAfter appends to buf the frames of up to limit stored rows of the
// view after seq after, and returns them with their count and the last
// seq read; no row is terminal.
func (st *ThreadStream) ReadAfter(ctx context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	return st.read(ctx, buf, st.view.ListParams(after, 0, limit))
}

// Head is the thread's newest seq when the stream opened, -1 when the
// store does not tell it: the follower reads the rows up to it from the
// store, and its subscription has those after (ssestream.RangeSource).
func (st *ThreadStream) Head() int64 { return st.head }

// ReadRange is ReadAfter of the view's rows with after < seq <= through
// (none when through <= after).
func (st *ThreadStream) ReadRange(ctx context.Context, buf []byte, after, through int64, limit int) ([]byte, int, int64, bool, error) {
	if through <= after {
		return buf, 0, after, false, nil
	}
	return st.read(ctx, buf, st.view.ListParams(after, through+1, limit))
}

// read appends to buf the frames of the rows p selects.
func (st *ThreadStream) read(ctx context.Context, buf []byte, p runevents.ListThreadEventsParams) ([]byte, int, int64, bool, error) {
	after := p.AfterSeq
	if r, ok := st.reader.(runevents.ThreadJSONReader); ok {
		return readEnvelopes(ctx, r, buf, p)
	}
	recs, err := st.reader.ListThreadEvents(ctx, p)
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

// readEnvelopes is read from a store that writes its rows' JSON envelopes
// itself: they are copied into the frames, with no Record read.
func readEnvelopes(ctx context.Context, r runevents.ThreadJSONReader, buf []byte, p runevents.ListThreadEventsParams) ([]byte, int, int64, bool, error) {
	after := p.AfterSeq
	n, last := 0, after
	err := r.ScanThreadJSON(ctx, p, func(seq int64, eventType string, envelope []byte) error {
		var err error
		buf, err = streams.AppendEnvelopeFrame(buf, seq, eventType, envelope)
		n, last = n+1, seq
		return err
	})
	if err != nil {
		return buf, 0, after, false, err
	}
	return buf, n, last, false, nil
}

// End never ends a thread stream: threads have no terminal event.
func (st *ThreadStream) End(context.Context, int64) ([]byte, bool, bool, error) {
	return nil, false, false, nil
}
