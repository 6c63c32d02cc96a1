// Package workflows holds the example workflow definitions (the YAML files
// of this directory, described in README.md) and the end-to-end tests that
// run each of them over the public HTTP API.
package workflows
