package workflow

// EventType is one of the 18 events of the workflow protocol v1.0.
type EventType string

type eventInfo struct {
	Type       EventType
	NodeScoped bool
	Terminal   bool
}

// Events returns the closed set of protocol events in contract order.
func Events() []EventType {
	out := make([]EventType, len(eventSet))
	for i, e := range eventSet {
		out[i] = e.Type
	}
	return out
}

func infoOf(t EventType) (eventInfo, bool) {
	for _, e := range eventSet {
		if e.Type == t {
			return e, true
		}
	}
	return eventInfo{}, false
}

// OutputDelta is the data of node.output.delta: a piece of a node's text
// on one of its channels ("text", "thinking").
type OutputDelta struct {
	Channel string `json:"channel"`
	Delta   string `json:"delta"`
}

// Known reports whether t is one of the protocol's events.
func (t EventType) Known() bool {
	_, ok := infoOf(t)
	return ok
}

// Terminal reports whether t ends a run: run.completed, run.failed or
// run.cancelled.
func (t EventType) Terminal() bool {
	info, _ := infoOf(t)
	return info.Terminal
}

// NodeScoped reports whether events of type t concern one node, so their
// envelope carries nodeId and nodeRunId.
func (t EventType) NodeScoped() bool {
	info, _ := infoOf(t)
	return info.NodeScoped
}
