// Package workflow holds the domain of workflow runs: the protocol v1.0
// envelope, the closed set of 18 events, run states, and the interfaces the
// stores and the engine implement. It imports only the standard library.
package workflow
