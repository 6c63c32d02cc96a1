// Package deerflowimport copies a DeerFlow deployment's data — the run
// events of its JSONL store directory or SQL database, with the run rows
// and feedback of the database — into runstream's stores, keeping thread
// seqs, run ids, timestamps and owners, idempotently, and reporting every
// row it cannot take with its location.
//
// Rows go through eventlog.ThreadLog.ImportThread: checked against the
// contract and the catalogue, redacted, and stored with their own seqs in
// one transaction per thread (runevents.Importer). A thread is imported
// whole or not at all: one refused row leaves its thread out (reported),
// unless Options.SkipBadRows imports the rest. A thread already present
// with the same rows is skipped; with the first of them, it gets the rest
// (the source went on writing); with other rows it is a conflict, reported
// and left as it is. Run rows and feedback, redacted as the thread API
// redacts them, are written through runevents.RunStore (feedback through
// runevents.FeedbackImporter, keeping its id) with the same rule: absent →
// written, equal → skipped, different → conflict, except that a run row
// newer at the source (later updated_at) replaces runstream's.
//
// What is converted, and how (see docs/DEERFLOW.md, "Importing DeerFlow
// data"):
//
//   - the legacy event type ai_message is kept as written; reads treat it
//     as llm.ai.response, as DeerFlow does;
//   - SQL content is decoded as DeerFlow's SQL store decodes it on read
//     (JSON when metadata.content_is_json or content_is_dict is truthy, the
//     raw text otherwise, or when it does not decode), and those two marker
//     keys, artefacts of its text column, are dropped from the metadata;
//   - timestamps without an offset (SQLite's) are UTC, as DeerFlow reads
//     them; others keep their offset;
//   - a row without an owner (every JSONL row, SQL rows whose user_id is
//     NULL) gets the owner of its run row when a source has one, else
//     Options.DefaultOwner;
//   - run statuses failed and cancelled, of later DeerFlow versions, become
//     error and interrupted; run columns runstream's row has no field for
//     (error, first_human_message, last_ai_message, follow_up_to_run_id,
//     failure_category, failed_layer) are kept in its metadata under their
//     names.
package deerflowimport
