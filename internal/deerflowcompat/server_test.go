package deerflowcompat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/internal/backendtest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/threadsvc"
)

// userHeader names the caller; the default is alice.
const userHeader = "X-Compat-User"

// forEachBackend runs test against a server per backend (in parallel);
// PostgreSQL skips with a message when RUNSTREAM_TEST_POSTGRES_URL is not
// set.
func forEachBackend(t *testing.T, test func(t *testing.T, c *client)) {
	backendtest.ForEach(t, func(t *testing.T, b backendtest.Backend) {
		t.Parallel()
		test(t, serve(t, b))
	})
}

// serve starts the thread API over new stores of b on a local listener,
// as serve composes it, and returns a client acting for alice.
func serve(t *testing.T, b backendtest.Backend) *client {
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	stores := b.Open(t)
	hub := live.New(live.Config{})
	log := eventlog.NewThreadLog(stores.Events, validator, hub, eventlog.ThreadLimits{})
	threads := threadsvc.New(stores.Events, stores.Events, stores.Runs, log, hub, threadsvc.Config{})
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
