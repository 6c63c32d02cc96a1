package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// chain is first → slow → last; slow waits 10 s with progress every 5 s.
func chain(slowRetry string) string {
	return `{"name":"chain","nodes":[
		{"id":"first","type":"delay","config":{"ms":10,"progressEveryMs":10}},
		{"id":"slow","type":"delay","needs":["first"],` + slowRetry + `"config":{"ms":10000,"progressEveryMs":5000}},
		{"id":"last","type":"transform","needs":["slow"],"config":{"expression":"nodes.slow.output.waitedMs"}}],
		"output":"last"}`
}

var chainStart = []string{
	"run.created", "run.queued", "run.started",
	"node.queued:first", "node.started:first", "node.progress:first", "node.progress:first", "node.completed:first",
	"node.queued:slow", "node.started:slow", "node.progress:slow",
}

// A run whose engine dies mid-node is taken over by another engine once
// the lease expires (the second engine's clock is past it): the completed
// node is not run again, the interrupted attempt fails with
// WORKFLOW_WORKER_LOST, and the node is retried when its policy allows,
// else the run fails.
func TestTakeover(t *testing.T) {
	tests := []struct {
		name  string
		retry string
		// kill stops engine a without a graceful release.
		kill func(cancel context.CancelFunc, a *engine.Engine) error
		tail []string
	}{
		{
			name:  "Retried",
			retry: `"retry":{"maxAttempts":2,"backoffMs":100},`,
			kill:  func(cancel context.CancelFunc, a *engine.Engine) error { cancel(); return a.Stop(context.Background()) },
			tail: []string{
				"node.failed:slow",
				"node.started:slow", "node.progress:slow", "node.progress:slow", "node.progress:slow", "node.completed:slow",
				"node.queued:last", "node.started:last", "node.completed:last",
				"run.completed",
			},
		},
		{
			name: "WorkerLost",
			kill: func(cancel context.CancelFunc, a *engine.Engine) error { cancel(); return a.Stop(context.Background()) },
			tail: []string{"node.failed:slow", "run.failed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				ctxA, killA := context.WithCancel(context.Background())
				defer killA()
				a, err := engine.New(engine.Config{Store: e.store, Log: e.log, WorkerID: "a", LeaseDuration: 3 * time.Second, PollInterval: 20 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				a.Start(ctxA)
				run := e.createRun(t, chain(tc.retry), `{}`)
				e.wait(t, run.ID, "slow's first progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
					return slices.Contains(enginetest.Sequence(envs), "node.progress:slow")
				})
				if err := tc.kill(killA, a); err != nil {
					t.Fatalf("stopping a: %v", err)
				}
				stored, _ := e.store.GetRun(t.Context(), run.ID, runstream.AnyOwner)
				if stored.Status != workflow.StatusRunning || !strings.HasPrefix(stored.LeaseOwner, "a/") {
					t.Fatalf("after a died: run %s leased to %q, want running and still leased to a", stored.Status, stored.LeaseOwner)
				}
				// b's clock is past a's lease.
				var retries retryCounter
				e.start(t, func(c *engine.Config) {
					c.WorkerID = "b"
					c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
					c.Observer = &retries
				})
				got, events := e.waitTerminal(t, run.ID)
				if n, want := retries.of("delay"), len(enginetest.Attempts(t, events, "slow"))-1; n != want {
					t.Errorf("b counted %d retries of slow, want %d (the lost attempt, when retried)", n, want)
				}
				enginetest.CheckSequence(t, events, append(slices.Clone(chainStart), tc.tail...)...)
				if n := len(enginetest.Attempts(t, events, "first")); n != 1 {
					t.Errorf("first ran %d times", n)
				}
				var lostErr failedData
				enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 0, &lostErr)
				willRetry := tc.tail[len(tc.tail)-1] == "run.completed"
				if lostErr.Error.Code != runstream.CodeWorkflowWorkerLost || !lostErr.Error.Retryable || lostErr.Attempt != 1 || lostErr.WillRetry != willRetry {
					t.Errorf("node.failed of slow: %+v", lostErr)
				}
				if !willRetry {
					var failed failedData
					enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
					if failed.Error.Code != runstream.CodeWorkflowWorkerLost || !failed.Error.Retryable || failed.Failed == nil || *failed.Failed != "slow" {
						t.Errorf("run.failed: %+v", failed)
					}
					return
				}
				if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2}) {
					t.Errorf("slow attempts %v, want [1 2]", a)
				}
				if got.Status != workflow.StatusCompleted || string(got.Output) != "10000" {
					t.Errorf("run %s with output %s", got.Status, got.Output)
				}
			})
		})
	}
}

