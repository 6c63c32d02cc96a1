package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Limits applied when the corresponding Reader field is zero.
const (
	DefaultMaxLineBytes = 1 << 20
	DefaultMaxDataBytes = 4 << 20
)

// Errors returned (wrapped) by Reader.Next when a limit is exceeded.
var (
	ErrLineTooLong = errors.New("sse: line too long")
	ErrDataTooLong = errors.New("sse: event data too long")
)

// Event is one dispatched event, or a comment when the Reader returns
// comments.
type Event struct {
	// ID is the last event ID at dispatch: the value of the most recent
	// accepted id field in the stream, which persists across events ("" if
	// there has been none). This is what a client sends as Last-Event-ID.
	ID string
	// HasID reports whether this event's own lines included an accepted id
	// field (an id containing NUL is ignored). A frame written without ID
	// reads back with HasID false and ID still the previous event's id.
	HasID bool
	// Event is the raw event type: the last event field of the event, ""
	// when there was none. Type applies the specification's default.
	Event string
	// Data is the data lines of the event joined with "\n".
	Data string
	// Retry is the reconnection time in effect at dispatch: the last valid
	// retry field read so far in the stream, 0 if none.
	Retry time.Duration
	// IsComment is set only for comments (when Reader.Comments is true).
	// Data then holds the comment text after the colon, with one leading
	// space removed; the other fields are zero.
	IsComment bool
}

// Type returns the event type as an EventSource reports it: Event, or
// "message" when Event is empty.
func (e Event) Type() string {
	if e.Event == "" {
		return "message"
	}
	return e.Event
}

// Reader parses a text/event-stream following the WHATWG HTML
// specification's "event stream interpretation": UTF-8 with invalid
// sequences replaced by U+FFFD, one leading BOM removed, lines ended by
// CRLF, LF or CR, lines starting with ':' ignored as comments, one optional
// space after the field colon, unknown fields ignored, an id containing NUL
// ignored, retry accepted only as ASCII digits, an event dispatched at a
// blank line unless its data is empty, and an unfinished event at the end
// of the stream discarded.
//
// Set the exported fields before the first call to Next. A Reader is not
// safe for concurrent use.
type Reader struct {
	// MaxLineBytes bounds the length of one line, in bytes as received,
	// without its line ending. Defaults to DefaultMaxLineBytes (1 MiB).
	MaxLineBytes int
	// MaxDataBytes bounds the data of one event, in bytes as received,
	// counting one byte per data line for the joining "\n". Defaults to
	// DefaultMaxDataBytes (4 MiB).
	MaxDataBytes int
	// Comments makes Next return comment lines too (as Events with
	// IsComment set), for callers that watch heartbeats. Defaults to false.
	Comments bool

	src   io.Reader
	buf   []byte // buf[start:end] is read but not yet consumed
	start int
	end   int
	// scanned counts the bytes from start known to hold no line ending, so
	// a long line arriving in many reads is scanned only once.
	scanned int
	rerr    error // error from src, reported once buf holds no full line
	err     error // sticky error returned by every later Next

	bomDone bool // the leading BOM has been looked for
	skipLF  bool // the last line ended with CR: a following LF belongs to it

	data      []byte // data buffer, each line followed by '\n'
	eventType string
	hasID     bool
	idBuf     string // the specification's "last event ID buffer"
	lastID    string // the last event ID as of the last blank line
	retry     time.Duration
}

// NewReader returns a Reader that parses the event stream read from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r}
}

// Next returns the next dispatched event (or, with Comments, comment). At
// the end of the stream it returns io.EOF itself, unwrapped; an event not
// yet ended by a blank line is discarded. A line or event over the limits
// returns an error matching ErrLineTooLong or ErrDataTooLong. After any
// error the Reader is spent: every later call returns the same error.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, r.fail(err)
		}
		switch {
		case len(line) == 0:
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
		case line[0] == ':':
			if r.Comments {
				text, _ := bytes.CutPrefix(line[1:], []byte(" "))
				return Event{IsComment: true, Data: decodeUTF8(text)}, nil
			}
		default:
			if err := r.field(line); err != nil {
				return Event{}, r.fail(err)
			}
		}
	}
}

// LastEventID returns the last event ID as of the last blank line read:
// what a client resuming the stream sends as Last-Event-ID.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the reconnection time set by the last valid retry field,
// 0 if none has been read.
func (r *Reader) Retry() time.Duration { return r.retry }

func (r *Reader) fail(err error) error {
	// The pending event, if any, is never dispatched.
	r.data, r.eventType, r.hasID = nil, "", false
	r.err = err
	return err
}

