package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// maxErrorBodyBytes bounds how much of an error response is read.
const maxErrorBodyBytes = 64 << 10

// Client talks to one runstream server. Create it with New; it is safe for
// concurrent use.
type Client struct {
	base   string // scheme://host[/prefix], without a trailing slash
	http   *http.Client
	header http.Header
	logger *slog.Logger
	// jitter returns a random duration in [0, d]; tests replace it to make
	// backoff delays exact.
	jitter func(d time.Duration) time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc. hc must not set
// a Timeout, which would cut long-lived streams; bound single calls with
// their context instead. Defaults to http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithHeader sets a header on every request, such as Authorization. A later
// WithHeader with the same key replaces the value.
func WithHeader(key, value string) Option {
	return func(c *Client) { c.header.Set(key, value) }
}

// WithLogger makes the Client log reconnections (Info), gaps (Warn) and
// dropped duplicate frames (Debug). Defaults to discarding logs.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.logger = l
		}
	}
}

// New returns a Client for the server at baseURL, an absolute http or https
// URL optionally ending in a path prefix ("https://example.com/runstream").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: parse base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q is not an absolute http or https URL", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q has a query or fragment", baseURL)
	}
	c := &Client{
		base:   strings.TrimSuffix(u.String(), "/"),
		http:   http.DefaultClient,
		header: http.Header{},
		logger: slog.New(slog.DiscardHandler),
		jitter: fullJitter,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// fullJitter returns a uniformly random duration in [0, d].
func fullJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Uint64N(uint64(d) + 1)) // d+1 may overflow int64, never uint64
}

// APIError is an error the server answered with: the protocol's unified
// error body and the HTTP status. A body that is not the unified error (from
// a proxy, say) leaves Code empty and puts the start of the body in Message.
type APIError struct {
	Status    int
	Code      runstream.ErrorCode
	Message   string
	Retryable bool
	NodeID    string
	Details   map[string]any
	RequestID string
}

// Error implements error.
func (e *APIError) Error() string {
	var b strings.Builder
	if e.Code != "" {
		fmt.Fprintf(&b, "%s (HTTP %d)", e.Code, e.Status)
	} else {
		fmt.Fprintf(&b, "HTTP %d", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// readAPIError reads the error response resp. The caller closes the body.
func readAPIError(resp *http.Response) *APIError {
	e := &APIError{Status: resp.StatusCode, Retryable: retryableStatus(resp.StatusCode)}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	var wire struct {
		Code      runstream.ErrorCode `json:"code"`
		Message   string              `json:"message"`
		Retryable bool                `json:"retryable"`
		NodeID    string              `json:"nodeId"`
		Details   map[string]any      `json:"details"`
		RequestID string              `json:"requestId"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Code != "" {
		e.Code, e.Message, e.Retryable = wire.Code, wire.Message, wire.Retryable
		e.NodeID, e.Details, e.RequestID = wire.NodeID, wire.Details, wire.RequestID
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 200 {
		e.Message = strings.ToValidUTF8(e.Message[:200], "") + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryableStatus reports whether a request answered with status may be
// sent again unchanged: 429 and 5xx.
func retryableStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// Run is a workflow run as the server shows it. It never holds a resume
// token.
type Run struct {
	ID         string             `json:"runId"`
	WorkflowID string             `json:"workflowId"`
	VersionID  string             `json:"versionId"`
	Status     workflow.RunStatus `json:"status"`
	Input      json.RawMessage    `json:"input"`
	// Output is the run's output once completed, nil before.
	Output json.RawMessage `json:"output"`
	// Error is the unified error object once failed, nil otherwise.
	Error json.RawMessage `json:"error"`
	// LastSeq is the seq of the run's newest event, 0 before the first.
	LastSeq   int64     `json:"lastSeq"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// StartedAt is zero until the run started; FinishedAt until it ended.
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// GetRun returns the run runID. An unknown run (or another user's) is an
// *APIError with CodeWorkflowRunNotFound.
func (c *Client) GetRun(ctx context.Context, runID string) (Run, error) {
	if runID == "" {
		return Run{}, errNoRunID
	}
	var run Run
	if err := c.getJSON(ctx, runPath(runID, ""), nil, &run); err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	for _, raw := range []*json.RawMessage{&run.Output, &run.Error} {
		if string(*raw) == "null" {
			*raw = nil
		}
	}
	return run, nil
}

// Page is one page of a run's stored events.
type Page struct {
	// Events have seq > the requested after, ascending.
	Events []workflow.Envelope `json:"events"`
	// HasMore reports that the run had events after this page when it was
	// read.
	HasMore bool `json:"hasMore"`
	// NextAfter is the after of the next page: the seq of the page's last
	// event, or the requested after for an empty page.
	NextAfter int64 `json:"nextAfter"`
}

// ListEvents returns up to limit stored events of run runID with seq >
// after. limit 0 asks for the server's default (100); the server accepts 1
// to 1000 (workflow.MaxEventPageLimit).
func (c *Client) ListEvents(ctx context.Context, runID string, after int64, limit int) (Page, error) {
	if runID == "" {
		return Page{}, errNoRunID
	}
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page Page
	if err := c.getJSON(ctx, runPath(runID, "/events"), q, &page); err != nil {
		return Page{}, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	return page, nil
}

// Events returns the stored events of run runID with seq > after, in seq
// order, fetched page by page (workflow.MaxEventPageLimit a page) until the
// server reports no more. It does not wait for new events: use Follow for
// that. An error is yielded once, and ends the sequence.
func (c *Client) Events(ctx context.Context, runID string, after int64) iter.Seq2[workflow.Envelope, error] {
	return func(yield func(workflow.Envelope, error) bool) {
		last := after
		for {
			page, err := c.ListEvents(ctx, runID, after, workflow.MaxEventPageLimit)
			if err != nil {
				yield(workflow.Envelope{}, err)
				return
			}
			for _, env := range page.Events {
				if env.Seq <= last {
					continue // a page overlapping the previous one
				}
				last = env.Seq
				if !yield(env, nil) {
					return
				}
			}
			if !page.HasMore {
				return
			}
			if page.NextAfter <= after {
				yield(workflow.Envelope{}, fmt.Errorf("list events of run %s: the page after %d has more but does not advance", runID, after))
				return
			}
			after = page.NextAfter
		}
	}
}

// errNoRunID answers a call without a run id, which would name no run.
var errNoRunID = errors.New("client: empty run id")

// runPath returns the API path of run runID followed by suffix.
func runPath(runID, suffix string) string {
	return "/api/workflows/runs/" + url.PathEscape(runID) + suffix
}

// newRequest returns a GET request for path and query with the client's
// headers.
func (c *Client) newRequest(ctx context.Context, path string, query url.Values) (*http.Request, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	return req, nil
}

// getJSON sends a GET request and decodes a 200 JSON answer into v; any
// other status is an *APIError.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, v any) error {
	req, err := c.newRequest(ctx, path, query)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}
