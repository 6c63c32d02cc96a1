package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/workflow"
)

// stopWithin stops eng gracefully, giving it d.
func stopWithin(eng *engine.Engine, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return eng.Stop(ctx)
}

// startKillable starts an engine named worker over e whose runs can be
// abandoned at once, as when its process dies: kill does it.
func startKillable(t *testing.T, e *env, worker string, clock func() time.Time, edits ...func(*engine.Config)) (eng *engine.Engine, kill func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Store: e.store, Log: e.log, WorkerID: worker, LeaseDuration: 3 * time.Second, PollInterval: 20 * time.Millisecond, Clock: clock}
	for _, edit := range edits {
		edit(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); eng.Stop(context.Background()) })
	return eng, func() { cancel(); eng.Stop(context.Background()) }
}

// waitProgress waits until attempt of node slow of run reported progress.
func waitProgress(t *testing.T, e *env, runID string, attempt int) {
	t.Helper()
	e.wait(t, runID, "slow's progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
		seq := enginetest.Sequence(envs)
		return len(enginetest.Attempts(t, envs, "slow")) == attempt && seq[len(seq)-1] == "node.progress:slow"
	})
}

// checkInterrupted checks the i-th node.failed of slow: attempt, written
// by a graceful shutdown.
func checkInterrupted(t *testing.T, events []workflow.Envelope, i, attempt int) {
	t.Helper()
	var d failedData
	enginetest.Data(t, events, workflow.EventNodeFailed, "slow", i, &d)
	if d.Error.Code != runstream.CodeWorkflowWorkerLost || d.Error.Details.Reason != engine.ShutdownReason || !d.Error.Retryable || !d.WillRetry || d.Attempt != attempt || d.Error.NodeID != "slow" {
		t.Errorf("node.failed %d of slow: %+v; want attempt %d lost to a shutdown, retried", i, d, attempt)
	}
}

