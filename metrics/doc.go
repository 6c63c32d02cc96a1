// Package metrics defines the Prometheus metrics of runstream's data
// flow — append, live delivery, the workflow engine and the store — and
// implements the observers that package eventlog, live, ssestream and
// engine take, so that none of them imports Prometheus.
//
// cmd/runstream creates one Metrics on the registry the HTTP API serves
// at /metrics and hands its observers to the packages it wires. Every
// label value is a constant of runstream (a kind of stream, a store, an
// operation, an outcome, a contract error code, a redaction rule, a
// registered node type), never an id or text of a request.
// docs/OPERATIONS.md lists the metrics and the alerts they support.
package metrics
