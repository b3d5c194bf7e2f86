package meshsync

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/libp2p/go-msgio"
)

// ProtocolID is the libp2p protocol of a sync or lookup session.
const ProtocolID = "/fleetmesh/sync/1.0.0"

// MaxFrameBytes bounds one frame. A negentropy message is capped at
// FrameSizeLimit bytes (hex doubles it) and a REQ carries at most
// maxIDsPerReq ids, so honest frames stay well below it.
const MaxFrameBytes = 512 << 10

var errFrameTooLarge = errors.New("meshsync: frame over the size limit")

// errMalformed is wrapped by readFrame's errors for a frame that was read
// whole but is not a JSON array with a message type: the peer broke the
// protocol, as opposed to the stream failing.
var errMalformed = errors.New("malformed frame")

// Frames are go-msgio's unsigned-varint-delimited messages, the framing
// libp2p's own stream protocols use, each holding one JSON array.

// writeFrame writes one JSON array.
func writeFrame(w msgio.Writer, parts ...any) error {
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	return writeRaw(w, b)
}

func writeRaw(w msgio.Writer, b []byte) error {
	if len(b) > MaxFrameBytes {
		return errFrameTooLarge
	}
	return w.WriteMsg(b)
}

// readFrame reads one frame and splits its JSON array. typ is its first
// element.
func readFrame(r msgio.Reader) (typ string, parts []json.RawMessage, err error) {
	b, err := r.ReadMsg()
	if err != nil {
		return "", nil, err
	}
	defer r.ReleaseMsg(b)
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) == 0 {
		return "", nil, fmt.Errorf("meshsync: frame is not a JSON array: %w", errMalformed)
	}
	if err := json.Unmarshal(parts[0], &typ); err != nil {
		return "", nil, fmt.Errorf("meshsync: frame has no message type: %w", errMalformed)
	}
	return typ, parts, nil
}
