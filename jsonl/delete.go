package jsonl

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// DeleteByThread deletes the thread's rows visible to owner, rewriting or
// removing the files that hold them. The thread keeps its last seq.
func (s *RunEventStore) DeleteByThread(_ context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return 0, err
	}
	if err := runevents.CheckOwner(owner); err != nil {
		return 0, err
	}
	return s.delete(threadID, func(a *attrs) bool { return owner.Sees(a.userID) })
}

// DeleteByRun deletes the run's rows visible to owner, rewriting or
// removing the files that hold them. The thread keeps its last seq.
func (s *RunEventStore) DeleteByRun(_ context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return 0, err
	}
	if err := runevents.ValidateID("run_id", runID); err != nil {
		return 0, err
	}
	if err := runevents.CheckOwner(owner); err != nil {
		return 0, err
	}
	return s.delete(threadID, func(a *attrs) bool { return a.run == runID && owner.Sees(a.userID) })
}

// delete removes the rows of the thread whose attrs gone accepts and
// returns how many. It first makes every written row durable and records
// the thread's last seq in last_seq, so that the seq of a deleted row is
// never assigned again.
func (s *RunEventStore) delete(threadID string, gone func(*attrs) bool) (int, error) {
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	t, err := s.loadThread(threadID, false)
	if err != nil || t == nil {
		return 0, err
	}
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.writable(); err != nil {
		return 0, err
	}
	if t.visible < t.lastSeq {
		p := t.pendingLocked()
		if err := s.syncedLocked(t, p, s.syncFiles(p)); err != nil {
			return 0, err
		}
	}
	n, touched := 0, map[uint32]bool{}
	for _, rows := range t.runs {
		for _, e := range rows {
			if gone(&t.attrs[e.attr]) {
				n++
				touched[e.file] = true
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	err = s.writeLastSeq(t.dir, t.lastSeq)
	if err == nil {
		err = s.dropLocked(t, gone, touched)
	}
	if err != nil {
		// The disk may hold part of the delete: recover the thread afresh
		// on its next use.
		s.fail(err)
		t.closeFilesLocked()
		s.forget(t)
		return 0, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: delete in thread %s failed; the store refuses further writes", t.id)
	}
	return n, nil
}

// dropLocked rewrites each touched file without the gone rows (removing it
// when nothing is left), fsyncs the runs directory, and then updates the
// index. A file keeps the key lines that still commit one of its rows
// (unexpired, with a kept row of the file in their seqs); the others go,
// and their keys with them. t.mu is held.
func (s *RunEventStore) dropLocked(t *thread, gone func(*attrs) bool, touched map[uint32]bool) error {
	moved := map[uint32]map[int64]int64{} // file -> old offset -> new offset
	now := s.now()
	var keptKeys, droppedKeys []*keyEntry
	for fi := range touched {
		f := t.files[fi]
		var kept []entry
		for _, rows := range t.runs {
			for _, e := range rows {
				if e.file == fi && !gone(&t.attrs[e.attr]) {
					kept = append(kept, e)
				}
			}
		}
		var lines []entry // the key lines kept, as entries
		for _, k := range t.keys {
			if k.at.f != f {
				continue
			}
			live := now.Before(k.rec.ExpiresAt) && slices.ContainsFunc(kept, func(e entry) bool {
				return e.seq >= k.rec.FirstSeq && e.seq <= k.rec.LastSeq
			})
			if !live {
				droppedKeys = append(droppedKeys, k)
				continue
			}
			keptKeys = append(keptKeys, k)
			lines = append(lines, entry{off: k.at.off, size: uint32(k.at.size), file: fi})
		}
		kept = append(kept, lines...)
		if len(kept) == 0 {
			if err := f.f.Close(); err != nil {
				return fmt.Errorf("close %s: %w", f.path, err)
			}
			t.files[fi] = nil
			delete(t.fileOf, f.name)
			if err := os.Remove(f.path); err != nil {
				return fmt.Errorf("remove %s: %w", f.path, err)
			}
			continue
		}
		slices.SortFunc(kept, func(a, b entry) int { return cmp.Compare(a.off, b.off) })
		offsets, err := s.rewrite(f, kept)
		if err != nil {
			return err
		}
		moved[fi] = offsets
	}
	if err := s.syncDir(t.runsDir()); err != nil {
		return err
	}
	for _, k := range keptKeys {
		if m := moved[t.fileOf[k.at.f.name]]; m != nil {
			k.at.off = m[k.at.off]
		}
	}
	s.forgetKeysLocked(t, droppedKeys)
	keep := func(rows []entry) []entry {
		rows = slices.DeleteFunc(rows, func(e entry) bool { return gone(&t.attrs[e.attr]) })
		for i := range rows {
			if m := moved[rows[i].file]; m != nil {
				rows[i].off = m[rows[i].off]
			}
		}
		return rows
	}
	for run, rows := range t.runs {
		if rows = keep(rows); len(rows) == 0 {
			delete(t.runs, run)
		} else {
			t.runs[run] = rows
		}
	}
	t.messages = keep(t.messages)
	return nil
}

// rewrite replaces f by a file holding only the lines of kept (sorted by
// offset) and returns where each line moved. The caller fsyncs the
// directory.
func (s *RunEventStore) rewrite(f *runFile, kept []entry) (map[int64]int64, error) {
	moved := make(map[int64]int64, len(kept))
	var size int64
	nf, err := s.replaceFile(f.path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		// Copy each span of contiguous lines in one go.
		for i := 0; i < len(kept); {
			start, end, j := kept[i].off, kept[i].off, i
			for ; j < len(kept) && kept[j].off == end; j++ {
				moved[kept[j].off] = size + (end - start)
				end = kept[j].off + int64(kept[j].size) + 1
			}
			if n, err := io.Copy(bw, io.NewSectionReader(f.f, start, end-start)); err != nil || n != end-start {
				return fmt.Errorf("copy lines of %s: %d of %d bytes: %w", f.path, n, end-start, err)
			}
			size += end - start
			i = j
		}
		return bw.Flush()
	})
	if err != nil {
		return nil, err
	}
	old := f.f
	f.f, f.size, f.synced = nf, size, size
	if err := old.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", f.path, err)
	}
	return moved, nil
}