// A graceful stop lets the running node finish, starts nothing more and
// releases the run, which another engine continues at once: no node runs
// twice and nothing is reported lost.
func TestGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		a, err := engine.New(engine.Config{Store: e.store, Log: e.log, WorkerID: "a", PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		a.Start(context.Background())
		run := e.createRun(t, chain(""), `{}`)
		e.wait(t, run.ID, "slow's first progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.progress:slow")
		})
		if err := a.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		stored, events := e.wait(t, run.ID, "released", func(workflow.Run, []workflow.Envelope) bool { return true })
		if stored.Status != workflow.StatusRunning || stored.LeaseOwner != "" {
			t.Errorf("after a graceful stop: run %s leased to %q, want running and released", stored.Status, stored.LeaseOwner)
		}
		if seq := enginetest.Sequence(events); seq[len(seq)-1] != "node.completed:slow" {
			t.Errorf("a stopped without finishing slow:\n%s", strings.Join(seq, "\n"))
		}
		e.start(t, func(c *engine.Config) { c.WorkerID = "b" })
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events, append(slices.Clone(chainStart),
			"node.progress:slow", "node.progress:slow", "node.completed:slow",
			"node.queued:last", "node.started:last", "node.completed:last", "run.completed")...)
		if got.Status != workflow.StatusCompleted {
			t.Errorf("run %s", got.Status)
		}
	})
}

// An engine runs at most Workers runs at once.
func TestWorkersBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, func(c *engine.Config) { c.Workers = 2 })
		var runs []workflow.Run
		for range 4 {
			runs = append(runs, e.createRun(t, `{"name":"w","nodes":[{"id":"w","type":"delay","config":{"ms":1000}}]}`, `{}`))
		}
		var starts []time.Time
		for _, r := range runs {
			_, events := e.waitTerminal(t, r.ID)
			starts = append(starts, enginetest.Data(t, events, workflow.EventRunStarted, "", 0, &struct{}{}).Timestamp)
		}
		slices.SortFunc(starts, time.Time.Compare)
		if starts[1].Sub(starts[0]) >= time.Second || starts[2].Sub(starts[0]) < time.Second {
			t.Errorf("run.started times %v: want two at once, then two a second later", starts)
		}
	})
}

// MaxRunsPerOwner: with 4 workers and a cap of 2, of alice's four runs
// and bob's run queued after them, two of alice's and bob's start at once
// (bob's run outranks alice's once she executes one); alice's two others
// wait, a worker idle, until her first two end a second later. (Runs
// created in one instant of the bubble's clock are ordered by id, which
// need not be their creation order: the test counts alice's runs.)
func TestMaxRunsPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		def := `{"name":"w","nodes":[{"id":"w","type":"delay","config":{"ms":1000}}]}`
		var runs []workflow.Run
		for range 4 {
			runs = append(runs, e.createRunOf(t, "alice", def, `{}`))
		}
		runs = append(runs, e.createRunOf(t, "bob", def, `{}`))
		e.start(t, func(c *engine.Config) { c.Workers = 4; c.MaxRunsPerOwner = 2 })
		var starts []time.Time
		for _, r := range runs {
			_, events := e.waitTerminal(t, r.ID)
			starts = append(starts, enginetest.Data(t, events, workflow.EventRunStarted, "", 0, &struct{}{}).Timestamp)
		}
		first := slices.MinFunc(starts, time.Time.Compare)
		late := map[string]int{} // owner → runs started a second later
		for i, r := range runs {
			if starts[i].Sub(first) >= time.Second {
				late[r.OwnerID]++
			}
		}
		if late["alice"] != 2 || late["bob"] != 0 {
			t.Errorf("runs started a second after the first: %d of alice's, %d of bob's; want 2 and 0 (starts %v)", late["alice"], late["bob"], starts)
		}
	})
}

