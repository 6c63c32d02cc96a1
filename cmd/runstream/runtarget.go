package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// runTarget is what "runstream run" drives: a server over HTTP (--server),
// or the workflow service in this process (--store).
type runTarget interface {
	// publish publishes a definition (YAML when yamlBody, else JSON) as a
	// new workflow.
	publish(ctx context.Context, definition []byte, yamlBody bool) (workflow.Workflow, error)
	// start starts a run of the workflow with input and returns its id.
	start(ctx context.Context, workflowID string, input json.RawMessage) (string, error)
	// follow yields the run's events in seq order until its terminal
	// event, or an error.
	follow(ctx context.Context, runID string) iter.Seq2[workflow.Envelope, error]
	// resume answers the run's input request.
	resume(ctx context.Context, runID, token, action string, values json.RawMessage) error
}

// remoteTarget drives a runstream server over HTTP.
type remoteTarget struct {
	api        *apiClient
	follower   *client.Client
	maxRetries int
}

func newRemoteTarget(cfg runConfig, logger *slog.Logger) (*remoteTarget, error) {
	api, err := newAPI(cfg.server)
	if err != nil {
		return nil, err
	}
	if api.http, err = cfg.credential.httpClient(); err != nil {
		return nil, err
	}
	follower, err := client.New(cfg.server, client.WithLogger(logger), client.WithHTTPClient(api.http))
	if err != nil {
		return nil, fmt.Errorf("%w: --server: %v", errUsage, err)
	}
	return &remoteTarget{api: api, follower: follower, maxRetries: cfg.maxRetries}, nil
}

func (t *remoteTarget) publish(ctx context.Context, definition []byte, yamlBody bool) (workflow.Workflow, error) {
	contentType := "application/json"
	if yamlBody {
		contentType = "application/yaml"
	}
	var wf struct {
		WorkflowID string `json:"workflowId"`
		Name       string `json:"name"`
	}
	if err := t.api.post(ctx, "/api/workflows", contentType, definition, &wf); err != nil {
		return workflow.Workflow{}, err
	}
	return workflow.Workflow{ID: wf.WorkflowID, Name: wf.Name}, nil
}

func (t *remoteTarget) start(ctx context.Context, workflowID string, input json.RawMessage) (string, error) {
	body, _ := json.Marshal(map[string]json.RawMessage{"input": input})
	var run struct {
		RunID string `json:"runId"`
	}
	err := t.api.post(ctx, "/api/workflows/"+url.PathEscape(workflowID)+"/runs", "application/json", body, &run)
	return run.RunID, err
}

func (t *remoteTarget) follow(ctx context.Context, runID string) iter.Seq2[workflow.Envelope, error] {
	return t.follower.Follow(ctx, runID, client.FollowOptions{MaxRetries: t.maxRetries})
}

func (t *remoteTarget) resume(ctx context.Context, runID, token, action string, values json.RawMessage) error {
	body, _ := json.Marshal(struct {
		ResumeToken string          `json:"resumeToken"`
		Action      string          `json:"action"`
		Values      json.RawMessage `json:"values"`
	}{token, action, values})
	return t.api.post(ctx, "/api/workflows/runs/"+url.PathEscape(runID)+"/resume", "application/json", body, nil)
}

// localTarget drives the workflow service of an app opened in this
// process, with its own engine, as the local user of a server in the
// "none" auth mode: a server later opened on the same store shows the run.
type localTarget struct {
	app *app
}

// localShutdownTimeout is how long closing an in-process run's services
// waits for a running node: a Ctrl-C interrupts it before this passes
// (engine.Stop), and the run goes on, with that node's next attempt, where
// a server runs on the store.
const localShutdownTimeout = 2 * time.Second

// localFollowPoll is how often a local follower reads the store when the
// hub wakes it for nothing.
const localFollowPoll = 500 * time.Millisecond

// openLocalTarget opens the store of --store with an engine of one worker.
// Close it with close.
func (m *Main) openLocalTarget(ctx context.Context, cfg runConfig, logger *slog.Logger) (*localTarget, error) {
	sc := serveConfig{
		store:           cfg.store,
		sqliteSync:      "FULL",
		workers:         1,
		workerID:        engine.DefaultWorkerID(),
		dataDir:         localDataDir(cfg.store),
		shutdownTimeout: localShutdownTimeout,
		openBackend:     m.openBackend,
	}
	if err := m.readNodeEnv(&sc); err != nil {
		return nil, err
	}
	a, err := newApp(ctx, sc, logger)
	if err != nil {
		return nil, err
	}
	return &localTarget{app: a}, nil
}

// localDataDir returns the data directory of an in-process run: beside a
// SQLite file, serve's default for PostgreSQL (artifacts are files), none
// for a memory store.
func localDataDir(store string) string {
	if path, ok := strings.CutPrefix(store, "sqlite:"); ok {
		return filepath.Dir(path)
	}
	if store == "memory:" {
		return ""
	}
	return "./runstream-data"
}

func (t *localTarget) close() error { return t.app.close() }

func (t *localTarget) publish(ctx context.Context, definition []byte, yamlBody bool) (workflow.Workflow, error) {
	if yamlBody {
		var err error
		if definition, err = workflowsvc.DefinitionFromYAML(definition); err != nil {
			return workflow.Workflow{}, err
		}
	}
	wf, _, err := t.app.workflows.Publish(ctx, httpapi.LocalUser, workflowsvc.Definition{Definition: definition})
	return wf, err
}

func (t *localTarget) start(ctx context.Context, workflowID string, input json.RawMessage) (string, error) {
	run, err := t.app.workflows.StartRun(ctx, workflowsvc.StartRunParams{User: httpapi.LocalUser, WorkflowID: workflowID, Input: input})
	return run.ID, err
}

// follow reads the run's events from the store, waking when the hub tells
// of new ones (or every localFollowPoll), until the terminal event, or
// until the run is terminal without one.
func (t *localTarget) follow(ctx context.Context, runID string) iter.Seq2[workflow.Envelope, error] {
	svc := t.app.workflows
	return func(yield func(workflow.Envelope, error) bool) {
		stream, err := svc.OpenRunStream(ctx, httpapi.LocalUser, runID)
		if err != nil {
			yield(workflow.Envelope{}, err)
			return
		}
		sub := stream.Subscribe(0)
		defer sub.Close()
		var cursor int64
		for {
			page, err := svc.ListEvents(ctx, httpapi.LocalUser, runID, cursor, 100)
			if err != nil {
				yield(workflow.Envelope{}, err)
				return
			}
			for _, env := range page.Events {
				if !yield(env, nil) || env.Event.Terminal() {
					return
				}
				cursor = env.Seq
			}
			if len(page.Events) > 0 {
				continue
			}
			run, err := svc.GetRun(ctx, httpapi.LocalUser, runID)
			if err != nil {
				yield(workflow.Envelope{}, err)
				return
			}
			if run.Status.Terminal() && run.LastSeq <= cursor {
				return // terminal without a terminal event
			}
			select {
			case <-sub.Ready():
				sub.Take()
			case <-time.After(localFollowPoll):
			case <-ctx.Done():
				yield(workflow.Envelope{}, ctx.Err())
				return
			}
		}
	}
}

func (t *localTarget) resume(ctx context.Context, runID, token, action string, values json.RawMessage) error {
	_, err := t.app.workflows.ResumeRun(ctx, workflowsvc.ResumeParams{User: httpapi.LocalUser, RunID: runID, Token: token, Action: action, Values: values})
	return err
}
