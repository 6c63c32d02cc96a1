package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

// streamScript is n one-token deltas, distinct so that a lost, doubled or
// reordered token changes the text.
func streamScript(n int) []string {
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%d ", i)
	}
	return tokens
}

func streamDefinition(tokens []string, tokensPerSecond int) string {
	raw, _ := json.Marshal(tokens)
	return fmt.Sprintf(`{"name":"stream","nodes":[{"id":"talk","type":"llm","config":{"provider":"scripted","tokens":%s,"tokensPerSecond":%d}}]}`, raw, tokensPerSecond)
}

type deltaEvent struct {
	env     workflow.Envelope
	channel string
	text    string
}

func deltas(t testing.TB, envs []workflow.Envelope) []deltaEvent {
	t.Helper()
	var out []deltaEvent
	for _, env := range envs {
		if env.Event != workflow.EventNodeOutputDelta {
			continue
		}
		var d struct{ Channel, Delta string }
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, deltaEvent{env, d.Channel, d.Delta})
	}
	return out
}

func allEvents(t testing.TB, e *env, runID string) []workflow.Envelope {
	t.Helper()
	var out []workflow.Envelope
	for {
		page, err := e.store.ListEvents(context.Background(), runID, int64(len(out)), workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < workflow.MaxEventPageLimit {
			return out
		}
	}
}

// 10,000 one-token deltas at 2,000 tokens/s (5 s of streaming) are stored
// as at most one event per 30 ms, and the stored deltas concatenate to the
// script byte for byte.
func TestDeltaCoalescing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		tokens := streamScript(10_000)
		run := e.createRun(t, streamDefinition(tokens, 2000), `{}`)
		e.waitTerminal(t, run.ID)
		events := allEvents(t, e, run.ID)
		ds := deltas(t, events)
		var text strings.Builder
		for _, d := range ds {
			if d.channel != "text" || d.env.NodeID != "talk" {
				t.Fatalf("seq %d: delta of %s on %q", d.env.Seq, d.env.NodeID, d.channel)
			}
			text.WriteString(d.text)
		}
		if text.String() != strings.Join(tokens, "") {
			t.Fatalf("the stored deltas (%d bytes) differ from the script (%d bytes)", text.Len(), len(strings.Join(tokens, "")))
		}
		streaming := 5 * time.Second
		if max := int(streaming / (30 * time.Millisecond)); len(ds) > max {
			t.Errorf("%d delta events for %s of streaming, want at most %d (one per 30 ms)", len(ds), streaming, max)
		}
		if len(ds) < 50 {
			t.Errorf("only %d delta events: the stream was not stored as it went", len(ds))
		}
		// The deltas are stored as they stream, not all at the end.
		first, last := ds[0].env.Timestamp, ds[len(ds)-1].env.Timestamp
		if last.Sub(first) < 4*time.Second {
			t.Errorf("deltas stored over %s only", last.Sub(first))
		}
	})
}

// probe is a node type whose attempts run a Go function, to drive the
// emitter directly.
func probe(run func(ctx context.Context, n *engine.NodeRun) error) engine.NodeType {
	return engine.NodeType{Name: "probe", Compile: func(json.RawMessage) (engine.NodeFunc, error) {
		return func(ctx context.Context, n *engine.NodeRun) (json.RawMessage, error) {
			return json.RawMessage(`true`), run(ctx, n)
		}, nil
	}}
}