// A negative MaxRunsPerOwner is refused.
func TestMaxRunsPerOwnerNegative(t *testing.T) {
	e := newEnv(t)
	if _, err := engine.New(engine.Config{Store: e.store, Log: e.log, MaxRunsPerOwner: -1}); err == nil {
		t.Error("New with MaxRunsPerOwner -1 succeeded")
	}
}

// A run longer than the lease is not taken over by another engine: its
// lease is renewed while it runs.
func TestLeaseRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, func(c *engine.Config) { c.WorkerID = "a" })
		run := e.createRun(t, chain(`"retry":{"maxAttempts":3},`), `{}`)
		e.wait(t, run.ID, "slow started", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.started:slow")
		})
		e.start(t, func(c *engine.Config) { c.WorkerID = "b" })
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events, append(slices.Clone(chainStart),
			"node.progress:slow", "node.progress:slow", "node.completed:slow",
			"node.queued:last", "node.started:last", "node.completed:last", "run.completed")...)
		if got.Status != workflow.StatusCompleted {
			t.Errorf("run %s", got.Status)
		}
	})
}

// An engine whose lease was taken (it looked expired to another engine)
// writes nothing more for the run: its appends are fenced by the lease
// even before it notices, and it lets the run go; the other engine
// continues it.
func TestLeaseLostStopsWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		// a checks its lease every second; its node reports progress every
		// 100 ms, so it tries to write after losing the lease.
		a := e.start(t, func(c *engine.Config) { c.WorkerID = "a"; c.PollInterval = time.Hour })
		run := e.createRun(t, `{"name":"chatty","nodes":[
			{"id":"slow","type":"delay","retry":{"maxAttempts":2},"config":{"ms":2000,"progressEveryMs":100}}],"output":"slow"}`, `{}`)
		a.Notify(run.ID) // a polls hourly
		e.wait(t, run.ID, "slow's first progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.progress:slow")
		})
		e.start(t, func(c *engine.Config) {
			c.WorkerID = "b"
			c.Clock = func() time.Time { return time.Now().Add(time.Hour) }
		})
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusCompleted {
			t.Fatalf("run %s", got.Status)
		}
		if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2}) {
			t.Fatalf("attempts %v, want [1 2]", a)
		}
		lost := enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 0, &struct{}{})
		second := enginetest.Data(t, events, workflow.EventNodeStarted, "slow", 1, &struct{}{})
		for _, env := range events[lost.Seq:] {
			if env.NodeID == "slow" && env.NodeRunID != second.NodeRunID {
				t.Errorf("seq %d: %s of the lost attempt after the takeover", env.Seq, env.Event)
			}
		}
		if n := a.Running(); n != 0 {
			t.Errorf("a still runs %d runs", n)
		}
	})
}

// flakyRenewals fails every lease renewal until failUntil, as a store that
// is briefly unreachable does.
type flakyRenewals struct {
	*memory.WorkflowStore
	failUntil time.Time
}

func (s *flakyRenewals) RenewLease(ctx context.Context, runID, owner string, until time.Time) error {
	if time.Now().Before(s.failUntil) {
		return runstream.Errorf(runstream.CodeUnavailable, "store unreachable")
	}
	return s.WorkflowStore.RenewLease(ctx, runID, owner, until)
}

// TestOwnReclaimIsFenced: when an engine cannot renew its lease, the lease
// expires and the same engine claims the run again. The new claim has an
// owner of its own, so the first runner, which still runs its node, is
// fenced off: no event of the interrupted attempt lands after its
// node.failed, and the node's retry completes the run.
func TestOwnReclaimIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		flaky := &flakyRenewals{WorkflowStore: e.store, failUntil: time.Now().Add(3500 * time.Millisecond)}
		e.start(t, func(c *engine.Config) { c.Store = flaky; c.WorkerID = "a" })
		run := e.createRun(t, chain(`"retry":{"maxAttempts":3,"backoffMs":100},`), `{}`)
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusCompleted {
			t.Fatalf("run %s:\n%s", got.Status, strings.Join(enginetest.Sequence(events), "\n"))
		}
		seq := enginetest.Sequence(events)
		failedAt := slices.Index(seq, "node.failed:slow")
		if failedAt < 0 {
			t.Fatalf("the interrupted attempt was not failed:\n%s", strings.Join(seq, "\n"))
		}
		if n := strings.Count(strings.Join(seq, "\n"), "node.completed:slow"); n != 1 {
			t.Errorf("slow completed %d times:\n%s", n, strings.Join(seq, "\n"))
		}
		var completed struct {
			Attempt int `json:"attempt"`
		}
		enginetest.Data(t, events, workflow.EventNodeCompleted, "slow", 0, &completed)
		if completed.Attempt != 2 {
			t.Errorf("slow completed by attempt %d, want the retry, 2", completed.Attempt)
		}
	})
}

