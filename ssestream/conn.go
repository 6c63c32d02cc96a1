package ssestream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// streamWriter is where a follower's bytes go.
type streamWriter interface {
	// send writes p to the client and flushes it, failing when the client
	// does not take it by deadline. The connection's deadline is set only
	// when deadline differs from the previous send's.
	send(p []byte, deadline time.Time) error
}

// responseStream sends through net/http's ResponseWriter.
type responseStream struct {
	w        io.Writer
	rc       *http.ResponseController
	deadline time.Time // the write deadline set
}

func (s *responseStream) send(p []byte, deadline time.Time) error {
	if !deadline.Equal(s.deadline) {
		if err := s.rc.SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		s.deadline = deadline
	}
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// connStream sends on a connection taken over from net/http: the response
// head with the first bytes, then each send as one HTTP/1.1 chunk (for an
// HTTP/1.0 client the body is delimited by the connection's close).
type connStream struct {
	conn    net.Conn
	head    []byte // the response head, until it is sent
	chunked bool
	written int64 // body bytes sent, framing excluded
	// deadline is the write deadline set on conn.
	deadline time.Time
	// size, bufs and pending are send's, kept to spare it allocations
	// (pending, the net.Buffers that writev consumes, would escape to the
	// heap as a local: one allocation a write).
	size    []byte
	bufs    [4][]byte
	pending net.Buffers
}

var (
	crlf      = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// newConnStream returns the connStream of a request answered 200 with
// header on conn.
func newConnStream(conn net.Conn, r *http.Request, header http.Header) *connStream {
	c := &connStream{conn: conn, chunked: r.ProtoAtLeast(1, 1)}
	var head bytes.Buffer
	if c.chunked {
		head.WriteString("HTTP/1.1 200 OK\r\n")
		header.Set("Transfer-Encoding", "chunked")
	} else {
		head.WriteString("HTTP/1.0 200 OK\r\n")
	}
	header.Set("Connection", "close")
	header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	header.Write(&head) // sorted, values sanitised; never fails on a Buffer
	head.WriteString("\r\n")
	c.head = head.Bytes()
	return c
}

func (c *connStream) send(p []byte, deadline time.Time) error {
	if !deadline.Equal(c.deadline) {
		if err := c.conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
		c.deadline = deadline
	}
	// Everything pending goes in one write: head, chunk size, data, CRLF.
	c.pending = c.bufs[:0]
	if c.head != nil {
		c.pending = append(c.pending, c.head)
		c.head = nil
	}
	if c.chunked {
		c.size = append(strconv.AppendInt(c.size[:0], int64(len(p)), 16), crlf...)
		c.pending = append(c.pending, c.size, p, crlf)
	} else {
		c.pending = append(c.pending, p)
	}
	_, err := writeBuffers(c.conn, &c.pending)
	c.bufs, c.pending = [4][]byte{}, nil // keep no reference to p
	if err != nil {
		return err
	}
	c.written += int64(len(p))
	return nil
}

// writeBuffers writes bufs to conn: with one writev on a TCP connection,
// else as one Write (on TLS, one record rather than one per buffer).
// bufs is consumed.
func writeBuffers(conn net.Conn, bufs *net.Buffers) (int64, error) {
	if _, ok := conn.(*net.TCPConn); ok {
		return bufs.WriteTo(conn)
	}
	n, err := conn.Write(bytes.Join(*bufs, nil))
	*bufs = nil
	return int64(n), err
}

// close ends the body with its last chunk when the stream ended cleanly
// (a client then tells a finished response from a broken connection), and
// closes the connection.
func (c *connStream) close(clean bool, deadline time.Time) error {
	if clean && c.chunked && c.head == nil {
		if err := c.conn.SetWriteDeadline(deadline); err == nil {
			c.conn.Write(lastChunk)
		}
	}
	return c.conn.Close()
}
