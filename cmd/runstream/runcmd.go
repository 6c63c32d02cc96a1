package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/workflow"
)

// runConfig is the configuration of "runstream run".
type runConfig struct {
	server     string
	store      string
	input      string
	resume     string
	values     string
	json       bool
	maxRetries int
	credential credentialFile
}

// errRunEnded marks a run that ended failed or cancelled: exit status 1.
var errRunEnded = errors.New("the run did not complete")

// runWorkflow is "runstream run FILE": it publishes the workflow of FILE
// (YAML, or JSON for a .json file), starts a run with --input, prints its
// events as "runstream tail" does, answers each input request (from
// --resume and --values, or by asking on stdin), and returns nil when the
// run completed, an error wrapping errRunEnded when it failed or was
// cancelled.
func (m *Main) runWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg runConfig
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&cfg.server, "server", "http://127.0.0.1:8780", "base URL of the runstream server")
	fs.StringVar(&cfg.store, "store", "", "run in this process on this store (sqlite:PATH, postgres://… or memory:), without a server; the run is then followed until it ends")
	fs.StringVar(&cfg.input, "input", "{}", "the run input, a JSON value")
	fs.StringVar(&cfg.resume, "resume", "", "answer every input request without asking: action=NAME")
	fs.StringVar(&cfg.values, "values", "{}", "the values sent with --resume, a JSON object")
	fs.BoolVar(&cfg.json, "json", false, "print each event's envelope as one JSON line (NDJSON)")
	fs.IntVar(&cfg.maxRetries, "max-retries", 0, "reconnections in a row without progress before giving up; 0 retries forever")
	cfg.credential.add(fs)
	file, flagArgs := splitRunID(fs, args)
	if err := m.parseFlags(fs, flagArgs, stderr, "runstream run [flags] FILE.yaml"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	action, err := checkRunFlags(file, cfg)
	if err != nil {
		return err
	}
	switch {
	case cfg.store != "" && flagGiven(fs, "server") && flagGiven(fs, "store"):
		return fmt.Errorf("%w: --store runs in this process and --server on a server: give one", errUsage)
	case cfg.store != "" && flagGiven(fs, "server"):
		cfg.store = "" // RUNSTREAM_STORE, exported for serve: the flag given wins
	case cfg.store != "" && !flagGiven(fs, "store"):
		fmt.Fprintf(stderr, "running in this process on %s (from %s), not on a server; give --server to use one\n", redact.Text(cfg.store), envName("store"))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var target runTarget
	if cfg.store == "" {
		remote, err := newRemoteTarget(cfg, logger)
		if err != nil {
			return err
		}
		target = remote
	}
	definition, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the workflow: %w", err)
	}
	if cfg.store != "" {
		local, err := m.openLocalTarget(ctx, cfg, logger)
		if err != nil {
			return err
		}
		defer local.close()
		target = local
	}
	yamlBody := !strings.EqualFold(filepath.Ext(file), ".json")
	wf, err := target.publish(ctx, definition, yamlBody)
	if err != nil {
		return fmt.Errorf("publish %s: %w", file, err)
	}
	runID, err := target.start(ctx, wf.ID, json.RawMessage(cfg.input))
	if err != nil {
		return fmt.Errorf("start a run of %s: %w", wf.ID, err)
	}
	fmt.Fprintf(stderr, "workflow %s (%s), run %s\n", wf.Name, wf.ID, runID)

	asker := &asker{in: bufio.NewReader(m.Stdin), out: stderr}
	var last workflow.EventType
	for env, err := range target.follow(ctx, runID) {
		if err != nil {
			if ctx.Err() != nil {
				return interrupted(cfg, runID)
			}
			return fmt.Errorf("follow run %s: %w", runID, err)
		}
		line, err := formatEvent(env, cfg.json, false)
		if err != nil {
			return fmt.Errorf("run %s: seq %d: %w", runID, env.Seq, err)
		}
		if _, err := io.WriteString(stdout, line+"\n"); err != nil {
			return fmt.Errorf("run %s: %w", runID, err)
		}
		switch {
		case env.Event == workflow.EventRunAwaitingInput && !client.IsSynthesised(env):
			if err := answer(ctx, target, asker, runID, env, action, json.RawMessage(cfg.values)); err != nil {
				return err
			}
		case env.Event.Terminal():
			last = env.Event
		}
	}
	switch last {
	case workflow.EventRunCompleted:
		return nil
	case workflow.EventRunFailed:
		return fmt.Errorf("run %s failed: %w", runID, errRunEnded)
	case workflow.EventRunCancelled:
		return fmt.Errorf("run %s was cancelled: %w", runID, errRunEnded)
	}
	return fmt.Errorf("run %s: the stream ended before the run did", runID)
}

