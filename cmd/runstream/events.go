package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
)

// eventsConfig is the configuration of "runstream events".
type eventsConfig struct {
	tailConfig
	thread string
}

// threadEventsPage is how many thread run events one request asks for
// (the endpoint's most).
const threadEventsPage = 2000

// events prints the stored events of a workflow run, or with --thread of
// a thread's run, after --after, and exits: the history that tail goes on
// to follow.
func (m *Main) events(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg eventsConfig
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	addEventFlags(fs, &cfg.tailConfig)
	fs.StringVar(&cfg.thread, "thread", "", "the thread of RUN_ID: print the thread run's events instead of a workflow run's")
	runID, flagArgs := splitRunID(fs, args)
	const usage = "runstream events [flags] RUN_ID | runstream events --thread THREAD_ID [flags] RUN_ID"
	if err := m.parseFlags(fs, flagArgs, stderr, usage); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case runID == "":
		return fmt.Errorf("%w: events needs a run id: %s", errUsage, usage)
	case cfg.after < 0:
		return fmt.Errorf("%w: --after must not be negative", errUsage)
	}
	hc, err := cfg.credential.httpClient()
	if err != nil {
		return err
	}
	if cfg.thread != "" {
		for _, id := range []struct{ kind, id string }{{"--thread", cfg.thread}, {"run id", runID}} {
			if runevents.ValidateID(id.kind, id.id) != nil {
				return fmt.Errorf("%w: %s %s: thread and run ids are 1 to 64 ASCII letters, digits, hyphens or underscores", errUsage, id.kind, redact.Quote(id.id))
			}
		}
		return printThreadEvents(ctx, hc, cfg, runID, stdout)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.New(cfg.server, client.WithLogger(logger), client.WithHTTPClient(hc))
	if err != nil {
		return fmt.Errorf("%w: --server: %v", errUsage, err)
	}
	for env, err := range c.Events(ctx, runID, cfg.after) {
		if err != nil {
			return runError("events", runID, err)
		}
		if err := printEvent(stdout, env, cfg.tailConfig); err != nil {
			return fmt.Errorf("events of run %s: %w", runID, err)
		}
	}
	return nil
}

// printThreadEvents prints the events of run runID of cfg.thread after
// cfg.after, a page of GET /api/threads/{t}/runs/{r}/events at a time; the
// ids are valid (runevents.ValidateID), so they need no escaping. A page
// whose seqs do not go past the previous one's is an error, not a loop.
func printThreadEvents(ctx context.Context, hc *http.Client, cfg eventsConfig, runID string, stdout io.Writer) error {
	api, err := newAPI(cfg.server)
	if err != nil {
		return err
	}
	api.http = hc
	path := "/api/threads/" + cfg.thread + "/runs/" + runID + "/events?"
	after := cfg.after
	for {
		q := url.Values{"limit": {strconv.Itoa(threadEventsPage)}}
		if after > 0 {
			q.Set("after_seq", strconv.FormatInt(after, 10))
		}
		var page []json.RawMessage
		if err := api.get(ctx, path+q.Encode(), &page); err != nil {
			return fmt.Errorf("events of run %s of thread %s: %w", runID, cfg.thread, err)
		}
		for _, raw := range page {
			line, seq, err := formatRecord(raw, cfg.json)
			if err != nil {
				return fmt.Errorf("events of run %s of thread %s: %w", runID, cfg.thread, err)
			}
			if seq <= after {
				return fmt.Errorf("events of run %s of thread %s: the server answered seq %d after %d: its pages do not advance", runID, cfg.thread, seq, after)
			}
			if _, err := io.WriteString(stdout, line+"\n"); err != nil {
				return err
			}
			after = seq
		}
		if len(page) < threadEventsPage {
			return nil
		}
	}
}

// formatRecord renders a thread run event record as one JSON line, or as
// "#SEQ  TIME  EVENT_TYPE  CATEGORY  CONTENT" with the content cut to a
// summary; it returns the record's seq.
func formatRecord(raw json.RawMessage, asJSON bool) (string, int64, error) {
	var r runevents.Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", 0, fmt.Errorf("decode a record: %w", err)
	}
	if asJSON {
		return string(raw), r.Seq, nil
	}
	line := fmt.Sprintf("#%d  %s  %s  %s", r.Seq, r.CreatedAt.Local().Format(time.TimeOnly+".000"), r.EventType, r.Category)
	if s := truncate(string(r.Content), maxSummaryRunes); s != "" && s != `""` {
		line += "  " + s
	}
	return line, r.Seq, nil
}
