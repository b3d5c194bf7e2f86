package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"fleetmesh.org/fleetmesh/announce"
	"fleetmesh.org/fleetmesh/invite"
)

// joinTimeout bounds the question to one relay named by --join.
const joinTimeout = 20 * time.Second

// joinPeers turns --join values into bootstrap multiaddrs: a join code
// must verify (a bad one is the user's to fix, so it stops the start); a
// relay that cannot be asked is logged and the node starts without it,
// as it would with an unreachable bootstrap peer.
func joinPeers(ctx context.Context, joins []string, self string, log *slog.Logger) ([]string, error) {
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
			found, err := announce.Find(qctx, j, time.Now())
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
