package jsonl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Config configures Open.
type Config struct {
	// Dir holds the store's files. Required; created when missing.
	Dir string
	// MaxTraceContent is the byte limit of trace content. Defaults to
	// runevents.DefaultMaxTraceContent.
	MaxTraceContent int
	// Logger receives recovery warnings: torn tails truncated, corrupt
	// lines skipped. Defaults to discarding them.
	Logger *slog.Logger
	// Now stamps rows written without CreatedAt. Defaults to time.Now.
	Now func() time.Time
}

// ErrLocked is the cause of the error Open returns when another store
// holds the directory.
var ErrLocked = errors.New("jsonl: directory locked by another store")

// RunEventStore is the JSONL runevents.Store. Create it with Open.
type RunEventStore struct {
	dir      string
	maxTrace int
	log      *slog.Logger
	now      func() time.Time
	io       ioHooks
	lockFile *os.File

	// life is held shared by every operation and exclusively by Close.
	life   sync.RWMutex
	closed bool

	mu      sync.Mutex // guards threads, failed, keys and lastKeySweep
	threads map[string]*thread
	failed  error // the first write or fsync error; later writes are refused
	// keys indexes the idempotency keys of the threads recovered since
	// Open, and those written since. Lock order: thread.mu, then mu.
	keys         map[idemKey]*keyEntry
	lastKeySweep time.Time

	// hintMu guards hints, the threads whose files held each unexpired key
	// at Open, found by one scan on the first keyed call (scanned).
	hintMu  sync.Mutex
	scanned bool
	hints   map[idemKey][]string
}

var (
	_ runevents.Store      = (*RunEventStore)(nil)
	_ runevents.Durability = (*RunEventStore)(nil)
)

// ioHooks are the calls whose failure the store must survive; tests
// replace them to inject errors.
type ioHooks struct {
	writeAt func(f *os.File, b []byte, off int64) (int, error)
	sync    func(f *os.File) error // files and directories
}

// Open opens the store in cfg.Dir, creating the directory if needed, and
// locks it: while the store is open, a second Open of the same directory,
// in this process or another, fails with CodeUnavailable and cause
// ErrLocked. Threads are recovered lazily, on first use.
func Open(cfg Config) (*RunEventStore, error) {
	if cfg.Dir == "" {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "jsonl: Config.Dir is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: create directory %s", cfg.Dir)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: open lock file in %s", cfg.Dir)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, runstream.Wrap(ErrLocked, runstream.CodeUnavailable,
				"jsonl: directory %s is in use by another store (one process per directory)", cfg.Dir)
		}
		return nil, runstream.Wrap(err, runstream.CodeUnavailable, "jsonl: lock directory %s", cfg.Dir)
	}
	s := &RunEventStore{
		dir:      cfg.Dir,
		maxTrace: cfg.MaxTraceContent,
		log:      cfg.Logger,
		now:      cfg.Now,
		io:       ioHooks{writeAt: (*os.File).WriteAt, sync: (*os.File).Sync},
		lockFile: lock,
		threads:  map[string]*thread{},
	}
	if s.maxTrace <= 0 {
		s.maxTrace = runevents.DefaultMaxTraceContent
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Durability reports the store's durability mode.
func (s *RunEventStore) Durability() string {
	return "jsonl: fsync before acknowledging; one process per directory"
}

// Ping reports whether the store takes writes, for readiness checks: it
// fails with CodeUnavailable once the store is closed, and after a write or
// fsync failed, until the store is reopened. It touches no file.
func (s *RunEventStore) Ping(context.Context) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	return s.writable()
}

// Close waits for running operations, closes every file and releases the
// directory lock. Later calls fail with CodeUnavailable.
func (s *RunEventStore) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, t := range s.threads {
		errs = append(errs, t.closeFiles())
	}
	s.threads = nil
	errs = append(errs, syscall.Flock(int(s.lockFile.Fd()), syscall.LOCK_UN), s.lockFile.Close())
	if err := errors.Join(errs...); err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "jsonl: close %s", s.dir)
	}
	return nil
}

// enter starts an operation: it holds s.life shared until the returned
// function is called.
func (s *RunEventStore) enter() (leave func(), err error) {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return nil, runstream.Errorf(runstream.CodeUnavailable, "run event store is closed")
	}
	return s.life.RUnlock, nil
}

// fail records the first write or fsync error; every later write is
// refused.
func (s *RunEventStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = err
		s.log.Error("jsonl: write failed; the store refuses further writes", "dir", s.dir, "err", err)
	}
}

// writable returns the error that refuses writes after a failure.
func (s *RunEventStore) writable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return runstream.Wrap(s.failed, runstream.CodeUnavailable, "jsonl: store refuses writes after an I/O failure; reopen it")
	}
	return nil
}

// loadThread returns the recovered state of thread id. When create is false
// and the thread has no directory, it returns nil: reads of unknown
// threads leave nothing behind.
func (s *RunEventStore) loadThread(id string, create bool) (*thread, error) {
	s.mu.Lock()
	t := s.threads[id]
	if t == nil {
		dir := filepath.Join(s.dir, "threads", id)
		if !create {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				s.mu.Unlock()
				return nil, nil
			}
		}
		t = newThread(id, dir)
		s.threads[id] = t
	}
	s.mu.Unlock()

	t.mu.RLock()
	loaded := t.loaded
	t.mu.RUnlock()
	if loaded {
		return t, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		if err := s.recover(t); err != nil {
			return nil, err
		}
		t.loaded = true
	}
	return t, nil
}

// forget drops t from the cache after a failed delete left its index out of
// step with the disk; the next use recovers it again.
func (s *RunEventStore) forget(t *thread) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.threads[t.id] == t {
		delete(s.threads, t.id)
	}
}

// syncDir fsyncs a directory, so that entries created or removed in it
// survive a crash.
func (s *RunEventStore) syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer d.Close()
	if err := s.io.sync(d); err != nil {
		return fmt.Errorf("fsync directory %s: %w", path, err)
	}
	return nil
}

// mkdirSynced creates path and its missing parents below s.dir, fsyncing
// the parent of each directory it creates.
func (s *RunEventStore) mkdirSynced(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	parent := filepath.Dir(path)
	if parent != filepath.Clean(s.dir) {
		if err := s.mkdirSynced(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create directory: %w", err)
	}
	return s.syncDir(parent)
}
