package addrbook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Version is the version of the file format this package writes and reads.
const Version = 1

// ErrMalformed is wrapped by every error about a file that is not a valid
// address book.
var ErrMalformed = errors.New("malformed address book")

type fileJSON struct {
	Version int         `json:"version"`
	Peers   []entryJSON `json:"peers"`
}

type entryJSON struct {
	ID       string   `json:"id"`
	Addrs    []string `json:"addrs"`
	LastSeen int64    `json:"last_seen"`
}

// Encode returns the file form of entries (spec/mesh-discovery.md).
func Encode(entries []Entry) []byte {
	f := fileJSON{Version: Version, Peers: make([]entryJSON, 0, len(entries))}
	for _, e := range entries {
		// A peer learnt from configuration or peer exchange but never
		// connected has no last-seen time; it is written as 0, not as the
		// zero time's negative Unix seconds, which a load would refuse.
		var seen int64
		if !e.LastSeen.IsZero() {
			seen = e.LastSeen.Unix()
		}
		j := entryJSON{ID: e.ID.String(), LastSeen: seen, Addrs: make([]string, 0, len(e.Addrs))}
		for _, a := range e.Addrs {
			j.Addrs = append(j.Addrs, a.String())
		}
		f.Peers = append(f.Peers, j)
	}
	data, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		// Only strings and integers are marshalled; this cannot fail.
		panic(fmt.Sprintf("addrbook: encode: %v", err))
	}
	return append(data, '\n')
}

// Decode parses the file form of an address book. Every peer id and
// address must parse and a peer may appear only once; the error names the
// first entry that does not.
func Decode(data []byte) ([]Entry, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%w: version %d, this node reads version %d", ErrMalformed, f.Version, Version)
	}
	out := make([]Entry, 0, len(f.Peers))
	seen := make(map[peer.ID]bool, len(f.Peers))
	for i, p := range f.Peers {
		id, err := peer.Decode(p.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: peer %d: id %q: %v", ErrMalformed, i, p.ID, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: peer %d: %s appears twice", ErrMalformed, i, id)
		}
		seen[id] = true
		if p.LastSeen < 0 {
			return nil, fmt.Errorf("%w: peer %d: negative last_seen", ErrMalformed, i)
		}
		e := Entry{ID: id}
		if p.LastSeen > 0 {
			e.LastSeen = time.Unix(p.LastSeen, 0)
		}
		for _, s := range p.Addrs {
			a, err := ma.NewMultiaddr(s)
			if err != nil {
				return nil, fmt.Errorf("%w: peer %d: address %q: %v", ErrMalformed, i, s, err)
			}
			e.Addrs = append(e.Addrs, a)
		}
		out = append(out, e)
	}
	return out, nil
}
