// Package httpapi serves runstream over HTTP: the operational endpoints
// (/healthz, /readyz, /metrics, /api/contracts, /api/openapi.json), the
// thread API and the workflow API, and the SSE streams.
//
// It is a translator: each handler decodes its request, calls the workflow
// service (workflowsvc) or the thread service (threadsvc), and encodes the
// answer. The rules of what a caller may do live in the services; the
// server owns routing, authentication, the request limits, access logs,
// metrics and the streams' connections. Every error answers with the
// unified body
//
//	{"code", "message", "retryable", "nodeId"?, "details"?, "requestId"}
//
// whose status comes from the one table of this package (ErrorStatus,
// generated from contracts/errors.json); on the thread API it also carries
// FastAPI's detail, for DeerFlow's clients (internal/fastapi). The run row
// and feedback routes are package threadruns', mounted here. Internal
// errors are logged with their cause under the request id; the body carries
// only a generic message, so driver text, SQL and connection strings never
// reach a caller.
package httpapi
