package sse

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

// pieces are the building blocks of random values: the characters that
// matter to the wire format (colon, space, BOM, Unicode line separators,
// the bytes of multi-byte sequences) and plain text.
var pieces = []string{
	"", "a", "Z", "0", "42", " ", "  ", ":", ": ", "\t", "data", "id", "event",
	"retry", "\ufeff", "\u2028", "\u2029", "\u0085", "é", "世", "😀", `{"k":"v"}`,
	`\n`, `\r`, `"`, "\x7f", "\x01",
}

func randomValue(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// TestRoundTripRandom writes random streams of valid frames, comments and
// retry hints and checks the Reader returns exactly what was written, with
// the last event ID carried over frames written without one.
func TestRoundTripRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var (
			stream bytes.Buffer
			want   []Event
			lastID string
			retry  time.Duration
		)
		w := NewWriter(&stream)
		for range rng.IntN(8) {
			switch rng.IntN(5) {
			case 0:
				text := randomValue(rng)
				if err := w.WriteComment(text); err != nil {
					t.Fatalf("WriteComment(%q): %v", text, err)
				}
				want = append(want, Event{IsComment: true, Data: text})
			case 1:
				retry = time.Duration(rng.IntN(100000)) * time.Millisecond
				if err := w.WriteRetry(retry); err != nil {
					t.Fatal(err)
				}
			default:
				f := Frame{Event: randomValue(rng), Data: []byte(randomValue(rng))}
				if rng.IntN(3) > 0 {
					f.ID = randomValue(rng)
				}
				if err := w.WriteFrame(f); err != nil {
					t.Fatalf("WriteFrame(%+v): %v", f, err)
				}
				if f.ID != "" {
					lastID = f.ID
				}
				want = append(want, Event{ID: lastID, HasID: f.ID != "", Event: f.Event, Data: string(f.Data), Retry: retry})
			}
		}
		for chunking, wrap := range chunkings {
			r := NewReader(wrap(bytes.NewReader(stream.Bytes())))
			r.Comments = true
			if got := readAll(t, r); !slices.Equal(got, want) {
				t.Fatalf("%s: stream %q\nread  %+v\nwrote %+v", chunking, stream.Bytes(), got, want)
			}
		}
	}
}