// A graceful stop that a node would outlast interrupts it before the
// stop's deadline: the attempt ends with node.failed (WORKER_LOST, reason
// shutdown, willRetry) and the lease is released, so that the instance
// that continues the run starts the node again at once, the interrupted
// attempt not counting against retry.maxAttempts.
func TestShutdownInterruptsLongNodes(t *testing.T) {
	t.Run("WithoutRetries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			var retries retryCounter
			a, _ := startKillable(t, e, "a", nil, func(c *engine.Config) { c.Observer = &retries })
			run := e.createRun(t, chain(""), `{}`)
			waitProgress(t, e, run.ID, 1)
			if err := stopWithin(a, time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if n := retries.of("delay"); n != 1 {
				t.Errorf("the stopped engine counted %d retries of slow, want 1", n)
			}
			stored, events := e.wait(t, run.ID, "released", func(workflow.Run, []workflow.Envelope) bool { return true })
			if stored.Status != workflow.StatusRunning || stored.LeaseOwner != "" {
				t.Fatalf("after the stop: run %s leased to %q, want running and released", stored.Status, stored.LeaseOwner)
			}
			enginetest.SameSequence(t, enginetest.Sequence(events), append(slices.Clone(chainStart), "node.failed:slow"))
			checkInterrupted(t, events, 0, 1)
			if elapsed := events[len(events)-1].Timestamp.Sub(events[len(events)-2].Timestamp); elapsed >= time.Second {
				t.Errorf("slow was interrupted %v after its last progress, past the stop's deadline", elapsed)
			}

			e.start(t, func(c *engine.Config) { c.WorkerID = "b" })
			got, events := e.waitTerminal(t, run.ID)
			if got.Status != workflow.StatusCompleted || string(got.Output) != "10000" {
				t.Errorf("run %s with output %s", got.Status, got.Output)
			}
			if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2}) {
				t.Errorf("slow attempts %v, want [1 2]", a)
			}
		})
	})
	t.Run("NoBackoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			a, _ := startKillable(t, e, "a", nil)
			run := e.createRun(t, chain(`"retry":{"maxAttempts":2,"backoffMs":30000},`), `{}`)
			waitProgress(t, e, run.ID, 1)
			if err := stopWithin(a, 2*time.Second); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			begin := time.Now()
			e.start(t, func(c *engine.Config) { c.WorkerID = "b" })
			waitProgress(t, e, run.ID, 2)
			events := e.events(t, run.ID)
			started := enginetest.Data(t, events, workflow.EventNodeStarted, "slow", 1, &struct{}{})
			if wait := started.Timestamp.Sub(begin); wait >= time.Second {
				t.Errorf("the interrupted node started again %v after b started, want at once (no backoff)", wait)
			}
		})
	})
	t.Run("EachShutdownIsSpare", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			run := e.createRun(t, chain(""), `{}`)
			for i, worker := range []string{"a", "b"} {
				eng, _ := startKillable(t, e, worker, nil)
				waitProgress(t, e, run.ID, i+1)
				if err := stopWithin(eng, time.Second); err != nil {
					t.Fatalf("Stop %s: %v", worker, err)
				}
			}
			e.start(t, func(c *engine.Config) { c.WorkerID = "c" })
			got, events := e.waitTerminal(t, run.ID)
			if got.Status != workflow.StatusCompleted {
				t.Errorf("run %s, want completed after two shutdowns", got.Status)
			}
			checkInterrupted(t, events, 0, 1)
			checkInterrupted(t, events, 1, 2)
			if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2, 3}) {
				t.Errorf("slow attempts %v, want [1 2 3]", a)
			}
		})
	})
	// A repeatable node's interrupted attempts are spare up to
	// MaxAttempts of them: the next interruption fails the node.
	t.Run("TooManyShutdowns", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			run := e.createRun(t, chain(""), `{}`)
			for i := range engine.MaxAttempts + 1 {
				eng, _ := startKillable(t, e, fmt.Sprintf("w%d", i), nil)
				waitProgress(t, e, run.ID, i+1)
				if err := stopWithin(eng, time.Second); err != nil {
					t.Fatalf("Stop %d: %v", i, err)
				}
			}
			got, events := e.waitTerminal(t, run.ID)
			if got.Status != workflow.StatusFailed {
				t.Fatalf("run %s after %d shutdowns, want failed", got.Status, engine.MaxAttempts+1)
			}
			var last failedData
			enginetest.Data(t, events, workflow.EventNodeFailed, "slow", engine.MaxAttempts, &last)
			if last.WillRetry || last.Attempt != engine.MaxAttempts+1 || last.Error.Details.Reason != engine.ShutdownReason {
				t.Errorf("the last interrupted attempt: %+v", last)
			}
		})
	})
	// A crashed attempt after an interrupted one counts: with one attempt
	// allowed the run fails, with two the node gets its second, after the
	// backoff of a first failure (the interrupted attempt not counted).
	for _, tc := range []struct {
		retry string
		want  workflow.RunStatus
	}{
		{``, workflow.StatusFailed},
		{`"retry":{"maxAttempts":2,"backoffMs":1000},`, workflow.StatusCompleted},
	} {
		t.Run("CrashAfterShutdown/"+string(tc.want), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				run := e.createRun(t, chain(tc.retry), `{}`)
				a, _ := startKillable(t, e, "a", nil)
				waitProgress(t, e, run.ID, 1)
				if err := stopWithin(a, time.Second); err != nil {
					t.Fatalf("Stop a: %v", err)
				}
				_, kill := startKillable(t, e, "b", nil)
				waitProgress(t, e, run.ID, 2)
				kill()
				// c's clock is past b's lease.
				e.start(t, func(c *engine.Config) {
					c.WorkerID = "c"
					c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
				})
				got, events := e.waitTerminal(t, run.ID)
				if got.Status != tc.want {
					t.Errorf("run %s, want %s", got.Status, tc.want)
				}
				checkInterrupted(t, events, 0, 1)
				var lost failedData
				failedAt := enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 1, &lost).Timestamp
				if lost.Error.Code != runstream.CodeWorkflowWorkerLost || lost.Error.Details.Reason != "" || lost.WillRetry != (tc.want == workflow.StatusCompleted) || lost.Attempt != 2 {
					t.Errorf("node.failed of the crashed attempt: %+v", lost)
				}
				if lost.WillRetry {
					startedAt := enginetest.Data(t, events, workflow.EventNodeStarted, "slow", 2, &struct{}{}).Timestamp
					if wait := startedAt.Sub(failedAt); wait < time.Second || wait >= 2*time.Second {
						t.Errorf("the third attempt started %v after the crash was reported, want the first backoff (1s)", wait)
					}
				}
			})
		})
	}
	// A failed attempt after an interrupted one is retried as the policy
	// says, the interrupted one not counted: neither in the attempts nor
	// in the backoff.
	t.Run("FailureAfterShutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			reg := registryWith(t, flaky(engine.AlwaysRepeatable))
			run := e.createRun(t, `{"name":"f","nodes":[{"id":"slow","type":"flaky","retry":{"maxAttempts":2,"backoffMs":1000}}],"output":"slow"}`, `{}`)
			interruptFirstAttempt(t, e, reg, run.ID)
			e.start(t, func(c *engine.Config) { c.WorkerID, c.Registry = "b", reg })
			got, events := e.waitTerminal(t, run.ID)
			if got.Status != workflow.StatusCompleted {
				t.Errorf("run %s, want completed at the third attempt:\n%v", got.Status, enginetest.Sequence(events))
			}
			checkInterrupted(t, events, 0, 1)
			var failed failedData
			failedAt := enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 1, &failed).Timestamp
			if failed.Error.Code != runstream.CodeWorkflowLLMProviderError || !failed.WillRetry || failed.Attempt != 2 {
				t.Errorf("node.failed of the second attempt: %+v", failed)
			}
			startedAt := enginetest.Data(t, events, workflow.EventNodeStarted, "slow", 2, &struct{}{}).Timestamp
			if wait := startedAt.Sub(failedAt); wait < time.Second || wait >= 2*time.Second {
				t.Errorf("the third attempt started %v after the second failed, want the first backoff (1s)", wait)
			}
		})
	})
	// A node that may act outside its run (no Repeatable: an http POST, a
	// custom type) runs again only when its policy allows: the
	// interrupted attempt counts, and without retries the run fails.
	for _, tc := range []struct {
		retry string
		want  workflow.RunStatus
	}{
		{``, workflow.StatusFailed},
		{`,"retry":{"maxAttempts":2}`, workflow.StatusCompleted},
	} {
		t.Run("NotRepeatable/"+string(tc.want), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				reg := registryWith(t, flaky(nil))
				run := e.createRun(t, `{"name":"f","nodes":[{"id":"slow","type":"flaky"`+tc.retry+`}],"output":"slow"}`, `{}`)
				interruptFirstAttempt(t, e, reg, run.ID)
				stored, events := e.wait(t, run.ID, "stopped", func(workflow.Run, []workflow.Envelope) bool { return true })
				var d failedData
				enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 0, &d)
				if d.Error.Code != runstream.CodeWorkflowWorkerLost || d.Error.Details.Reason != engine.ShutdownReason || d.WillRetry != (tc.want == workflow.StatusCompleted) {
					t.Errorf("node.failed of the interrupted attempt: %+v", d)
				}
				if tc.want == workflow.StatusFailed {
					var failed failedData
					enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
					if stored.Status != workflow.StatusFailed || failed.Error.Code != runstream.CodeWorkflowWorkerLost || failed.Failed == nil || *failed.Failed != "slow" {
						t.Errorf("run %s, run.failed %+v; want it failed by the shutdown", stored.Status, failed)
					}
					return
				}
				e.start(t, func(c *engine.Config) { c.WorkerID, c.Registry = "b", reg })
				got, events := e.waitTerminal(t, run.ID)
				if got.Status != tc.want {
					t.Errorf("run %s, want %s", got.Status, tc.want)
				}
				if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2}) {
					t.Errorf("slow attempts %v, want [1 2]", a)
				}
			})
		})
	}
}

