package antientropy

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ProtocolID is the libp2p protocol of a sync session.
const ProtocolID = "/fleetmesh/sync/1.0.0"

// MaxFrameBytes bounds one frame. A negentropy message is capped at
// negFrameLimit bytes (hex doubles it) and a REQ carries at most
// maxIDsPerReq ids, so honest frames stay well below it.
const MaxFrameBytes = 512 << 10

var errFrameTooLarge = errors.New("antientropy: frame over the size limit")

// writeFrame writes one uvarint-length-prefixed JSON array.
func writeFrame(w *bufio.Writer, parts ...any) error {
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	return writeRaw(w, b)
}

func writeRaw(w *bufio.Writer, b []byte) error {
	if len(b) > MaxFrameBytes {
		return errFrameTooLarge
	}
	var lenBuf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
	if _, err := w.Write(lenBuf[:n]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// readFrame reads one frame and splits its JSON array. typ is its first
// element.
func readFrame(r *bufio.Reader) (typ string, parts []json.RawMessage, err error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", nil, err
	}
	if n > MaxFrameBytes {
		return "", nil, errFrameTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", nil, err
	}
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) == 0 {
		return "", nil, fmt.Errorf("antientropy: frame is not a JSON array")
	}
	if err := json.Unmarshal(parts[0], &typ); err != nil {
		return "", nil, fmt.Errorf("antientropy: frame has no message type")
	}
	return typ, parts, nil
}