func probeRegistry(t *testing.T, run func(ctx context.Context, n *engine.NodeRun) error) *engine.Registry {
	t.Helper()
	r, err := engine.NewRegistry(append(engine.Builtins(), probe(run))...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const probeDefinition = `{"name":"probe","nodes":[{"id":"p","type":"probe"}]}`

// Pending deltas are flushed before any other event, merged per channel in
// the order the channels first appeared, and a channel is flushed at
// DeltaMaxBytes; the word a channel is writing ("b") waits for the text
// after it, past the attempt's progress.
func TestDeltaOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, func(c *engine.Config) {
			c.DeltaMaxBytes = 6
			c.Registry = probeRegistry(t, func(ctx context.Context, n *engine.NodeRun) error {
				for _, step := range []func() error{
					func() error { return n.Delta(ctx, "text", "a ") },
					func() error { return n.Delta(ctx, "text", "b") },
					func() error { return n.Progress(ctx, "work", "halfway", 50) },
					func() error { return n.Delta(ctx, "text", " c") },
					func() error { return n.Delta(ctx, "thinking", "x ") },
					func() error { time.Sleep(10 * time.Millisecond); return n.Delta(ctx, "text", " d") },
					func() error { return n.Delta(ctx, "text", " ef ") }, // reaches 6 bytes: flushed
					func() error { return n.Delta(ctx, "text", "k") },
				} {
					if err := step(); err != nil {
						return err
					}
				}
				return nil
			})
		})
		run := e.createRun(t, probeDefinition, `{}`)
		_, events := e.waitTerminal(t, run.ID)
		var got []string
		for _, env := range events {
			switch env.Event {
			case workflow.EventNodeOutputDelta:
				var d struct{ Channel, Delta string }
				json.Unmarshal(env.Data, &d)
				got = append(got, d.Channel+":"+d.Delta)
			case workflow.EventNodeProgress, workflow.EventNodeCompleted:
				got = append(got, string(env.Event))
			}
		}
		want := []string{"text:a ", "node.progress", "text:b c d ef ", "thinking:x ", "text:k", "node.completed"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("stored %q, want %q", got, want)
		}
	})
}

// DeltaWindow is clamped to 30–100 ms: a delta every millisecond for
// 600 ms is stored as about 600/30 events with a 5 ms window and about
// 600/100 with a 1 s window.
func TestDeltaWindowClamped(t *testing.T) {
	for _, tc := range []struct {
		window   time.Duration
		min, max int
	}{
		{5 * time.Millisecond, 19, 21},
		{time.Second, 6, 7},
		{0, 12, 13}, // the 50 ms default
	} {
		t.Run(tc.window.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.start(t, func(c *engine.Config) {
					c.DeltaWindow = tc.window
					c.Registry = probeRegistry(t, func(ctx context.Context, n *engine.NodeRun) error {
						for range 600 {
							if err := n.Delta(ctx, "text", ". "); err != nil {
								return err
							}
							time.Sleep(time.Millisecond)
						}
						return nil
					})
				})
				run := e.createRun(t, probeDefinition, `{}`)
				_, events := e.waitTerminal(t, run.ID)
				if n := len(deltas(t, events)); n < tc.min || n > tc.max {
					t.Errorf("%d delta events, want %d to %d", n, tc.min, tc.max)
				}
			})
		})
	}
}

// BenchmarkDeltaCoalescing streams 10,000 one-token deltas at 2,000
// tokens/s through the engine into a memory store, in real time, and
// reports the delta events stored per second of streaming.
func BenchmarkDeltaCoalescing(b *testing.B) {
	tokens := streamScript(10_000)
	def := streamDefinition(tokens, 2000)
	var stored int
	var streaming time.Duration
	for b.Loop() {
		e := newEnv(b)
		eng, err := engine.New(engine.Config{Store: e.store, Log: e.log, PollInterval: 10 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		eng.Start(context.Background())
		run := e.createRun(b, def, `{}`)
		start := time.Now()
		for {
			r, err := e.store.GetRun(context.Background(), run.ID, runstream.AnyOwner)
			if err != nil {
				b.Fatal(err)
			}
			if r.Status.Terminal() {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		streaming += time.Since(start)
		eng.Stop(context.Background())
		stored += len(deltas(b, allEvents(b, e, run.ID)))
	}
	b.ReportMetric(float64(stored)/streaming.Seconds(), "delta-events/s")
	b.ReportMetric(float64(stored)/float64(b.N), "delta-events/run")
}
