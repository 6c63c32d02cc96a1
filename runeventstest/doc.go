// Package runeventstest is the conformance suite of runevents.Store: one set of
// tests and benchmarks that every backend (memory, jsonl, sqlite, postgres)
// runs, so that they all behave as the runevents package doc decides.
//
// A backend wires it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		runeventstest.RunEventStore(t, runeventstest.Harness{
//			Open: func(t *testing.T) runevents.Store { return memory.NewRunEventStore() },
//		})
//	}
//
//	func BenchmarkConformance(b *testing.B) {
//		runeventstest.BenchmarkRunEventStore(b, runeventstest.BenchHarness{
//			Open: func(b *testing.B) runevents.Store { return memory.NewRunEventStore() },
//		})
//	}
//
// The suite runs its subtests in parallel, each on a store of its own, and
// assumes the default trace limit (runevents.DefaultMaxTraceContent).
package runeventstest
