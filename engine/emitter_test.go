package engine

// The emitter is tested from inside the package: a Delta that never
// returns holds the emitter's mutex, so a run whose node calls it can
// neither end nor be stopped, and a test through an engine would hang
// instead of failing.

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// newTestEmitter returns an emitter for a new run in a memory store, with
// no lease, and a function that returns the run's node.output.delta texts.
// The caller halts the emitter (which stops its flush timer).
func newTestEmitter(t *testing.T) (*emitter, func() []string) {
	t.Helper()
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	log := eventlog.NewWorkflowLog(store, v, nil, nil)
	ctx := context.Background()
	w, ver, err := store.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_1", OwnerID: "alice", Name: "test"},
		workflow.Version{ID: "wv_1", Definition: json.RawMessage(`{"name":"x","nodes":[{"id":"p","type":"transform","config":{"expression":"1"}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := log.CreateRun(ctx, workflow.Run{ID: "run_1", WorkflowID: w.ID, VersionID: ver.ID, OwnerID: "alice", Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: RunCreatedData(ver, json.RawMessage(`{}`))}})
	if err != nil {
		t.Fatal(err)
	}
	em := &emitter{log: log, runID: run.ID, window: DefaultDeltaWindow, maxBytes: DefaultDeltaMaxBytes, flushCtx: ctx}
	deltas := func() []string {
		t.Helper()
		envs, err := store.ListEvents(ctx, run.ID, 0, workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, env := range envs {
			if env.Event != workflow.EventNodeOutputDelta {
				continue
			}
			var d struct{ Delta string }
			if err := json.Unmarshal(env.Data, &d); err != nil {
				t.Fatalf("seq %d: %v", env.Seq, err)
			}
			out = append(out, d.Delta)
		}
		return out
	}
	return em, deltas
}

// TestDeltaLongText: text longer than maxDeltaChunk is stored in chunks
// cut at rune boundaries, each valid UTF-8, that join to the text; text
// that is not valid UTF-8, even with no rune start in its first
// maxDeltaChunk bytes, is stored with each run of invalid bytes replaced
// by one U+FFFD, and Delta returns.
func TestDeltaLongText(t *testing.T) {
	// Two-byte runes, shifted by one byte so that maxDeltaChunk falls
	// inside a rune.
	multiByte := "a" + strings.Repeat("é", maxDeltaChunk)
	tests := []struct {
		name, text, want string
	}{
		{"ValidMultiByte", multiByte, multiByte},
		{"NoRuneStart", strings.Repeat("\x80", 70<<10), "\uFFFD"},
		{"InvalidRuns", "ok\xff\xfe" + multiByte + strings.Repeat("\xbf", maxDeltaChunk), "ok\uFFFD" + multiByte + "\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em, deltas := newTestEmitter(t)
			done := make(chan error, 1)
			go func() {
				err := em.delta(t.Context(), "p", "nr_1", "text", tc.text)
				if err == nil {
					err = em.emit(t.Context(), workflow.AppendParams{}) // the pending rest
				}
				em.halt(errRunnerDone)
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Delta did not return within a minute")
			}
			got := deltas()
			for i, d := range got {
				if !utf8.ValidString(d) || len(d) > maxDeltaChunk {
					t.Errorf("delta %d of %d: %d bytes, valid UTF-8: %t", i, len(got), len(d), utf8.ValidString(d))
				}
			}
			if joined := strings.Join(got, ""); joined != tc.want {
				t.Errorf("the %d stored deltas join to %d bytes, want %d", len(got), len(joined), len(tc.want))
			}
		})
	}
}

// progressStep, among a test's pieces, stores a node.progress of the
// attempt instead of text.
const progressStep = "<progress>"

// cutMarker matches a delta that holds part of a redaction marker.
var cutMarker = regexp.MustCompile(`^[a-z_]+\]|\[(?:R(?:E(?:D(?:A(?:C(?:T(?:E(?:D(?::[a-z_]*)?)?)?)?)?)?)?)?)?$|\[REDACTED:[a-z_]*[^a-z_\]]`)

// TestDeltaSecretAcrossPieces: a secret a model streams in pieces, flushed
// apart (each piece written by the window's timer, or pushed by another
// event of the attempt), is not stored, whole or in part, in any delta;
// text without secrets joins back to itself, in deltas none of which is
// empty.
func TestDeltaSecretAcrossPieces(t *testing.T) {
	const (
		bearer = "q8Zt3LmN0pXv7Rk2Yb5WcJ4hQ9"
		openai = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
		github = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
		pemB64 = "MIIEowIBAAKCAQEAx9f2Lp0QmZ3Vb8nYtR4sW1kJ7aHc5dE6gF2hI3jK4lM5nO6p"
		cookie = "eyQ9xT3mK8pL2vN7bR4wZ1cF6hJ0sD5g"
	)
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + pemB64 + "\n" + pemB64 + "\n-----END RSA PRIVATE KEY-----\n"
	longJSON := `{"items":[` + strings.Repeat(`{"id":12345,"name":"widget"},`, 150) + `{"note":"` + github[:30]
	longLine := "Cookie: " + strings.Repeat("_ga=GA1.2.3456789; ", 16) + "__Host-sid="
	tests := []struct {
		name    string
		pieces  []string
		secrets []string // none of these (secrets and pieces of them) may be stored
		want    string   // the deltas joined, when set
	}{
		{"SchemeThenToken", []string{"use Authorization: Bearer ", bearer + " and more"}, []string{bearer, bearer[:8]}, ""},
		{"TokenCut", []string{"the key is sk-proj-Ab12", "Cd34Ef56Gh78Ij90Kl12Mn34Op56 now"}, []string{openai, "sk-proj-Ab12", "Cd34Ef56Gh78"}, "the key is [REDACTED:openai_key] now"},
		{"TokenCutByProgress", []string{"token " + github[:39], progressStep, github[39:] + " ok"}, []string{github[:20]}, "token [REDACTED:github_token] ok"},
		{"DSNCut", []string{"connect to postgres://admin:hun", "ter2@db.internal:5432/prod please"}, []string{"hunter2", "ter2@"}, ""},
		{"DSNNonASCIIPassword", []string{"connect postgres://admin:Sup3rS3cretPä", "ss@db:5432/prod please"}, []string{"Sup3rS3cret"}, ""},
		{"MySQLNonASCIIPassword", []string{"db root:Sup3rS3cret字", "x@tcp(db:3306)/app ok"}, []string{"Sup3rS3cret"}, ""},
		{"LongRun", []string{longJSON, github[30:] + `"}]} done`}, []string{github[:20], github[30:]}, ""},
		{"LongLine", strings.SplitAfter(longLine+cookie+"\nAccept: */*", " "), []string{cookie[:12]}, ""},
		{"PrivateKeyInLines", strings.SplitAfter("here: "+pem+"done ", "\n"), []string{pemB64[:8], pemB64[20:40]}, ""},
		{"PrivateKeyInBytes", strings.Split("k: "+pem+"end ", ""), []string{pemB64[:8], pemB64[20:40]}, ""},
		{"MarkerNotCut", []string{"Authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ= ", "ok"}, []string{"dXNlcjpwYXNz"}, ""},
		{"Prose", []string{"Hello wor", "ld, this is ", "fine. Ünïcode 字 too"}, nil, "Hello world, this is fine. Ünïcode 字 too"},
		{"ProseWithAName", []string{"To reset the pass", "word: go to settings and click reset."}, nil, "To reset the password: go to settings and click reset."},
		{"CJKAtOnce", []string{"你好世界", "，再见"}, nil, "你好世界，再见"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em, deltas := newTestEmitter(t)
			defer em.halt(errRunnerDone)
			for _, piece := range tc.pieces {
				if piece == progressStep {
					progress := nodeEvent(workflow.EventNodeProgress, "p", "nr_1", map[string]any{"phase": "p", "message": "m", "percent": nil})
					if err := em.emit(t.Context(), workflow.AppendParams{}, progress); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := em.delta(t.Context(), "p", "nr_1", "text", piece); err != nil {
					t.Fatal(err)
				}
				em.mu.Lock()
				err := em.flushLocked(nil, workflow.AppendParams{}, false) // the window's flush
				em.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
			}
			completed := nodeEvent(workflow.EventNodeCompleted, "p", "nr_1", nodeCompletedData{OutputSummary: json.RawMessage(`"…"`), DurationMs: 1, Attempt: 1})
			if err := em.emit(t.Context(), workflow.AppendParams{}, completed); err != nil {
				t.Fatal(err)
			}
			got := deltas()
			joined := strings.Join(got, "")
			for i, d := range got {
				if d == "" || cutMarker.MatchString(d) {
					t.Errorf("delta %d of %d is empty or cuts a marker: %q", i, len(got), d)
				}
				for _, secret := range tc.secrets {
					if strings.Contains(d, secret) {
						t.Errorf("delta %d of %d holds %q: %q", i, len(got), secret, d)
					}
				}
			}
			for _, secret := range tc.secrets {
				if strings.Contains(joined, secret) {
					t.Errorf("the deltas join to %q, holding %q", joined, secret)
				}
			}
			if tc.want != "" && joined != tc.want {
				t.Errorf("the deltas join to %q, want %q", joined, tc.want)
			}
			em.mu.Lock()
			if len(em.streams) != 0 {
				t.Errorf("%d streams kept after the attempt ended", len(em.streams))
			}
			em.mu.Unlock()
		})
	}
}
