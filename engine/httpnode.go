package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// Defaults and bounds of the http node type and the http_get tool.
const (
	DefaultHTTPTimeout          = 30 * time.Second
	MaxHTTPTimeout              = 10 * time.Minute
	DefaultHTTPMaxResponseBytes = 1 << 20
	MaxHTTPMaxResponseBytes     = 16 << 20
	maxHTTPRedirects            = 5
)

// HTTPOptions are the server's policies for the http node type and the
// http_get tool. A node may ask for a shorter timeout or a smaller
// response cap, never for more.
type HTTPOptions struct {
	// Client sends the requests. Defaults to a client that follows at
	// most 5 redirects (and, as net/http does, drops credentials on a
	// redirect to another host), uses no proxy, and refuses to connect to
	// an address that is not public (loopback, private, link-local,
	// unspecified, multicast, reserved; IPv4-mapped forms too) unless
	// Allow lists it: the resolved address of every connection is judged,
	// redirects included. A Client given here is used as it is, without
	// that guard.
	Client *http.Client
	// Allow lists the hosts and networks the default Client may reach
	// although they are not public (runstream serve --http-node-allow).
	Allow HTTPAllowList
	// Secrets resolves the {{ secrets.NAME }} references of the http
	// node's url and headers when it runs; their values are scrubbed
	// from the node's output and errors. Nil resolves none.
	Secrets Secrets
	// Timeout bounds each request. Defaults to DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds each response body. Defaults to
	// DefaultHTTPMaxResponseBytes.
	MaxResponseBytes int64
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.Client == nil {
		o.Client = guardedClient(o.Allow)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultHTTPTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultHTTPMaxResponseBytes
	}
	return o
}

// httpConfig is the config of an http node.
type httpConfig struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Body is a text template; JSON a JSON template sent as
	// application/json. At most one of them.
	Body             string          `json:"body"`
	JSON             json.RawMessage `json:"json"`
	TimeoutMs        int64           `json:"timeoutMs"`
	MaxResponseBytes int64           `json:"maxResponseBytes"`
}

var (
	httpMethods       = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	// reservedHeaders are set by the transport, not by a definition.
	reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer"}
)

// httpRequest is one compiled request: templates over the node's Env.
type httpRequest struct {
	method   string
	url      *secretTemplate
	headers  map[string]*secretTemplate
	body     *Template
	json     *JSONTemplate
	timeout  time.Duration
	maxBytes int64
}

// HTTP returns the http node type: config {"method"? (GET), "url",
// "headers"?, "body"? | "json"?, "timeoutMs"?, "maxResponseBytes"?}; url,
// header values and body are templates over input and
// nodes.<id>.output. Its output is {"status", "contentType", "body"}:
// the body as JSON when the response says it is JSON, else as text, or
// "bodyBase64" when it is not UTF-8. A non-2xx answer fails with
// WORKFLOW_HTTP_NODE_ERROR and details.status, retryable for 5xx and 429;
// so is a request that could not be sent or timed out. Request headers
// (credentials among them) appear in no output, event or error.
func HTTP(opts HTTPOptions) NodeType {
	opts = opts.withDefaults()
	return NodeType{Name: "http", Repeatable: httpRepeatable, Compile: func(raw json.RawMessage) (NodeFunc, error) {
		var c httpConfig
		if err := DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		req, err := compileHTTP(c, opts)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
			env, err := n.Env()
			if err != nil {
				return nil, err
			}
			return req.do(ctx, env, opts.Client, opts.Secrets)
		}, nil
	}}
}