// checkRunFlags checks the command line and returns the --resume action.
func checkRunFlags(file string, cfg runConfig) (string, error) {
	if file == "" {
		return "", fmt.Errorf("%w: run needs a workflow file: runstream run [flags] FILE.yaml", errUsage)
	}
	if !json.Valid([]byte(cfg.input)) {
		return "", fmt.Errorf("%w: --input is not valid JSON", errUsage)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal([]byte(cfg.values), &values); err != nil || values == nil {
		return "", fmt.Errorf("%w: --values must be a JSON object", errUsage)
	}
	if cfg.resume == "" {
		if cfg.values != "{}" {
			return "", fmt.Errorf("%w: --values goes with --resume action=NAME", errUsage)
		}
		return "", nil
	}
	action, ok := strings.CutPrefix(cfg.resume, "action=")
	if !ok || action == "" {
		return "", fmt.Errorf("%w: --resume must be action=NAME, not %q", errUsage, cfg.resume)
	}
	return action, nil
}

// inputRequest is the data of run.awaiting_input.
type inputRequest struct {
	FormSchema  json.RawMessage `json:"formSchema"`
	Actions     []string        `json:"actions"`
	ResumeToken string          `json:"resumeToken"`
}

// answer resumes a run that awaits input: with action and values when
// action is set, else with what the user answers on stdin, asking again
// after a refused action or invalid values.
func answer(ctx context.Context, target runTarget, ask *asker, runID string, env workflow.Envelope, action string, values json.RawMessage) error {
	var req inputRequest
	if err := json.Unmarshal(env.Data, &req); err != nil {
		return fmt.Errorf("run %s: read the input request: %w", runID, err)
	}
	for {
		a, v := action, values
		if action == "" {
			var err error
			if a, v, err = ask.request(env.NodeID, req); err != nil {
				return fmt.Errorf("run %s awaits input at node %s: %w (or give --resume action=NAME --values '{…}')", runID, env.NodeID, err)
			}
		}
		err := target.resume(ctx, runID, req.ResumeToken, a, v)
		if err == nil {
			return nil
		}
		code, message := errorCode(err)
		refused := code == runstream.CodeWorkflowFormInvalid || code == runstream.CodeWorkflowResumeActionInvalid
		if action != "" || !refused {
			return fmt.Errorf("resume run %s: %w", runID, err)
		}
		fmt.Fprintf(ask.out, "refused: %s\n", message)
	}
}

// errorCode returns the code and message of an error of the API, whether
// it came over HTTP (*client.APIError) or from a service in this process.
func errorCode(err error) (runstream.ErrorCode, string) {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code, apiErr.Message
	}
	return runstream.ErrorCodeOf(err), runstream.ErrorMessage(err)
}

// asker asks the user for an action and values.
type asker struct {
	in  *bufio.Reader
	out io.Writer
}

