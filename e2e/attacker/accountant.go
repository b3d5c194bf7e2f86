package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/grant"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// accountant is a dishonest accountant: a node key on a libp2p host of
// its own that speaks the node's accounting protocols (spec/receipts.md,
// spec/disputes.md, spec/grants.md) over DIDComm, authcrypted, as a peer
// would, and lies in them.
type accountant struct {
	key    *identity.Key
	h      host.Host
	node   peer.AddrInfo
	did    string // the node's
	packer *didcomm.Packer
	unpack *didcomm.Unpacker
}

func newAccountant(ctx context.Context, t target) (*accountant, error) {
	key, err := identity.GenerateKey()
	if err != nil {
		return nil, err
	}
	h, err := libp2p.New(libp2p.Identity(key.Libp2pKey()), libp2p.ListenAddrStrings("/ip4/"+t.from+"/tcp/0"),
		libp2p.ResourceManager(&network.NullResourceManager{}))
	if err != nil {
		return nil, err
	}
	ai, err := peer.AddrInfoFromP2pAddr(multiaddr.StringCast(t.mesh))
	if err != nil {
		h.Close()
		return nil, err
	}
	s, err := didcomm.SecretsFromKey(key)
	if err != nil {
		h.Close()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.Connect(cctx, *ai); err != nil {
		h.Close()
		return nil, err
	}
	res := didcomm.DIDKeyResolver{}
	return &accountant{key: key, h: h, node: *ai, did: t.node, packer: &didcomm.Packer{Secrets: s, Resolver: res},
		unpack: &didcomm.Unpacker{Secrets: s, Resolver: res, Limits: didcomm.DefaultLimits()}}, nil
}

// send sends one message of type typ to the node and returns its answer's
// type, or the problem code it was refused with ("error" if it could not
// be sent or read).
func (a *accountant) send(ctx context.Context, typ string, body any) string {
	m, err := didcomm.NewMessage(typ, body)
	if err != nil {
		return "error"
	}
	m.From, m.To, m.ReturnRoute = a.key.DID(), []string{a.did}, "all"
	packed, err := a.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return "error"
	}
	if a.h.Network().Connectedness(a.node.ID) != network.Connected {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := a.h.Connect(cctx, a.node)
		cancel()
		if err != nil {
			return "error"
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := transport.SendLibp2p(cctx, a.h, a.node.ID, packed)
	if err != nil {
		return "error"
	}
	if len(raw) == 0 {
		return "none"
	}
	u, err := a.unpack.Unpack(raw)
	if err != nil {
		return "error"
	}
	if u.Message.Type == problemreport.Type {
		if b, err := problemreport.Parse(u.Message); err == nil {
			return b.Code
		}
	}
	return u.Message.Type[strings.LastIndex(u.Message.Type, "/")+1:]
}

// accountantModes are the lies, each a message the attacker sends again
// and again: the mode's name, and the message's type and body (i counts
// the mode's messages).
type accountantMode struct {
	name string
	msg  func(a *accountant, i int64) (string, any)
}

func accountantModes(window int64) []accountantMode {
	now := time.Now().Unix()
	aligned := func(t int64) int64 { return t - t%window }
	big := receipt.Counts{Events: 1 << 40, Bytes: 1 << 50}
	// fork mints a fork proof of two fresh keys (or of the same two,
	// at another seq, when i is odd).
	x, _ := identity.GenerateKey()
	y, _ := identity.GenerateKey()
	fork := func(i int64) []byte {
		k1, k2 := x, y
		if i%2 == 0 {
			k1, _ = identity.GenerateKey()
			k2, _ = identity.GenerateKey()
		}
		a, b := receipt.Pair(k1.DID(), k2.DID())
		seq := uint64(i%1000) + 1
		prev := cid.Undef
		if seq > 1 {
			prev, _ = receipt.New(a, b, 0, window, 1, cid.Undef, receipt.Side{}, receipt.Side{}).CID()
		}
		var rs [2]*receipt.Receipt
		for j := range rs {
			r := receipt.New(a, b, aligned(now), window, seq, prev, receipt.Side{Gave: receipt.Counts{Events: uint64(j)}}, receipt.Side{})
			r.Sign(k1)
			r.Sign(k2)
			rs[j] = r
		}
		p, err := receipt.NewForkProof(rs[0], rs[1])
		if err != nil {
			return nil
		}
		raw, _ := p.Encode()
		return raw
	}
	var reuse atomic.Pointer[string]
	return []accountantMode{
		{"inflate-own", func(a *accountant, i int64) (string, any) {
			return exchange.TypePropose, proposeFirst(aligned(now)-window*(i%4+1), window, receipt.Side{Gave: big})
		}},
		{"inflate-theirs", func(a *accountant, i int64) (string, any) {
			return exchange.TypePropose, proposeFirst(aligned(now)-window*(i%4+1), window, receipt.Side{Received: big})
		}},
		{"replay-old", func(a *accountant, i int64) (string, any) {
			return exchange.TypePropose, proposeFirst(aligned(now)-window*(100+i%100_000), window, receipt.Side{})
		}},
		{"windows-1970", func(a *accountant, i int64) (string, any) {
			if i%2 == 0 {
				return exchange.TypeRequest, exchange.RequestBody{WindowStart: window * (i % 1_000_000)}
			}
			return exchange.TypePropose, proposeFirst(window*(i%1_000_000), window, receipt.Side{Gave: big})
		}},
		{"fork-proofs", func(a *accountant, i int64) (string, any) {
			return exchange.TypeForkProof, accounting.ForkProofBody{Proof: fork(i)}
		}},
		{"grant-offers", func(a *accountant, i int64) (string, any) {
			g := grant.New(a.key.DID(), a.did, meter.Events, uint64(i), time.Duration(window)*time.Second, time.Now(), time.Hour, 0)
			g.Sign(a.key)
			raw, _ := g.Encode()
			return grant.TypeOffer, grant.OfferBody{Grant: raw}
		}},
		{"grant-id-reuse", func(a *accountant, i int64) (string, any) {
			g := grant.New(a.key.DID(), a.did, meter.Events, uint64(i), time.Duration(window)*time.Second, time.Now(), time.Hour, 0)
			if id := reuse.Load(); id != nil {
				g.ID = *id
			} else {
				reuse.Store(&g.ID)
			}
			g.Sign(a.key)
			raw, _ := g.Encode()
			if i%2 == 1 {
				return grant.TypeRevoke, grant.RevokeBody{ID: g.ID, EffectiveAt: 1}
			}
			return grant.TypeOffer, grant.OfferBody{Grant: raw}
		}},
	}
}

// accountantFlood runs every mode of the dishonest accountant at once,
// each from accounting peers of its own (a fresh key every 256 messages,
// so the lies come from many DIDs too), until the duration ends or
// t.messages are sent, and counts the answers by mode and kind.
func accountantFlood(ctx context.Context, t target) result {
	window := int64(t.seed)
	if window <= 0 {
		window = 2
	}
	modes := accountantModes(window)
	var mu sync.Mutex
	counts := map[string]int64{}
	var sent atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const perMode = 3
	workers(ctx, len(modes)*perMode, func(ctx context.Context, w int) {
		mode := modes[w%len(modes)]
		var a *accountant
		for i := int64(w / len(modes)); ctx.Err() == nil; i += perMode {
			if a == nil || (i/perMode)%256 == 0 && mode.name != "grant-id-reuse" {
				if a != nil {
					a.h.Close()
				}
				var err error
				if a, err = newAccountant(ctx, t); err != nil {
					mu.Lock()
					counts["connect_failed"]++
					mu.Unlock()
					a = nil
					pause(ctx, 50*time.Millisecond)
					continue
				}
			}
			typ, body := mode.msg(a, i)
			got := a.send(ctx, typ, body)
			if n := sent.Add(1); t.messages > 0 && n >= t.messages {
				cancel()
			}
			mu.Lock()
			counts[mode.name+" "+got]++
			mu.Unlock()
		}
		if a != nil {
			a.h.Close()
		}
	})
	counts["sent"] = sent.Load()
	b, _ := json.Marshal(counts)
	return result{Got: fmt.Sprintf("%d accounting lies sent: %s", sent.Load(), b), Counts: counts}
}

// proposeFirst is the proposal of a pair's first receipt, round 1, of
// the window at start: a stranger has no chain with the node.
func proposeFirst(start, secs int64, side receipt.Side) exchange.ProposeBody {
	return exchange.ProposeBody{WindowStart: start, WindowSecs: secs, Seq: 1, Counts: side, Round: 1}
}
