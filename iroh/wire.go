package iroh

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one JSON line on the helper socket, in either
// direction (spec/iroh.md, "The helper socket").
const MaxLineBytes = 64 << 10

// msg is one line on the helper socket. T names the message; the other
// fields are those its type uses (spec/iroh.md lists them per type).
type msg struct {
	T      string   `json:"t"`
	Token  string   `json:"token,omitempty"`
	Req    uint64   `json:"req,omitempty"`
	CID    uint64   `json:"cid,omitempty"`
	ALPN   string   `json:"alpn,omitempty"`
	Remote string   `json:"remote,omitempty"`
	ID     string   `json:"id,omitempty"`
	Key    string   `json:"key,omitempty"`
	ALPNs  []string `json:"alpns,omitempty"`
	Relays []string `json:"relays,omitempty"`
	Bind   []string `json:"bind,omitempty"`
	Relay  string   `json:"relay,omitempty"`
	Addrs  []string `json:"addrs,omitempty"`
	Bound  []string `json:"bound,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Path   string   `json:"path,omitempty"`
	Err    string   `json:"err,omitempty"`
	// Limits (config), Why and N (refused), Until (ban, Unix ms).
	Limits *wireLimits `json:"limits,omitempty"`
	Why    string      `json:"why,omitempty"`
	N      uint64      `json:"n,omitempty"`
	Until  int64       `json:"until,omitempty"`
}

// wireLimits is Limits on the helper socket.
type wireLimits struct {
	Streams            int `json:"streams"`
	StreamsPerPeer     int `json:"streams_per_peer"`
	StreamsPerProtocol int `json:"streams_per_protocol"`
	Conns              int `json:"conns"`
	ConnsPerPeer       int `json:"conns_per_peer"`
}

// errLineTooLong is returned for a line over MaxLineBytes.
var errLineTooLong = errors.New("iroh: helper line longer than 64 KiB")

// readMsg reads one line from r and decodes it. It never reads past the
// newline, so the bytes after a stream's header line stay in r.
func readMsg(r *bufio.Reader) (msg, error) {
	var m msg
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return m, errLineTooLong
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return m, io.ErrUnexpectedEOF
		}
		return m, err
	}
	return decodeMsg(line)
}

// decodeMsg parses one line (with or without its newline).
func decodeMsg(line []byte) (msg, error) {
	var m msg
	if len(line) > MaxLineBytes {
		return m, errLineTooLong
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("iroh: helper line is not JSON: %w", err)
	}
	if m.T == "" {
		return m, errors.New(`iroh: helper line has no "t"`)
	}
	return m, nil
}

// newLineReader makes the reader readMsg needs: its buffer is the line
// bound.
func newLineReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, MaxLineBytes) }

// writeMsg writes m as one line.
func writeMsg(w io.Writer, m msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