// httpRepeatable reports whether an http node's request is safe to send
// again (RFC 9110 §9.2.1: GET, HEAD, OPTIONS): see NodeType.Repeatable.
func httpRepeatable(raw json.RawMessage) bool {
	var c httpConfig
	if json.Unmarshal(raw, &c) != nil {
		return false
	}
	switch strings.ToUpper(c.Method) {
	case "", "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

func compileHTTP(c httpConfig, opts HTTPOptions) (*httpRequest, error) {
	r := &httpRequest{method: strings.ToUpper(c.Method), headers: map[string]*secretTemplate{}, timeout: opts.Timeout, maxBytes: opts.MaxResponseBytes}
	if r.method == "" {
		r.method = "GET"
	}
	if !slices.Contains(httpMethods, r.method) {
		return nil, fmt.Errorf("method must be one of %s", strings.Join(httpMethods, ", "))
	}
	if strings.TrimSpace(c.URL) == "" {
		return nil, errors.New("url is required")
	}
	if err := checkCredentials(c.URL, c.Headers); err != nil {
		return nil, err
	}
	var err error
	if r.url, err = compileSecretTemplate(c.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	for name, value := range c.Headers {
		if !headerNamePattern.MatchString(name) {
			return nil, fmt.Errorf("header name %q is not valid", shorten(name))
		}
		canonical := http.CanonicalHeaderKey(name)
		if slices.Contains(reservedHeaders, canonical) {
			return nil, fmt.Errorf("header %s is set by the server, not by a definition", canonical)
		}
		if r.headers[canonical], err = compileSecretTemplate(value); err != nil {
			return nil, fmt.Errorf("header %s: %w", canonical, err)
		}
	}
	switch {
	case c.Body != "" && len(c.JSON) > 0:
		return nil, errors.New("give body or json, not both")
	case c.Body != "":
		if r.body, err = CompileTemplate(c.Body); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
	case len(c.JSON) > 0:
		if r.json, err = CompileJSONTemplate(c.JSON); err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
	}
	switch {
	case c.TimeoutMs < 0 || time.Duration(c.TimeoutMs)*time.Millisecond > opts.Timeout:
		return nil, fmt.Errorf("timeoutMs must be 0 (the server's %d) to %d", opts.Timeout.Milliseconds(), opts.Timeout.Milliseconds())
	case c.TimeoutMs > 0:
		r.timeout = time.Duration(c.TimeoutMs) * time.Millisecond
	}
	switch {
	case c.MaxResponseBytes < 0 || c.MaxResponseBytes > opts.MaxResponseBytes:
		return nil, fmt.Errorf("maxResponseBytes must be 0 (the server's %d) to %d", opts.MaxResponseBytes, opts.MaxResponseBytes)
	case c.MaxResponseBytes > 0:
		r.maxBytes = c.MaxResponseBytes
	}
	return r, nil
}

// do renders and sends the request and reads its answer. The values of
// the secrets it resolved are scrubbed from its output and its error.
func (r *httpRequest) do(ctx context.Context, env Env, client *http.Client, secrets Secrets) (json.RawMessage, error) {
	var used []string
	out, err := r.send(ctx, env, client, secrets, &used)
	if len(used) == 0 {
		return out, err
	}
	if err != nil {
		if re, ok := errors.AsType[*runstream.Error](err); ok {
			scrubbed := *re
			scrubbed.Message = scrubSecrets(re.Message, used)
			return nil, &scrubbed
		}
		return nil, errors.New(scrubSecrets(err.Error(), used))
	}
	return json.RawMessage(scrubSecrets(string(out), used)), nil
}

func (r *httpRequest) send(ctx context.Context, env Env, client *http.Client, secrets Secrets, used *[]string) (json.RawMessage, error) {
	rawURL, u, err := r.url.render(ctx, env, secrets, *used)
	*used = u
	if err != nil {
		return nil, RenderError("url", err)
	}
	header := http.Header{}
	for name, t := range r.headers {
		v, u, err := t.render(ctx, env, secrets, *used)
		*used = u
		if err != nil {
			return nil, RenderError("header "+name, err)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "header %s has a value with a line break or NUL", name)
		}
		header.Set(name, v)
	}
	var body []byte
	switch {
	case r.body != nil:
		s, err := r.body.RenderContext(ctx, env)
		if err != nil {
			return nil, RenderError("body", err)
		}
		body = []byte(s)
	case r.json != nil:
		if body, err = r.json.RenderContext(ctx, env); err != nil {
			return nil, RenderError("json", err)
		}
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/json")
		}
	}
	return sendHTTP(ctx, client, r.method, rawURL, header, body, r.timeout, r.maxBytes)
}

// sendHTTP sends one request under a timeout and a response cap; its
// errors are caller-safe (they name the method and the URL without its
// query or credentials, never a header).
func sendHTTP(ctx context.Context, client *http.Client, method, rawURL string, header http.Header, body []byte, timeout time.Duration, maxBytes int64) (json.RawMessage, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "the url must be an absolute http or https URL")
	}
	where := method + " " + safeURL(u)
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, u.String(), rd)
	if err != nil {
		return nil, runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s: the request is not valid", where)
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		if refused, ok := errors.AsType[*AddressNotAllowedError](err); ok {
			e := runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s: the %s", where, refused.Error()).WithDetail("rule", "address_not_allowed")
			return nil, WithRetryable(e, false)
		}
		return nil, transportError(ctx, reqCtx, where, timeout)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, transportError(ctx, reqCtx, where, timeout)
	}
	status := resp.StatusCode
	if status < 200 || status > 299 {
		e := runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s answered %d", where, status).WithDetail("status", status)
		return nil, WithRetryable(e, status >= 500 || status == http.StatusTooManyRequests)
	}
	if int64(len(raw)) > maxBytes {
		e := runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s: the response body exceeds %d bytes", where, maxBytes).WithDetail("status", status)
		return nil, WithRetryable(e, false)
	}
	return httpOutput(status, resp.Header.Get("Content-Type"), raw)
}

