package sqlnode

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Spec names one database a server lets sql nodes query: a definition
// refers to it by Name only, never by its location.
type Spec struct {
	Name    string
	Dialect Dialect
	// Location is a SQLite file path or a PostgreSQL URL.
	Location string
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ParseSpec parses "name=sqlite:PATH" or "name=postgres://…" (also
// postgresql://). Its error never quotes the location, which may hold a
// password.
func ParseSpec(s string) (Spec, error) {
	name, loc, ok := strings.Cut(s, "=")
	if !ok || !namePattern.MatchString(name) {
		return Spec{}, fmt.Errorf("sql database %q: want NAME=sqlite:PATH or NAME=postgres://…, NAME matching %s", shortWord(name), namePattern)
	}
	switch {
	case strings.HasPrefix(loc, "sqlite:"):
		path := strings.TrimPrefix(loc, "sqlite:")
		if path == "" {
			return Spec{}, fmt.Errorf("sql database %s: sqlite: needs a file path", name)
		}
		return Spec{Name: name, Dialect: SQLite, Location: path}, nil
	case strings.HasPrefix(loc, "postgres://"), strings.HasPrefix(loc, "postgresql://"):
		if _, err := url.Parse(loc); err != nil {
			return Spec{}, fmt.Errorf("sql database %s: the PostgreSQL URL does not parse", name)
		}
		return Spec{Name: name, Dialect: Postgres, Location: loc}, nil
	}
	return Spec{}, fmt.Errorf("sql database %s: want sqlite:PATH or postgres://…", name)
}

// Databases are the databases a server's sql nodes and sql_query tools
// may query, by name. It is safe for concurrent use; Close it once.
type Databases struct {
	byName map[string]*database
}

type database struct {
	name    string
	dialect Dialect
	db      *sql.DB
}

// maxConnsPerDatabase bounds the connections of one database's pool.
const maxConnsPerDatabase = 4

// Open opens the databases of specs, lazily: a SQLite file must exist
// (it is opened read-only, mode=ro with query_only), a PostgreSQL server
// is first reached by the first query. No specs give an empty set.
func Open(specs ...Spec) (*Databases, error) {
	d := &Databases{byName: map[string]*database{}}
	for _, s := range specs {
		if d.byName[s.Name] != nil {
			d.Close()
			return nil, fmt.Errorf("sql database %s is given twice", s.Name)
		}
		db, err := openDB(s)
		if err != nil {
			d.Close()
			return nil, err
		}
		db.SetMaxOpenConns(maxConnsPerDatabase)
		db.SetConnMaxIdleTime(5 * time.Minute)
		d.byName[s.Name] = &database{name: s.Name, dialect: s.Dialect, db: db}
	}
	return d, nil
}

func openDB(s Spec) (*sql.DB, error) {
	if s.Dialect == Postgres {
		cfg, err := pgx.ParseConfig(s.Location)
		if err != nil {
			return nil, fmt.Errorf("sql database %s: the PostgreSQL URL is not valid", s.Name)
		}
		// A row is one message: refusing messages past the output bound
		// keeps a huge value (SELECT repeat('x', 200000000)) from ever
		// being read into memory.
		cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
			f := pgproto3.NewFrontend(r, w)
			f.SetMaxBodyLen(maxMessageBytes)
			return f
		}
		return stdlib.OpenDB(*cfg), nil
	}
	info, err := os.Stat(s.Location)
	if err != nil || info.IsDir() {
		return nil, fmt.Errorf("sql database %s: no SQLite file at %s", s.Name, s.Location)
	}
	uri := "file:" + (&url.URL{Path: s.Location}).EscapedPath() +
		"?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("sql database %s: %w", s.Name, err)
	}
	return db, nil
}

// Names returns the names of the databases, sorted.
func (d *Databases) Names() []string {
	if d == nil {
		return nil
	}
	names := make([]string, 0, len(d.byName))
	for n := range d.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close closes every database.
func (d *Databases) Close() error {
	if d == nil {
		return nil
	}
	var errs []error
	for _, db := range d.byName {
		errs = append(errs, db.db.Close())
	}
	return errors.Join(errs...)
}

// lookup returns the database of a name, or the policy error
// unknown_database. A nil *Databases has none.
func (d *Databases) lookup(name string) (*database, error) {
	if d != nil {
		if db := d.byName[name]; db != nil {
			return db, nil
		}
	}
	return nil, deny(RuleUnknownDatabase, "the database %q is not configured on this server", shortWord(name))
}
