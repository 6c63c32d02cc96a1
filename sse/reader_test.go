package sse

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chunkings deliver the same stream in differently sized reads, so that
// CRLF pairs, BOMs and UTF-8 sequences are split across reads.
var chunkings = map[string]func(io.Reader) io.Reader{
	"whole":    func(r io.Reader) io.Reader { return r },
	"one-byte": iotest.OneByteReader,
	"half":     iotest.HalfReader,
	"data-err": iotest.DataErrReader,
}

// TestReaderSpec covers the rules of the WHATWG "event stream
// interpretation", one or more cases per rule.
func TestReaderSpec(t *testing.T) {
	t.Parallel()
	const maxRetry = time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond
	tests := []struct {
		name     string
		in       string
		comments bool
		want     []Event
		lastID   string
	}{
		// Line endings.
		{name: "LF", in: "data: a\n\n", want: []Event{{Data: "a"}}},
		{name: "CRLF", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []Event{{Data: "a"}, {Data: "b"}}},
		{name: "CR only", in: "data: a\r\rdata: b\r\r", want: []Event{{Data: "a"}, {Data: "b"}}},
		{name: "mixed endings", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []Event{{Data: "a\nb\nc"}}},
		{name: "CRLF is one line end", in: "data: a\r\ndata: b\r\n\n", want: []Event{{Data: "a\nb"}}},
		{name: "LF CR is two line ends", in: "data: a\n\rdata: b\n\n", want: []Event{{Data: "a"}, {Data: "b"}}},
		{name: "CR CR LF", in: "data: a\r\r\ndata: b\n\n", want: []Event{{Data: "a"}, {Data: "b"}}},
		{name: "U+2028 and NEL are not line ends", in: "data: a\u2028b\u0085c\u2029\n\n", want: []Event{{Data: "a\u2028b\u0085c\u2029"}}},

		// BOM.
		{name: "BOM stripped", in: "\xEF\xBB\xBFdata: a\n\n", want: []Event{{Data: "a"}}},
		{name: "BOM stripped once", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", want: []Event{{Data: "b"}}},
		{name: "BOM later is data", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: \xEF\xBB\xBF\n\n", want: []Event{{Data: "a"}, {Data: "\ufeff"}}},
		{name: "BOM alone", in: "\xEF\xBB\xBF", want: nil},
		{name: "partial BOM", in: "\xEF\xBBdata: a\n\n", want: nil},

		// Field parsing.
		{name: "no space after colon", in: "data:a\n\n", want: []Event{{Data: "a"}}},
		{name: "only one space removed", in: "data:  a\n\n", want: []Event{{Data: " a"}}},
		{name: "tab kept", in: "data:\ta\n\n", want: []Event{{Data: "\ta"}}},
		{name: "trailing space kept", in: "data: a \n\n", want: []Event{{Data: "a "}}},
		{name: "colon in value", in: "data: a: b:c\n\n", want: []Event{{Data: "a: b:c"}}},
		{name: "space before colon names another field", in: "data : x\n\n", want: nil},
		{name: "leading space names another field", in: " data: x\n\n", want: nil},
		{name: "names are case sensitive", in: "Data: x\nDATA: y\nfoo: z\ndata: a\n\n", want: []Event{{Data: "a"}}},
		{name: "field without colon", in: "data\n\n", want: []Event{{Data: ""}}},
		{name: "empty data value", in: "data:\n\n", want: []Event{{Data: ""}}},
		{name: "empty data with space", in: "data: \n\n", want: []Event{{Data: ""}}},
		{name: "line without field", in: "no field here\ndata: a\n\n", want: []Event{{Data: "a"}}},

		// Data.
		{name: "data lines joined", in: "data: a\ndata: b\ndata\ndata:\ndata: c\n\n", want: []Event{{Data: "a\nb\n\n\nc"}}},
		{name: "NUL kept in data", in: "data: a\x00b\n\n", want: []Event{{Data: "a\x00b"}}},
		{name: "empty data buffer not dispatched", in: "id: 1\nevent: e\nretry: 5\n\n\n\n", want: nil, lastID: "1"},

		// Comments.
		{name: "comments ignored", in: ": heartbeat\n:x\n:\ndata: a\n: c\ndata: b\n\n", want: []Event{{Data: "a\nb"}}},
		{
			name: "comments returned", in: ": heartbeat\n:x\n:\n:  two\ndata: a\n: c\ndata: b\n\n", comments: true,
			want: []Event{
				{IsComment: true, Data: "heartbeat"}, {IsComment: true, Data: "x"}, {IsComment: true},
				{IsComment: true, Data: " two"}, {IsComment: true, Data: "c"}, {Data: "a\nb"},
			},
		},
		{name: "comment without line end", in: ": heartbeat", comments: true, want: nil},

		// Event type.
		{name: "event type", in: "event: run.started\ndata: a\n\n", want: []Event{{Event: "run.started", Data: "a"}}},
		{name: "last event field wins", in: "event: a\nevent: b\ndata: x\n\n", want: []Event{{Event: "b", Data: "x"}}},
		{name: "event reset after dispatch", in: "event: a\ndata: x\n\ndata: y\n\n", want: []Event{{Event: "a", Data: "x"}, {Data: "y"}}},
		{name: "event reset when not dispatched", in: "event: a\n\ndata: y\n\n", want: []Event{{Data: "y"}}},
		{name: "event without value", in: "event: a\nevent\ndata: y\n\n", want: []Event{{Data: "y"}}},

		// Last event ID.
		{
			name: "id persists", in: "id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n",
			want: []Event{{ID: "1", HasID: true, Data: "a"}, {ID: "1", Data: "b"}, {ID: "2", HasID: true, Data: "c"}}, lastID: "2",
		},
		{
			name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			want: []Event{{ID: "1", HasID: true, Data: "a"}, {ID: "1", Data: "b"}}, lastID: "1",
		},
		{
			name: "empty id resets", in: "id: 1\ndata: a\n\nid\ndata: b\n\nid: 3\ndata: c\n\nid:\ndata: d\n\n",
			want: []Event{{ID: "1", HasID: true, Data: "a"}, {HasID: true, Data: "b"}, {ID: "3", HasID: true, Data: "c"}, {HasID: true, Data: "d"}},
		},
		{name: "id from undispatched block persists", in: "id: 5\n\ndata: a\n\n", want: []Event{{ID: "5", Data: "a"}}, lastID: "5"},
		{name: "id after data in block", in: "data: a\nid: 9\n\n", want: []Event{{ID: "9", HasID: true, Data: "a"}}, lastID: "9"},
		{name: "id not trimmed", in: "id:  7 \ndata: a\n\n", want: []Event{{ID: " 7 ", HasID: true, Data: "a"}}, lastID: " 7 "},
		{
			name: "spec example", in: "data: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
			want: []Event{{ID: "1", HasID: true, Data: "first event"}, {HasID: true, Data: "second event"}, {Data: " third event"}},
		},

		// Retry.
		{name: "retry", in: "retry: 1500\ndata: a\n\n", want: []Event{{Data: "a", Retry: 1500 * time.Millisecond}}},
		{name: "retry persists", in: "retry: 1500\n\ndata: a\n\n", want: []Event{{Data: "a", Retry: 1500 * time.Millisecond}}},
		{name: "retry zero", in: "retry: 7\nretry:0\ndata: a\n\n", want: []Event{{Data: "a"}}},
		{
			name: "retry ignored unless ASCII digits",
			in:   "retry: 1500\nretry: 2s\nretry: -1\nretry: +1\nretry: 1.5\nretry:  100\nretry: 100 \nretry:\nretry\nretry: 1e3\nretry: \uff11\ndata: a\n\n",
			want: []Event{{Data: "a", Retry: 1500 * time.Millisecond}},
		},
		{name: "retry leading zeros", in: "retry: 000250\ndata: a\n\n", want: []Event{{Data: "a", Retry: 250 * time.Millisecond}}},
		{name: "retry clamped", in: "retry: 99999999999999999999999999\ndata: a\n\n", want: []Event{{Data: "a", Retry: maxRetry}}},

		// End of stream.
		{name: "no trailing blank line", in: "data: a\n\ndata: b\n", want: []Event{{Data: "a"}}},
		{name: "no trailing line end", in: "data: a\n\ndata: b", want: []Event{{Data: "a"}}},
		{name: "unfinished id not applied", in: "id: 1\ndata: a\n\nid: 2\ndata: b\n", want: []Event{{ID: "1", HasID: true, Data: "a"}}, lastID: "1"},
		{name: "empty stream", in: "", want: nil},

		// UTF-8 decoding.
		{name: "invalid UTF-8 replaced", in: "data: \xff\xe2\x82A\xed\xa0\x80\n\n", want: []Event{{Data: "\ufffd\ufffdA\ufffd\ufffd\ufffd"}}},
		{name: "truncated sequence at line end", in: "id: \xc3\nevent: \xe2\x82\ndata: \xf0\x9f\x98\ndata: x\n\n", want: []Event{{ID: "\ufffd", HasID: true, Event: "\ufffd", Data: "\ufffd\nx"}}, lastID: "\ufffd"},
		{name: "truncated sequence before colon", in: "data\xe2: a\n\n", want: nil},
		{name: "invalid comment", in: ":\xff\n", comments: true, want: []Event{{IsComment: true, Data: "\ufffd"}}},
	}
	for _, tt := range tests {
		for chunking, wrap := range chunkings {
			t.Run(tt.name+"/"+chunking, func(t *testing.T) {
				t.Parallel()
				r := NewReader(wrap(strings.NewReader(tt.in)))
				r.Comments = tt.comments
				got := readAll(t, r)
				if !slices.Equal(got, tt.want) {
					t.Errorf("events for %q:\ngot  %+v\nwant %+v", tt.in, got, tt.want)
				}
				if r.LastEventID() != tt.lastID {
					t.Errorf("LastEventID() = %q, want %q", r.LastEventID(), tt.lastID)
				}
				if _, err := r.Next(); err != io.EOF {
					t.Errorf("Next after EOF: err = %v, want io.EOF", err)
				}
			})
		}
	}
}

func TestEventType(t *testing.T) {
	t.Parallel()
	if got := (Event{}).Type(); got != "message" {
		t.Errorf("Type() of event without type = %q, want message", got)
	}
	if got := (Event{Event: "run.started"}).Type(); got != "run.started" {
		t.Errorf("Type() = %q, want run.started", got)
	}
}

// stopReader returns its chunks one per Read, then fails the test if read
// again: it proves that Next did not wait for bytes it did not need.
type stopReader struct {
	t      *testing.T
	chunks []string
}

func (r *stopReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		r.t.Error("Next read past the bytes it needed")
		return 0, errors.New("read past the end")
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// TestReaderDoesNotWaitPastEvent checks that a live stream's event is
// returned as soon as its blank line arrives, including when lines end
// with CR (a following LF cannot be known yet) and when the stream starts
// with what could be a BOM.
func TestReaderDoesNotWaitPastEvent(t *testing.T) {
	t.Parallel()
	tests := map[string][]string{
		"LF":         {"data: a\n\n"},
		"CR":         {"data: a\r\r"},
		"CRLF split": {"data: a\r", "\n\r", "\n"},
		"BOM split":  {"\xEF", "\xBB", "\xBFdata: a\n", "\n"},
		"heartbeat":  {": heartbeat\r", "\ndata: a\r", "\r"},
	}
	for name, chunks := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(&stopReader{t: t, chunks: chunks})
			ev, err := r.Next()
			if err != nil || ev.Data != "a" {
				t.Errorf("Next() = %+v, %v; want data a", ev, err)
			}
		})
	}
}

func TestReaderLineLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		max     int
		in      string
		wantErr bool
	}{
		{"at limit", 10, "data: 0123\n\n", false},
		{"at limit CRLF", 10, "data: 0123\r\n\r\n", false},
		{"over limit", 10, "data: 01234\n\n", true},
		{"over limit after short lines", 10, "data: 1\n\n: 123456789\n", true},
		{"over limit in BOM look-ahead", 1, "\xEF\xBB\n", true},
		{"default at limit", 0, "data: " + strings.Repeat("x", DefaultMaxLineBytes-6) + "\n\n", false},
		{"default over limit", 0, "data: " + strings.Repeat("x", DefaultMaxLineBytes-5) + "\n\n", true},
	}
	for _, tt := range tests {
		for chunking, wrap := range chunkings {
			t.Run(tt.name+"/"+chunking, func(t *testing.T) {
				t.Parallel()
				r := NewReader(wrap(strings.NewReader(tt.in)))
				r.MaxLineBytes = tt.max
				r.Comments = true
				var err error
				for err == nil {
					_, err = r.Next()
				}
				if got := errors.Is(err, ErrLineTooLong); got != tt.wantErr {
					t.Errorf("err = %v, want ErrLineTooLong: %v", err, tt.wantErr)
				}
				if tt.wantErr {
					if _, again := r.Next(); again != err {
						t.Errorf("Next after error = %v, want the same error %v", again, err)
					}
				}
			})
		}
	}
}

