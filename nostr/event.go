package nostr

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Event is a NIP-01 event. Tags, Content and the rest are kept as the client
// sent them; ID, PubKey and Sig are lowercase hex on the wire.
type Event struct {
	ID        [32]byte
	PubKey    [32]byte
	CreatedAt int64
	Kind      int
	Tags      Tags
	Content   string
	Sig       [64]byte
}

// Tags are an event's tags: each a list of strings whose first is the name.
type Tags [][]string

// Errors of event validation. The relay maps them to "invalid:" messages.
var (
	ErrBadID        = errors.New("event id does not match its content")
	ErrBadSignature = errors.New("signature does not verify")
	ErrBadPubKey    = errors.New("pubkey is not a valid x-only secp256k1 point")
)

// Serialize writes the canonical NIP-01 serialization
// [0,pubkey,created_at,kind,tags,content] whose SHA-256 is the event id.
func (e *Event) Serialize(dst []byte) []byte {
	dst = append(dst, `[0,"`...)
	dst = hex.AppendEncode(dst, e.PubKey[:])
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, e.CreatedAt, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(e.Kind), 10)
	dst = append(dst, ',')
	dst = appendTags(dst, e.Tags)
	dst = append(dst, ',')
	dst = AppendString(dst, e.Content)
	return append(dst, ']')
}

// ComputeID returns SHA-256 of the canonical serialization.
func (e *Event) ComputeID() [32]byte {
	var buf [512]byte
	return sha256.Sum256(e.Serialize(buf[:0]))
}

// CheckID reports whether the event's id is the hash of its content.
func (e *Event) CheckID() bool { return e.ComputeID() == e.ID }

// IDHex is the id in lowercase hex.
func (e *Event) IDHex() string { return hex.EncodeToString(e.ID[:]) }

// PubKeyHex is the pubkey in lowercase hex.
func (e *Event) PubKeyHex() string { return hex.EncodeToString(e.PubKey[:]) }

// CID is the event's content identifier: CIDv1, raw codec, sha2-256 of the
// canonical serialization, so its digest is the Nostr event id (docs/design.md §4).
func (e *Event) CID() cid.Cid { return IDToCID(e.ID) }

// IDToCID wraps an event id in its CIDv1.
func IDToCID(id [32]byte) cid.Cid {
	mh, err := multihash.Encode(id[:], multihash.SHA2_256)
	if err != nil {
		// Encoding a 32-byte sha2-256 digest cannot fail.
		panic(fmt.Sprintf("nostr: multihash: %v", err))
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// MarshalJSON writes the event as a NIP-01 JSON object.
func (e *Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// AppendJSON appends the event's JSON object to dst.
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":"`...)
	dst = hex.AppendEncode(dst, e.ID[:])
	dst = append(dst, `","pubkey":"`...)
	dst = hex.AppendEncode(dst, e.PubKey[:])
	dst = append(dst, `","created_at":`...)
	dst = strconv.AppendInt(dst, e.CreatedAt, 10)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(e.Kind), 10)
	dst = append(dst, `,"tags":`...)
	dst = appendTags(dst, e.Tags)
	dst = append(dst, `,"content":`...)
	dst = AppendString(dst, e.Content)
	dst = append(dst, `,"sig":"`...)
	dst = hex.AppendEncode(dst, e.Sig[:])
	return append(dst, `"}`...)
}

func appendTags(dst []byte, tags Tags) []byte {
	dst = append(dst, '[')
	for i, t := range tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, s := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, s)
		}
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// AppendString appends s as a JSON string escaped exactly as NIP-01 says:
// \n \" \\ \r \t \b \f get their short escapes, other control characters
// \u00XX, and everything else (including non-ASCII and '/') is written as is.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// AppendStringBytes is AppendString for a string held in a byte slice (a
// stored record read in place), without converting it.
func AppendStringBytes(dst []byte, s []byte) []byte { return appendString(dst, s) }

func appendString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexdigits = "0123456789abcdef"

// ValidUTF8 reports whether every string in the event is valid UTF-8. JSON
// decoding replaces invalid bytes, so an event carrying them could never
// hash to the id its author signed; the relay refuses them up front.
func (e *Event) ValidUTF8() bool {
	if !utf8.ValidString(e.Content) {
		return false
	}
	for _, t := range e.Tags {
		for _, s := range t {
			if !utf8.ValidString(s) {
				return false
			}
		}
	}
	return true
}
