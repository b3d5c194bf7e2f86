package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/compute"
	"fleetmesh.org/fleetmesh/compute/nip90"
	"fleetmesh.org/fleetmesh/compute/sandbox"
	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// cheatRunner, when set, wraps the runner the executor runs others'
// jobs with. Only a binary built with the e2echeat tag sets it
// (node/cheat_e2e.go): the e2e suite's cheating executor. A release has
// no code that sets it.
var cheatRunner func(compute.Runner) compute.Runner

// cheatHandler, when set, wraps the executor's DIDComm handler; like
// cheatRunner, only the e2echeat tag sets it.
var cheatHandler func(*identity.Key, agent.Handler) agent.Handler

// cheatUncounted, when set, keeps the executor from metering what it
// gives: a cheat silent about its units. Only the e2echeat tag sets it.
var cheatUncounted bool

// computePart is the node's compute market (spec/compute.md): the
// executor on the agent when [compute] offer is set, and the
// requester's side behind `fleetmesh job run` always.
type computePart struct {
	runner *sandbox.Runner
	market *compute.Market
	bridge *nip90.Bridge // nil unless [compute] nip90
}

// NIP90KeyFile holds the NIP-90 bridge's Nostr key in the home (hex,
// mode 0600): its own, never the node's key nor a user's.
const NIP90KeyFile = "nip90.key"

// openCompute wires package compute to the node's agent, meter, grants,
// standing and mesh.
func openCompute(opts Options, dc *agent.Service, mp *meshPart, acct *accountingPart, rl *relay.Relay, st EventStore, reg prometheus.Registerer) (*computePart, error) {
	cfg := opts.Config.Compute
	r, err := sandbox.New(context.Background(), sandbox.Compiler)
	if err != nil {
		return nil, err
	}
	run := compute.SandboxRunner(r)
	m := compute.NewMetrics(reg)
	peerOf := func(did string) peer.ID {
		p, _ := identity.PeerIDFromDID(did)
		return p
	}
	execRun := run
	if cheatRunner != nil {
		execRun = cheatRunner(run)
	}
	exec, err := compute.NewExecutor(opts.Key, cfg, execRun, compute.Hooks{
		Allow: func(requester string, units uint64) error {
			return acct.allow(peerOf(requester), meter.ComputeUnits, units)
		},
		Gave: func(requester string, units uint64, at time.Time) {
			if cheatUncounted {
				return
			}
			acct.meter.RecordAt(peerOf(requester), meter.ComputeUnits, meter.Gave, units, at)
		},
		Ran: m.Ran,
	}, opts.Log)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	handle := agent.Handler(exec.Handle)
	if cheatHandler != nil {
		handle = cheatHandler(opts.Key, handle)
	}
	dc.Register(compute.PIURI, handle, "requester", "executor")
	req, err := compute.NewRequester(opts.Key, dc.Request)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	market, err := compute.NewMarket(opts.Key.DID(), cfg, req, run, verify.DefaultPolicy(), compute.MarketHooks{
		Candidates: func() []verify.Candidate { return computeCandidates(mp) },
		Standing:   acct.standing,
		Received: func(executor string, units uint64, at time.Time) {
			acct.meter.RecordAt(peerOf(executor), meter.ComputeUnits, meter.Received, units, at)
		},
		// A caught executor's window is disputed whether or not it
		// claims the units it is not paid for (spec/compute.md
		// "Accounting").
		Caught: func(d verify.Dispute) {
			if err := acct.s.Refuse(d.Executor, "compute job "+d.JobID+": "+d.Reason); err != nil {
				opts.Log.Warn("compute: refusing the caught executor's window", "executor", d.Executor, "err", err)
			}
		},
	}, m, opts.Log)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	acct.mux.HandleFunc("POST /jobs/run", market.ServeRun)
	cp := &computePart{runner: r, market: market}
	if cfg.NIP90 {
		key, err := nip90Key(opts.Home.Path(NIP90KeyFile))
		if err != nil {
			r.Close(context.Background())
			return nil, err
		}
		cp.bridge = nip90.New(key, nip90.Hooks{
			Publish: func(ctx context.Context, ev *nostr.Event) error {
				_, err := rl.AddEvent(ctx, ev, relay.FromClient)
				return err
			},
			Count: func(ctx context.Context, f *nostr.Filter) (int64, error) {
				n, _, err := st.Count(ctx, f)
				return n, err
			},
			Run: market.Run,
		}, opts.Log)
		rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, from relay.Origin) { cp.bridge.Stored(ev, from == relay.FromClient) })
		opts.Log.Info("nip90 bridge", "pubkey", cp.bridge.PubKey())
	}
	return cp, nil
}

// nip90Key reads the bridge's key, making it on first use.
func nip90Key(path string) (nostr.SecretKey, error) {
	if b, err := os.ReadFile(path); err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			return nostr.SecretKey{}, fmt.Errorf("node: %s: not hex: %w (delete it to make a new key)", path, err)
		}
		return nostr.SecretKeyFromBytes(raw)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nostr.SecretKey{}, fmt.Errorf("node: %w", err)
	}
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		return nostr.SecretKey{}, err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(k.Bytes())+"\n"), 0o600); err != nil {
		return nostr.SecretKey{}, fmt.Errorf("node: %w", err)
	}
	return k, nil
}

// computeCandidates are the connected peers whose descriptors offer
// compute, with the operator keys their addresses give.
func computeCandidates(mp *meshPart) []verify.Candidate {
	h := mp.m.Host()
	var out []verify.Candidate
	for _, p := range h.Network().Peers() {
		raw, ok := mp.m.Descriptor(p)
		if !ok {
			continue
		}
		s, err := descriptor.Parse(raw, descriptor.DefaultLimits())
		if err != nil || s.Descriptor.Offers.Compute == nil {
			continue
		}
		var addrs []netip.Addr
		for _, a := range h.Peerstore().Addrs(p) {
			if ip, err := manet.ToIP(a); err == nil {
				if na, ok := netip.AddrFromSlice(ip); ok {
					addrs = append(addrs, na)
				}
			}
		}
		out = append(out, verify.Candidate{DID: s.Descriptor.DID, Operators: verify.Operators(addrs, "")})
	}
	return out
}

func (cp *computePart) close() {
	if cp.bridge != nil {
		cp.bridge.Close()
	}
	cp.runner.Close(context.Background())
}