// transportError words a request that got no complete answer: the node's
// own context ending is returned as it is; a timeout or a network failure
// is a retryable WORKFLOW_HTTP_NODE_ERROR.
func transportError(ctx, reqCtx context.Context, where string, timeout time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if reqCtx.Err() != nil {
		return WithRetryable(runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s did not answer within %d ms", where, timeout.Milliseconds()), true)
	}
	return WithRetryable(runstream.Errorf(runstream.CodeWorkflowHTTPNodeError, "%s could not be sent or its answer read", where), true)
}

// safeURL is u without credentials, query or fragment, for messages.
func safeURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// httpOutput is the output of an answered request.
func httpOutput(status int, contentType string, raw []byte) (json.RawMessage, error) {
	out := struct {
		Status      int             `json:"status"`
		ContentType string          `json:"contentType"`
		Body        json.RawMessage `json:"body,omitempty"`
		BodyBase64  string          `json:"bodyBase64,omitempty"`
	}{Status: status, ContentType: contentType}
	mt, _, _ := mime.ParseMediaType(contentType)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	switch {
	case len(raw) == 0:
		out.Body = json.RawMessage(`""`)
	case isJSON && json.Valid(raw):
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return nil, err
		}
		out.Body = compact.Bytes()
	case utf8.Valid(raw):
		out.Body, _ = json.Marshal(string(raw))
	default:
		out.BodyBase64 = base64.StdEncoding.EncodeToString(raw)
	}
	return json.Marshal(out)
}

// HTTPGetTool returns the http_get tool: input {"url"}, a GET under the
// same policies as the http node (opts), output as the http node's. A
// non-2xx answer is the tool's error.
func HTTPGetTool(opts HTTPOptions) Tool {
	opts = opts.withDefaults()
	return Tool{
		Name:        "http_get",
		Description: "Fetch a URL with an HTTP GET request and return its status, content type and body.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"The absolute http or https URL to fetch."}},"required":["url"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
			var in struct {
				URL string `json:"url"`
			}
			if err := DecodeConfig(input, &in); err != nil {
				return nil, runstream.Errorf(runstream.CodeInvalidArgument, "http_get input: %s", err.Error())
			}
			return sendHTTP(ctx, opts.Client, "GET", in.URL, http.Header{}, nil, opts.Timeout, opts.MaxResponseBytes)
		},
	}
}
