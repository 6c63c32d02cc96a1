package jsonl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/jsonl"
	"github.com/runstream/runstream/runevents"
)

func event(thread, run string, typ runevents.EventType, cat runevents.Category, content string) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: thread, RunID: run, EventType: typ, Category: cat, Content: json.RawMessage(content)}
}

func message(thread, run, content string) runevents.NewEvent {
	return event(thread, run, runevents.EventLLMHumanInput, runevents.CategoryMessage, content)
}

// runRows returns every row of a run, for AnyOwner.
func runRows(t *testing.T, s runevents.Store, thread, run string) []runevents.Record {
	t.Helper()
	recs, err := s.ListEvents(t.Context(), runevents.ListEventsParams{ThreadID: thread, RunID: run, Owner: runevents.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatalf("ListEvents(%s, %s): %v", thread, run, err)
	}
	return recs
}

func seqsOf(recs []runevents.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runFile(dir, thread, run string) string {
	return filepath.Join(dir, "threads", thread, "runs", run+".jsonl")
}

func TestLayoutOneFilePerRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	recs, err := s.PutBatch(t.Context(), []runevents.NewEvent{
		message("t1", "r1", `"a"`), message("t1", "r2", `"b"`), message("t1", "r1", `"c"`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string][]runevents.Record{"r1": {recs[0], recs[2]}, "r2": {recs[1]}} {
		var lines []byte
		for _, r := range want {
			enc, _ := r.MarshalJSON()
			lines = append(append(lines, enc...), '\n')
		}
		if got := readFile(t, runFile(dir, "t1", run)); !bytes.Equal(got, lines) {
			t.Errorf("threads/t1/runs/%s.jsonl =\n%s\nwant\n%s", run, got, lines)
		}
	}
	if got := s.Durability(); got != "jsonl: fsync before acknowledging; one process per directory" {
		t.Errorf("Durability() = %q", got)
	}
}

func TestLineSeparatorsInsideStrings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	content := "\"a\u2028b\u2029c\u0085d\\u2028\\n\""
	e := message("t1", "r1", content)
	e.Metadata = json.RawMessage("{\"note\":\"x\u2028y\u0085\"}")
	want, err := s.Put(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), message("t1", "r1", `"next"`)); err != nil {
		t.Fatal(err)
	}
	raw := readFile(t, runFile(dir, "t1", "r1"))
	if n := bytes.Count(raw, []byte("\n")); n != 2 {
		t.Errorf("file has %d newlines, want 2 (one per row)", n)
	}
	for _, sep := range []rune{'\u2028', '\u2029', '\u0085'} {
		if !bytes.ContainsRune(raw, sep) && !bytes.Contains(raw, fmt.Appendf(nil, `\u%04x`, sep)) {
			t.Errorf("file holds %U neither raw nor escaped", sep)
		}
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	got := runRows(t, s, "t1", "r1")
	if len(got) != 2 || string(got[0].Content) != string(want.Content) || string(got[0].Metadata) != string(want.Metadata) {
		t.Fatalf("after reopen: %d rows, first %s %s; want 2 rows, first %s %s", len(got), got[0].Content, got[0].Metadata, want.Content, want.Metadata)
	}
	var text string
	if err := json.Unmarshal(got[0].Content, &text); err != nil || text != "a\u2028b\u2029c\u0085d\u2028\n" {
		t.Errorf("content decodes to %q, %v", text, err)
	}
}

func TestTornTailTruncated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tail string }{
		{"fragment", `{"thread_id":"t1","run_id":"r1","event_ty`},
		{"complete JSON without newline", `{"thread_id":"t1","run_id":"r1","event_type":"run.start","category":"trace","content":"","metadata":{},"seq":3,"created_at":"2024-06-01T12:00:00.000000+00:00"}`},
		{"zeros", "\x00\x00\x00\x00"},
		{"garbage line", "\x00\x00garbage\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var logs bytes.Buffer
			s, err := jsonl.Open(jsonl.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutBatch(t.Context(), []runevents.NewEvent{message("t1", "r1", `"one"`), message("t1", "r1", `"two"`)}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			path := runFile(dir, "t1", "r1")
			good := readFile(t, path)
			if err := os.WriteFile(path, append(bytes.Clone(good), tc.tail...), 0o644); err != nil {
				t.Fatal(err)
			}

			s, err = jsonl.Open(jsonl.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{1, 2}) {
				t.Errorf("rows after reopen: seqs %v, want [1 2]", got)
			}
			if got := readFile(t, path); !bytes.Equal(got, good) {
				t.Errorf("file after recovery:\n%q\nwant the torn tail gone:\n%q", got, good)
			}
			if !strings.Contains(logs.String(), "torn tail") {
				t.Errorf("no warning about the torn tail in logs: %s", logs.String())
			}
			next, err := s.Put(t.Context(), message("t1", "r1", `"three"`))
			if err != nil || next.Seq != 3 {
				t.Fatalf("Put after recovery: seq %d, %v; want 3", next.Seq, err)
			}
			s.Close()
			s = openStore(t, dir)
			defer s.Close()
			got := runRows(t, s, "t1", "r1")
			if !slices.Equal(seqsOf(got), []int64{1, 2, 3}) || string(got[2].Content) != `"three"` {
				t.Errorf("after a second reopen: %v, want seqs [1 2 3] ending with \"three\"", seqsOf(got))
			}
		})
	}
}

func TestCorruptMiddleLineSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	for _, c := range []string{`"one"`, `"two"`} {
		if _, err := s.Put(t.Context(), message("t1", "r1", c)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := runFile(dir, "t1", "r1")
	lines := bytes.SplitAfter(readFile(t, path), []byte("\n"))
	corrupt := slices.Concat(lines[0], []byte("{not json}\n"), []byte(`{"thread_id":"other","run_id":"r1","seq":9}`+"\n"), lines[1])
	if err := os.WriteFile(path, corrupt, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := jsonl.Open(jsonl.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("rows: %v, want [1 2]", got)
	}
	if n, err := s.CountMessages(t.Context(), "t1", runevents.AnyOwner); err != nil || n != 2 {
		t.Errorf("CountMessages = %d, %v; want 2", n, err)
	}
	if !strings.Contains(logs.String(), "lines=2") {
		t.Errorf("want one warning counting 2 skipped lines, logs: %s", logs.String())
	}
	if got := readFile(t, path); !bytes.Equal(got, corrupt) {
		t.Error("a corrupt line in the middle was changed on disk; it must stay until a delete rewrites the file")
	}
	if rec, err := s.Put(t.Context(), message("t1", "r1", `"three"`)); err != nil || rec.Seq != 3 {
		t.Errorf("Put: seq %d, %v; want 3", rec.Seq, err)
	}
}

// legacyThread is a thread written by the original system: r1.jsonl also
// holds rows of r2 (its multi-run batch bug), lines are not compact, rows
// have no user_id, and r2.jsonl repeats seq 2.
var legacyThread = map[string]string{
	"r1": `{"thread_id": "t1", "run_id": "r1", "event_type": "llm.human.input", "category": "message", "content": "hi", "metadata": {}, "seq": 1, "created_at": "2024-06-01T12:00:00+00:00"}
{"thread_id": "t1", "run_id": "r2", "event_type": "llm.ai.response", "category": "message", "content": {"text": "a"}, "metadata": {"caller": "lead_agent"}, "seq": 2, "created_at": "2024-06-01T12:00:01+00:00"}
{"thread_id": "t1", "run_id": "r1", "event_type": "llm.ai.response", "category": "message", "content": "hello", "metadata": null, "seq": 3, "created_at": "2024-06-01T12:00:02.5+00:00"}
`,
	"r2": `{"thread_id": "t1", "run_id": "r2", "event_type": "llm.ai.response", "category": "message", "content": "dup", "metadata": {}, "seq": 2, "created_at": "2024-06-01T12:00:01+00:00"}
{"thread_id": "t1", "run_id": "r2", "event_type": "run.start", "category": "trace", "content": "", "metadata": {}, "seq": 4, "created_at": "2024-06-01T12:00:03+00:00"}
`,
}

func writeLegacy(t *testing.T, dir string) {
	t.Helper()
	for run, text := range legacyThread {
		path := runFile(dir, "t1", run)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRowsOfOtherRunsInAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLegacy(t, dir)
	s := openStore(t, dir)
	defer s.Close()
	ctx := t.Context()

	if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("r1 rows: %v, want [1 3]", got)
	}
	r2 := runRows(t, s, "t1", "r2")
	if !slices.Equal(seqsOf(r2), []int64{2, 4}) {
		t.Fatalf("r2 rows: %v, want [2 4] (seq 2 from r1.jsonl, once)", seqsOf(r2))
	}
	if string(r2[0].Content) != `{"text":"a"}` || string(r2[0].Metadata) != `{"caller":"lead_agent"}` {
		t.Errorf("legacy row not normalised: content %s metadata %s", r2[0].Content, r2[0].Metadata)
	}
	msgs, err := s.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 100})
	if err != nil || !slices.Equal(seqsOf(msgs), []int64{1, 2, 3}) {
		t.Errorf("ListMessages: %v, %v; want [1 2 3]", seqsOf(msgs), err)
	}
	if len(msgs) == 3 && (string(msgs[2].Metadata) != `{}` || !msgs[2].CreatedAt.Equal(time.Date(2024, 6, 1, 12, 0, 2, 5e8, time.UTC))) {
		t.Errorf("legacy row 3: metadata %s, created_at %v", msgs[2].Metadata, msgs[2].CreatedAt)
	}
	if n, err := s.CountMessages(ctx, "t1", runevents.AnyOwner); err != nil || n != 3 {
		t.Errorf("CountMessages = %d, %v; want 3", n, err)
	}
	ai, err := s.LastVisibleAISeqByRun(ctx, runevents.LastVisibleAIParams{ThreadID: "t1", RunIDs: []string{"r1", "r2"}, Owner: runevents.AnyOwner})
	if err != nil || ai["r1"] != 3 || ai["r2"] != 2 {
		t.Errorf("LastVisibleAISeqByRun = %v, %v; want r1:3 r2:2", ai, err)
	}
	if n, err := s.DeleteByRun(ctx, "t1", "r2", runevents.AnyOwner); err != nil || n != 2 {
		t.Fatalf("DeleteByRun(r2) = %d, %v; want 2", n, err)
	}
	if _, err := os.Stat(runFile(dir, "t1", "r2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("r2.jsonl still exists after deleting r2: %v", err)
	}
	if got := string(readFile(t, runFile(dir, "t1", "r1"))); strings.Contains(got, `"r2"`) {
		t.Errorf("r1.jsonl still holds a row of r2:\n%s", got)
	}
	rec, err := s.Put(ctx, message("t1", "r1", `"new"`))
	if err != nil || rec.Seq != 5 {
		t.Fatalf("Put after delete: seq %d, %v; want 5", rec.Seq, err)
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Errorf("r1 after delete and reopen: %v, want [1 3 5]", got)
	}
	if got := runRows(t, s, "t1", "r2"); len(got) != 0 {
		t.Errorf("r2 after delete and reopen: %v, want none", seqsOf(got))
	}
}

func TestOwnerDeleteRewritesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	var events []runevents.NewEvent
	for i := range 6 {
		e := message("t1", "r1", `"row"`)
		e.UserID = []string{"alice", "bob"}[i%2]
		events = append(events, e)
	}
	if _, err := s.PutBatch(ctx, events); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteByRun(ctx, "t1", "r1", runevents.OwnedBy("alice")); err != nil || n != 3 {
		t.Fatalf("DeleteByRun(alice) = %d, %v; want 3", n, err)
	}
	// Reads after the rewrite use the new offsets.
	if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{2, 4, 6}) {
		t.Errorf("rows after delete: %v, want [2 4 6]", got)
	}
	if rec, err := s.Put(ctx, message("t1", "r1", `"after"`)); err != nil || rec.Seq != 7 {
		t.Errorf("Put after delete: seq %d, %v; want 7", rec.Seq, err)
	}
	if got := bytes.Count(readFile(t, runFile(dir, "t1", "r1")), []byte("\n")); got != 4 {
		t.Errorf("file has %d lines after delete and put, want 4", got)
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	if got := seqsOf(runRows(t, s, "t1", "r1")); !slices.Equal(got, []int64{2, 4, 6, 7}) {
		t.Errorf("rows after reopen: %v, want [2 4 6 7]", got)
	}
}

func TestSeqRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	for range 3 {
		if _, err := s.Put(ctx, message("t1", "r1", `"x"`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, message("t1", "r2", `"x"`)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteByRun(ctx, "t1", "r2", runevents.AnyOwner); err != nil || n != 1 {
		t.Fatalf("DeleteByRun = %d, %v", n, err)
	}
	s.Close()
	if got := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "threads", "t1", "last_seq")))); got != "4" {
		t.Errorf("last_seq file = %q, want 4", got)
	}
	s = openStore(t, dir)
	if rec, err := s.Put(ctx, message("t1", "r1", `"x"`)); err != nil || rec.Seq != 5 {
		t.Errorf("Put after delete and reopen: seq %d, %v; want 5 (seq 4 was deleted, not reusable)", rec.Seq, err)
	}
	s.Close()

	if err := os.WriteFile(filepath.Join(dir, "threads", "t1", "last_seq"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if _, err := s.Put(ctx, message("t1", "r1", `"x"`)); runstream.ErrorCodeOf(err) != runstream.CodeInternal {
		t.Errorf("Put with a corrupt last_seq: %v, want CodeInternal (never guess a seq)", err)
	}
}

func TestIDsCannotEscapeTheDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	s := openStore(t, dir)
	defer s.Close()
	ctx := t.Context()
	for _, e := range []runevents.NewEvent{message("../x", "r1", `"x"`), message("t1", "../../x", `"x"`), message("t1", "a/b", `"x"`)} {
		if _, err := s.Put(ctx, e); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("Put(thread %q, run %q): %v, want CodeInvalidArgument", e.ThreadID, e.RunID, err)
		}
	}
	if _, err := s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "../x", Owner: runevents.AnyOwner, Limit: 1}); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
		t.Errorf("ListEvents(../x): %v, want CodeInvalidArgument", err)
	}
	if _, err := s.DeleteByThread(ctx, "..", runevents.AnyOwner); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
		t.Errorf("DeleteByThread(..): %v, want CodeInvalidArgument", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the store directory: %v", root, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "threads")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused writes created %s/threads: %v", dir, err)
	}
}

