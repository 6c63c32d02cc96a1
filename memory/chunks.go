package memory

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
)

// ChunkStore is the in-memory runchunks.Store. A push that creates or
// ends a run also writes the thread run row in runs (when not nil), under
// the store's lock. Create it with NewChunkStore.
type ChunkStore struct {
	runs runevents.RunStore

	mu    sync.Mutex
	state map[string]*chunkRun
}

type chunkRun struct {
	run    runchunks.Run
	chunks []runchunks.Chunk // ascending, indexes FirstIndex … NextIndex-1
}

var _ runchunks.Store = (*ChunkStore)(nil)

// NewChunkStore returns an empty chunk store writing thread run rows to
// runs (nil: none).
func NewChunkStore(runs runevents.RunStore) *ChunkStore {
	return &ChunkStore{runs: runs, state: map[string]*chunkRun{}}
}

// Push applies p as runchunks.Plan decides it.
func (s *ChunkStore) Push(ctx context.Context, p runchunks.Push) (runchunks.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[p.RunID]
	var cur *runchunks.Run
	if st != nil {
		cur = &st.run
	}
	res, err := runchunks.Plan(cur, p)
	if err != nil || res.Skipped {
		return res, err
	}
	if err := s.writeThreadRun(ctx, res); err != nil {
		return runchunks.Result{}, err
	}
	if st == nil {
		st = &chunkRun{}
		s.state[p.RunID] = st
	}
	st.run = res.Run
	for _, c := range res.Appended {
		c.Data = bytes.Clone(c.Data)
		st.chunks = append(st.chunks, c)
	}
	drop := 0
	for drop < len(st.chunks) && st.chunks[drop].Index < res.Run.FirstIndex {
		drop++
	}
	st.chunks = slices.Delete(st.chunks, 0, drop)
	res.Run = cloneChunkRun(res.Run)
	return res, nil
}

// writeThreadRun creates the thread run row "running" with a run, and sets
// its terminal status with the end. s.mu is held.
func (s *ChunkStore) writeThreadRun(ctx context.Context, res runchunks.Result) error {
	if s.runs == nil || (!res.Created && !res.Ended) {
		return nil
	}
	r := res.Run
	fresh := runevents.ThreadRun{ThreadID: r.ThreadID, RunID: r.RunID, OwnerID: r.OwnerID, OperationKind: "run", Status: r.Status, CreatedAt: r.UpdatedAt, UpdatedAt: r.UpdatedAt}
	if runs, ok := s.runs.(*RunStore); ok {
		// Under the run store's lock, as the SQL stores' pushes set it in
		// their transaction: only the status and updated_at, unguarded
		// (a new epoch may reopen a finished row, which PutRun refuses to
		// a late writer).
		fresh, err := runevents.PrepareRunRow(fresh, r.UpdatedAt)
		if err != nil {
			return err
		}
		if !runs.putStatus(fresh) {
			return runchunks.NotFound(r.RunID)
		}
		return nil
	}
	row, err := s.runs.GetRun(ctx, r.ThreadID, r.RunID, runstream.AnyOwner)
	switch {
	case err != nil && runstream.AsError(err).Code == runstream.CodeNotFound:
		row = fresh
	case err != nil:
		return err
	case row.OwnerID != r.OwnerID:
		return runchunks.NotFound(r.RunID)
	}
	row.Status, row.UpdatedAt = r.Status, r.UpdatedAt
	_, err = s.runs.PutRun(ctx, row)
	return err
}

// GetRun returns the run.
func (s *ChunkStore) GetRun(_ context.Context, runID string) (runchunks.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[runID]
	if st == nil {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	return cloneChunkRun(st.run), nil
}

// ReadChunks returns up to limit chunks with index > after, up to
// maxBytes of data (runchunks.Store).
func (s *ChunkStore) ReadChunks(_ context.Context, runID string, after int64, limit, maxBytes int) ([]runchunks.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[runID]
	if st == nil {
		return nil, nil
	}
	var out []runchunks.Chunk
	read := 0
	for _, c := range st.chunks {
		if len(out) >= limit || (maxBytes > 0 && read >= maxBytes) {
			break
		}
		if c.Index > after {
			c.Data = bytes.Clone(c.Data)
			out = append(out, c)
			read += len(c.Data)
		}
	}
	return out, nil
}

// RequestCancel stores a cancel request on an active run.
func (s *ChunkStore) RequestCancel(_ context.Context, runID, action string, at time.Time) (runchunks.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[runID]
	if st == nil {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	if !st.run.Ended() {
		c := runchunks.Cancel{Action: action, RequestedAt: at}
		if st.run.Cancel != nil && st.run.Cancel.Action == action {
			c.RequestedAt = st.run.Cancel.RequestedAt
		}
		st.run.Cancel = &c
	}
	return cloneChunkRun(st.run), nil
}

// ExpiredRuns returns up to limit active runs whose lease expired at now.
func (s *ChunkStore) ExpiredRuns(_ context.Context, now time.Time, limit int) ([]runchunks.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runchunks.Run
	for _, st := range s.state {
		if !st.run.Ended() && !st.run.LeaseExpiresAt.After(now) && len(out) < limit {
			out = append(out, cloneChunkRun(st.run))
		}
	}
	return out, nil
}

// DeleteEndedChunks deletes the chunks of runs that ended before before.
func (s *ChunkStore) DeleteEndedChunks(_ context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, st := range s.state {
		if st.run.Ended() && st.run.EndedAt.Before(before) && len(st.chunks) > 0 {
			n += int64(len(st.chunks))
			st.chunks = nil
			st.run.FirstIndex = st.run.NextIndex
		}
	}
	return n, nil
}

func cloneChunkRun(r runchunks.Run) runchunks.Run {
	if r.Cancel != nil {
		c := *r.Cancel
		r.Cancel = &c
	}
	return r
}
