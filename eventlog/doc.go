// Package eventlog is the append choke point of runstream: every event,
// from the workflow engine or from a producer over HTTP, passes through it
// on its way to a store.
//
// For each batch it validates every event against the contract, redacts
// secrets, appends the batch to the store in one transaction, and only after
// the commit publishes the stored events to the live hub. An event that
// failed validation or failed to commit is never stored in part and never
// published.
//
// WorkflowLog serves workflow runs, publishing under the run's stream key;
// ThreadLog serves thread run events, publishing each record under the
// thread's key and the keys of the filtered views that show it. The keys
// and frames are package streams'.
package eventlog
