package jsonl

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// idemEvent is an event of thread t1.
func idemEvent(run string, typ runevents.EventType, cat runevents.Category, content string) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "t1", RunID: run, EventType: typ, Category: cat, Content: json.RawMessage(content)}
}

func idemMessage(run, content string) runevents.NewEvent {
	return idemEvent(run, runevents.EventLLMHumanInput, runevents.CategoryMessage, content)
}

// openUnsynced opens the store in dir without fsyncs, so that the
// thousands of reopens of TestIdempotentTornTail stay quick: the test
// cuts files itself, it does not need the disk to keep them.
func openUnsynced(t *testing.T, dir string) *RunEventStore {
	t.Helper()
	s := mustOpen(t, dir)
	s.io.sync = func(*os.File) error { return nil }
	return s
}

func hashOf(body string) []byte {
	h := sha256.Sum256([]byte(body))
	return h[:]
}

// seqsBody is the response of the tests' keyed appends: the seqs as JSON,
// and 200 instead of 201 for an if-absent append that found its row.
func seqsBody(recs []runevents.Record, created bool) (runevents.IdempotentResponse, error) {
	status := 201
	if !created {
		status = 200
	}
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	body, err := json.Marshal(seqs)
	return runevents.IdempotentResponse{Status: status, Body: body}, err
}

func keyedAppend(key string, ifAbsent bool, events ...runevents.NewEvent) runevents.IdempotentAppend {
	for i := range events {
		events[i].UserID = "alice"
	}
	return runevents.IdempotentAppend{UserID: "alice", Key: key, RequestHash: hashOf(key), Events: events, IfAbsent: ifAbsent, Response: seqsBody}
}

