package memory_test

import (
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestWorkflowQueue(t *testing.T) {
	workflowtest.RunQueue(t, workflowtest.Harness{
		Open: func(*testing.T) workflow.Store { return memory.NewWorkflowStore() },
	})
}
