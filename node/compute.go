package node

import (
	"context"
	"net/netip"

	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/compute"
	"fleetmesh.org/fleetmesh/compute/sandbox"
	"fleetmesh.org/fleetmesh/compute/verify"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

// computePart is the node's compute market (spec/compute.md): the
// executor on the agent when [compute] offer is set, and the
// requester's side behind `fleetmesh job run` always.
type computePart struct {
	runner *sandbox.Runner
	market *compute.Market
}

// openCompute wires package compute to the node's agent, meter, grants,
// standing and mesh.
func openCompute(opts Options, dc *agent.Service, mp *meshPart, acct *accountingPart, reg prometheus.Registerer) (*computePart, error) {
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
	exec, err := compute.NewExecutor(opts.Key, cfg, run, compute.Hooks{
		Allow: func(requester string, units uint64) error {
			return acct.allow(peerOf(requester), meter.ComputeUnits, units)
		},
		Gave: func(requester string, units uint64) {
			acct.meter.Record(peerOf(requester), meter.ComputeUnits, meter.Gave, units)
		},
		Ran: m.Ran,
	}, opts.Log)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	dc.Register(compute.PIURI, exec.Handle, "requester", "executor")
	req, err := compute.NewRequester(opts.Key, dc.Request)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	market, err := compute.NewMarket(opts.Key.DID(), cfg, req, run, verify.DefaultPolicy(), compute.MarketHooks{
		Candidates: func() []verify.Candidate { return computeCandidates(mp) },
		Standing:   acct.standing,
		Received: func(executor string, units uint64) {
			acct.meter.Record(peerOf(executor), meter.ComputeUnits, meter.Received, units)
		},
	}, m, opts.Log)
	if err != nil {
		r.Close(context.Background())
		return nil, err
	}
	acct.mux.HandleFunc("POST /jobs/run", market.ServeRun)
	return &computePart{runner: r, market: market}, nil
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
	cp.runner.Close(context.Background())
}