// threadRows returns the thread's rows as "seq run type content" lines.
func threadRows(t *testing.T, s *RunEventStore, thread string) []string {
	t.Helper()
	recs, err := s.ListThreadEvents(t.Context(), runevents.ListThreadEventsParams{ThreadID: thread, Owner: runevents.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatalf("ListThreadEvents(%s): %v", thread, err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d %s %s %s", r.Seq, r.RunID, r.EventType, r.Content))
	}
	return out
}

// snapshot returns the content of every file below dir but LOCK.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// restore writes files into a new directory.
func restore(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for rel, b := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestIdempotentTornTail cuts the write of a keyed append at every byte
// offset, as a crash would, and checks after a reopen that the key exists
// exactly when all the append's rows do, and that a retry with the key
// either replays the first response or appends the batch once.
func TestIdempotentTornTail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		before func(t *testing.T, s *RunEventStore)
		append runevents.IdempotentAppend
	}{
		{"OneRun", nil, keyedAppend("k1", false, idemMessage("r1", `"a"`), idemMessage("r1", `"b"`))},
		{"ThreeRuns", nil, keyedAppend("k1", false, idemMessage("r1", `"a"`), idemMessage("r2", `"b"`), idemMessage("r1", `"c"`), idemMessage("r3", `"d"`))},
		{"IfAbsentFound", func(t *testing.T, s *RunEventStore) {
			e := idemEvent("r1", runevents.EventRunDelivery, runevents.CategoryOutputs, `"first"`)
			e.UserID = "alice"
			if _, _, err := s.PutIfAbsent(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}, keyedAppend("k1", true, idemEvent("r1", runevents.EventRunDelivery, runevents.CategoryOutputs, `"second"`))},
		{"IfAbsentCreated", nil, keyedAppend("k1", true, idemEvent("r1", runevents.EventRunDelivery, runevents.CategoryOutputs, `"first"`))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openUnsynced(t, dir)
			// Earlier rows, with a keyed append of their own, that every cut must keep.
			if _, err := s.PutBatch(t.Context(), []runevents.NewEvent{idemMessage("r1", `"old"`), idemMessage("r2", `"old"`)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendIdempotent(t.Context(), keyedAppend("k0", false, idemMessage("r1", `"k0"`), idemMessage("r3", `"k0"`))); err != nil {
				t.Fatal(err)
			}
			if c.before != nil {
				c.before(t, s)
			}
			oldRows := threadRows(t, s, "t1")
			before := snapshot(t, dir)
			first, err := s.AppendIdempotent(t.Context(), c.append)
			if err != nil {
				t.Fatal(err)
			}
			newRows := threadRows(t, s, "t1")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, dir)

			// The last write: what it appended to each file, in the order
			// the store wrote the files (the order of their names does not
			// matter: every order is tried).
			var written []string
			for rel, b := range after {
				if !bytes.Equal(b, before[rel]) {
					if !bytes.HasPrefix(b, before[rel]) {
						t.Fatalf("%s was rewritten, not appended to", rel)
					}
					written = append(written, rel)
				}
			}
			slices.Sort(written)
			if len(written) == 0 {
				t.Fatal("the keyed append wrote nothing")
			}
			// Every check reuses one copy of the directory: only the files
			// of the last write differ between checks, and only they are
			// changed by a check (its recovery and its retry).
			crashed := restore(t, before)
			check := func(t *testing.T, files map[string][]byte, what string) {
				for _, rel := range written {
					if err := os.WriteFile(filepath.Join(crashed, rel), files[rel], 0o644); err != nil {
						t.Fatal(err)
					}
				}
				s := openUnsynced(t, crashed)
				defer s.Close()
				// The lookup comes first: it must find the key of a thread
				// not yet recovered.
				got, err := s.LookupIdempotent(t.Context(), "alice", c.append.Key, c.append.RequestHash)
				if err != nil {
					t.Fatalf("%s: LookupIdempotent: %v", what, err)
				}
				rows := threadRows(t, s, "t1")
				switch {
				case got != nil && !slices.Equal(rows, newRows):
					t.Fatalf("%s: the key survived without its rows:\n%s\nwant\n%s", what, strings.Join(rows, "\n"), strings.Join(newRows, "\n"))
				case got == nil && !slices.Equal(rows, oldRows):
					t.Fatalf("%s: rows survived without their key:\n%s\nwant\n%s", what, strings.Join(rows, "\n"), strings.Join(oldRows, "\n"))
				case got != nil && (got.Status != first.Response.Status || !bytes.Equal(got.Body, first.Response.Body)):
					t.Fatalf("%s: key holds %d %s, want %d %s", what, got.Status, got.Body, first.Response.Status, first.Response.Body)
				}
				retry, err := s.AppendIdempotent(t.Context(), c.append)
				if err != nil {
					t.Fatalf("%s: retry: %v", what, err)
				}
				if retry.Replayed != (got != nil) || retry.Response.Status != first.Response.Status || !bytes.Equal(retry.Response.Body, first.Response.Body) {
					t.Fatalf("%s: retry = replayed %v, %d %s; want replayed %v, %d %s", what,
						retry.Replayed, retry.Response.Status, retry.Response.Body, got != nil, first.Response.Status, first.Response.Body)
				}
				if rows := threadRows(t, s, "t1"); !slices.Equal(rows, newRows) {
					t.Fatalf("%s: rows after the retry:\n%s\nwant\n%s", what, strings.Join(rows, "\n"), strings.Join(newRows, "\n"))
				}
			}
			cut := func(lens map[string]int) map[string][]byte {
				files := map[string][]byte{}
				for _, rel := range written {
					files[rel] = after[rel]
				}
				for rel, n := range lens {
					files[rel] = after[rel][:len(before[rel])+n]
				}
				return files
			}
			added := func(rel string) int { return len(after[rel]) - len(before[rel]) }
			// A crash during the writes, in either order of the files: the
			// files written before are whole, the one being written is
			// cut, the ones after are untouched.
			reversed := slices.Clone(written)
			slices.Reverse(reversed)
			for _, order := range [][]string{written, reversed} {
				for i, rel := range order {
					for n := range added(rel) + 1 {
						lens := map[string]int{rel: n}
						for _, later := range order[i+1:] {
							lens[later] = 0
						}
						check(t, cut(lens), fmt.Sprintf("order %v, %s cut at %d", order, rel, n))
					}
				}
			}
			// A power loss may keep any prefix of each file: every pair of
			// cuts, at a coarser step.
			if len(written) >= 2 {
				a, b := written[0], written[1]
				for i := 0; i <= added(a); i += 13 {
					for j := 0; j <= added(b); j += 17 {
						check(t, cut(map[string]int{a: i, b: j}), fmt.Sprintf("%s cut at %d, %s at %d", a, i, b, j))
					}
				}
			}
		})
	}
}

// TestIdempotentKeysFoundAfterReopen checks that after a reopen a key is
// found before its thread is touched: by LookupIdempotent, and by an
// append to another thread, which is refused as another request. One key
// line is longer than the read buffer.
func TestIdempotentKeysFoundAfterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openUnsynced(t, dir)
	big := `"` + strings.Repeat("x", 100<<10) + `"`
	first := map[string]runevents.IdempotentResult{}
	for key, a := range map[string]runevents.IdempotentAppend{
		"k1": keyedAppend("k1", false, idemMessage("r1", `"a"`)),
		"k2": keyedAppend("k2", false, runevents.NewEvent{ThreadID: "t2", RunID: "r1", EventType: runevents.EventLLMHumanInput, Category: runevents.CategoryMessage, Content: json.RawMessage(big)}),
	} {
		a.Response = func(recs []runevents.Record, created bool) (runevents.IdempotentResponse, error) {
			body, err := json.Marshal(recs) // the records, content included
			return runevents.IdempotentResponse{Status: 201, Body: body}, err
		}
		res, err := s.AppendIdempotent(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		first[key] = res
	}
	if len(first["k2"].Response.Body) < 100<<10 {
		t.Fatalf("k2's response has %d bytes; want a key line longer than the 64 KiB read buffer", len(first["k2"].Response.Body))
	}
	s.Close()

	s = openUnsynced(t, dir)
	for _, key := range []string{"k1", "k2"} {
		got, err := s.LookupIdempotent(t.Context(), "alice", key, hashOf(key))
		if err != nil || got == nil || !bytes.Equal(got.Body, first[key].Response.Body) {
			t.Fatalf("LookupIdempotent(%s) after reopen = %v, %v; want the first response", key, got, err)
		}
	}
	s.Close()

	s = openUnsynced(t, dir)
	other := keyedAppend("k1", false, runevents.NewEvent{ThreadID: "t3", RunID: "r1", EventType: runevents.EventLLMHumanInput, Category: runevents.CategoryMessage, Content: json.RawMessage(`"b"`)})
	other.RequestHash = hashOf("another request")
	if _, err := s.AppendIdempotent(t.Context(), other); runstream.ErrorCodeOf(err) != runstream.CodeValidationFailed {
		t.Fatalf("append to t3 under t1's key with another request: %v; want VALIDATION_FAILED", err)
	}
	if rows := threadRows(t, s, "t3"); len(rows) != 0 {
		t.Fatalf("the refused append stored %v", rows)
	}
}

// TestIdempotentKeysAcrossDeletes checks that a delete keeps the key line
// of rows that remain, at its new place, and forgets a key whose rows are
// all gone, in the process and after a reopen.
func TestIdempotentKeysAcrossDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openUnsynced(t, dir)
	bobs := idemMessage("r1", `"bob"`)
	bobs.UserID = "bob"
	if _, err := s.Put(t.Context(), bobs); err != nil {
		t.Fatal(err)
	}
	k1 := keyedAppend("k1", false, idemMessage("r1", `"a"`), idemMessage("r1", `"b"`))
	first, err := s.AppendIdempotent(t.Context(), k1)
	if err != nil {
		t.Fatal(err)
	}
	k2 := keyedAppend("k2", false, idemMessage("r2", `"c"`))
	if _, err := s.AppendIdempotent(t.Context(), k2); err != nil {
		t.Fatal(err)
	}
	// Bob's row goes: k1's line moves to the start of r1's file. All of
	// r2 goes, and k2 with it.
	if n, err := s.DeleteByRun(t.Context(), "t1", "r1", runevents.OwnedBy("bob")); err != nil || n != 1 {
		t.Fatalf("DeleteByRun(r1, bob) = %d, %v", n, err)
	}
	if n, err := s.DeleteByRun(t.Context(), "t1", "r2", runevents.AnyOwner); err != nil || n != 1 {
		t.Fatalf("DeleteByRun(r2) = %d, %v", n, err)
	}
	wantRows := threadRows(t, s, "t1")
	check := func(what string) {
		t.Helper()
		got, err := s.LookupIdempotent(t.Context(), "alice", "k1", k1.RequestHash)
		if err != nil || got == nil || !bytes.Equal(got.Body, first.Response.Body) {
			t.Fatalf("%s: k1 = %v, %v; want the first response %s", what, got, err, first.Response.Body)
		}
		if got, err := s.LookupIdempotent(t.Context(), "alice", "k2", k2.RequestHash); err != nil || got != nil {
			t.Fatalf("%s: k2 = %v, %v; want it forgotten with its rows", what, got, err)
		}
		if rows := threadRows(t, s, "t1"); !slices.Equal(rows, wantRows) {
			t.Fatalf("%s: rows %v, want %v", what, rows, wantRows)
		}
	}
	check("after the deletes")
	s.Close()
	s = openUnsynced(t, dir)
	check("after a reopen")
	if res, err := s.AppendIdempotent(t.Context(), k1); err != nil || !res.Replayed {
		t.Fatalf("retry of k1 = %+v, %v; want a replay", res, err)
	}
	if res, err := s.AppendIdempotent(t.Context(), k2); err != nil || res.Replayed || len(res.Appended) != 1 {
		t.Fatalf("retry of k2 = %+v, %v; want a new append", res, err)
	}
}

// TestIdempotentKeyAcrossThreadsConcurrently races two requests that share
// a key on two threads: exactly one appends, the other is refused as
// another request.
func TestIdempotentKeyAcrossThreadsConcurrently(t *testing.T) {
	t.Parallel()
	s := openUnsynced(t, t.TempDir())
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, thread := range []string{"t1", "t2"} {
			a := keyedAppend(key, false, runevents.NewEvent{ThreadID: thread, RunID: "r1", EventType: runevents.EventLLMHumanInput, Category: runevents.CategoryMessage, Content: json.RawMessage(`"x"`)})
			a.RequestHash = hashOf(key + thread)
			wg.Go(func() { _, errs[j] = s.AppendIdempotent(t.Context(), a) })
		}
		wg.Wait()
		refused := 0
		for _, err := range errs {
			switch {
			case err == nil:
			case runstream.ErrorCodeOf(err) == runstream.CodeValidationFailed:
				refused++
			default:
				t.Fatalf("key %s: %v", key, err)
			}
		}
		if refused != 1 {
			t.Fatalf("key %s: %d of 2 requests refused; want 1 (errors %v)", key, refused, errs)
		}
	}
	if n := len(threadRows(t, s, "t1")) + len(threadRows(t, s, "t2")); n != 20 {
		t.Errorf("%d rows in t1 and t2; want 20, one per key", n)
	}
}
