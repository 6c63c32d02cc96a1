package jsonl

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// lastSeqName is the per-thread file that keeps the highest seq ever
// assigned once deletes may have removed its row.
const lastSeqName = "last_seq"

// recover builds t's index from its files, truncating torn tails. t.mu is
// held.
func (s *RunEventStore) recover(t *thread) error {
	lastSeq, err := readLastSeq(t.dir)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "jsonl: recover thread %s", t.id)
	}
	dirents, err := os.ReadDir(t.runsDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: recover thread %s", t.id)
	}
	var (
		found []entry
		keys  []foundKey
	)
	for _, d := range dirents { // sorted by name, so recovery is deterministic
		path := filepath.Join(t.runsDir(), d.Name())
		if strings.HasSuffix(d.Name(), ".tmp") { // left by a rewrite that did not finish
			os.Remove(path)
			continue
		}
		run, ok := strings.CutSuffix(d.Name(), ".jsonl")
		if !ok || d.IsDir() || runevents.ValidateID("run_id", run) != nil {
			s.log.Warn("jsonl: ignoring unexpected file", "path", path)
			continue
		}
		rows, ks, err := s.recoverFile(t, run, path)
		if err != nil {
			t.closeFilesLocked()
			return runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: recover thread %s", t.id)
		}
		found = append(found, rows...)
		keys = append(keys, ks...)
	}
	// A stable sort keeps the first of duplicate seqs in file name order.
	slices.SortStableFunc(found, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	deleted := lastSeq // every seq up to it was durable before a delete
	dups := 0
	var seqs []int64
	for i, e := range found {
		if i > 0 && e.seq == found[i-1].seq {
			dups++
			continue
		}
		t.add(e)
		seqs = append(seqs, e.seq)
		lastSeq = max(lastSeq, e.seq)
	}
	if dups > 0 {
		s.log.Warn("jsonl: skipped rows repeating a seq", "thread", t.id, "rows", dups)
	}
	t.lastSeq, t.visible = lastSeq, lastSeq

	// A key line commits its rows: a key whose rows are not all present
	// was torn by a crash (unless a delete removed them since), and so are
	// the rows of its batch that made it to disk. They were never
	// acknowledged: cut every file at the torn batch's key line and
	// recover again.
	cuts := map[uint32]int64{}
	var whole []foundKey
	for _, k := range keys {
		switch {
		case hasSeqs(seqs, k.rec.FirstSeq, k.rec.LastSeq) || k.rec.FirstSeq <= deleted:
			whole = append(whole, k)
		case k.rec.FirstSeq > deleted:
			if at, ok := cuts[k.file]; !ok || k.off < at {
				cuts[k.file] = k.off
			}
		}
	}
	if len(cuts) > 0 {
		err := s.cutTornKeys(t, cuts)
		t.closeFilesLocked()
		if err != nil {
			return runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: recover thread %s", t.id)
		}
		return s.recover(t)
	}
	now := s.now()
	for _, k := range whole {
		if now.Before(k.rec.ExpiresAt) {
			s.recoveredKey(t, k.rec, keyLoc{f: t.files[k.file], off: k.off, size: k.size})
		}
	}
	return nil
}

// foundKey is a whole key line of size bytes (without '\n') found by
// recovery at off in file file.
type foundKey struct {
	rec  keyRecord
	file uint32
	off  int64
	size int64
}

// hasSeqs reports whether sorted seqs holds every seq from first to last.
func hasSeqs(seqs []int64, first, last int64) bool {
	if first <= 0 || last < first {
		return false
	}
	i, ok := slices.BinarySearch(seqs, first)
	n := int(last - first + 1)
	return ok && i+n <= len(seqs) && seqs[i+n-1] == last
}

