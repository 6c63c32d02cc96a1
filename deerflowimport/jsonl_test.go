package deerflowimport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONLSource reads rows as DeerFlow wrote them and not as its reader
// drops them: a line holding U+2028 (which DeerFlow's splitlines breaks)
// is one row, rows of another run in a run's file (its batch bug) keep
// their run, a torn line and a row of another thread are reported with
// file:line.
func TestJSONLSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "threads", "t1", "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	line := func(thread, run string, seq int, text string) string {
		return `{"thread_id":"` + thread + `","run_id":"` + run + `","event_type":"llm.human.input","category":"message","content":{"type":"human","content":"` + text + `"},"metadata":{"caller":"lead_agent"},"seq":` + string(rune('0'+seq)) + `,"created_at":"2026-03-01T10:00:00+00:00"}`
	}
	file := strings.Join([]string{
		line("t1", "seed-1", 1, "a\u2028b"),
		"",
		line("t1", "seed-2", 2, "second turn"),
		`{"thread_id":"t1",`,
		line("t2", "seed-2", 3, "elsewhere"),
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(runs, "seed-1.jsonl"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "notes.txt"), []byte("not a run file"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := OpenJSONL(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []Row
	var bad []Problem
	err = src.Threads(func(thread string, rows []Row, b []Problem) error {
		if thread != "t1" {
			t.Errorf("thread %s", thread)
		}
		got, bad = rows, b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Event.RunID != "seed-1" || got[1].Event.RunID != "seed-2" || !strings.Contains(string(got[0].Event.Content), "a\u2028b") ||
		got[1].Loc != "threads/t1/runs/seed-1.jsonl:3" || got[0].Owned {
		t.Errorf("rows %+v", got)
	}
	if len(bad) != 2 || bad[0].Loc != "threads/t1/runs/seed-1.jsonl:4" || bad[1].Loc != "threads/t1/runs/seed-1.jsonl:5" {
		t.Errorf("problems %v, want lines 4 and 5", bad)
	}
	if _, err := OpenJSONL(t.TempDir()); err == nil {
		t.Error("a directory without threads/ opened")
	}
}
