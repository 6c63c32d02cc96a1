// Package runstream holds what every part of runstream shares: the
// application error type with its stable codes, and the table from code to
// retryability. It imports only the standard library, and not net/http: the
// HTTP status of each code is the HTTP layer's (httpapi).
//
// The codes, and httpapi's table of their statuses, are generated from
// contracts/errors.json (go generate); a test fails when a generated file is
// stale. Domain packages live beside this one: runevents (thread run
// events) and workflow (workflow runs and their events); adapters are one
// package per dependency (sqlite, postgres, …).
package runstream

//go:generate go run ./internal/contractgen
