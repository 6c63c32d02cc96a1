package seal

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// tokenMember is the member of run.awaiting_input data that is sealed.
const tokenMember = "resumeToken"

// WorkflowStore returns inner with the resume token of run.awaiting_input
// sealed by s in what it stores and opened in what it returns. When inner
// also implements workflow.Queue and workflow.NodeOutputStore, so does
// the result. A token that does not open (the store was written with
// another key) is returned sealed: that run cannot be resumed, only
// cancelled.
func WorkflowStore(inner workflow.Store, s *Sealer) workflow.Store {
	st := &store{Store: inner, sealer: s}
	q, isQueue := inner.(workflow.Queue)
	o, isOutputs := inner.(workflow.NodeOutputStore)
	if isQueue && isOutputs {
		return &engineStore{store: st, Queue: q, NodeOutputStore: o}
	}
	return st
}

// store seals and opens around a workflow.Store.
type store struct {
	workflow.Store
	sealer *Sealer
}

// engineStore is a store whose inner store is an engine's: a queue with
// node outputs.
type engineStore struct {
	*store
	workflow.Queue
	workflow.NodeOutputStore
}

func (s *store) CreateRun(ctx context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	sealed, err := s.sealEvents(r.ID, events)
	if err != nil {
		return workflow.Run{}, nil, err
	}
	run, stored, err := s.Store.CreateRun(ctx, r, sealed)
	s.open(stored)
	return run, stored, err
}

func (s *store) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	sealed, err := s.sealEvents(p.RunID, p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = sealed
	stored, err := s.Store.Append(ctx, p)
	s.open(stored)
	return stored, err
}

func (s *store) Resume(ctx context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	sealed, err := s.sealEvents(p.RunID, p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = sealed
	stored, err := s.Store.Resume(ctx, p)
	s.open(stored)
	return stored, err
}

func (s *store) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]workflow.Envelope, error) {
	events, err := s.Store.ListEvents(ctx, runID, afterSeq, limit)
	s.open(events)
	return events, err
}

// sealEvents returns events with the token of each run.awaiting_input
// sealed for runID; the caller's slice and data are not modified.
func (s *store) sealEvents(runID string, events []workflow.NewEvent) ([]workflow.NewEvent, error) {
	i := slices.IndexFunc(events, func(e workflow.NewEvent) bool { return e.Event == workflow.EventRunAwaitingInput })
	if i < 0 {
		return events, nil
	}
	out := slices.Clone(events)
	for ; i < len(out); i++ {
		if out[i].Event != workflow.EventRunAwaitingInput {
			continue
		}
		data, err := replaceToken(out[i].Data, func(token string) (string, bool) {
			if token == "" || IsSealed(token) {
				return "", false
			}
			return s.sealer.Seal(token, runID), true
		})
		if err != nil {
			return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "events[%d]: seal the resume token", i)
		}
		out[i].Data = data
	}
	return out, nil
}

// open replaces, in place, each sealed token of events by its plain text.
// The envelopes are the caller's: the store returns new ones on each call.
func (s *store) open(events []workflow.Envelope) {
	for i := range events {
		e := &events[i]
		if e.Event != workflow.EventRunAwaitingInput {
			continue
		}
		data, err := replaceToken(e.Data, func(token string) (string, bool) {
			if !IsSealed(token) {
				return "", false
			}
			plain, err := s.sealer.Open(token, e.RunID)
			return plain, err == nil
		})
		if err == nil {
			e.Data = data
		}
	}
}

// replaceToken returns data with its resumeToken replaced by what replace
// returns, or data itself when replace declines (false) or there is no
// token (data that is not an object with a string resumeToken). The token's JSON text is replaced where it stands, so the rest
// of the bytes, member order included, stay as they are.
func replaceToken(data json.RawMessage, replace func(token string) (string, bool)) (json.RawMessage, error) {
	var d map[string]json.RawMessage
	if json.Unmarshal(data, &d) != nil {
		return data, nil // not an object: the store's checks refuse it
	}
	raw, ok := d[tokenMember]
	if !ok {
		return data, nil
	}
	var token string
	if json.Unmarshal(raw, &token) != nil {
		return data, nil
	}
	next, ok := replace(token)
	if !ok {
		return data, nil
	}
	quoted, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	member := append([]byte(`"`+tokenMember+`":`), raw...)
	if at := bytes.Index(data, member); at >= 0 && bytes.Count(data, member) == 1 {
		out := make([]byte, 0, len(data)-len(raw)+len(quoted))
		out = append(out, data[:at+len(tokenMember)+3]...)
		out = append(out, quoted...)
		return append(out, data[at+len(member):]...), nil
	}
	// Not compact: encode the members again.
	d[tokenMember] = quoted
	return json.Marshal(d)
}
