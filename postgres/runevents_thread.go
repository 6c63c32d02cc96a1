package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadReader = (*RunEventStore)(nil)

// ListThreadEvents returns the thread's rows of every category (or of
// p.Category, of run p.RunID) with seq > p.AfterSeq (and < p.BeforeSeq
// when it is positive) visible to p.Owner,
// ascending, at most p.Limit: the replay of the thread stream.
//
// It is one page query in seq order: a range of the key (thread_id, seq),
// or of (thread_id, run_id, seq) with a run, or of the partial index of
// message rows for the message category; the other filters are checked on
// the rows of the range, so a rare category or owner may read many rows
// for one page. Like the other page queries it runs with sorting off (see
// queryPage).
func (s *RunEventStore) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sql, args, ok := listThreadQuery(p)
	if !ok {
		return nil, nil
	}
	return s.list(ctx, "list thread events", sql, args, false)
}

// listThreadQuery returns the statement of ListThreadEvents, or ok=false
// when no row can match.
func listThreadQuery(p runevents.ListThreadEventsParams) (sql string, args []any, ok bool) {
	var q query
	q.add("thread_id = ?", p.ThreadID)
	if p.RunID != "" {
		q.add("run_id = ?", p.RunID)
	}
	switch {
	case p.Category == "":
	case p.Category == runevents.CategoryMessage:
		q.where = append(q.where, isMessage) // a literal: the partial index applies
	case !storableText(string(p.Category)):
		return "", nil, false // never written
	default:
		q.add("category = ?", string(p.Category))
	}
	if !q.owner(p.Owner) {
		return "", nil, false
	}
	after := p.AfterSeq
	var before *int64
	if p.BeforeSeq > 0 {
		before = &p.BeforeSeq
	}
	q.cursors(&after, before)
	return q.page(false, p.Limit), q.args, true
}

var _ runevents.ThreadJSONReader = (*RunEventStore)(nil)

// ScanThreadJSON calls fn with the seq, event type and JSON envelope of
// each row ListThreadEvents(p) returns, in order. The envelope is written
// from the row's values as pgx received them (runevents.RecordText.AppendJSON
// over their bytes): no Record and no copy of its content and metadata.
// An error of fn is returned as it is.
func (s *RunEventStore) ScanThreadJSON(ctx context.Context, p runevents.ListThreadEventsParams, fn func(seq int64, eventType string, envelope []byte) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	sql, args, ok := listThreadQuery(p)
	if !ok {
		return nil
	}
	_, err := queryPage(ctx, s.pool, sql, args, func(rows pgx.Rows) (struct{}, error) {
		return struct{}{}, scanEnvelopes(rows, fn)
	})
	var fe fnError
	if errors.As(err, &fe) {
		return fe.err
	}
	if err != nil {
		return dbError(err, "scan thread events")
	}
	return nil
}

// fnError carries an error of ScanThreadJSON's fn through queryPage.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// scanEnvelopes calls fn with the envelope of each row of recordColumns
// and closes rows. It decodes the binary seq, created_at and
// created_at_offset itself, and takes the text columns as they came; rows
// in another format go through scanRecords and Record.AppendJSON.
func scanEnvelopes(rows pgx.Rows, fn func(seq int64, eventType string, envelope []byte) error) error {
	defer rows.Close()
	var envelope []byte
	if !binaryColumns(rows.FieldDescriptions(), 2, 8, 9) {
		recs, err := scanRecords(rows)
		if err != nil {
			return err
		}
		for _, r := range recs {
			envelope = r.AppendJSON(envelope[:0])
			if err := fn(r.Seq, string(r.EventType), envelope); err != nil {
				return fnError{err}
			}
		}
		return nil
	}
	var (
		at        [len(runevents.CreatedAtLayout)]byte
		zone      = time.UTC
		offset    int32
		eventType string
	)
	for rows.Next() {
		v := rows.RawValues()
		if len(v) != 10 || len(v[2]) != 8 || len(v[8]) != 8 || len(v[9]) != 4 {
			return fmt.Errorf("a row of %d values, not of recordColumns", len(v))
		}
		seq := int64(binary.BigEndian.Uint64(v[2]))
		micros := int64(binary.BigEndian.Uint64(v[8]))
		if micros == math.MaxInt64 || micros == math.MinInt64 {
			return fmt.Errorf("seq %d: created_at is infinite", seq)
		}
		if o := int32(binary.BigEndian.Uint32(v[9])); o != offset {
			offset, zone = o, time.UTC // as scanRecords: UTC for offset 0, else a fixed zone
			if o != 0 {
				zone = time.FixedZone("", int(o))
			}
		}
		created := postgresEpoch.Add(time.Duration(micros) * time.Microsecond).In(zone)
		if string(v[4]) != eventType {
			eventType = string(v[4])
		}
		text := runevents.RecordText[[]byte]{ThreadID: v[0], RunID: v[1], UserID: v[3], EventType: v[4], Category: v[5],
			Content: v[6], Metadata: v[7], Seq: seq, CreatedAt: created.AppendFormat(at[:0], runevents.CreatedAtLayout)}
		envelope = text.AppendJSON(envelope[:0])
		if err := fn(seq, eventType, envelope); err != nil {
			return fnError{err}
		}
	}
	return rows.Err()
}

// postgresEpoch is the zero of PostgreSQL's binary timestamps.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// binaryColumns reports whether the columns at indexes came in binary.
func binaryColumns(fields []pgconn.FieldDescription, indexes ...int) bool {
	for _, i := range indexes {
		if i >= len(fields) || fields[i].Format != pgx.BinaryFormatCode {
			return false
		}
	}
	return true
}