// partitioned is a store that an engine cannot reach for claims, lease
// renewals and reads of a run from cut until heal, as in a network
// partition: the calls fail at once or, when hang is set, only when their
// context ends or the partition heals. Appends go through the env's log,
// not this store: nothing on the engine's write path fails.
type partitioned struct {
	*memory.WorkflowStore
	hang   bool
	cutOff atomic.Bool
	healed chan struct{}
}

func newPartitioned(s *memory.WorkflowStore, hang bool) *partitioned {
	return &partitioned{WorkflowStore: s, hang: hang, healed: make(chan struct{})}
}

func (s *partitioned) cut()  { s.cutOff.Store(true) }
func (s *partitioned) heal() { s.cutOff.Store(false); close(s.healed) }

func (s *partitioned) unreachable(ctx context.Context) error {
	if !s.cutOff.Load() {
		return nil
	}
	if s.hang {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.healed:
		}
	}
	return runstream.Errorf(runstream.CodeUnavailable, "store unreachable")
}

func (s *partitioned) Claim(ctx context.Context, owner string, now, until time.Time, maxPerOwner int) (workflow.Run, bool, error) {
	if err := s.unreachable(ctx); err != nil {
		return workflow.Run{}, false, err
	}
	return s.WorkflowStore.Claim(ctx, owner, now, until, maxPerOwner)
}

func (s *partitioned) RenewLease(ctx context.Context, runID, owner string, until time.Time) error {
	if err := s.unreachable(ctx); err != nil {
		return err
	}
	return s.WorkflowStore.RenewLease(ctx, runID, owner, until)
}

func (s *partitioned) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	if err := s.unreachable(ctx); err != nil {
		return workflow.Run{}, err
	}
	return s.WorkflowStore.GetRun(ctx, id, owner)
}

// logBuffer collects an engine's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An engine that cannot renew its lease (the store fails or does not
// answer) stops its run before the lease expires: it cancels the node's
// context, writes nothing more and logs it. When another engine takes the
// run over after the lease expired, the node's attempts never run at the
// same time (as side effects done twice would), and the run completes with
// the second attempt.
func TestLeaseExpiryStopsRun(t *testing.T) {
	for _, hang := range []bool{false, true} {
		name := "StoreFails"
		if hang {
			name = "StoreHangs"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				// running counts the attempts of p under way, maxRunning the
				// most at once.
				var mu sync.Mutex
				running, maxRunning := 0, 0
				attempts := func() (now, most int) {
					mu.Lock()
					defer mu.Unlock()
					return running, maxRunning
				}
				reg := probeRegistry(t, func(ctx context.Context, n *engine.NodeRun) error {
					mu.Lock()
					running++
					maxRunning = max(maxRunning, running)
					mu.Unlock()
					defer func() {
						mu.Lock()
						running--
						mu.Unlock()
					}()
					select { // a side effect that writes no event
					case <-time.After(20 * time.Second):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				pa := newPartitioned(e.store, hang)
				var logs logBuffer
				a := e.start(t, func(c *engine.Config) {
					c.Store, c.Registry, c.WorkerID = pa, reg, "a"
					c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				})
				run := e.createRun(t, `{"name":"x","nodes":[{"id":"p","type":"probe","retry":{"maxAttempts":2}}]}`, `{}`)
				a.Notify(run.ID)
				e.wait(t, run.ID, "p started", func(_ workflow.Run, envs []workflow.Envelope) bool {
					return slices.Contains(enginetest.Sequence(envs), "node.started:p")
				})
				pa.cut()
				time.Sleep(4 * time.Second) // a's lease (3 s) has expired
				if now, _ := attempts(); now != 0 {
					t.Errorf("a still runs p after its lease expired")
				}
				if n := a.Running(); n != 0 {
					t.Errorf("a still runs %d runs after their lease expired", n)
				}
				if !strings.Contains(logs.String(), "lease expired") {
					t.Errorf("a did not log that the lease expired; its log:\n%s", logs.String())
				}
				e.start(t, func(c *engine.Config) { c.Registry, c.WorkerID = reg, "b" })
				e.wait(t, run.ID, "p's second attempt", func(_ workflow.Run, envs []workflow.Envelope) bool {
					return slices.Equal(enginetest.Attempts(t, envs, "p"), []int{1, 2})
				})
				pa.heal()
				got, events := e.waitTerminal(t, run.ID)
				if _, most := attempts(); most != 1 {
					t.Errorf("%d attempts of p ran at once", most)
				}
				enginetest.CheckSequence(t, events,
					"run.created", "run.queued", "run.started", "node.queued:p", "node.started:p",
					"node.failed:p", "node.started:p", "node.completed:p", "run.completed")
				var lostErr failedData
				enginetest.Data(t, events, workflow.EventNodeFailed, "p", 0, &lostErr)
				if lostErr.Error.Code != runstream.CodeWorkflowWorkerLost || !lostErr.WillRetry {
					t.Errorf("node.failed of p's first attempt: %+v", lostErr)
				}
				if got.Status != workflow.StatusCompleted {
					t.Errorf("run %s", got.Status)
				}
			})
		})
	}
}