// registryWith returns the built-in node types and types.
func registryWith(t *testing.T, types ...engine.NodeType) *engine.Registry {
	t.Helper()
	reg, err := engine.NewRegistry(append(engine.Builtins(), types...)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// interruptFirstAttempt runs an engine with reg until node slow of run
// started, then stops it gracefully within a second.
func interruptFirstAttempt(t *testing.T, e *env, reg *engine.Registry, runID string) {
	t.Helper()
	a := e.start(t, func(c *engine.Config) { c.WorkerID, c.Registry = "a", reg })
	e.wait(t, runID, "slow started", func(_ workflow.Run, envs []workflow.Envelope) bool {
		return slices.Contains(enginetest.Sequence(envs), "node.started:slow")
	})
	if err := stopWithin(a, time.Second); err != nil {
		t.Fatalf("Stop a: %v", err)
	}
}

// flaky returns a node type, repeatable as repeatable says, whose first
// attempt waits for its context, whose second fails with a retryable
// error, and whose later ones return true; for the second attempt of a
// node without retries, it returns true.
func flaky(repeatable func(json.RawMessage) bool) engine.NodeType {
	return engine.NodeType{Name: "flaky", Repeatable: repeatable, Compile: func(json.RawMessage) (engine.NodeFunc, error) {
		return func(ctx context.Context, n *engine.NodeRun) (json.RawMessage, error) {
			switch {
			case n.Attempt == 1:
				<-ctx.Done()
				return nil, ctx.Err()
			case n.Attempt == 2 && repeatable != nil:
				return nil, runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "the provider is busy")
			}
			return json.RawMessage(`true`), nil
		}, nil
	}}
}

// stubborn is a node type whose attempts sleep 2 s whatever their context
// says, and then return true.
var stubborn = engine.NodeType{Name: "stubborn", Compile: func(json.RawMessage) (engine.NodeFunc, error) {
	return func(context.Context, *engine.NodeRun) (json.RawMessage, error) {
		time.Sleep(2 * time.Second)
		return json.RawMessage(`true`), nil
	}, nil
}}

// A node that does not return when interrupted is abandoned at the stop's
// deadline, as if the process had died: the lease is kept, and the
// instance that takes the run over once it expires counts the attempt as
// lost (WORKER_LOST without a reason), against retry.maxAttempts.
func TestShutdownAbandonsNodesThatIgnoreTheirContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		reg := registryWith(t, stubborn)
		withStubborn := func(worker string, clock func() time.Time) func(*engine.Config) {
			return func(c *engine.Config) { c.WorkerID, c.Registry, c.Clock = worker, reg, clock }
		}
		a := e.start(t, withStubborn("a", nil))
		run := e.createRun(t, `{"name":"s","nodes":[{"id":"slow","type":"stubborn","retry":{"maxAttempts":2}}],"output":"slow"}`, `{}`)
		e.wait(t, run.ID, "slow started", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.started:slow")
		})
		if err := stopWithin(a, time.Second); err != context.DeadlineExceeded {
			t.Fatalf("Stop: %v, want the deadline's error", err)
		}
		stored, _ := e.store.GetRun(t.Context(), run.ID, runstream.AnyOwner)
		if stored.Status != workflow.StatusRunning || stored.LeaseOwner == "" {
			t.Fatalf("after the stop: run %s leased to %q, want running and still leased", stored.Status, stored.LeaseOwner)
		}
		e.start(t, withStubborn("b", func() time.Time { return time.Now().Add(4 * time.Second) }))
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusCompleted {
			t.Errorf("run %s", got.Status)
		}
		var lost failedData
		enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 0, &lost)
		if lost.Error.Code != runstream.CodeWorkflowWorkerLost || lost.Error.Details.Reason != "" || !lost.WillRetry || lost.Attempt != 1 {
			t.Errorf("node.failed of the abandoned attempt: %+v", lost)
		}
	})
}
