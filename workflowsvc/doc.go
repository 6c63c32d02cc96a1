// Package workflowsvc is the workflow service: what a caller may do with
// workflows and their runs, whatever transport carries the request.
//
// It publishes definitions (compiled before they are stored), starts runs
// (input checked against the definition's inputSchema, run.created and
// run.queued written with the run), cancels runs (a conditional append
// retried while an engine moves the run along), resumes runs paused at a
// human_input node (the resume token and the submitted values checked
// before the token is consumed), lists and reads them, and opens a run's
// event stream for a follower.
//
// Every run event it writes goes through the append choke point
// (eventlog.WorkflowLog); the store it holds (Store) has no method that
// writes events, so the types keep it that way. The HTTP API (httpapi) and
// `runstream run` call it; so can tests, without HTTP.
package workflowsvc
