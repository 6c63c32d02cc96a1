package eventlog_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

// TestThreadImport imports a thread larger than a batch may be, with its
// own seqs (gaps are the stores' conformance cases) and owners, redacted like an append and published; a second
// import of the thread is a conflict.
func TestThreadImport(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	sub := env.follow(t, streams.ThreadStream{})
	secret := "sk-" + strings.Repeat("Ab3", 16)
	var events []runevents.ImportEvent
	for i := range 150 { // above the 100 events of a batch
		e := aiEvent("r1")
		if i == 0 {
			e = newEvent("r1", runevents.EventLLMToolResult, `{"type":"tool","content":"key `+secret+`"}`, "")
		}
		e.UserID = []string{"alice", "bob"}[i%2]
		events = append(events, runevents.ImportEvent{NewEvent: e, Seq: int64(i + 1)})
	}
	recs, err := env.log.ImportThread(t.Context(), events)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 150 || recs[0].Seq != 1 || recs[149].Seq != 150 || recs[1].UserID != "bob" || strings.Contains(string(recs[0].Content), secret) {
		t.Errorf("imported %d records, first %+v", len(recs), recs[0])
	}
	if frames, _ := sub.Take(); len(frames) != 150 || strings.Contains(string(frames[0].Frame), secret) {
		t.Errorf("published %d frames", len(frames))
	}
	_, err = env.log.ImportThread(t.Context(), events[:1])
	if runstream.ErrorCodeOf(err) != runstream.CodeConflict {
		t.Errorf("second import: %v, want CONFLICT", err)
	}
}

// TestThreadCheckImport lists every refused row by index and changes
// nothing in the store.
func TestThreadCheckImport(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	events := []runevents.ImportEvent{
		{NewEvent: newEvent("r1", "ai_tool_call", `{}`, ""), Seq: 1},
		{NewEvent: aiEvent("r1"), Seq: 2},
		{NewEvent: newEvent("r1", runevents.EventLLMAIResponse, `{"type":"ai","content":"x","tool_calls":[]}`, `{"caller":"lead_agent","branch_seed":true}`), Seq: 3},
		{NewEvent: newEvent("r1", runevents.EventLegacyAIMessage, `{"type":"human","content":"x","tool_calls":[]}`, `{}`), Seq: 4},
	}
	_, err := env.log.ImportThread(t.Context(), events)
	problems, _ := runstream.AsError(err).Details["problems"].([]contracts.Problem)
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	if fmt.Sprint(paths) != "[/events/0/event_type /events/3/content/type]" {
		t.Errorf("problems at %v (%v)", paths, err)
	}
	if rows := env.rows(t); len(rows) != 0 {
		t.Errorf("%d rows stored by a refused import", len(rows))
	}
	if _, err := env.log.CheckImport(events[1:3]); err != nil {
		t.Errorf("CheckImport of a journal row and a seed: %v", err)
	}
}

// A row under the event size limit as sent but over it once redacted (a
// redaction marker is longer than what it replaces) is refused, as an
// append's would be, and nothing is stored.
func TestThreadImportSizeOnceRedacted(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t, eventlog.ThreadLimits{MaxEventBytes: 2000})
	e := newEvent("r1", runevents.EventRunError, `""`, `{"error_type":"E","l":[`+strings.Repeat(`{"password":"a"},`, 100)+`{}]}`)
	e.UserID = "alice"
	_, err := env.log.ImportThread(t.Context(), []runevents.ImportEvent{{NewEvent: e, Seq: 1}})
	if runstream.ErrorCodeOf(err) != runstream.CodePayloadTooLarge || !strings.Contains(err.Error(), "once redacted") {
		t.Fatalf("import of a row over the limit once redacted: %v, want PAYLOAD_TOO_LARGE once redacted", err)
	}
	if rows := env.rows(t); len(rows) != 0 {
		t.Errorf("%d rows stored by a refused import", len(rows))
	}
}