// A claim the store does not answer is abandoned after a sixth of the
// lease, so it cannot keep Stop from draining the engine.
func TestStopWhileAClaimHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		pa := newPartitioned(e.store, true)
		pa.cut()
		a := e.start(t, func(c *engine.Config) { c.Store = pa })
		synctest.Wait() // the engine's first claim hangs
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("Stop while a claim hangs: %v", err)
		}
		pa.heal()
	})
}

// A run taken over counts the node outputs it loads against its bound:
// the engine that continues it refuses the output that would take the
// run past MaxRunOutputBytes, its predecessor's included.
func TestRunOutputBoundAfterTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctxA, killA := context.WithCancel(context.Background())
		defer killA()
		a, err := engine.New(engine.Config{Store: e.store, Log: e.log, WorkerID: "a", LeaseDuration: 3 * time.Second, PollInterval: 20 * time.Millisecond,
			MaxRunOutputBytes: 1500})
		if err != nil {
			t.Fatal(err)
		}
		a.Start(ctxA)
		run := e.createRun(t, `{"name":"big","nodes":[
			{"id":"first","type":"transform","config":{"expression":"repeat(\"x\", 900)"}},
			{"id":"slow","type":"delay","needs":["first"],"retry":{"maxAttempts":2},"config":{"ms":10000,"progressEveryMs":5000}},
			{"id":"last","type":"transform","needs":["slow"],"config":{"expression":"repeat(\"y\", 900)"}}]}`, `{}`)
		e.wait(t, run.ID, "slow's first progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.progress:slow")
		})
		killA()
		if err := a.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.start(t, func(c *engine.Config) {
			c.WorkerID, c.MaxRunOutputBytes = "b", 1500
			c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
		})
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusFailed {
			t.Fatalf("run %s, want failed: first's loaded output and last's are past the bound", got.Status)
		}
		if code, limit, _ := nodeFailure(t, events, "last"); code != runstream.CodeWorkflowNodeLimitExceeded || limit != engine.LimitRunOutputBytes {
			t.Errorf("node.failed of last: %s %v, want %s %s", code, limit, runstream.CodeWorkflowNodeLimitExceeded, engine.LimitRunOutputBytes)
		}
	})
}

// retryCounter is an engine.Observer that counts NodeRetried by node type.
type retryCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *retryCounter) Claimed(string)                              {}
func (c *retryCounter) LeaseRenewed(error)                          {}
func (c *retryCounter) NodeAttempted(string, string, time.Duration) {}
func (c *retryCounter) NodeRetried(nodeType string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[nodeType]++
}

// of returns the retries counted of nodeType.
func (c *retryCounter) of(nodeType string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[nodeType]
}
