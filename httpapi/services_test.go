package httpapi

import (
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// readOnlyWorkflows is the workflow service of a server that follows the
// runs of store on hub and starts, cancels and resumes none.
func readOnlyWorkflows(store workflow.Store, hub *live.Hub) *workflowsvc.Service {
	return workflowsvc.New(store, nil, hub, workflowsvc.Config{})
}

// envConfig is what a test server is made of: the server's Config and the
// dependencies of its services, each of which a test may replace.
type envConfig struct {
	Config
	Hub *live.Hub
	// Workflows and Log make the workflow service; Log nil: read-only.
	Workflows workflow.Store
	Log       *eventlog.WorkflowLog
	// RunEvents, Threads, Runs and ThreadLog make the thread
	// service; Threads defaults to RunEvents. With neither RunEvents nor
	// Runs the server has no thread service.
	RunEvents runevents.Store
	Threads   runevents.ThreadReader
	Runs      runevents.RunStore
	ThreadLog *eventlog.ThreadLog
}

// newServer returns the server of c.
func (c envConfig) newServer() *Server {
	workflows := workflowsvc.New(c.Workflows, c.Log, c.Hub, workflowsvc.Config{})
	if c.RunEvents == nil && c.Runs == nil {
		return New(c.Config, workflows, nil)
	}
	if c.Threads == nil {
		c.Threads, _ = c.RunEvents.(runevents.ThreadReader)
	}
	threads := threadsvc.New(c.RunEvents, c.Threads, c.Runs, c.ThreadLog, c.Hub, threadsvc.Config{})
	return New(c.Config, workflows, threads)
}
