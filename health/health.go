// Package health checks the readiness of the parts of a running server —
// the store, the PostgreSQL listener, the workflow engine — each on its
// own, so that /readyz says which part is not ready and why.
package health

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream"
)

// CheckTimeout bounds each part's check.
const CheckTimeout = 2 * time.Second

// Part is one part of a server whose readiness is checked.
type Part struct {
	// Name names the part in /readyz: "store", "listener", "engine".
	Name string
	// Check returns nil when the part is ready, else why not: the message
	// of a *runstream.Error is shown to callers (runstream.ErrorMessage),
	// any other error only as a generic text.
	Check func(ctx context.Context) error
}

// Status is what /readyz says of one part.
type Status struct {
	Status string `json:"status"` // "ready" or "unavailable"
	// Message says why the part is not ready.
	Message string `json:"message,omitempty"`
}

// Check runs the checks of parts at the same time, each within
// CheckTimeout, so that /readyz answers within CheckTimeout however many
// parts hang. It returns the status of every part by name and, when a
// part is not ready, an UNAVAILABLE *runstream.Error whose message names
// the failing parts and whose details hold the statuses ("parts").
func Check(ctx context.Context, parts []Part) (map[string]Status, error) {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			errs[i] = p.Check(cctx)
		})
	}
	wg.Wait()
	statuses := make(map[string]Status, len(parts))
	var failing []string
	for i, p := range parts {
		if errs[i] == nil {
			statuses[p.Name] = Status{Status: "ready"}
			continue
		}
		statuses[p.Name] = Status{Status: "unavailable", Message: runstream.ErrorMessage(errs[i])}
		failing = append(failing, p.Name)
	}
	if len(failing) == 0 {
		return statuses, nil
	}
	sort.Strings(failing)
	var why []string
	for _, name := range failing {
		why = append(why, name+": "+statuses[name].Message)
	}
	return statuses, runstream.Errorf(runstream.CodeUnavailable, "not ready: %s", strings.Join(why, "; ")).
		WithDetail("parts", statuses)
}
