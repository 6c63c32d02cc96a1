package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/workflow"
)

// tailConfig is the configuration of "runstream tail".
type tailConfig struct {
	server     string
	after      int64
	json       bool
	showToken  bool
	maxRetries int
	credential credentialFile
}

// tokenPlaceholder replaces the resume token of run.awaiting_input unless
// --show-token is given.
const tokenPlaceholder = "[REDACTED:resume_token]"

// maxSummaryRunes bounds the summary of one event in the human format.
const maxSummaryRunes = 120

func (m *Main) tail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg tailConfig
	fs := newTailFlags(&cfg)
	runID, flagArgs := splitRunID(fs, args)
	if err := m.parseFlags(fs, flagArgs, stderr, "runstream tail [flags] RUN_ID"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if runID == "" {
		return fmt.Errorf("%w: tail needs a run id: runstream tail [flags] RUN_ID", errUsage)
	}
	if cfg.after < 0 {
		return fmt.Errorf("%w: --after must not be negative", errUsage)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	hc, err := cfg.credential.httpClient()
	if err != nil {
		return err
	}
	c, err := client.New(cfg.server, client.WithLogger(logger), client.WithHTTPClient(hc))
	if err != nil {
		return fmt.Errorf("%w: --server: %v", errUsage, err)
	}

	// Ask for the run first: an unknown run or an unreachable server fails
	// at once instead of being retried.
	if _, err := c.GetRun(ctx, runID); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return runError("tail", runID, err)
	}
	for env, err := range c.Follow(ctx, runID, client.FollowOptions{After: cfg.after, MaxRetries: cfg.maxRetries}) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: not a failure of the run or the stream
			}
			return runError("tail", runID, err)
		}
		if err := printEvent(stdout, env, cfg); err != nil {
			return fmt.Errorf("tail run %s: %w", runID, err)
		}
	}
	return nil
}

// printEvent writes env to w as one line, as cfg asks (formatEvent).
func printEvent(w io.Writer, env workflow.Envelope, cfg tailConfig) error {
	line, err := formatEvent(env, cfg.json, cfg.showToken)
	if err != nil {
		return fmt.Errorf("seq %d: %w", env.Seq, err)
	}
	_, err = io.WriteString(w, line+"\n")
	return err
}

// newTailFlags returns the flag set of "runstream tail", bound to cfg.
func newTailFlags(cfg *tailConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	addEventFlags(fs, cfg)
	fs.IntVar(&cfg.maxRetries, "max-retries", 0, "reconnections in a row without progress before giving up; 0 retries forever")
	return fs
}

// addEventFlags binds the flags that tail and events share to cfg.
func addEventFlags(fs *flag.FlagSet, cfg *tailConfig) {
	fs.StringVar(&cfg.server, "server", "http://127.0.0.1:8780", "base URL of the runstream server")
	fs.Int64Var(&cfg.after, "after", 0, "print the events after this seq")
	fs.BoolVar(&cfg.json, "json", false, "print each event as one JSON line (NDJSON): its envelope (events --thread: its record)")
	fs.BoolVar(&cfg.showToken, "show-token", false, "print the resume token of run.awaiting_input (hidden by default: it is the credential that resumes the run)")
	cfg.credential.add(fs)
}

// runError words err, met by command cmd reading run runID, for the
// command line.
func runError(cmd, runID string, err error) error {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Code == runstream.CodeWorkflowRunNotFound {
		return fmt.Errorf("run %s not found", runID)
	}
	return fmt.Errorf("%s: %w", cmd, err) // err names the run
}

