// Package deerflowcompat is the DeerFlow compatibility suite (issue 15):
// its tests replay, over HTTP against a served thread API, the calls of
// DeerFlow's frontend (core/threads, core/tasks, core/workspace-changes,
// core/api/feedback.ts, core/api/api-client.ts) and the assertions of its
// router tests (test_thread_messages_page.py,
// test_thread_messages_feedback.py, test_thread_run_messages_pagination.py,
// test_workspace_changes.py, test_feedback.py,
// test_thread_id_route_contract.py), on memory, SQLite, JSONL and
// PostgreSQL stores. The expected bodies are written from the reference
// (deerflow_behavior.md §2) and DeerFlow's public sources; where runstream
// deliberately differs, the test says so and docs/DEERFLOW.md says why.
// The package has no code outside its tests.
package deerflowcompat
