package sse

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalidField is matched (with errors.Is) by every *FieldError: the
// writer refused a value that could not be framed on one line.
var ErrInvalidField = errors.New("sse: invalid field")

// FieldError reports a value the writer refuses to encode, and where.
// Nothing is written when it is returned.
type FieldError struct {
	// Field is "id", "event", "data" or "comment".
	Field string
	// Offset is the byte offset of the refused byte within the value.
	Offset int
	// Byte is the refused byte: '\r', '\n', 0, or the first byte of an
	// invalid UTF-8 sequence.
	Byte byte
}

func (e *FieldError) Error() string {
	what := fmt.Sprintf("byte %q", e.Byte)
	switch e.Byte {
	case '\r':
		what = "CR"
	case '\n':
		what = "LF"
	case 0:
		what = "NUL"
	}
	if e.Byte >= utf8.RuneSelf {
		what = "invalid UTF-8"
	}
	return fmt.Sprintf("sse: %s contains %s at byte %d", e.Field, what, e.Offset)
}

// Is reports whether target is ErrInvalidField.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidField }

// Frame is one event as written on the wire.
type Frame struct {
	// ID becomes the "id:" line; empty means no id line, so the reader keeps
	// the previous last event ID (a synthesised terminal frame has none).
	// It must be valid UTF-8 without CR, LF or NUL.
	ID string
	// Event becomes the "event:" line; empty means no event line (the
	// reader's default type "message"). It must be valid UTF-8 without CR,
	// LF or NUL.
	Event string
	// Data becomes exactly one "data:" line. It must be valid UTF-8 without
	// CR or LF; it may be empty, which still produces an event.
	Data []byte
}

// AppendFrame appends the wire form of f to dst and returns the extended
// buffer:
//
//	id: <ID>\n        (only when ID is not empty)
//	event: <Event>\n  (only when Event is not empty)
//	data: <Data>\n
//	\n
//
// If f cannot be framed it returns dst unchanged and a *FieldError. It
// allocates only to grow dst, so a server can batch several frames into
// one write.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if err := checkField("id", f.ID); err != nil {
		return dst, err
	}
	if err := checkField("event", f.Event); err != nil {
		return dst, err
	}
	if err := checkData(f.Data); err != nil {
		return dst, err
	}
	if f.ID != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, f.ID...)
		dst = append(dst, '\n')
	}
	if f.Event != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, f.Event...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, f.Data...)
	dst = append(dst, "\n\n"...)
	return dst, nil
}

// AppendSeqFrame appends the frame of a stored event to dst: its id is
// seq, its event name event (omitted when empty), and its data what
// appendData appends to the buffer it is given, written in place rather
// than copied (the hot path of every replay). The event name and the data
// are checked as AppendFrame checks them; if either cannot be framed, or
// appendData fails, it returns dst unchanged and the error (a *FieldError
// for a refused value).
func AppendSeqFrame(dst []byte, seq int64, event string, appendData func(dst []byte) ([]byte, error)) ([]byte, error) {
	if err := checkField("event", event); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, '\n')
	if event != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, event...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	data := len(dst)
	dst, err := appendData(dst)
	if err != nil {
		return dst[:start], err
	}
	if err := checkData(dst[data:]); err != nil {
		return dst[:start], err
	}
	return append(dst, "\n\n"...), nil
}

// AppendComment appends the comment line ": <text>\n" (":\n" when text is
// empty) to dst. Readers ignore comments; the server uses them as
// heartbeats. If text contains CR, LF, NUL or invalid UTF-8 it returns dst
// unchanged and a *FieldError.
func AppendComment(dst []byte, text string) ([]byte, error) {
	if err := checkField("comment", text); err != nil {
		return dst, err
	}
	if text == "" {
		return append(dst, ":\n"...), nil
	}
	dst = append(dst, ": "...)
	dst = append(dst, text...)
	return append(dst, '\n'), nil
}

// AppendRetry appends the block "retry: <milliseconds>\n\n" to dst, which
// sets the reader's reconnection time. d is truncated to whole
// milliseconds; a negative d is refused with dst unchanged.
func AppendRetry(dst []byte, d time.Duration) ([]byte, error) {
	if d < 0 {
		return dst, fmt.Errorf("sse: negative retry %v", d)
	}
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, d.Milliseconds(), 10)
	return append(dst, "\n\n"...), nil
}

// checkField refuses CR, LF, NUL and invalid UTF-8 in s. NUL is refused
// because a reader ignores an id containing it, so the frame would be
// delivered under the previous id.
func checkField(field, s string) error {
	if i := strings.IndexAny(s, "\r\n\x00"); i >= 0 {
		return &FieldError{Field: field, Offset: i, Byte: s[i]}
	}
	if !utf8.ValidString(s) {
		i := firstInvalid(s)
		return &FieldError{Field: field, Offset: i, Byte: s[i]}
	}
	return nil
}

// checkData refuses CR, LF and invalid UTF-8 in data; NUL is allowed.
func checkData(b []byte) error {
	// Vectorised scans: data is the large part of every frame.
	if i := indexEOL(b); i >= 0 {
		return &FieldError{Field: "data", Offset: i, Byte: b[i]}
	}
	if !utf8.Valid(b) {
		i := firstInvalid(string(b))
		return &FieldError{Field: "data", Offset: i, Byte: b[i]}
	}
	return nil
}

// firstInvalid returns the offset of the first invalid UTF-8 sequence in s,
// which must contain one.
func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}

// maxRetainedBuffer bounds the buffer a Writer keeps between writes, so one
// huge frame does not pin its memory for the life of a stream.
const maxRetainedBuffer = 64 << 10

// Writer writes frames, comments and retry hints to an io.Writer, each with
// a single Write call. A Writer does not flush (the HTTP handler does that)
// and is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteFrame writes f as AppendFrame encodes it. A frame that cannot be
// encoded is refused with a *FieldError and nothing is written.
func (w *Writer) WriteFrame(f Frame) error {
	buf, err := AppendFrame(w.buf[:0], f)
	if err != nil {
		return err
	}
	return w.write("sse: write frame", buf)
}

// WriteComment writes the comment line ": <text>\n" (for example
// ": heartbeat"). Text with CR, LF, NUL or invalid UTF-8 is refused with a
// *FieldError and nothing is written.
func (w *Writer) WriteComment(text string) error {
	buf, err := AppendComment(w.buf[:0], text)
	if err != nil {
		return err
	}
	return w.write("sse: write comment", buf)
}

// WriteRetry writes "retry: <milliseconds>\n\n". A negative d is refused and
// nothing is written.
func (w *Writer) WriteRetry(d time.Duration) error {
	buf, err := AppendRetry(w.buf[:0], d)
	if err != nil {
		return err
	}
	return w.write("sse: write retry", buf)
}

func (w *Writer) write(op string, buf []byte) error {
	if cap(buf) <= maxRetainedBuffer {
		w.buf = buf[:0]
	} else {
		w.buf = nil
	}
	if _, err := w.w.Write(buf); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
