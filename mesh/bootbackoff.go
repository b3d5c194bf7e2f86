package mesh

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// bootFailure is a bootstrap peer's redial backoff: the wait after its last
// failed dial and when it may be dialled again.
type bootFailure struct {
	wait  time.Duration
	retry time.Time
}

// isBootstrap says whether id is a configured bootstrap peer.
func (d *discovery) isBootstrap(id peer.ID) bool {
	for _, b := range d.m.boot {
		if b.ID == id {
			return true
		}
	}
	return false
}

// bootstrapFailed records a failed dial of bootstrap peer pi and logs it
// once, as a warning with its addresses and the error: the operator
// configured that peer, so a typo or a dead host must show, not be retried
// in silence. The wait before the next dial starts at
// Config.MaintainInterval and doubles with each failure up to
// Config.RedialBackoff; a successful connection (identify) resets it.
func (d *discovery) bootstrapFailed(pi peer.AddrInfo, err error) {
	d.mu.Lock()
	f := d.bootFailed[pi.ID]
	f.wait = min(max(2*f.wait, d.m.cfg.MaintainInterval), d.m.cfg.RedialBackoff)
	f.retry = time.Now().Add(f.wait)
	d.bootFailed[pi.ID] = f
	d.mu.Unlock()
	addrs := make([]string, len(pi.Addrs))
	for i, a := range pi.Addrs {
		addrs[i] = a.String()
	}
	d.m.log.Warn("mesh: bootstrap peer unreachable", "peer", pi.ID, "addrs", addrs, "err", err, "retry_in", f.wait)
}
