package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/sse"
)

// TestServeLangGraphRestartMidRun: a run's chunks pushed before a restart
// and after it reach a joiner exactly once, in order: the shutdown aborts
// the joiner's connection (not a clean end), and the joiner resumes from
// its Last-Event-ID on the restarted server.
func TestServeLangGraphRestartMidRun(t *testing.T) {
	t.Parallel()
	stores := map[string][]string{"sqlite": {"--store", "sqlite:" + filepath.Join(t.TempDir(), "rs.db")}}
	if url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL"); url != "" {
		schema := fmt.Sprintf("rs_cmd_lg_%d", time.Now().UnixNano())
		t.Cleanup(func() { dropSchema(t, url, schema) })
		stores["postgres"] = []string{"--store", url, "--postgres-schema", schema}
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--workers", "0", "--data-dir", t.TempDir()}, store...)
			first := runServe(t, nil, args...)
			pushChunks(t, first.base, 0, 3, "")
			s := joinRun(t, first.base, "-1")
			var got []string
			for len(got) < 4 { // metadata and chunks 0..2
				got = append(got, s.next(t))
			}
			if err := first.stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if _, err := s.r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("the joiner's stream ended with %v at the shutdown; want an aborted connection", err)
			}
			second := runServe(t, nil, args...)
			s = joinRun(t, second.base, s.r.LastEventID())
			got = append(got, s.next(t))
			pushChunks(t, second.base, 3, 2, `{"status":"success"}`)
			for {
				ev, err := s.r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, frameOf(ev))
			}
			want := "metadata ,values 0,values 1,values 2,metadata ,values 3,values 4,end "
			if strings.Join(got, ",") != want {
				t.Fatalf("frames:\n%s\nwant\n%s", strings.Join(got, ","), want)
			}
			if code, body, _ := get(t, second.base+"/api/threads/t1/runs/r1"); code != 200 || !strings.Contains(body, `"status":"success"`) {
				t.Fatalf("run row: %d %s", code, body)
			}
		})
	}
}

func TestServeLangGraphFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--max-chunk-bytes", "1048576"},
		{"--chunk-lease", "0s"},
		{"--chunk-ttl", "-1h"},
		{"--max-chunks-per-run", "0"},
		{"--max-chunk-bytes", "16777216"}, // past the 8 MiB body limit
	} {
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.Run(t.Context(), append([]string{"serve", "--store", "memory:"}, args...), io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}

func pushChunks(t *testing.T, base string, first, n int, end string) {
	t.Helper()
	var chunks []string
	for i := first; i < first+n; i++ {
		chunks = append(chunks, fmt.Sprintf(`{"event":"values","data":{"n":%d}}`, i))
	}
	body := fmt.Sprintf(`{"thread_id":"t1","epoch":1,"first_index":%d,"chunks":[%s]`, first, strings.Join(chunks, ","))
	if end != "" {
		body += `,"end":` + end
	}
	resp, err := http.Post(base+"/api/runs/r1/stream-chunks", "application/json", strings.NewReader(body+"}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("push: %d %s", resp.StatusCode, raw)
	}
}

type joined struct{ r *sse.Reader }

func (j joined) next(t *testing.T) string {
	t.Helper()
	ev, err := j.r.Next()
	if err != nil {
		t.Fatal(err)
	}
	return frameOf(ev)
}

func frameOf(ev sse.Event) string {
	if ev.Event == "values" {
		return "values " + ev.ID
	}
	return ev.Event + " "
}

func joinRun(t *testing.T, base, lastEventID string) joined {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/threads/t1/runs/r1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "/threads/t1/runs/r1/stream" {
		t.Fatalf("join: %d %v", resp.StatusCode, resp.Header)
	}
	return joined{r: sse.NewReader(resp.Body)}
}

// TestServeLangGraphJoinEndsWithItsToken: under --auth jwt a join stream
// is aborted when the caller's token expires (the SDK re-authenticates and
// resumes), as served by runstream serve.
func TestServeLangGraphJoinEndsWithItsToken(t *testing.T) {
	t.Parallel()
	keys := newJWTKeys(t)
	p := runServe(t, nil, "--store", "memory:", "--workers", "0", "--auth", "jwt", "--jwt-keys-file", keys.file, "--jwt-leeway", "0")
	long := keys.token("alice", time.Hour)
	body := `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":{"n":0}}]}`
	if code, out, _ := call(t, "POST", p.base+"/api/runs/r1/stream-chunks", long, body); code != http.StatusOK {
		t.Fatalf("push: %d %s", code, out)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", p.base+"/api/threads/t1/runs/r1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keys.token("alice", 2*time.Second))
	req.Header.Set("Last-Event-ID", "-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("join: %d", resp.StatusCode)
	}
	s := joined{r: sse.NewReader(resp.Body)}
	if got := s.next(t) + "," + s.next(t); got != "metadata ,values 0" {
		t.Fatalf("frames before the expiry: %s", got)
	}
	if _, err := s.r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the join stream ended with %v when its token expired; want an aborted connection", err)
	}
}

// A --chunk-lease shorter than twice chunkpush's renewal interval is
// served, with a warning that idle producers may be swept.
func TestServeWarnsOfAShortChunkLease(t *testing.T) {
	t.Parallel()
	_, _, stderr := startServe(t, nil, "--store", "memory:", "--chunk-lease", "5s")
	if !strings.Contains(stderr.String(), "--chunk-lease is shorter") {
		t.Errorf("no warning of a 5 s chunk lease; stderr:\n%s", stderr)
	}
	_, _, stderr = startServe(t, nil, "--store", "memory:")
	if strings.Contains(stderr.String(), "--chunk-lease is shorter") {
		t.Errorf("a warning with the default chunk lease; stderr:\n%s", stderr)
	}
}

// A user's LangGraph joins count against the same --max-streams-per-user
// as their thread and workflow streams: before, joins had a limit of
// their own, so a user could hold twice the limit.
func TestServeJoinsShareTheStreamLimit(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:", "--workers", "0", "--max-streams-per-user", "2")
	pushChunks(t, base, 0, 1, "")
	open := func(path string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for i := range 2 {
		if resp := open("/api/threads/t1/stream"); resp.StatusCode != 200 {
			t.Fatalf("thread stream %d: %d", i+1, resp.StatusCode)
		}
	}
	if resp := open("/api/threads/t1/runs/r1/stream"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a join with 2 thread streams open and a limit of 2: %d, want 429", resp.StatusCode)
	}
}