func TestOpenRequiresDir(t *testing.T) {
	t.Parallel()
	if _, err := jsonl.Open(jsonl.Config{}); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
		t.Errorf("Open without Dir: %v, want CodeInvalidArgument", err)
	}
}

func TestLockInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir)
	_, err := jsonl.Open(jsonl.Config{Dir: dir})
	if !errors.Is(err, jsonl.ErrLocked) || runstream.ErrorCodeOf(err) != runstream.CodeUnavailable || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v; want CodeUnavailable, ErrLocked, naming %s", err, dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// helperEnv names the directory TestHelperProcess tries to open.
const helperEnv = "JSONL_TEST_HELPER_DIR"

// TestHelperProcess is not a test: TestLockAcrossProcesses runs the test
// binary again with only this function, to open the store from another
// process. It prints "locked", "opened" or the error.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		return // not started by TestLockAcrossProcesses
	}
	s, err := jsonl.Open(jsonl.Config{Dir: dir})
	switch {
	case errors.Is(err, jsonl.ErrLocked):
		os.Stdout.WriteString("locked\n")
	case err != nil:
		os.Stdout.WriteString("error: " + err.Error() + "\n")
	default:
		s.Close()
		os.Stdout.WriteString("opened\n")
	}
}

func TestLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := func() string {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper process: %v", err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		return first
	}
	s := openStore(t, dir)
	if got := other(); got != "locked" {
		t.Errorf("Open in another process while open here: %q, want locked", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := other(); got != "opened" {
		t.Errorf("Open in another process after Close: %q, want opened", got)
	}
}
