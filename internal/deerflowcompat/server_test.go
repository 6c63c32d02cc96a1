package deerflowcompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
	"github.com/runstream/runstream/threadsvc"
)

// userHeader names the caller; the default is alice.
const userHeader = "X-Compat-User"

// eventStore is a run-event store that also reads whole threads.
type eventStore interface {
	runevents.Store
	runevents.ThreadReader
}

// backend opens new, empty thread stores.
type backend struct {
	name string
	open func(t *testing.T) (eventStore, runevents.RunStore)
}

var schemas atomic.Int64

var backends = []backend{
	{"memory", func(t *testing.T) (eventStore, runevents.RunStore) {
		return memory.NewRunEventStore(), memory.NewRunStore()
	}},
	{"sqlite", func(t *testing.T) (eventStore, runevents.RunStore) {
		db := openSQLite(t, t.TempDir())
		return db.RunEvents(), db.Runs()
	}},
	{"jsonl", func(t *testing.T) (eventStore, runevents.RunStore) {
		dir := t.TempDir()
		events, err := jsonl.Open(jsonl.Config{Dir: dir + "/events"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { events.Close() })
		return events, openSQLite(t, dir).Runs()
	}},
	{"postgres", func(t *testing.T) (eventStore, runevents.RunStore) {
		url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
		schema := fmt.Sprintf("rs_deerflowcompat_%d_%d", time.Now().UnixNano(), schemas.Add(1))
		db, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			db.Close()
			conn, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		return db.RunEvents(), db.Runs()
	}},
}

func openSQLite(t *testing.T, dir string) *sqlite.DB {
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: dir + "/runstream.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// forEachBackend runs test against a server per backend; PostgreSQL
// skips with a message when RUNSTREAM_TEST_POSTGRES_URL is not set.
func forEachBackend(t *testing.T, test func(t *testing.T, c *client)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "postgres" && os.Getenv("RUNSTREAM_TEST_POSTGRES_URL") == "" {
				t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
			}
			t.Parallel()
			test(t, serve(t, b))
		})
	}
}

// serve starts the thread API over new stores of b on a local listener,
// as serve composes it, and returns a client acting for alice.
func serve(t *testing.T, b backend) *client {
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events, runs := b.open(t)
	hub := live.New(live.Config{})
	log := eventlog.NewThreadLog(events, validator, hub, eventlog.ThreadLimits{})
	threads := threadsvc.New(events, events, runs, log, hub, threadsvc.Config{})
	api := httpapi.New(httpapi.Config{Authenticate: func(r *http.Request) (string, error) {
		if user := r.Header.Get(userHeader); user != "" {
			return user, nil
		}
		return "alice", nil
	}}, nil, threads)
	return &client{t: t, base: apitest.Serve(t, api, api).URL, user: "alice"}
}

// client sends requests as a DeerFlow client does, for one user.
type client struct {
	t    *testing.T
	base string
	user string
}

// as returns a client acting for user.
func (c *client) as(user string) *client {
	other := *c
	other.user = user
	return &other
}

// response is an answer: its status, and its body decoded.
type response struct {
	status int
	body   any
	raw    string
}

// do sends method target with body (nil: none; a string is sent as is,
// anything else as JSON) and decodes the answer.
func (c *client) do(method, target string, body any) response {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+target, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(userHeader, c.user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := response{status: resp.StatusCode, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			c.t.Fatalf("%s %s: %d, body is not JSON: %q", method, target, resp.StatusCode, raw)
		}
	}
	return out
}

// want fails unless the request answers status; it returns the body.
func (c *client) want(status int, method, target string, body any) any {
	c.t.Helper()
	resp := c.do(method, target, body)
	if resp.status != status {
		c.t.Fatalf("%s %s = %d %s, want %d", method, target, resp.status, resp.raw, status)
	}
	return resp.body
}

// detail fails unless the request answers status with FastAPI's detail
// equal to want (a string, or the list of validation items as JSON).
func (c *client) detail(status int, method, target string, body any, want any) {
	c.t.Helper()
	got, _ := c.want(status, method, target, body).(map[string]any)
	if !sameJSON(got["detail"], want) {
		g, _ := json.Marshal(got["detail"])
		w, _ := json.Marshal(want)
		c.t.Errorf("%s %s: detail %s, want %s", method, target, g, w)
	}
}

// sameJSON compares two values as JSON documents.
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		raw, _ := json.Marshal(v)
		var out any
		json.Unmarshal(raw, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// loc is one FastAPI validation item's loc with its message left out: the
// suite pins where a validation error points, which DeerFlow's clients
// read, not its wording.
func locs(body any) [][]any {
	m, _ := body.(map[string]any)
	items, _ := m["detail"].([]any)
	var out [][]any
	for _, it := range items {
		item, _ := it.(map[string]any)
		l, _ := item["loc"].([]any)
		out = append(out, l)
	}
	return out
}
