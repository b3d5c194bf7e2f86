package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"fleetmesh.org/fleetmesh/announce"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
	"fleetmesh.org/fleetmesh/mesh/addrbook"
)

// joinTimeout bounds the question to one relay named by --join.
const joinTimeout = 20 * time.Second

// joinPeers turns --join values into bootstrap multiaddrs: a join code
// must verify (a bad one is the user's to fix, so it stops the start); a
// relay that cannot be asked is logged and the node starts without it,
// as it would with an unreachable bootstrap peer. known are the DIDs the
// node has seen reachable before, which a relay's answer puts first.
func joinPeers(ctx context.Context, joins []string, self string, known []string, log *slog.Logger) ([]string, error) {
	var out []string
	for _, j := range joins {
		switch {
		case invite.IsCode(j):
			inv, err := invite.Parse(j, time.Now())
			if err != nil {
				return nil, fmt.Errorf("--join: %w", err)
			}
			log.Info("join: code", "did", inv.DID(), "addrs", len(inv.Addrs), "expires", inv.Expires.UTC().Format(time.RFC3339))
			out = append(out, inv.Bootstrap()...)
		case announce.IsRelayURL(j):
			if err := announce.CheckRelayURL(j); err != nil {
				return nil, fmt.Errorf("%w: --join: %v", errUsage, err)
			}
			qctx, cancel := context.WithTimeout(ctx, joinTimeout)
			found, err := announce.Find(qctx, j, time.Now(), known...)
			cancel()
			if err != nil {
				log.Warn("join: relay", "relay", j, "err", err)
				continue
			}
			boot := found.Bootstrap(self)
			log.Info("join: relay", "relay", j, "found", found.String(), "addrs", len(boot))
			out = append(out, boot...)
		default:
			return nil, fmt.Errorf("%w: --join %q: want a join code (fmjoin1…, from `fleetmesh invite`) or a relay URL (wss://…)", errUsage, j)
		}
	}
	return out, nil
}

// knownPeers are the DIDs of the peers in the address book under dir,
// those seen most recently first (announce.MaxKnown at most); none when
// there is no book yet or it cannot be read (the node says so when it
// opens the book itself).
func knownPeers(dir string) []string {
	book, err := addrbook.Open(addrbook.Config{Dir: dir})
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range book.Recent(announce.MaxKnown) {
		if did, err := identity.DIDFromPeerID(e.ID); err == nil {
			out = append(out, did)
		}
	}
	return out
}
