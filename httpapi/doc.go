// Package httpapi serves runstream over HTTP: the operational endpoints
// (/healthz, /readyz, /metrics, /api/contracts, /api/openapi.json), the
// thread API and the workflow API. Every error answers with the unified body
//
//	{"code", "message", "retryable", "nodeId"?, "details"?, "requestId"}
//
// whose status comes from the one table in the runstream package. Internal
// errors are logged with their cause under the request id; the body carries
// only a generic message, so driver text, SQL and connection strings never
// reach a caller.
package httpapi
