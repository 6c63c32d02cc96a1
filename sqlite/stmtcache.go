package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxCachedStmts bounds a stmtCache. The read queries are built from a
// few filters, so their texts are few; only texts with a variable number
// of placeholders (IN lists) can be many, and past the bound they run
// unprepared.
const maxCachedStmts = 256

// stmtCache prepares the read queries of a pool once per connection
// rather than once per call: it keeps one *sql.Stmt per query text, which
// database/sql prepares on each connection the first time it runs there
// and keeps prepared on it. It is safe for concurrent use.
type stmtCache struct {
	db *sql.DB

	mu     sync.RWMutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}}
}

// stmt returns the prepared statement of text, preparing it on first use;
// nil when the cache is full or closed (the caller runs text unprepared).
func (c *stmtCache) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	c.mu.RLock()
	st, ok := c.stmts[text]
	full := c.closed || len(c.stmts) >= maxCachedStmts
	c.mu.RUnlock()
	if ok || full {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[text]; ok || c.closed || len(c.stmts) >= maxCachedStmts {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	c.stmts[text] = st
	return st, nil
}

// query runs text with args as a prepared statement.
func (c *stmtCache) query(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.db.QueryContext(ctx, text, args...)
	}
	return st.QueryContext(ctx, args...)
}

// queryRow runs text with args as a prepared statement, for one row.
func (c *stmtCache) queryRow(ctx context.Context, text string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, text)
	if err != nil || st == nil {
		// An error to prepare shows again, from the row's Scan.
		return c.db.QueryRowContext(ctx, text, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// close closes the statements; later calls run unprepared (and fail once
// the pool is closed).
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for text, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, text)
	}
	return errors.Join(errs...)
}
