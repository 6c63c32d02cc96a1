package metrics

import (
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/ssestream"
)

// The observers the packages take.
var (
	_ eventlog.Observer  = (*Append)(nil)
	_ live.Observer      = (*Hub)(nil)
	_ ssestream.Observer = (*Streams)(nil)
	_ engine.Observer    = (*Engine)(nil)
)