// validField reports whether the writer must accept s as an id, event or
// comment, stated independently of the writer's code.
func validField(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsAny(s, "\r\n\x00")
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("42", "node.output.delta", []byte(`{"seq":42}`), "heartbeat")
	f.Add("", "", []byte(""), "")
	f.Add(" 1", " run", []byte(" {}"), " x")
	f.Add("a:b", "e:f", []byte("data: x"), ": y")
	f.Add("\ufeff", "\u2028", []byte("\u2029\x00"), "\ufeff")
	f.Add("4\n2", "run\r", []byte("a\nb"), "c\rd")
	f.Add("1\x002", "e\x00", []byte("\xff"), "\xe2\x82")
	f.Fuzz(func(t *testing.T, id, event string, data []byte, comment string) {
		var stream bytes.Buffer
		w := NewWriter(&stream)
		// A frame with an id first, so a fuzzed frame without one must
		// read back under this id.
		if err := w.WriteFrame(Frame{ID: "prev", Event: "prev", Data: []byte("prev")}); err != nil {
			t.Fatal(err)
		}
		prefix := stream.Len()

		err := w.WriteComment(comment)
		if wantOK := validField(comment); (err == nil) != wantOK {
			t.Fatalf("WriteComment(%q) = %v, valid %v", comment, err, wantOK)
		}
		commentOK := err == nil
		f := Frame{ID: id, Event: event, Data: data}
		before := stream.Len()
		err = w.WriteFrame(f)
		wantOK := validField(id) && validField(event) && utf8.Valid(data) && !bytes.ContainsAny(data, "\r\n")
		if (err == nil) != wantOK {
			t.Fatalf("WriteFrame(%+q) = %v, valid %v", f, err, wantOK)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidField) {
				t.Fatalf("refusal %v does not match ErrInvalidField", err)
			}
			if stream.Len() != before {
				t.Fatalf("refused frame wrote %q", stream.Bytes()[before:])
			}
		}
		frameOK := err == nil

		r := NewReader(bytes.NewReader(stream.Bytes()))
		r.Comments = true
		got := readAll(t, r)
		want := []Event{{ID: "prev", HasID: true, Event: "prev", Data: "prev"}}
		if commentOK {
			want = append(want, Event{IsComment: true, Data: comment})
		}
		if frameOK {
			ev := Event{ID: "prev", Event: event, Data: string(data)}
			if id != "" {
				ev.ID, ev.HasID = id, true
			}
			want = append(want, ev)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stream %q (frame at %d)\nread  %#v\nwrote %#v", stream.Bytes(), prefix, got, want)
		}
	})
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\n"), uint16(0))
	f.Add([]byte("\xEF\xBB\xBFid: 1\r\nevent: e\r\ndata: a\r\ndata\r\n\r\n"), uint16(1))
	f.Add([]byte(": heartbeat\rretry: 12\rid: x\x00\rdata:  b\r\r"), uint16(2))
	f.Add([]byte("data: \xff\xe2\x82\n\ndata: abc"), uint16(3))
	f.Add([]byte("retry: 99999999999999999999\nid\ndata:\n\n"), uint16(4))
	f.Fuzz(func(t *testing.T, in []byte, limits uint16) {
		// With generous limits the Reader must agree with the reference
		// model, however the input is chunked.
		want, wantLastID := referenceParse(in)
		for chunking, wrap := range chunkings {
			r := NewReader(wrap(bytes.NewReader(in)))
			r.Comments = true
			got := readAll(t, r)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: input %q\nread      %#v\nreference %#v", chunking, in, got, want)
			}
			if r.LastEventID() != wantLastID {
				t.Fatalf("%s: LastEventID() = %q, reference %q", chunking, r.LastEventID(), wantLastID)
			}
		}

		// With small limits it must stay within them and fail cleanly.
		r := NewReader(iotest.HalfReader(bytes.NewReader(in)))
		r.MaxLineBytes = 1 + int(limits&0xff)
		r.MaxDataBytes = 1 + int(limits>>8)
		r.Comments = true
		for {
			ev, err := r.Next()
			// The buffer may also hold the three bytes of a possible BOM.
			if len(r.buf) > max(r.MaxLineBytes+1, len(bom)) || len(r.data) > r.MaxDataBytes {
				t.Fatalf("buffered %d line bytes (limit %d), %d data bytes (limit %d)", len(r.buf), r.MaxLineBytes, len(r.data), r.MaxDataBytes)
			}
			if err != nil {
				if !errors.Is(err, ErrLineTooLong) && !errors.Is(err, ErrDataTooLong) && err != io.EOF {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if !ev.IsComment && len(ev.Data) > 3*r.MaxDataBytes {
				t.Fatalf("event data of %d bytes over limit %d", len(ev.Data), r.MaxDataBytes)
			}
		}
	})
}

// referenceParse is a direct, unbuffered transcription of the WHATWG
// event stream interpretation, used as the model in FuzzReader: decode the
// whole stream, then walk its complete lines. It returns every event and
// comment, and the last event ID at the end.
func referenceParse(in []byte) ([]Event, string) {
	s := decodeUTF8(bytes.TrimPrefix(in, []byte("\xEF\xBB\xBF")))
	var (
		events                 []Event
		data, eventType, idBuf string
		lastID                 string
		hasData, hasID         bool
		retry                  time.Duration
	)
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return events, lastID // an unterminated last line is discarded
		}
		line := s[:i]
		if strings.HasPrefix(s[i:], "\r\n") {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
		if line == "" {
			lastID = idBuf
			if hasData {
				events = append(events, Event{ID: lastID, HasID: hasID, Event: eventType, Data: strings.TrimSuffix(data, "\n"), Retry: retry})
			}
			data, eventType, hasData, hasID = "", "", false, false
			continue
		}
		if line[0] == ':' {
			events = append(events, Event{IsComment: true, Data: strings.TrimPrefix(line[1:], " ")})
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			eventType = value
		case "data":
			data += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf, hasID = value, true
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				ms, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					ms = math.MaxInt64
				}
				retry = time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
			}
		}
	}
}
