package langgraphsdk_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sdkVersion is the SDK version DeerFlow's frontend locks, pinned in
// harness/package.json and package-lock.json.
const sdkVersion = "1.6.0"

var (
	installOnce sync.Once
	installErr  string
)

// harnessDir returns the harness directory with its dependencies
// installed (npm ci, unless node_modules already holds the pinned SDK),
// skipping the test when node or npm is missing.
func harnessDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: install Debian's nodejs and npm (bash .ci/run does) to run the LangGraph SDK tests", tool)
		}
	}
	dir, err := filepath.Abs("harness")
	if err != nil {
		t.Fatal(err)
	}
	installOnce.Do(func() {
		var pkg struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk", "package.json"))
		if err == nil && json.Unmarshal(b, &pkg) == nil && pkg.Version == sdkVersion {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			installErr = "npm ci in " + dir + ": " + err.Error() + "\n" + string(out)
		}
	})
	if installErr != "" {
		t.Fatal(installErr)
	}
	return dir
}

// line is one JSON line of the harness.
type line struct {
	Kind        string          `json:"kind"`
	Method      string          `json:"method"`
	URL         string          `json:"url"`
	LastEventID *string         `json:"last_event_id"`
	Status      int             `json:"status"`
	Location    *string         `json:"location"`
	ContentType *string         `json:"content_type"`
	Event       string          `json:"event"`
	ID          *string         `json:"id"`
	Data        json.RawMessage `json:"data"`
	Value       json.RawMessage `json:"value"`
	Name        string          `json:"name"`
	Message     string          `json:"message"`
}

// harness is one run of harness.mjs.
type harness struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{}
	lines   []line
	stderr  strings.Builder
}

// runHarness starts node harness.mjs with args; its lines are collected
// as they come.
func runHarness(t *testing.T, args ...string) *harness {
	t.Helper()
	dir := harnessDir(t)
	cmd := exec.Command("node", append([]string{"harness.mjs"}, args...)...)
	cmd.Dir = dir
	h := &harness{t: t, cmd: cmd, done: make(chan struct{}), changed: make(chan struct{})}
	cmd.Stderr = &lockedWriter{h: h}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = line{Kind: "garbage", Message: sc.Text()}
			}
			h.mu.Lock()
			h.lines = append(h.lines, l)
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			t.Logf("harness %v stderr:\n%s", args, h.stderrText())
		}
	})
	return h
}

type lockedWriter struct{ h *harness }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.stderr.Write(p)
}

func (h *harness) stderrText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// snapshot returns the lines so far.
func (h *harness) snapshot() []line {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]line(nil), h.lines...)
}

// waitFor waits until cond holds on the lines so far, failing when the
// harness exits first or after two minutes.
func (h *harness) waitFor(what string, cond func([]line) bool) []line {
	h.t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		h.mu.Lock()
		lines := append([]line(nil), h.lines...)
		changed := h.changed
		h.mu.Unlock()
		if cond(lines) {
			return lines
		}
		select {
		case <-changed:
		case <-h.done:
			if lines := h.snapshot(); cond(lines) {
				return lines
			}
			h.t.Fatalf("harness exited before %s; lines:\n%s", what, dump(h.snapshot()))
		case <-deadline:
			h.t.Fatalf("waiting for %s: timed out; lines:\n%s", what, dump(h.snapshot()))
		}
	}
}

// wait waits for the harness to exit and returns its lines.
func (h *harness) wait() []line {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(3 * time.Minute):
		h.t.Fatalf("the harness did not exit; lines:\n%s", dump(h.snapshot()))
	}
	return h.snapshot()
}

// sawID reports whether an event with id was printed.
func sawID(id string) func([]line) bool {
	return func(lines []line) bool {
		for _, l := range lines {
			if l.Kind == "event" && l.ID != nil && *l.ID == id {
				return true
			}
		}
		return false
	}
}

func dump(lines []line) string {
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		if len(j) > 300 {
			j = append(j[:300], "…"...)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// sdkCall runs a one-shot harness command (get, cancel) and returns its
// result or error line.
func sdkCall(t *testing.T, args ...string) line {
	t.Helper()
	lines := runHarness(t, args...).wait()
	for _, l := range lines {
		if l.Kind == "result" || l.Kind == "error" {
			return l
		}
	}
	t.Fatalf("harness %v printed no result:\n%s", args, dump(lines))
	return line{}
}
