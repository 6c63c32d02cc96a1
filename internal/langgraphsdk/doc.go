// Package langgraphsdk holds the black-box tests of runstream's
// LangGraph-compatible run stream with the real LangGraph JS SDK
// (@langchain/langgraph-sdk 1.6.0, DeerFlow's version): a Go producer
// (package chunkpush) pushes scripted chunks shaped like DeerFlow's replay
// fixture to `runstream serve` processes, and the Node harness in harness/
// joins the run with client.runs.joinStream through a TCP proxy that cuts
// connections, across a server restart and across two instances sharing a
// PostgreSQL store. The tests skip when node or npm is missing.
package langgraphsdk