// endless is an io.Reader that never ends and never sends a line end.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestReaderBoundedMemory checks that an endless line is refused after
// buffering at most the limit, instead of growing without bound.
func TestReaderBoundedMemory(t *testing.T) {
	t.Parallel()
	r := NewReader(endless{})
	r.MaxLineBytes = 100 << 10
	_, err := r.Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	if len(r.buf) > r.MaxLineBytes+1 {
		t.Errorf("buffered %d bytes for a limit of %d", len(r.buf), r.MaxLineBytes)
	}
}

func TestReaderDataLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"at limit", "data: 1234567\n\n", false},
		{"lines at limit", "data: 123\ndata: 123\n\n", false},
		{"over limit", "data: 12345678\n\n", true},
		{"lines over limit", "data: 123\ndata: 1234\n\n", true},
		{"empty lines count", "data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\n", true},
		{"limit per event", "data: 1234567\n\ndata: 1234567\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(strings.NewReader(tt.in))
			r.MaxDataBytes = 8
			var err error
			for err == nil {
				_, err = r.Next()
			}
			if got := errors.Is(err, ErrDataTooLong); got != tt.wantErr {
				t.Errorf("err = %v, want ErrDataTooLong: %v", err, tt.wantErr)
			}
		})
	}
}

func TestReaderSourceErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	t.Run("wrapped, after buffered events, pending event discarded", func(t *testing.T) {
		t.Parallel()
		src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
		r := NewReader(src)
		ev, err := r.Next()
		if err != nil || ev.Data != "a" {
			t.Fatalf("Next() = %+v, %v; want data a", ev, err)
		}
		if _, err := r.Next(); !errors.Is(err, boom) || err == boom {
			t.Errorf("err = %v, want boom wrapped", err)
		}
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Errorf("second Next err = %v, want the same error", err)
		}
	})
	t.Run("EOF unwrapped", func(t *testing.T) {
		t.Parallel()
		r := NewReader(strings.NewReader("data: a\n"))
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("err = %#v, want io.EOF itself", err)
		}
	})
	t.Run("no progress", func(t *testing.T) {
		t.Parallel()
		r := NewReader(zeroReader{})
		if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
			t.Errorf("err = %v, want io.ErrNoProgress", err)
		}
	})
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderRetryAndLastEventID(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("retry: 3000\n\nid: 4\ndata: a\n\nid: 5\n"))
	if r.Retry() != 0 || r.LastEventID() != "" {
		t.Fatalf("fresh reader: Retry() = %v, LastEventID() = %q", r.Retry(), r.LastEventID())
	}
	ev, err := r.Next()
	if err != nil || ev.ID != "4" || ev.Retry != 3*time.Second {
		t.Fatalf("Next() = %+v, %v", ev, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF", err)
	}
	if r.Retry() != 3*time.Second {
		t.Errorf("Retry() = %v, want 3s", r.Retry())
	}
	if r.LastEventID() != "4" {
		t.Errorf("LastEventID() = %q, want 4 (id 5 was never ended by a blank line)", r.LastEventID())
	}
}

