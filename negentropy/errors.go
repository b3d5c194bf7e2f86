package negentropy

import "errors"

// Errors callers can test for with errors.Is. Each is wrapped with context.
var (
	// ErrMalformed: a message does not follow the version-1 wire format.
	// A relay answers it with NEG-ERR "invalid: ...".
	ErrMalformed = errors.New("negentropy: malformed message")
	// ErrUnsupportedVersion: a message carries a protocol version byte
	// (0x60..0x6f) other than 0x61. A responder answers it with the single
	// byte 0x61; an initiator fails.
	ErrUnsupportedVersion = errors.New("negentropy: unsupported protocol version")
	// ErrEncode: a Message cannot be encoded (bounds out of order, payload
	// not matching its mode).
	ErrEncode = errors.New("negentropy: cannot encode message")
	// ErrConfig: a Config value is out of range.
	ErrConfig = errors.New("negentropy: invalid config")
	// ErrTooManyRecords: the storage holds more items than Config.MaxRecords.
	// A relay answers it with NEG-ERR "blocked: this query is too big".
	ErrTooManyRecords = errors.New("negentropy: too many records")
	// ErrTooManyDifferences: the initiator found more have+need ids than
	// Config.MaxDifferences.
	ErrTooManyDifferences = errors.New("negentropy: too many differences")
	// ErrStorage: the storage failed or was asked for an impossible range.
	ErrStorage = errors.New("negentropy: storage")
	// ErrState: a call out of order (Reconcile before Initiate, twice
	// Initiate, Reconcile after completion).
	ErrState = errors.New("negentropy: call out of order")
)
