// Package subagent turns the task chunks a lead agent's task tool streams
// about its subagents into subagent.start, subagent.step and subagent.end
// events (reference §4), and writes them in batches.
//
// A chunk is a JSON object with a "type" starting with "task_" and a
// non-empty string "task_id":
//
//	task_started   {task_id, description, model_name}       → subagent.start {task_id, description}
//	task_running   {task_id, message, message_index, …}     → subagent.step (the step payload)
//	task_completed {task_id, result, usage, model_name}      → subagent.end status completed
//	task_failed | task_cancelled | task_timed_out {task_id, error, usage, model_name}
//	                                                          → subagent.end status failed | cancelled | timed_out
//
// Map validates every rule of the reference: description null or a string;
// message_index an integer >= 0 (not a boolean, not 1.0); message an object;
// usage kept only when its three counts are non-negative integers; result,
// error, step text and serialized tool-call arguments cut to 8192 characters
// (runes) with a *_truncated flag. A chunk that breaks a rule is reported
// with an error wrapping ErrMalformed and never persisted; a chunk that is
// not a task chunk at all (another type, or an unknown task_ type) is
// ignored.
//
// A Writer maps chunks and appends them in batches: at 25 pending events or
// when a subagent.end arrives, and on Flush. A failed write keeps the batch
// at the front of the queue for the next flush; Add never reports it, so a
// store failure cannot break the agent's stream loop. Flush reports it.
package subagent
