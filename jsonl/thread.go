package jsonl

import (
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/runstream/runstream/runevents"
)

// thread is the in-memory index of one thread's files. Every entry slice is
// ascending by seq.
type thread struct {
	id  string
	dir string // <Dir>/threads/<id>

	// syncMu is held by the writer that fsyncs for the group (the leader)
	// and by deletes. Lock order: syncMu, then mu.
	syncMu sync.Mutex

	mu     sync.RWMutex // guards everything below
	loaded bool
	// lastSeq is the highest seq assigned and written; visible is the
	// highest durable one. Readers see only seq <= visible; rows above it
	// are waiting for their fsync.
	lastSeq, visible int64
	files            []*runFile         // by entry.file; nil once removed
	fileOf           map[string]uint32  // file name (a run id) -> index in files
	runs             map[string][]entry // run id of the row -> its rows
	messages         []entry            // rows of category message, all runs
	attrs            []attrs            // by entry.attr
	attrIndex        map[attrs]uint32
	syncErr          error // a failed group fsync; waiting writers return it
	// keys are the idempotency keys whose lines are in the thread's files
	// (some perhaps expired), to move their bodies into memory before a
	// delete rewrites a file; pruneKeysAt is when to forget expired ones.
	keys        []*keyEntry
	pruneKeysAt int
}

// runFile is one open <run_id>.jsonl file.
type runFile struct {
	name   string // run id in the file name
	path   string
	f      *os.File
	size   int64 // bytes written
	synced int64 // bytes known durable
}

// entry locates one row: a line of size bytes (without '\n') at off in
// file files[file]. What reads filter on lives in attrs[attr], interned,
// so that an entry stays 32 bytes.
type entry struct {
	seq  int64
	off  int64
	size uint32
	file uint32
	attr uint32
}

// attrs are the fields of a row that reads filter on.
type attrs struct {
	run       string
	eventType runevents.EventType
	category  runevents.Category
	userID    string
	taskID    string // metadata.task_id when it is a JSON string
	hasTaskID bool   // whether it is
	// middleware reports metadata.caller starting with "middleware:".
	middleware bool
	// legacy marks a line that parsePlain does not accept (written by
	// another system, or with escapes in its strings): reads decode it
	// with encoding/json and normalise it.
	legacy bool
}

func newThread(id, dir string) *thread {
	return &thread{
		id:        id,
		dir:       dir,
		fileOf:    map[string]uint32{},
		runs:      map[string][]entry{},
		attrIndex: map[attrs]uint32{},
	}
}

func (t *thread) runsDir() string { return filepath.Join(t.dir, "runs") }

// intern returns the index of a in t.attrs, adding it if new.
func (t *thread) intern(a attrs) uint32 {
	if i, ok := t.attrIndex[a]; ok {
		return i
	}
	i := uint32(len(t.attrs))
	t.attrs = append(t.attrs, a)
	t.attrIndex[a] = i
	return i
}

// add files e, a row already written, in the thread's indexes. Rows are
// added in seq order.
func (t *thread) add(e entry) {
	a := &t.attrs[e.attr]
	t.runs[a.run] = append(t.runs[a.run], e)
	if a.category == runevents.CategoryMessage {
		t.messages = append(t.messages, e)
	}
}

// attrsOf returns the filter fields of rec.
func attrsOf(rec *runevents.Record, legacy bool) attrs {
	f := runevents.FiltersOf(rec.Metadata)
	return attrs{
		run:        rec.RunID,
		eventType:  rec.EventType,
		category:   rec.Category,
		userID:     rec.UserID,
		taskID:     f.TaskID,
		hasTaskID:  f.HasTaskID,
		middleware: f.Middleware,
		legacy:     legacy,
	}
}

// rollbackLocked drops the rows above t.visible after a failed fsync and
// truncates every file back to its durable size. The store has failed, so
// truncation errors are only logged by the caller.
func (t *thread) rollbackLocked() error {
	for run, rows := range t.runs {
		rows = trimAbove(rows, t.visible)
		if len(rows) == 0 {
			delete(t.runs, run)
		} else {
			t.runs[run] = rows
		}
	}
	t.messages = trimAbove(t.messages, t.visible)
	t.lastSeq = t.visible
	var errs []error
	for _, f := range t.files {
		if f != nil && f.size > f.synced {
			errs = append(errs, f.f.Truncate(f.synced))
			f.size = f.synced
		}
	}
	return errors.Join(errs...)
}

// trimAbove returns rows without the rows whose seq is above max.
func trimAbove(rows []entry, max int64) []entry {
	n := len(rows)
	for n > 0 && rows[n-1].seq > max {
		n--
	}
	return rows[:n]
}

// closeFiles closes every open file of t.
func (t *thread) closeFiles() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closeFilesLocked()
}

// closeFilesLocked closes every open file of t and empties its index, as
// if it had never been recovered. t.mu is held.
func (t *thread) closeFilesLocked() error {
	var errs []error
	for _, f := range t.files {
		if f != nil {
			errs = append(errs, f.f.Close())
		}
	}
	t.loaded, t.lastSeq, t.visible = false, 0, 0
	t.files, t.messages, t.attrs, t.keys = nil, nil, nil, nil
	t.fileOf, t.runs, t.attrIndex = map[string]uint32{}, map[string][]entry{}, map[attrs]uint32{}
	return errors.Join(errs...)
}