// cutTornKeys truncates each file of cuts at its offset, the key line of a
// torn batch, and fsyncs it. t.mu is held.
func (s *RunEventStore) cutTornKeys(t *thread, cuts map[uint32]int64) error {
	for fi, off := range cuts {
		f := t.files[fi]
		if err := f.f.Truncate(off); err != nil {
			return fmt.Errorf("truncate torn keyed batch of %s: %w", f.path, err)
		}
		if err := s.io.sync(f.f); err != nil {
			return fmt.Errorf("fsync %s: %w", f.path, err)
		}
		s.log.Warn("jsonl: truncated a keyed batch a crash left incomplete", "path", f.path, "bytes", f.size-off)
	}
	return nil
}

// recoverFile opens a run file, indexes its lines and truncates a torn
// tail: a final fragment without '\n', or a final line that is not valid
// JSON. t.mu is held.
func (s *RunEventStore) recoverFile(t *thread, name, path string) ([]entry, []foundKey, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	fi := uint32(len(t.files))
	var (
		rows           []entry
		keys           []foundKey
		off            int64 // offset after the last complete line
		lastOff        int64 // offset of the last complete line
		lastTorn       bool  // the last complete line is not JSON at all
		skipped        int
		fragment, long []byte
	)
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if errors.Is(err, io.EOF) {
			fragment = line
			break
		}
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		body := line[:len(line)-1]
		lastOff, off = off, off+int64(len(line))
		lastTorn = false
		if len(body) == 0 {
			continue
		}
		if bytes.HasPrefix(body, []byte(keyLinePrefix)) {
			var k keyLine
			if json.Unmarshal(body, &k) == nil {
				keys = append(keys, foundKey{rec: k.Key, file: fi, off: lastOff, size: int64(len(body))})
				continue
			}
		}
		e, ok := t.index(body, lastOff, fi)
		if !ok {
			skipped++
			lastTorn = !json.Valid(body)
			continue
		}
		rows = append(rows, e)
	}
	keep := off
	if lastTorn {
		keep, skipped = lastOff, skipped-1
	}
	if cut := off + int64(len(fragment)) - keep; cut > 0 {
		if err := f.Truncate(keep); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("truncate torn tail of %s: %w", path, err)
		}
		if err := s.io.sync(f); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("fsync %s: %w", path, err)
		}
		s.log.Warn("jsonl: truncated a torn tail", "path", path, "bytes", cut)
	}
	if skipped > 0 {
		s.log.Warn("jsonl: skipping lines that are not records of the thread", "path", path, "lines", skipped)
	}
	t.files = append(t.files, &runFile{name: name, path: path, f: f, size: keep, synced: keep})
	t.fileOf[name] = fi
	return rows, keys, nil
}

// index decodes one line of file fi at off and returns its entry, or false
// when the line is not a row of t.
func (t *thread) index(line []byte, off int64, fi uint32) (entry, bool) {
	if !json.Valid(line) || len(line) > math.MaxUint32 {
		return entry{}, false
	}
	rec, plain := parsePlain(line)
	if !plain && json.Unmarshal(line, &rec) != nil {
		return entry{}, false
	}
	if rec.ThreadID != t.id || rec.Seq <= 0 || runevents.ValidateID("run_id", rec.RunID) != nil {
		return entry{}, false
	}
	a := attrsOf(&rec, !plain)
	return entry{seq: rec.Seq, off: off, size: uint32(len(line)), file: fi, attr: t.intern(a)}, true
}

// readLastSeq returns the seq in dir/last_seq, 0 when there is none.
func readLastSeq(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, lastSeqName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("corrupt %s file in %s", lastSeqName, dir)
	}
	return n, nil
}

// writeLastSeq durably replaces dir/last_seq with n.
func (s *RunEventStore) writeLastSeq(dir string, n int64) error {
	f, err := s.replaceFile(filepath.Join(dir, lastSeqName), func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%d\n", n)
		return err
	})
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return s.syncDir(dir)
}

// replaceFile atomically replaces path by what write produces: it writes
// and fsyncs path.tmp, then renames it over path. The caller fsyncs the
// directory to make the rename durable. It returns the new file, open for
// reading and writing.
func (s *RunEventStore) replaceFile(path string, write func(io.Writer) error) (*os.File, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	err = write(f)
	if err == nil {
		err = s.io.sync(f)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	return f, nil
}
