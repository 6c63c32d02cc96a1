// Package threadruns serves the run rows of threads and their feedback
// over HTTP, as DeerFlow's runs and feedback routers answer them: run rows
// (PUT, GET, list), feedback (PUT, POST, list, stats, DELETE by run and by
// id, and GET /api/runs/{run_id}/feedback), and the routes of an executing
// run (cancel, join, stream), which answer CONFLICT for the runs
// runstream only stores. httpapi mounts its Routes; the thread service
// (threadsvc) decides who sees what.
package threadruns
