package workspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workspace"
)

type env struct {
	ws, out string
	cfg     workspace.Config
}

func setup(t *testing.T) env {
	t.Helper()
	dir := t.TempDir()
	e := env{ws: filepath.Join(dir, "workspace"), out: filepath.Join(dir, "outputs")}
	for _, d := range []string{e.ws, e.out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.cfg = workspace.Config{Roots: workspace.DefaultRoots(e.ws, e.out)}
	return e
}

func write(t *testing.T, path string, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func capture(t *testing.T, e env) *workspace.Snapshot {
	t.Helper()
	s, err := workspace.Capture(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func compare(t *testing.T, e env, before *workspace.Snapshot) workspace.Changes {
	t.Helper()
	after, err := workspace.Scan(t.Context(), e.cfg, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return workspace.Compare(before, after, e.cfg.Limits)
}

func file(t *testing.T, ch workspace.Changes, path string) workspace.FileChange {
	t.Helper()
	for _, f := range ch.Files {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("%s not in %+v", path, ch.Files)
	return workspace.FileChange{}
}

func TestCreatedModifiedDeleted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.ws, "keep.txt"), "same\n")
	write(t, filepath.Join(e.ws, "edit.txt"), "one\ntwo\nthree\n")
	write(t, filepath.Join(e.ws, "gone.txt"), "bye\n")
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "edit.txt"), "one\n2\nthree\n")
	write(t, filepath.Join(e.out, "report.md"), "# Report\n\nDone.\n")
	if err := os.Remove(filepath.Join(e.ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	ch := compare(t, e, before)
	s := ch.Summary
	if s.Created != 1 || s.Modified != 1 || s.Deleted != 1 || s.Additions != 4 || s.Deletions != 2 || s.Truncated {
		t.Fatalf("summary = %+v", s)
	}
	if got := s.String(); got != "3 files changed +4 -2" {
		t.Errorf("summary string = %q", got)
	}
	paths := []string{ch.Files[0].Path, ch.Files[1].Path, ch.Files[2].Path}
	want := []string{"/mnt/user-data/outputs/report.md", "/mnt/user-data/workspace/edit.txt", "/mnt/user-data/workspace/gone.txt"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("paths = %v", paths)
	}
	edit := file(t, ch, "/mnt/user-data/workspace/edit.txt")
	wantDiff := "--- a/mnt/user-data/workspace/edit.txt\n+++ b/mnt/user-data/workspace/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three"
	if edit.Diff != wantDiff || edit.Root != "workspace" || edit.Status != "modified" || *edit.SizeBefore != 14 || *edit.SizeAfter != 12 {
		t.Errorf("edit = %+v\ndiff %q", edit, edit.Diff)
	}
	created := file(t, ch, "/mnt/user-data/outputs/report.md")
	if created.Root != "outputs" || created.SizeBefore != nil || created.SHA256Before != nil || created.SHA256After == nil ||
		!strings.Contains(created.Diff, "@@ -0,0 +1,3 @@\n+# Report\n+\n+Done.") {
		t.Errorf("created = %+v", created)
	}
	gone := file(t, ch, "/mnt/user-data/workspace/gone.txt")
	if gone.Status != "deleted" || gone.SizeAfter != nil || !strings.Contains(gone.Diff, "-bye") || gone.Deletions != 1 {
		t.Errorf("deleted = %+v", gone)
	}
}

func TestSymlinks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.ws, "becomes_link.txt"), "text\n")
	write(t, filepath.Join(e.ws, "target.txt"), "target\n")
	if err := os.Symlink("target.txt", filepath.Join(e.ws, "old_link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.txt", filepath.Join(e.ws, "removed_link")); err != nil {
		t.Fatal(err)
	}
	before := capture(t, e)
	if err := os.Remove(filepath.Join(e.ws, "becomes_link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(e.ws, "becomes_link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.ws, "old_link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.ws, "old_link"), "now a file\n")
	if err := os.Remove(filepath.Join(e.ws, "removed_link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.out, filepath.Join(e.ws, "dir_link")); err != nil {
		t.Fatal(err)
	}
	ch := compare(t, e, before)
	replaced := file(t, ch, "/mnt/user-data/workspace/becomes_link.txt")
	if replaced.Status != "symlink_created" || !replaced.Symlink || *replaced.SymlinkTargetAfter != "/etc/passwd" ||
		replaced.SymlinkTargetBefore != nil || *replaced.DiffUnavailableReason != "symlink" || replaced.Diff != "" {
		t.Errorf("file replaced by a symlink = %+v", replaced)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/old_link"); f.Status != "modified" || *f.SymlinkTargetBefore != "target.txt" {
		t.Errorf("symlink replaced by a file = %+v", f)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/removed_link"); f.Status != "deleted" || !f.Symlink {
		t.Errorf("removed symlink = %+v", f)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/dir_link"); f.Status != "symlink_created" {
		t.Errorf("directory symlink = %+v", f)
	}
	if ch.Summary.SymlinkCreated != 2 || ch.Summary.Deleted != 1 || ch.Summary.Modified != 1 {
		t.Errorf("summary = %+v", ch.Summary)
	}
}

func TestSensitive(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/w/password.txt", "/w/api_key.txt", "/w/apikey", "/w/private_key.json", "/w/.env",
		"/w/.env.local", "/w/secrets/notes.md", "/w/tokens/a.txt", "/w/tokenizer.py", "/w/server.PEM", "/w/My_Credentials.csv"} {
		if !workspace.Sensitive(p) {
			t.Errorf("%s is not sensitive", p)
		}
	}
	for _, p := range []string{"/w/readme.md", "/w/environment.txt", "/w/keys.txt"} {
		if workspace.Sensitive(p) {
			t.Errorf("%s is sensitive", p)
		}
	}
}

// TestSensitiveFilesNeverRead changes a sensitive file's content while
// keeping its size and modification time: a file that was read would be
// told apart by its hash, a sensitive one is not.
func TestSensitiveFilesNeverRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	secret := filepath.Join(e.ws, "api_key.txt")
	plain := filepath.Join(e.ws, "plain.txt")
	write(t, secret, "sk-aaaa")
	write(t, plain, "aaaa")
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []string{secret, plain} {
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	before := capture(t, e)
	write(t, secret, "sk-bbbb")
	write(t, plain, "bbbb")
	for _, p := range []string{secret, plain} {
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(e.ws, "secrets", "new.txt"), "sk-cccc\n")
	ch := compare(t, e, before)
	if len(ch.Files) != 2 {
		t.Fatalf("files = %+v", ch.Files)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/plain.txt"); f.Status != "modified" {
		t.Errorf("plain = %+v", f)
	}
	f := file(t, ch, "/mnt/user-data/workspace/secrets/new.txt")
	if !f.Sensitive || f.SHA256After != nil || f.Diff != "" || *f.DiffUnavailableReason != "sensitive" || f.Additions != 0 {
		t.Errorf("sensitive = %+v", f)
	}
	raw, _ := json.Marshal(ch)
	if bytes.Contains(raw, []byte("sk-")) {
		t.Errorf("sensitive content leaked: %s", raw)
	}
}

func utf16LE(s string) []byte {
	out := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return out
}

func TestBinaryAndEncodings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "image.PNG"), "not really an image\n")
	write(t, filepath.Join(e.ws, "nul.txt"), "a\x00b\n")
	write(t, filepath.Join(e.ws, "bytes.md"), "\x00\x01\x02")
	write(t, filepath.Join(e.ws, "utf16.md"), string(utf16LE("# 标题\n")))
	write(t, filepath.Join(e.ws, "bom.md"), "\xEF\xBB\xBFhello\n")
	write(t, filepath.Join(e.ws, "straddle.txt"), strings.Repeat("a", 4095)+"é\n")
	write(t, filepath.Join(e.ws, "latin1.txt"), "caf\xe9\n")
	ch := compare(t, e, before)
	for _, name := range []string{"image.PNG", "nul.txt", "bytes.md", "latin1.txt"} {
		f := file(t, ch, "/mnt/user-data/workspace/"+name)
		if !f.Binary || f.Diff != "" || *f.DiffUnavailableReason != "binary" {
			t.Errorf("%s = %+v", name, f)
		}
	}
	if f := file(t, ch, "/mnt/user-data/workspace/utf16.md"); f.Binary || !strings.Contains(f.Diff, "\n+# 标题") {
		t.Errorf("utf16 = %+v", f)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/bom.md"); !strings.HasSuffix(f.Diff, "\n+hello") {
		t.Errorf("bom diff = %q", f.Diff)
	}
	if f := file(t, ch, "/mnt/user-data/workspace/straddle.txt"); f.Binary || f.Additions != 1 {
		t.Errorf("straddle = %+v", f)
	}
}

