package workflow

import "github.com/runstream/runstream"

// DefaultMaxEventBytes bounds the data of one workflow event when no other
// bound is configured, as thread events are bounded.
const DefaultMaxEventBytes = 256 << 10

// EventLimit returns the bound of an event's data: limit, or
// DefaultMaxEventBytes when limit <= 0.
func EventLimit(limit int) int {
	if limit <= 0 {
		return DefaultMaxEventBytes
	}
	return limit
}

// CheckEventSize rejects, with CodePayloadTooLarge and details.limit, an
// event whose data has more than EventLimit(limit) bytes; index is its
// place in its batch, for the message. The event log calls it on each
// event as it will be stored, so no workflow event past the bound is ever
// stored or streamed.
func CheckEventSize(index int, e NewEvent, limit int) error {
	limit = EventLimit(limit)
	if len(e.Data) > limit {
		return runstream.Errorf(runstream.CodePayloadTooLarge, "events[%d] %s has %d bytes of data, the limit is %d", index, e.Event, len(e.Data), limit).
			WithDetail("index", index).WithDetail("limit", limit)
	}
	return nil
}