func TestDecodeUTF8(t *testing.T) {
	t.Parallel()
	const x = "\ufffd"
	tests := []struct{ in, want string }{
		{"", ""},
		{"ascii", "ascii"},
		{"é世😀\u2028", "é世😀\u2028"},
		{"\x80", x},
		{"\xff", x},
		{"\xc0\xaf", x + x},               // overlong
		{"\xc3", x},                       // truncated at end
		{"\xe2\x82A", x + "A"},            // one U+FFFD for the maximal subpart
		{"\xe2\x82\xe2\x82\xac", x + "€"}, // restarts on a lead byte
		{"\xed\xa0\x80", x + x + x},       // surrogate
		{"\xf0\x80\x80\x80", x + x + x + x},
		{"\xf4\x90\x80\x80", x + x + x + x}, // above U+10FFFF
		{"\xf0\x9f\x98", x},
		{"\xf0\x9f\x98A", x + "A"},
		{"\xf5\x80", x + x},
		{"a\xffb\xe2\x82\xacc", "a" + x + "b€c"},
	}
	for _, tt := range tests {
		if got := decodeUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("decodeUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	var stream bytes.Buffer
	w := NewWriter(&stream)
	for i := range 100 {
		f := Frame{ID: "123456", Event: "node.output.delta", Data: []byte(`{"schemaVersion":"1.0","runId":"run_01","seq":123456,"data":{"delta":"héllo"}}`)}
		if i%10 == 0 {
			_ = w.WriteComment("heartbeat")
		}
		if err := w.WriteFrame(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(stream.Len()))
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream.Bytes()))
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