func (a *asker) line(prompt string) (string, error) {
	fmt.Fprint(a.out, prompt)
	s, err := a.in.ReadString('\n')
	if err != nil && (err != io.EOF || s == "") {
		if err == io.EOF {
			return "", errors.New("no answer on stdin")
		}
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// request asks for the action (the first one on an empty line) and the
// values: field by field when the form schema lists properties, else as
// one JSON object.
func (a *asker) request(nodeID string, req inputRequest) (string, json.RawMessage, error) {
	if len(req.Actions) == 0 {
		return "", nil, errors.New("the input request offers no action")
	}
	fmt.Fprintf(a.out, "node %s asks for input; actions: %s\n", nodeID, strings.Join(req.Actions, ", "))
	var action string
	for {
		s, err := a.line(fmt.Sprintf("action [%s]: ", req.Actions[0]))
		if err != nil {
			return "", nil, err
		}
		action = strings.TrimSpace(s)
		if action == "" {
			action = req.Actions[0]
		}
		if slices.Contains(req.Actions, action) {
			break
		}
		fmt.Fprintf(a.out, "%q is not one of %s\n", action, strings.Join(req.Actions, ", "))
	}
	fields := formFields(req.FormSchema)
	if len(fields) == 0 {
		for {
			s, err := a.line("values (a JSON object; empty for {}): ")
			if err != nil {
				return "", nil, err
			}
			if strings.TrimSpace(s) == "" {
				s = "{}"
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
				return action, json.RawMessage(s), nil
			}
			fmt.Fprintln(a.out, "that is not a JSON object")
		}
	}
	values := map[string]json.RawMessage{}
	for _, f := range fields {
		v, err := a.field(f)
		if err != nil {
			return "", nil, err
		}
		if v != nil {
			values[f.name] = v
		}
	}
	out, _ := json.Marshal(values)
	return action, out, nil
}

// field asks for one value; an empty answer leaves it out.
func (a *asker) field(f formField) (json.RawMessage, error) {
	hint := f.typ
	if f.required {
		hint += ", required"
	}
	for {
		s, err := a.line(fmt.Sprintf("%s (%s): ", f.name, hint))
		if err != nil {
			return nil, err
		}
		switch {
		case s == "":
			return nil, nil
		case f.typ == "string":
			v, _ := json.Marshal(s)
			return v, nil
		case json.Valid([]byte(s)):
			return json.RawMessage(s), nil
		case f.typ == "any":
			v, _ := json.Marshal(s)
			return v, nil
		}
		fmt.Fprintf(a.out, "a %s is expected, as JSON\n", f.typ)
	}
}

// formField is one property of a form schema.
type formField struct {
	name, typ string
	required  bool
}

// formFields returns the properties of a form schema in their order in
// the schema, with their type ("any" when it is not one plain type).
func formFields(schema json.RawMessage) []formField {
	var top struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &top) != nil || len(top.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []formField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := t.(string)
		var prop struct {
			Type any `json:"type"`
		}
		if err := dec.Decode(&prop); err != nil {
			return nil
		}
		typ, ok := prop.Type.(string)
		if !ok {
			typ = "any"
		}
		out = append(out, formField{name: name, typ: typ, required: slices.Contains(top.Required, name)})
	}
	return out
}

// apiClient sends the requests of "runstream run" and "runstream events"
// that package client does not make.
type apiClient struct {
	base string
	http *http.Client
}

func newAPI(server string) (*apiClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --server must be an absolute http or https URL", errUsage)
	}
	return &apiClient{base: strings.TrimSuffix(u.String(), "/"), http: http.DefaultClient}, nil
}

// post sends body and decodes a 2xx answer into out (when not nil); any
// other answer is a *client.APIError.
func (a *apiClient) post(ctx context.Context, path, contentType string, body []byte, out any) error {
	return a.do(ctx, http.MethodPost, path, contentType, body, out)
}

// get is post's GET: path may carry a query.
func (a *apiClient) get(ctx context.Context, path string, out any) error {
	return a.do(ctx, http.MethodGet, path, "", nil, out)
}

// do makes a request of method to path with body (when contentType is
// not empty), as post says.
func (a *apiClient) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := &client.APIError{Status: resp.StatusCode}
		var wire struct {
			Code    runstream.ErrorCode `json:"code"`
			Message string              `json:"message"`
			NodeID  string              `json:"nodeId"`
			Details map[string]any      `json:"details"`
		}
		if json.Unmarshal(raw, &wire) == nil && wire.Code != "" {
			apiErr.Code, apiErr.Message, apiErr.NodeID, apiErr.Details = wire.Code, wire.Message, wire.NodeID, wire.Details
		} else {
			apiErr.Message = http.StatusText(resp.StatusCode)
		}
		return apiErr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("read the answer of %s: %w", path, err)
	}
	return nil
}

// interrupted is the error of a run command stopped by a signal: where
// the run goes on, if anywhere.
func interrupted(cfg runConfig, runID string) error {
	switch {
	case cfg.store == "":
		return fmt.Errorf("interrupted; the run goes on on the server: runstream tail --server %s %s", redact.Text(cfg.server), runID)
	case strings.HasPrefix(cfg.store, "memory:"):
		return fmt.Errorf("interrupted; run %s ended with this process (a memory: store keeps nothing)", runID)
	}
	return fmt.Errorf("interrupted; run %s stays in the store and goes on when a server runs on it: runstream serve --store … then runstream tail %s", runID, runID)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
