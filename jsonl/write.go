package jsonl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Put appends one event to its run's file and returns once it is durable.
func (s *RunEventStore) Put(_ context.Context, e runevents.NewEvent) (runevents.Record, error) {
	rec, err := runevents.Prepare(e, s.now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, err
	}
	recs := []runevents.Record{rec}
	if err := s.append(recs); err != nil {
		return runevents.Record{}, err
	}
	return recs[0], nil
}

// PutBatch appends the events of one thread, each to its own run's file,
// and returns once all are durable. On a write error it truncates every
// file it touched back to its previous size, so that none is stored.
func (s *RunEventStore) PutBatch(_ context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	recs, err := runevents.PrepareBatch(events, s.now(), s.maxTrace)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	if err := s.append(recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// PutIfAbsent appends e unless its run already has a row of its type. The
// check and the append happen under the thread's lock.
func (s *RunEventStore) PutIfAbsent(_ context.Context, e runevents.NewEvent) (runevents.Record, bool, error) {
	rec, err := runevents.Prepare(e, s.now(), s.maxTrace)
	if err != nil {
		return runevents.Record{}, false, err
	}
	leave, err := s.enter()
	if err != nil {
		return runevents.Record{}, false, err
	}
	defer leave()
	t, err := s.loadThread(rec.ThreadID, true)
	if err != nil {
		return runevents.Record{}, false, err
	}
	t.mu.Lock()
	for _, old := range t.runs[rec.RunID] { // rows waiting for their fsync included
		a := &t.attrs[old.attr]
		if a.eventType != rec.EventType {
			continue
		}
		if a.userID != rec.UserID {
			t.mu.Unlock()
			return runevents.Record{}, false, runstream.Errorf(runstream.CodeConflict,
				"event %s of run %s already exists for another owner", rec.EventType, rec.RunID)
		}
		found, err := s.readLocked(t, []entry{old})
		t.mu.Unlock()
		if err == nil {
			err = s.commit(t, old.seq) // the row may still be waiting for its fsync
		}
		if err != nil {
			return runevents.Record{}, false, err
		}
		return found[0], false, nil
	}
	recs := []runevents.Record{rec}
	err = s.appendLocked(t, recs, nil)
	last := t.lastSeq
	t.mu.Unlock()
	if err == nil {
		err = s.commit(t, last)
	}
	if err != nil {
		return runevents.Record{}, false, err
	}
	return recs[0], true, nil
}

// append writes recs, rows of one thread, and waits for their fsync.
func (s *RunEventStore) append(recs []runevents.Record) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	t, err := s.loadThread(recs[0].ThreadID, true)
	if err != nil {
		return err
	}
	t.mu.Lock()
	err = s.appendLocked(t, recs, nil)
	last := t.lastSeq
	t.mu.Unlock()
	if err != nil {
		return err
	}
	return s.commit(t, last)
}

// appendLocked assigns recs the thread's next seqs, writes each to its
// run's file (one write per file) and indexes them; they stay invisible to
// readers until commit. A non-nil marker (an idempotency key line,
// without its '\n') is written first in every file the batch touches, in
// the same write as the rows that follow it there. t.mu is held.
func (s *RunEventStore) appendLocked(t *thread, recs []runevents.Record, marker []byte) error {
	for i := range recs {
		recs[i].Seq = t.lastSeq + int64(i) + 1
	}
	return s.writeLocked(t, recs, marker)
}

// writeLocked is appendLocked for recs whose seqs are set, ascending and
// above t.lastSeq; t.lastSeq becomes the last of them. t.mu is held.
func (s *RunEventStore) writeLocked(t *thread, recs []runevents.Record, marker []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	type group struct {
		file uint32
		buf  []byte
	}
	type line struct {
		group *group
		pos   int64 // offset in group.buf
		size  uint32
	}
	var groups []*group // in first-seen order; a batch spans few runs
	lines := make([]line, len(recs))
	for i := range recs {
		rec := &recs[i]
		fi, err := s.fileFor(t, rec.RunID)
		if err != nil {
			return err
		}
		var g *group
		for _, c := range groups {
			if c.file == fi {
				g = c
			}
		}
		if g == nil {
			g = &group{file: fi}
			if marker != nil {
				g.buf = append(append(g.buf, marker...), '\n')
			}
			groups = append(groups, g)
		}
		enc, _ := rec.MarshalJSON() // never fails
		if len(enc) > math.MaxUint32 {
			return runstream.Errorf(runstream.CodePayloadTooLarge, "event of %d bytes exceeds the 4 GiB line limit", len(enc))
		}
		lines[i] = line{group: g, pos: int64(len(g.buf)), size: uint32(len(enc))}
		g.buf = append(append(g.buf, enc...), '\n')
	}
	for k, g := range groups {
		f := t.files[g.file]
		if _, err := s.io.writeAt(f.f, g.buf, f.size); err != nil {
			// Cut the partial batch so that no later append is glued to it.
			for _, g := range groups[:k+1] {
				f := t.files[g.file]
				if terr := f.f.Truncate(f.size); terr != nil {
					s.log.Error("jsonl: truncate after failed write", "path", f.path, "err", terr)
				}
			}
			err = fmt.Errorf("write %s: %w", f.path, err)
			s.fail(err)
			return runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: append to thread %s failed; the store refuses further writes", t.id)
		}
	}
	for i := range recs {
		l := lines[i]
		f := t.files[l.group.file]
		t.add(entry{seq: recs[i].Seq, off: f.size + l.pos, size: l.size, file: l.group.file, attr: t.intern(attrsOf(&recs[i], false))})
	}
	for _, g := range groups {
		t.files[g.file].size += int64(len(g.buf))
	}
	if len(recs) > 0 {
		t.lastSeq = recs[len(recs)-1].Seq
	}
	return nil
}

// fileFor returns the index of run's file, creating the file, its
// directories and their directory entries durably when it is new. t.mu is
// held.
func (s *RunEventStore) fileFor(t *thread, run string) (uint32, error) {
	if fi, ok := t.fileOf[run]; ok {
		return fi, nil
	}
	path := filepath.Join(t.runsDir(), run+".jsonl")
	f, err := s.createFile(t.runsDir(), path)
	if err != nil {
		err = fmt.Errorf("create %s: %w", path, err)
		s.fail(err)
		return 0, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: create run file in thread %s; the store refuses further writes", t.id)
	}
	fi := uint32(len(t.files))
	t.files = append(t.files, &runFile{name: run, path: path, f: f})
	t.fileOf[run] = fi
	return fi, nil
}

// createFile creates the empty file path in dir, creating dir if needed,
// and fsyncs dir so that the new entry survives a crash.
func (s *RunEventStore) createFile(dir, path string) (*os.File, error) {
	if err := s.mkdirSynced(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := s.syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// commit returns once every row of t up to seq upTo is durable. The first
// writer to get t.syncMu fsyncs every file written so far, for every
// waiting writer (group commit); the others find their rows durable.
func (s *RunEventStore) commit(t *thread, upTo int64) error {
	return s.commitFile(t, upTo, nil, 0)
}

// commitFile is commit that also waits, when f is not nil, until the first
// end bytes of f are durable: a key line written without rows has no seq
// to wait for.
func (s *RunEventStore) commitFile(t *thread, upTo int64, f *runFile, end int64) error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.mu.Lock()
	if t.visible >= upTo && (f == nil || f.synced >= end) {
		t.mu.Unlock()
		return nil
	}
	if t.syncErr != nil {
		t.mu.Unlock()
		return t.syncErr
	}
	p := t.pendingLocked()
	t.mu.Unlock()
	err := s.syncFiles(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.syncedLocked(t, p, err)
}

// pending is what one fsync round makes durable.
type pending struct {
	upTo  int64      // rows up to this seq
	files []*runFile // files with unsynced bytes
	sizes []int64    // their sizes when the round started
}

// pendingLocked returns the rows and files waiting for an fsync. t.mu is
// held.
func (t *thread) pendingLocked() pending {
	p := pending{upTo: t.lastSeq}
	for _, f := range t.files {
		if f != nil && f.size > f.synced {
			p.files = append(p.files, f)
			p.sizes = append(p.sizes, f.size)
		}
	}
	return p
}

// syncFiles fsyncs the files of p in parallel, so that a round costs about
// one fsync (the file system commits them together) rather than one per
// file.
func (s *RunEventStore) syncFiles(p pending) error {
	if len(p.files) == 1 {
		if err := s.io.sync(p.files[0].f); err != nil {
			return fmt.Errorf("fsync %s: %w", p.files[0].path, err)
		}
		return nil
	}
	errs := make([]error, len(p.files))
	var wg sync.WaitGroup
	for i, f := range p.files {
		wg.Go(func() {
			if err := s.io.sync(f.f); err != nil {
				errs[i] = fmt.Errorf("fsync %s: %w", f.path, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// syncedLocked ends an fsync round: on success the rows become visible; on
// failure the store fails and every row not yet durable is rolled back.
// t.mu is held.
func (s *RunEventStore) syncedLocked(t *thread, p pending, err error) error {
	if err != nil {
		s.fail(err)
		t.syncErr = runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: fsync in thread %s failed; the store refuses further writes", t.id)
		if rerr := t.rollbackLocked(); rerr != nil {
			s.log.Error("jsonl: truncate after failed fsync", "thread", t.id, "err", rerr)
		}
		return t.syncErr
	}
	for i, f := range p.files {
		f.synced = max(f.synced, p.sizes[i])
	}
	t.visible = max(t.visible, p.upTo)
	return nil
}