func TestLargeFile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.cfg.Limits.MaxFileBytesForDiff = 10
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "big.txt"), "0123456789ab\n")
	write(t, filepath.Join(e.ws, "small.txt"), "x\n")
	ch := compare(t, e, before)
	f := file(t, ch, "/mnt/user-data/workspace/big.txt")
	if f.SHA256After != nil || *f.DiffUnavailableReason != "large" || !ch.Summary.Truncated {
		t.Errorf("large = %+v, summary %+v", f, ch.Summary)
	}
	if ch.Limits.MaxFileBytesForDiff != 10 || ch.Limits.MaxFiles != 200 || ch.Limits.MaxScannedFiles != 2000 || ch.Limits.MaxTotalDiffBytes != 1<<20 {
		t.Errorf("limits = %+v", ch.Limits)
	}
}

func TestDiffBudgetExhausted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "a.txt"), "alpha\n")
	write(t, filepath.Join(e.ws, "b.txt"), "beta\ngamma\n")
	write(t, filepath.Join(e.ws, "c.txt"), "c\n")
	probe := compare(t, e, before)
	first := int64(len(file(t, probe, "/mnt/user-data/workspace/a.txt").Diff))
	e.cfg.Limits.MaxTotalDiffBytes = first + 1
	ch := compare(t, e, before)
	a, b, c := file(t, ch, "/mnt/user-data/workspace/a.txt"), file(t, ch, "/mnt/user-data/workspace/b.txt"), file(t, ch, "/mnt/user-data/workspace/c.txt")
	if a.Diff == "" || a.DiffTruncated {
		t.Errorf("a = %+v", a)
	}
	if b.Diff != "" || !b.DiffTruncated || *b.DiffUnavailableReason != "truncated" || b.Additions != 2 {
		t.Errorf("b = %+v", b)
	}
	if !c.DiffTruncated {
		t.Errorf("c fits in the 1 byte left: %+v", c)
	}
	if !ch.Summary.Truncated || ch.Summary.Additions != 4 {
		t.Errorf("summary = %+v", ch.Summary)
	}
}

func TestMaxFilesAndScanLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.cfg.Limits.MaxFiles = 2
	before := capture(t, e)
	for _, p := range []string{"z/1.txt", "a/2.txt", "a/b/3.txt", "m.txt"} {
		write(t, filepath.Join(e.ws, p), "x\n")
	}
	ch := compare(t, e, before)
	if len(ch.Files) != 2 || ch.Summary.Created != 4 || ch.Summary.Additions != 4 || !ch.Summary.Truncated {
		t.Fatalf("max files: %d files, %+v", len(ch.Files), ch.Summary)
	}
	e.cfg.Limits = workspace.Limits{MaxScannedFiles: 2}
	snap, err := workspace.Scan(t.Context(), e.cfg, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Truncated || len(snap.Entries) != 2 {
		t.Fatalf("scan limit: truncated %v, %d entries", snap.Truncated, len(snap.Entries))
	}
	for _, p := range []string{"/mnt/user-data/workspace/a/2.txt", "/mnt/user-data/workspace/a/b/3.txt"} {
		if _, ok := snap.Entries[p]; !ok {
			t.Errorf("the sorted walk did not keep %s: %v", p, snap.Entries)
		}
	}
	e.cfg.Limits = workspace.Limits{MaxScannedFiles: 4}
	if snap, _ := workspace.Scan(t.Context(), e.cfg, false, nil); snap.Truncated {
		t.Error("a scan that saw every file is truncated")
	}
}

