// Package engine executes workflow runs: it compiles definitions, claims
// runs from the store's queue and runs their nodes, writing every event of
// the protocol through the event log.
//
// A tour:
//
//   - definition.go: the Definition (JSON, or YAML converted to JSON) and
//     the rules it is checked against; registry.go compiles it into a
//     Plan with the registered NodeTypes (llm, human_input, transform,
//     delay and http here; sql in engine/sqlnode, the openai llm provider
//     in engine/openaillm, engine/nodeset assembles them all). Built-in
//     tools (tools.go: http_get here, sql_query in sqlnode) are what llm
//     providers let a model call.
//   - artifacts.go: a node that declares an artifact stores its output's
//     bytes in ArtifactBlobs (files or memory) and its metadata with
//     artifact.created, atomically with node.completed.
//   - engine.go: Engine claims runs (workflow.Queue) up to Workers at a
//     time, fairly among owners (and, when MaxRunsPerOwner is set, at most
//     that many of one owner across the engines sharing the store),
//     renews their leases, and
//     stops gracefully (Stop) or abandons them as a crash would
//     (cancelling Start's context).
//   - runner.go: one run: run.started, then the DAG, independent nodes in
//     parallel, each attempt node.queued → node.started → … →
//     node.completed (its full output stored atomically with it) or
//     node.failed with retries and backoff, per-attempt timeouts, and the
//     terminal event; state.go rebuilds a run from its events when it is
//     taken over, resumed or continued.
//   - emitter.go: the run's only writer. Appends are fenced by the lease
//     (AppendParams.LeaseOwner); node.output.delta is coalesced per (node
//     attempt, channel) for DeltaWindow or DeltaMaxBytes and flushed before
//     any other event of the run. The events that set the run's status
//     (run.awaiting_input, the terminal ones) are appended only while the
//     status is the one they were chosen for (AppendParams.IfStatus), so
//     that a run.cancel_requested the engine has not seen yet is never
//     overwritten: the run ends cancelled instead.
//   - noderun.go: what a node sees (NodeRun): its input, upstream outputs
//     and the methods that write its events, AwaitInput included.
//
// Lifecycle of a run as this engine writes it:
//
//	run.created, run.queued          (the API, when the run is created)
//	run.started                      (first claim)
//	node.queued → node.started{attempt} → node.progress / node.output.delta /
//	  node.tool.started / node.tool.finished → node.completed | node.failed{willRetry}
//	run.awaiting_input → (resume: run.resumed, by the API) → node.completed
//	run.cancel_requested (the API) → run.cancelled
//	run.completed | run.failed | run.cancelled
//
// A run whose instance died (its lease expired) is claimed by another
// instance: nodes with stored outputs are not run again, and the
// interrupted attempt gets node.failed with WORKFLOW_WORKER_LOST, then a
// next attempt when the node's retry policy allows, else run.failed. An
// instance that is alive but cannot renew a lease stops that run itself
// before the lease expires, so that two instances do not run a node at
// the same time.
package engine
