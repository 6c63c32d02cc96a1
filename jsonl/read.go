package jsonl

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// maxRead bounds the bytes of one coalesced read.
const maxRead = 1 << 20

// ListMessages returns message rows of the thread.
func (s *RunEventStore) ListMessages(_ context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.read(p.ThreadID, func(t *thread) []entry {
		return window(t.messages, t.visible, p.AfterSeq, p.BeforeSeq, p.Limit, t.ownedBy(p.Owner))
	})
}

// ListMessagesByRun returns message rows of one run.
func (s *RunEventStore) ListMessagesByRun(_ context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.read(p.ThreadID, func(t *thread) []entry {
		owned := t.ownedBy(p.Owner)
		return window(t.runs[p.RunID], t.visible, p.AfterSeq, p.BeforeSeq, p.Limit, func(e *entry) bool {
			return t.attrs[e.attr].category == runevents.CategoryMessage && owned(e)
		})
	})
}

// ListEvents returns rows of every category of one run.
func (s *RunEventStore) ListEvents(_ context.Context, p runevents.ListEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	after := p.AfterSeq
	if after == nil { // the first Limit rows, as with a cursor
		after = runevents.Seq(0)
	}
	return s.read(p.ThreadID, func(t *thread) []entry {
		return window(t.runs[p.RunID], t.visible, after, nil, p.Limit, func(e *entry) bool {
			a := &t.attrs[e.attr]
			return p.Owner.Sees(a.userID) &&
				(len(p.EventTypes) == 0 || slices.Contains(p.EventTypes, a.eventType)) &&
				(!p.FiltersTask() || (a.hasTaskID && a.taskID == p.TaskID))
		})
	})
}

// LastVisibleAISeqByRun returns the newest visible AI message seq per run,
// from the index alone.
func (s *RunEventStore) LastVisibleAISeqByRun(_ context.Context, p runevents.LastVisibleAIParams) (map[string]int64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	err := s.inspect(p.ThreadID, func(t *thread) {
		for _, id := range p.RunIDs {
			rows := t.runs[id]
			for i := len(rows) - 1; i >= 0; i-- {
				a := &t.attrs[rows[i].attr]
				if rows[i].seq <= t.visible && a.category == runevents.CategoryMessage &&
					a.eventType.IsAIResponse() && !a.middleware && p.Owner.Sees(a.userID) {
					out[id] = rows[i].seq
					break
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountMessages returns the number of message rows of the thread, from the
// index alone: O(log n) for AnyOwner, O(n) for one owner.
func (s *RunEventStore) CountMessages(_ context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return 0, err
	}
	if err := runevents.CheckOwner(owner); err != nil {
		return 0, err
	}
	n := 0
	err := s.inspect(threadID, func(t *thread) {
		durable := sort.Search(len(t.messages), func(i int) bool { return t.messages[i].seq > t.visible })
		if owner.All() {
			n = durable
			return
		}
		owned := t.ownedBy(owner)
		for i := range t.messages[:durable] {
			if owned(&t.messages[i]) {
				n++
			}
		}
	})
	return n, err
}

// inspect calls fn with the thread's index locked for reading; it does not
// call it for a thread that has no directory.
func (s *RunEventStore) inspect(threadID string, fn func(*thread)) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	t, err := s.loadThread(threadID, false)
	if err != nil || t == nil {
		return err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	fn(t)
	return nil
}

// read returns the records of the entries pick selects.
func (s *RunEventStore) read(threadID string, pick func(*thread) []entry) ([]runevents.Record, error) {
	var (
		recs []runevents.Record
		err  error
	)
	ierr := s.inspect(threadID, func(t *thread) { recs, err = s.readLocked(t, pick(t)) })
	if ierr != nil {
		return nil, ierr
	}
	return recs, err
}

// ownedBy returns the filter of rows o sees.
func (t *thread) ownedBy(o runevents.Owner) func(*entry) bool {
	if o.All() {
		return func(*entry) bool { return true }
	}
	return func(e *entry) bool { return o.Sees(t.attrs[e.attr].userID) }
}

// window selects, from rows ascending by seq, those accepted by keep that
// are durable (seq <= visible) and inside after < seq < before: the first
// limit of them when after is set, else the last limit — runevents.Window
// applied after the filter. It costs O(log n + rows scanned).
func window(rows []entry, visible int64, after, before *int64, limit int, keep func(*entry) bool) []entry {
	lo, hi := 0, sort.Search(len(rows), func(i int) bool { return rows[i].seq > visible })
	if after != nil {
		lo = sort.Search(hi, func(i int) bool { return rows[i].seq > *after })
	}
	if before != nil {
		hi = sort.Search(hi, func(i int) bool { return rows[i].seq >= *before })
	}
	var out []entry
	if after != nil {
		for i := lo; i < hi && len(out) < limit; i++ {
			if keep(&rows[i]) {
				out = append(out, rows[i])
			}
		}
		return out
	}
	for i := hi - 1; i >= lo && len(out) < limit; i-- {
		if keep(&rows[i]) {
			out = append(out, rows[i])
		}
	}
	slices.Reverse(out)
	return out
}

// readLocked reads and decodes the lines of es, in order. Lines that
// follow each other in one file are read together. t.mu is held.
func (s *RunEventStore) readLocked(t *thread, es []entry) ([]runevents.Record, error) {
	if len(es) == 0 {
		return nil, nil
	}
	out := make([]runevents.Record, 0, len(es))
	var buf []byte
	for i := 0; i < len(es); {
		first := es[i]
		end, j := first.off+int64(first.size), i+1
		for j < len(es) && es[j].file == first.file && es[j].off == end+1 && end-first.off < maxRead {
			end, j = es[j].off+int64(es[j].size), j+1
		}
		f := t.files[first.file]
		buf = slices.Grow(buf[:0], int(end-first.off))[:end-first.off]
		if _, err := f.f.ReadAt(buf, first.off); err != nil {
			return nil, runstream.Wrap(fmt.Errorf("read %s: %w", f.path, err), runstream.CodeUnavailable, "jsonl: read thread %s", t.id)
		}
		for _, e := range es[i:j] {
			line := buf[e.off-first.off : e.off-first.off+int64(e.size)]
			rec, err := decode(line, t.attrs[e.attr].legacy)
			if err == nil && rec.Seq != e.seq {
				err = fmt.Errorf("line at offset %d of %s holds seq %d, want %d", e.off, f.path, rec.Seq, e.seq)
			}
			if err != nil {
				return nil, runstream.Wrap(err, runstream.CodeInternal, "jsonl: thread %s: file changed under the store", t.id)
			}
			out = append(out, rec)
		}
		i = j
	}
	return out, nil
}
