package placement

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/identity"
)

// Domain separates placement hashes from every other SHA-256 in
// fleetmesh (spec/mesh-placement.md). The version in it is the rule's
// version: a different rule is a different domain.
const Domain = "fleetmesh/placement/1"

// MaxShards is the most shards a Placement can place: the rule hashes a
// shard as a 16-bit number.
const MaxShards = math.MaxUint16 + 1

// Placement is one node's view of who holds which shard for durability:
// for each shard, the R storage nodes with the highest rendezvous weight.
// Two nodes that know the same storage nodes compute the same Placement.
// The zero Placement places nothing.
type Placement struct {
	r     int
	nodes []peer.ID
	// holders[s] are shard s's holders, highest weight first.
	holders [][]peer.ID
}

// placed is a storage node with the key its weights are computed from.
type placed struct {
	id  peer.ID
	key []byte
}

// New places each of shards shards (0 to shards-1) on the r of nodes with
// the highest weight. Every node must be named by an Ed25519 PeerID (as
// every fleetmesh node is), since the weight hashes the node's public key;
// repeated nodes count once.
func New(r, shards int, nodes []peer.ID) (Placement, error) {
	if r <= 0 {
		return Placement{}, fmt.Errorf("placement: replication factor %d, want at least 1", r)
	}
	if shards <= 0 || shards > MaxShards {
		return Placement{}, fmt.Errorf("placement: %d shards, want 1 to %d", shards, MaxShards)
	}
	ps := make([]placed, 0, len(nodes))
	seen := make(map[peer.ID]bool, len(nodes))
	for _, id := range nodes {
		if seen[id] {
			continue
		}
		seen[id] = true
		key, err := keyOf(id)
		if err != nil {
			return Placement{}, err
		}
		ps = append(ps, placed{id: id, key: key})
	}
	p := Placement{r: r, nodes: make([]peer.ID, len(ps)), holders: make([][]peer.ID, shards)}
	for i, n := range ps {
		p.nodes[i] = n.id
	}
	slices.Sort(p.nodes)
	type weighted struct {
		w uint64
		n *placed
	}
	ws := make([]weighted, len(ps))
	for s := range shards {
		for i := range ps {
			ws[i] = weighted{weight(s, ps[i].key), &ps[i]}
		}
		// Highest weight first; equal weights (never seen in practice)
		// are ordered by key so that every node breaks the tie the same way.
		slices.SortFunc(ws, func(a, b weighted) int {
			if c := cmp.Compare(b.w, a.w); c != 0 {
				return c
			}
			return bytes.Compare(a.n.key, b.n.key)
		})
		k := min(r, len(ws))
		p.holders[s] = make([]peer.ID, k)
		for i := range k {
			p.holders[s][i] = ws[i].n.id
		}
	}
	return p, nil
}

// keyOf is the 32-byte Ed25519 public key a PeerID names.
func keyOf(id peer.ID) ([]byte, error) {
	pub, err := identity.PublicKeyFromPeerID(id)
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	return pub, nil
}

// weight is the rendezvous weight of a node's key for shard: the first 8
// bytes, big-endian, of SHA-256(Domain ‖ uint16_be(shard) ‖ key).
func weight(shard int, key []byte) uint64 {
	h := sha256.New()
	h.Write([]byte(Domain))
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(shard)))
	h.Write(key)
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// Weight is the rendezvous weight of the node id names for shard, for
// other implementations' test vectors and for tools.
func Weight(shard int, id peer.ID) (uint64, error) {
	if shard < 0 || shard >= MaxShards {
		return 0, fmt.Errorf("placement: shard %d out of range 0 to %d", shard, MaxShards-1)
	}
	key, err := keyOf(id)
	if err != nil {
		return 0, err
	}
	return weight(shard, key), nil
}

// Replication is the placement's R.
func (p Placement) Replication() int { return p.r }

// Nodes are the storage nodes placed over, in PeerID order.
func (p Placement) Nodes() []peer.ID { return slices.Clone(p.nodes) }

// Holders returns the nodes that hold shard, highest weight first: min(R,
// number of storage nodes) of them. A shard out of range has none.
func (p Placement) Holders(shard int) []peer.ID {
	if shard < 0 || shard >= len(p.holders) {
		return nil
	}
	return slices.Clone(p.holders[shard])
}

// Shards returns the shards id holds, in increasing order.
func (p Placement) Shards(id peer.ID) []int {
	var out []int
	for s, h := range p.holders {
		if slices.Contains(h, id) {
			out = append(out, s)
		}
	}
	return out
}