func TestExclusions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.cfg.ExtraExcludedNames = []string{"scratch"}
	before := capture(t, e)
	for _, p := range []string{".git/HEAD", "node_modules/x/index.js", "deep/__pycache__/m.pyc", "scratch/a.txt", "src/.venv/bin/python", "ok.txt"} {
		write(t, filepath.Join(e.ws, p), "x\n")
	}
	ch := compare(t, e, before)
	if len(ch.Files) != 1 || ch.Files[0].Path != "/mnt/user-data/workspace/ok.txt" {
		t.Errorf("files = %+v", ch.Files)
	}
}

func TestDashLinesCounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.ws, "q.sql"), "-- get users\nSELECT 1;\n")
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "q.sql"), "SELECT 2\nSELECT 1;\n")
	f := file(t, compare(t, e, before), "/mnt/user-data/workspace/q.sql")
	if f.Additions != 1 || f.Deletions != 1 || !strings.Contains(f.Diff, "\n--- get users\n") {
		t.Errorf("q.sql = %+v", f)
	}
}

func TestLineTerminators(t *testing.T) {
	t.Parallel()
	e := setup(t)
	write(t, filepath.Join(e.ws, "crlf.txt"), "a\r\nb\r\n")
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "crlf.txt"), "a\rb\u2028c")
	f := file(t, compare(t, e, before), "/mnt/user-data/workspace/crlf.txt")
	if f.Additions != 1 || f.Deletions != 0 || !strings.HasSuffix(f.Diff, " a\n b\n+c") {
		t.Errorf("diff = %q (+%d -%d)", f.Diff, f.Additions, f.Deletions)
	}
}

type appender struct {
	events []runevents.NewEvent
	err    error
}

func (a *appender) Append(ctx context.Context, events []runevents.NewEvent) error {
	if a.err != nil {
		return a.err
	}
	a.events = append(a.events, events...)
	return nil
}

func tempDirs(t *testing.T, tmp string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(tmp, "runstream-workspace-changes-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecord is not parallel: it points TMPDIR at a directory of its own to
// see the text caches come and go.
func TestRecord(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := setup(t)
	write(t, filepath.Join(e.out, "a.md"), "one\n")
	before, err := workspace.Capture(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(tempDirs(t, tmp)) != 1 {
		t.Fatal("no text cache")
	}
	app := &appender{}
	if _, recorded, err := workspace.Record(t.Context(), app, "t1", "r1", e.cfg, before); err != nil || recorded {
		t.Fatalf("no change: recorded %v, %v", recorded, err)
	}
	if len(tempDirs(t, tmp)) != 0 || len(app.events) != 0 {
		t.Fatal("cache left or event written after a run without changes")
	}

	before, err = workspace.Capture(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.out, "a.md"), "one\ntwo\n")
	ch, recorded, err := workspace.Record(t.Context(), app, "t1", "r1", e.cfg, before)
	if err != nil || !recorded {
		t.Fatalf("Record = %v, %v", recorded, err)
	}
	if len(tempDirs(t, tmp)) != 0 {
		t.Error("cache left after Record")
	}
	ev := app.events[0]
	if ev.EventType != runevents.EventWorkspaceChanges || string(ev.Content) != `"1 file changed +1 -0"` || ch.Summary.Modified != 1 {
		t.Errorf("event = %s %s", ev.EventType, ev.Content)
	}
	var meta struct {
		WC workspace.Changes `json:"workspace_changes"`
	}
	if err := json.Unmarshal(ev.Metadata, &meta); err != nil || meta.WC.Version != 1 || !strings.Contains(meta.WC.Files[0].Diff, "+two") {
		t.Errorf("metadata = %s (%v)", ev.Metadata, err)
	}

	before, err = workspace.Capture(t.Context(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.out, "b.md"), "x\n")
	app.err = errors.New("store down")
	if _, _, err := workspace.Record(t.Context(), app, "t1", "r1", e.cfg, before); err == nil {
		t.Error("a failed append reported no error")
	}
	if len(tempDirs(t, tmp)) != 0 {
		t.Error("cache left after a failed Record")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := workspace.Capture(ctx, e.cfg); err == nil {
		t.Error("a cancelled capture succeeded")
	}
	if len(tempDirs(t, tmp)) != 0 {
		t.Error("cache left after a cancelled Capture")
	}
}