// splitRunID takes the run id, the one positional argument, out of args, so
// that it may come before, between or after the flags of fs. Arguments after
// "--" are positional.
func splitRunID(fs *flag.FlagSet, args []string) (string, []string) {
	rest := make([]string, 0, len(args))
	runID := ""
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			positional := args[i+1:]
			if runID == "" && len(positional) > 0 {
				runID, positional = positional[0], positional[1:]
			}
			if len(positional) > 0 {
				// More positional arguments: left for parseFlags to refuse.
				rest = append(rest, "--")
				rest = append(rest, positional...)
			}
			return runID, rest
		case strings.HasPrefix(arg, "-") && arg != "-":
			rest = append(rest, arg)
			name := strings.TrimLeft(arg, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				i++
				rest = append(rest, args[i]) // the flag's value
			}
		case runID == "":
			runID = arg
		default:
			rest = append(rest, arg) // a second positional argument: refused by parseFlags
		}
	}
	return runID, rest
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// formatEvent renders one event: its envelope JSON, or one human-readable
// line. The resume token is replaced unless showToken.
func formatEvent(env workflow.Envelope, asJSON, showToken bool) (string, error) {
	if env.Event == workflow.EventRunAwaitingInput && !showToken {
		data, err := hideToken(env.Data)
		if err != nil {
			return "", err
		}
		env.Data = data
	}
	if asJSON {
		b, err := env.MarshalJSON()
		return string(b), err
	}
	node := env.NodeID
	if node == "" {
		node = "-"
	}
	line := fmt.Sprintf("#%d  %s  %s  %s", env.Seq, env.Timestamp.Local().Format("15:04:05.000"), env.Event, node)
	if s := summary(env, showToken); s != "" {
		line += "  " + s
	}
	return line, nil
}

// hideToken returns data with its resumeToken replaced.
func hideToken(data json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("decode run.awaiting_input data: %w", err)
	}
	if _, ok := fields["resumeToken"]; !ok {
		return data, nil
	}
	fields["resumeToken"], _ = json.Marshal(tokenPlaceholder)
	return json.Marshal(fields)
}

// errorObject is the protocol's unified error object inside event data.
type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e errorObject) String() string { return e.Code + ": " + strconv.Quote(e.Message) }

// summary returns the readable part of an event's line: the text of a
// delta, the error of a failure, the actions of an input request, or else
// the compact data. It is at most maxSummaryRunes long.
func summary(env workflow.Envelope, showToken bool) string {
	var s string
	switch env.Event {
	case workflow.EventNodeOutputDelta:
		var d workflow.OutputDelta
		if json.Unmarshal(env.Data, &d) == nil {
			s = d.Channel + ": " + strconv.Quote(d.Delta)
		}
	case workflow.EventNodeProgress:
		var d struct {
			Phase   string   `json:"phase"`
			Message string   `json:"message"`
			Percent *float64 `json:"percent"`
		}
		if json.Unmarshal(env.Data, &d) == nil {
			s = d.Phase + ": " + d.Message
			if d.Percent != nil {
				s += fmt.Sprintf(" (%g%%)", *d.Percent)
			}
		}
	case workflow.EventNodeFailed:
		var d struct {
			Error     errorObject `json:"error"`
			Attempt   int         `json:"attempt"`
			WillRetry bool        `json:"willRetry"`
		}
		if json.Unmarshal(env.Data, &d) == nil {
			s = d.Error.String()
			if d.Attempt > 0 {
				s += fmt.Sprintf(" (attempt %d", d.Attempt)
				if d.WillRetry {
					s += ", will retry"
				}
				s += ")"
			}
		}
	case workflow.EventRunFailed:
		var d struct {
			Error        errorObject `json:"error"`
			FailedNodeID string      `json:"failedNodeId"`
		}
		if json.Unmarshal(env.Data, &d) == nil {
			s = d.Error.String()
			if d.FailedNodeID != "" {
				s += " (node " + d.FailedNodeID + ")"
			}
		}
	case workflow.EventRunAwaitingInput:
		var d struct {
			Actions     []string `json:"actions"`
			ResumeToken string   `json:"resumeToken"`
		}
		// Never the compact data: it would hold the token.
		s = "actions: ?"
		if json.Unmarshal(env.Data, &d) == nil {
			s = "actions: " + strings.Join(d.Actions, ", ")
			if showToken {
				s += "  resumeToken: " + d.ResumeToken
			}
		}
		if showToken {
			return s // the token must not be cut short
		}
	}
	if s == "" {
		s = string(env.Data)
	}
	if client.IsSynthesised(env) {
		s = "(synthesised) " + s
	}
	return truncate(s, maxSummaryRunes)
}

// truncate cuts s to at most n runes, ending a cut string with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}