// field processes one line that is neither blank nor a comment.
func (r *Reader) field(line []byte) error {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		value, _ = bytes.CutPrefix(value, []byte(" "))
	}
	// Field names are compared as bytes: decoding never changes ASCII, so
	// a name matches after decoding exactly when it matches before.
	switch string(name) {
	case "event":
		r.eventType = decodeUTF8(value)
	case "data":
		if len(r.data)+len(value)+1 > r.maxData() {
			return fmt.Errorf("sse: next: event data over %d bytes: %w", r.maxData(), ErrDataTooLong)
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "id":
		// Decoding produces U+0000 exactly where the input has a 0 byte.
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuf = decodeUTF8(value)
			r.hasID = true
		}
	case "retry":
		if d, ok := parseRetry(value); ok {
			r.retry = d
		}
	}
	return nil
}

// dispatch ends the current event at a blank line. It reports false when
// the data buffer is empty, in which case nothing is dispatched.
func (r *Reader) dispatch() (Event, bool) {
	r.lastID = r.idBuf
	hasID := r.hasID
	r.hasID = false
	if len(r.data) == 0 {
		r.eventType = ""
		return Event{}, false
	}
	ev := Event{
		ID:    r.lastID,
		HasID: hasID,
		Event: r.eventType,
		Data:  decodeUTF8(r.data[:len(r.data)-1]), // drop the final '\n'
		Retry: r.retry,
	}
	r.eventType = ""
	if cap(r.data) > maxRetainedBuffer {
		r.data = nil
	} else {
		r.data = r.data[:0]
	}
	return ev, true
}

// parseRetry accepts a non-empty value of ASCII digits as milliseconds,
// clamping values too large for a time.Duration.
func parseRetry(value []byte) (time.Duration, bool) {
	if len(value) == 0 {
		return 0, false
	}
	const maxMillis = math.MaxInt64 / int64(time.Millisecond)
	var ms int64
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms <= maxMillis {
			ms = ms*10 + int64(c-'0')
		}
	}
	ms = min(ms, maxMillis)
	return time.Duration(ms) * time.Millisecond, true
}

var bom = []byte("\xEF\xBB\xBF")

// readLine returns the next line without its ending. The slice is valid
// until the next call. At the end of the stream a line without an ending is
// discarded and src's error (io.EOF) returned.
func (r *Reader) readLine() ([]byte, error) {
	maxLine := r.maxLine()
	for {
		b := r.buf[r.start:r.end]
		if !r.bomDone {
			// Wait until the first bytes either are or cannot be a BOM.
			if len(b) < len(bom) && bytes.HasPrefix(bom, b) && r.rerr == nil {
				r.fill(maxLine)
				continue
			}
			if bytes.HasPrefix(b, bom) {
				r.start += len(bom)
				b = b[len(bom):]
			}
			r.bomDone = true
		}
		if r.skipLF && len(b) > 0 {
			// Decided only once the next byte has arrived, so a stream
			// ending lines with CR is never held back waiting for it.
			if b[0] == '\n' {
				r.start++
				b = b[1:]
			}
			r.skipLF = false
		}
		if i := indexEOL(b[r.scanned:]); i >= 0 {
			i += r.scanned
			if i > maxLine {
				return nil, fmt.Errorf("sse: next: line over %d bytes: %w", maxLine, ErrLineTooLong)
			}
			r.skipLF = b[i] == '\r'
			r.start += i + 1
			r.scanned = 0
			return b[:i], nil
		}
		r.scanned = len(b)
		if len(b) > maxLine {
			return nil, fmt.Errorf("sse: next: line over %d bytes: %w", maxLine, ErrLineTooLong)
		}
		if r.rerr != nil {
			if r.rerr == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("sse: next: %w", r.rerr)
		}
		r.fill(maxLine)
	}
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	// Two vectorised scans instead of one byte-by-byte scan for either.
	lf := bytes.IndexByte(b, '\n')
	if lf < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if cr := bytes.IndexByte(b[:lf], '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
const maxEmptyReads = 100

// fill reads more of src into buf, growing buf to hold at most one line
// longer than maxLine (enough to see that it is too long).
func (r *Reader) fill(maxLine int) {
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		size := min(max(2*len(r.buf), 4096), maxLine+1)
		size = max(size, r.end+1)
		buf := make([]byte, size)
		copy(buf, r.buf[:r.end])
		r.buf = buf
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.rerr = errors.New("sse: reader returned invalid count")
			return
		}
		r.end += n
		if err != nil {
			r.rerr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.rerr = io.ErrNoProgress
}

func (r *Reader) maxLine() int {
	if r.MaxLineBytes > 0 {
		return r.MaxLineBytes
	}
	return DefaultMaxLineBytes
}

func (r *Reader) maxData() int {
	if r.MaxDataBytes > 0 {
		return r.MaxDataBytes
	}
	return DefaultMaxDataBytes
}
