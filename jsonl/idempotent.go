package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var _ runevents.IdempotentAppender = (*RunEventStore)(nil)

// IdempotencyTTL is how long an idempotency key is remembered, as in the
// sqlite and postgres stores.
const IdempotencyTTL = 24 * time.Hour

// keyLinePrefix starts every key line, so that recovery tells it from a
// row without decoding it.
const keyLinePrefix = `{"idempotency_key":`

// keyLine is the line that commits an idempotency key with its rows. It is
// written first in every run file a keyed batch touches, in the same write
// as the batch's rows there. FirstSeq..LastSeq are the seqs of the rows
// the line commits: the whole batch's (in every file it touches), or, for
// an if-absent append that found its row, that row's seq (the line is then
// written alone, after the row, in the row's file).
type keyLine struct {
	Key keyRecord `json:"idempotency_key"`
}

type keyRecord struct {
	UserID      string    `json:"user_id"`
	Key         string    `json:"key"`
	RequestHash []byte    `json:"request_hash"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	FirstSeq    int64     `json:"first_seq"`
	LastSeq     int64     `json:"last_seq"`
}

// idemKey names a key: keys are per user.
type idemKey struct{ user, key string }

// keyEntry is a key in the store's index. ready is closed once the key's
// line and rows are durable, or once the write failed (then failed is
// set and the entry is no longer in the index). The response body stays
// on disk, in the key line at locates: rec.Body is nil.
type keyEntry struct {
	rec    keyRecord
	t      *thread // the thread whose files hold the key line
	at     keyLoc  // guarded by t.mu: a delete's rewrite moves the line
	ready  chan struct{}
	failed bool
}

// keyLoc locates a key line (without its '\n') in f.
type keyLoc struct {
	f    *runFile
	off  int64
	size int64
}

// closedReady is the ready channel of keys found by recovery.
var closedReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// response returns the response stored under e, reading its body from
// the key line.
func (e *keyEntry) response() (*runevents.IdempotentResponse, error) {
	e.t.mu.RLock()
	defer e.t.mu.RUnlock()
	body, err := e.bodyLocked()
	if err != nil {
		return nil, err
	}
	return &runevents.IdempotentResponse{
		RequestHash: bytes.Clone(e.rec.RequestHash),
		Status:      e.rec.Status,
		Body:        body,
		CreatedAt:   e.rec.CreatedAt,
	}, nil
}

// bodyLocked reads e's response body from its key line. e.t.mu is held.
func (e *keyEntry) bodyLocked() ([]byte, error) {
	buf := make([]byte, e.at.size)
	if _, err := e.at.f.f.ReadAt(buf, e.at.off); err != nil {
		return nil, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: read idempotency key in %s", e.at.f.path)
	}
	var k keyLine
	if err := json.Unmarshal(buf, &k); err != nil || k.Key.UserID != e.rec.UserID || k.Key.Key != e.rec.Key {
		return nil, runstream.Errorf(runstream.CodeInternal, "jsonl: idempotency key line at offset %d of %s is not the key's", e.at.off, e.at.f.path)
	}
	return k.Key.Body, nil
}

// forgetKeysLocked drops keys whose lines a delete removed, from t and
// from the index. t.mu is held.
func (s *RunEventStore) forgetKeysLocked(t *thread, gone []*keyEntry) {
	if len(gone) == 0 {
		return
	}
	t.keys = slices.DeleteFunc(t.keys, func(e *keyEntry) bool { return slices.Contains(gone, e) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range gone {
		if k := (idemKey{e.rec.UserID, e.rec.Key}); s.keys[k] == e {
			delete(s.keys, k)
		}
	}
}

// addKeyLocked records e among t's keys, forgetting expired ones now and
// then. t.mu is held.
func (s *RunEventStore) addKeyLocked(t *thread, e *keyEntry) {
	t.keys = append(t.keys, e)
	if len(t.keys) >= t.pruneKeysAt {
		now := s.now()
		t.keys = slices.DeleteFunc(t.keys, func(e *keyEntry) bool { return !now.Before(e.rec.ExpiresAt) })
		t.pruneKeysAt = 2*len(t.keys) + 16
	}
}

// AppendIdempotent appends a.Events under the key (runevents.IdempotentAppender).
// The key line and the rows are one write per touched file and share the
// rows' fsync, so the key exists after a crash exactly when its rows do
// (recovery drops a batch that is not whole). A concurrent call with the
// same key waits for the first one's fsync and replays its response.
//
// The key index of a thread is built when the thread is recovered. The
// first keyed call after Open scans the run files modified in the last
// IdempotencyTTL for key lines, and every keyed call recovers the threads
// where its key was found, so that a key is seen from any thread.
func (s *RunEventStore) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	if err := a.Validate(); err != nil {
		return runevents.IdempotentResult{}, err
	}
	now := s.now()
	recs, err := runevents.PrepareBatch(a.Events, now, s.maxTrace)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	leave, err := s.enter()
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	defer leave()
	t, err := s.loadThread(recs[0].ThreadID, true)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	if err := s.loadKeyThreads(idemKey{a.UserID, a.Key}); err != nil {
		return runevents.IdempotentResult{}, err
	}
	for {
		res, wait, err := s.appendIdempotent(t, a, recs, now)
		if wait == nil {
			return res, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return runevents.IdempotentResult{}, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "waiting for a request with the same idempotency key")
		}
	}
}

// appendIdempotent is one attempt of AppendIdempotent. When the key is
// held by a write not yet durable it returns that write's ready channel:
// the caller waits on it and tries again.
func (s *RunEventStore) appendIdempotent(t *thread, a runevents.IdempotentAppend, recs []runevents.Record, now time.Time) (runevents.IdempotentResult, <-chan struct{}, error) {
	k := idemKey{a.UserID, a.Key}
	t.mu.Lock()
	s.mu.Lock()
	e, err := s.lookupLocked(a.UserID, a.Key, a.RequestHash, now)
	if err != nil || e != nil {
		s.mu.Unlock()
		t.mu.Unlock()
		if err != nil {
			return runevents.IdempotentResult{}, nil, err
		}
		select {
		case <-e.ready:
			resp, err := e.response()
			if err != nil {
				return runevents.IdempotentResult{}, nil, err
			}
			return runevents.IdempotentResult{Response: *resp, Replayed: true}, nil, nil
		default:
			return runevents.IdempotentResult{}, e.ready, nil
		}
	}
	// Reserve the key in the lookup's critical section, so that a call
	// with the same key in another thread (another request: it fails with
	// a hash mismatch, or waits) cannot slip in. Until ready is closed,
	// only the fields lookupLocked reads are set.
	expires := now.Add(IdempotencyTTL).UTC().Truncate(time.Microsecond)
	mine := &keyEntry{
		rec:   keyRecord{UserID: a.UserID, Key: a.Key, RequestHash: bytes.Clone(a.RequestHash), ExpiresAt: expires},
		t:     t,
		ready: make(chan struct{}),
	}
	if s.keys == nil {
		s.keys = map[idemKey]*keyEntry{}
	}
	s.keys[k] = mine
	s.mu.Unlock()
	committed := false
	defer func() { // on any failure, free the key and wake its waiters
		if committed {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		mine.failed = true
		if s.keys[k] == mine {
			delete(s.keys, k)
		}
		close(mine.ready)
	}()
	if err := s.writable(); err != nil {
		t.mu.Unlock()
		return runevents.IdempotentResult{}, nil, err
	}

	// The response is built before anything is written, from the seqs the
	// rows will get (or the row an if-absent append finds), so that a
	// failing builder leaves nothing.
	var (
		out     = recs
		created = true
		found   *entry
	)
	if a.IfAbsent {
		old, conflict := t.firstOfTypeLocked(&recs[0])
		if conflict != nil {
			t.mu.Unlock()
			return runevents.IdempotentResult{}, nil, conflict
		}
		if old != nil {
			rows, err := s.readLocked(t, []entry{*old})
			if err != nil {
				t.mu.Unlock()
				return runevents.IdempotentResult{}, nil, err
			}
			out, created, found = rows, false, old
		}
	}
	if created {
		for i := range recs {
			recs[i].Seq = t.lastSeq + int64(i) + 1
		}
	}
	built := make([]runevents.Record, len(out))
	for i := range out {
		built[i] = out[i].Clone()
	}
	resp, err := a.Response(built, created)
	if err != nil {
		t.mu.Unlock()
		return runevents.IdempotentResult{}, nil, err
	}
	if resp.CreatedAt.IsZero() {
		resp.CreatedAt = now
	}
	rec := keyRecord{
		UserID:      a.UserID,
		Key:         a.Key,
		RequestHash: bytes.Clone(a.RequestHash),
		Status:      resp.Status,
		Body:        bytes.Clone(resp.Body),
		CreatedAt:   resp.CreatedAt.UTC().Truncate(time.Microsecond),
		ExpiresAt:   expires,
	}
	if created {
		rec.FirstSeq, rec.LastSeq = recs[0].Seq, recs[len(recs)-1].Seq
	} else {
		rec.FirstSeq, rec.LastSeq = found.seq, found.seq
	}
	line, err := json.Marshal(keyLine{Key: rec})
	if err != nil {
		t.mu.Unlock()
		return runevents.IdempotentResult{}, nil, runstream.Wrap(err, runstream.CodeInternal, "jsonl: encode idempotency key")
	}

	body := rec.Body
	rec.Body = nil // read from the key line
	s.mu.Lock()
	mine.rec = rec
	s.mu.Unlock()

	var (
		upTo int64
		kf   *runFile
		end  int64
	)
	if created {
		// The batch's first file gets the first group of the write, which
		// starts with the key line.
		var fi uint32
		fi, err = s.fileFor(t, recs[0].RunID)
		if err == nil {
			mine.at = keyLoc{f: t.files[fi], off: t.files[fi].size, size: int64(len(line))}
			err = s.appendLocked(t, recs, line)
		}
		upTo = t.lastSeq
	} else {
		upTo = found.seq // the row may still be waiting for its fsync
		kf, end, err = s.writeKeyLocked(t, t.attrs[found.attr].run, line)
		if err == nil {
			mine.at = keyLoc{f: kf, off: end - int64(len(line)) - 1, size: int64(len(line))}
		}
	}
	if err == nil {
		s.addKeyLocked(t, mine)
	}
	t.mu.Unlock()
	if err == nil {
		err = s.commitFile(t, upTo, kf, end)
	}
	if err != nil { // the line was cut, or will be on reopen
		t.mu.Lock()
		t.keys = slices.DeleteFunc(t.keys, func(e *keyEntry) bool { return e == mine })
		t.mu.Unlock()
		return runevents.IdempotentResult{}, nil, err
	}
	s.mu.Lock()
	committed = true
	close(mine.ready)
	s.mu.Unlock()
	res := runevents.IdempotentResult{Response: runevents.IdempotentResponse{
		RequestHash: bytes.Clone(rec.RequestHash), Status: rec.Status, Body: body, CreatedAt: rec.CreatedAt,
	}}
	if created {
		res.Appended = recs
	}
	return res, nil, nil
}

// LookupIdempotent returns the response stored under the key, or nil when
// the key is absent or expired (runevents.IdempotentAppender). A key whose
// append is still waiting for its fsync is waited for.
func (s *RunEventStore) LookupIdempotent(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	if err := runevents.CheckIdempotencyKey(key); err != nil {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if err := s.loadKeyThreads(idemKey{userID, key}); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		e, err := s.lookupLocked(userID, key, requestHash, s.now())
		s.mu.Unlock()
		if err != nil || e == nil {
			return nil, err
		}
		select {
		case <-e.ready:
			if !e.failed {
				return e.response()
			}
		case <-ctx.Done():
			return nil, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "waiting for a request with the same idempotency key")
		}
	}
}

// lookupLocked returns the entry of the key, nil when it is absent or
// expired, or the error of a hash mismatch. At most once a minute it
// forgets every expired key. s.mu is held.
func (s *RunEventStore) lookupLocked(userID, key string, requestHash []byte, now time.Time) (*keyEntry, error) {
	if now.Sub(s.lastKeySweep) >= time.Minute {
		s.lastKeySweep = now
		for k, e := range s.keys {
			if !now.Before(e.rec.ExpiresAt) {
				delete(s.keys, k)
			}
		}
	}
	e := s.keys[idemKey{userID, key}]
	if e == nil || !now.Before(e.rec.ExpiresAt) {
		return nil, nil
	}
	if !bytes.Equal(e.rec.RequestHash, requestHash) {
		return nil, runevents.ErrIdempotencyMismatch()
	}
	return e, nil
}

// recoveredKey adds the key line at of t, found whole by recovery, to the
// index, unless the index holds a key of the same name that expires later.
// t.mu is held, s.mu is not.
func (s *RunEventStore) recoveredKey(t *thread, rec keyRecord, at keyLoc) {
	rec.Body = nil // read from the key line
	e := &keyEntry{rec: rec, t: t, at: at, ready: closedReady}
	s.addKeyLocked(t, e)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := idemKey{rec.UserID, rec.Key}
	if old := s.keys[k]; old != nil && old.rec.ExpiresAt.After(rec.ExpiresAt) {
		return
	}
	if s.keys == nil {
		s.keys = map[idemKey]*keyEntry{}
	}
	s.keys[k] = e
}

// writeKeyLocked appends a key line alone to run's file and returns the
// file and its size after the line, for commitFile. t.mu is held.
func (s *RunEventStore) writeKeyLocked(t *thread, run string, line []byte) (*runFile, int64, error) {
	fi, err := s.fileFor(t, run)
	if err != nil {
		return nil, 0, err
	}
	f := t.files[fi]
	buf := append(line, '\n')
	if _, err := s.io.writeAt(f.f, buf, f.size); err != nil {
		if terr := f.f.Truncate(f.size); terr != nil {
			s.log.Error("jsonl: truncate after failed write", "path", f.path, "err", terr)
		}
		s.fail(err)
		return nil, 0, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: write idempotency key in thread %s failed; the store refuses further writes", t.id)
	}
	f.size += int64(len(buf))
	return f, f.size, nil
}

// firstOfTypeLocked returns the row of rec's run with rec's event type,
// nil when there is none, or a conflict when it is another user's. t.mu
// is held.
func (t *thread) firstOfTypeLocked(rec *runevents.Record) (*entry, error) {
	for _, old := range t.runs[rec.RunID] {
		a := &t.attrs[old.attr]
		if a.eventType != rec.EventType {
			continue
		}
		if a.userID != rec.UserID {
			return nil, runstream.Errorf(runstream.CodeConflict,
				"event %s of run %s already exists for another owner", rec.EventType, rec.RunID)
		}
		return &old, nil
	}
	return nil, nil
}

// loadKeyThreads recovers the threads whose files held key k at Open, so
// that their key lines are in the index: the threads a keyed call must see
// besides its own. The first call scans the directory (scanKeys).
func (s *RunEventStore) loadKeyThreads(k idemKey) error {
	s.hintMu.Lock()
	if !s.scanned {
		hints, err := s.scanKeys()
		if err != nil {
			s.hintMu.Unlock()
			return runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: find idempotency keys in %s", s.dir)
		}
		s.hints, s.scanned = hints, true
	}
	ids := s.hints[k]
	s.hintMu.Unlock()
	for _, id := range ids {
		if _, err := s.loadThread(id, false); err != nil {
			return err
		}
	}
	return nil
}

// scanKeys returns the threads of every key line that has not expired, in
// the run files modified less than IdempotencyTTL ago (an older file
// cannot hold one). It reads only: whether a key line is whole is decided
// by the recovery of its thread. Its cost is one read of those files.
func (s *RunEventStore) scanKeys() (map[idemKey][]string, error) {
	now := s.now()
	hints := map[idemKey][]string{}
	threads, err := os.ReadDir(filepath.Join(s.dir, "threads"))
	if errors.Is(err, os.ErrNotExist) {
		return hints, nil
	}
	if err != nil {
		return nil, err
	}
	for _, td := range threads {
		id := td.Name()
		if !td.IsDir() || runevents.ValidateID("thread_id", id) != nil {
			continue
		}
		runs := filepath.Join(s.dir, "threads", id, "runs")
		files, err := os.ReadDir(runs)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, fd := range files {
			if fd.IsDir() || !strings.HasSuffix(fd.Name(), ".jsonl") {
				continue
			}
			info, err := fd.Info()
			if errors.Is(err, os.ErrNotExist) {
				continue // removed meanwhile by a delete
			}
			if err != nil {
				return nil, err
			}
			if now.Sub(info.ModTime()) >= IdempotencyTTL {
				continue
			}
			keys, err := keyLinesOf(filepath.Join(runs, fd.Name()), now)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				if !slices.Contains(hints[k], id) {
					hints[k] = append(hints[k], id)
				}
			}
		}
	}
	return hints, nil
}

// keyLinesOf returns the keys of the unexpired key lines of a file.
func keyLinesOf(path string, now time.Time) ([]idemKey, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []idemKey
	prefix := []byte(keyLinePrefix)
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long line: kept whole only if a key line's
			var long []byte
			isKey := bytes.HasPrefix(line, prefix)
			for {
				if isKey {
					long = append(long, line...)
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
				line, err = r.ReadSlice('\n')
			}
			line = long
		}
		if bytes.HasPrefix(line, prefix) {
			var k keyLine
			if json.Unmarshal(line, &k) == nil && now.Before(k.Key.ExpiresAt) {
				keys = append(keys, idemKey{k.Key.UserID, k.Key.Key})
			}
		}
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
