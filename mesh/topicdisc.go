package mesh

import (
	"context"
	mrand "math/rand"
	"math/rand/v2"
	"time"

	coredisc "github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/backoff"
)

// Topic discovery pacing. GossipSub (go-libp2p-pubsub) looks up a topic's
// subscribers in the DHT every second for as long as the node's mesh for
// that topic has fewer than D_lo peers, which for a shard with few
// subscribers anywhere is for ever; and it retries a failed advertisement
// exactly 2 minutes later, so nodes that failed together (a mesh starting,
// a partition healing) retry together. Both turn into waves of DHT lookups
// whose dialled connections the connection manager then trims: the scale
// run (docs/benchmarks/mesh.md) saw them at 500 nodes.
const (
	// topicLookupMin and topicLookupMax bound the wait between two DHT
	// lookups of one topic while the subscribers they find do not change;
	// the wait doubles (with decorrelated jitter) from the first to the
	// second and starts again at the first when the set changes. A node
	// that joins a topic looks up at once and connects to the subscribers,
	// so subscribers that are already there find the newcomer through its
	// connection, not through their next lookup.
	topicLookupMin = 10 * time.Second
	topicLookupMax = 10 * time.Minute
	// advertiseRetry is the mean wait before retrying a failed topic
	// advertisement; each wait is drawn from half to one and a half times
	// it.
	advertiseRetry = 2 * time.Minute
	// topicLookupPeers bounds the subscribers one lookup collects. It is
	// also needed for the backoff cache to pass on what an ongoing lookup
	// finds at all: with no limit (GossipSub sets none) it passes nothing.
	topicLookupPeers = 64
	// readyPoll is how often an advertisement waiting for the DHT to have
	// peers looks again.
	readyPoll = time.Second
)

// topicDiscovery wraps the DHT rendezvous discovery that GossipSub uses to
// find a topic's subscribers: go-libp2p's backoff cache answers repeated
// lookups of a topic from its last result until the backoff ends, and
// failed advertisements are retried after a jittered wait.
//
// ready reports whether the DHT has peers to advertise to: advertising
// waits for it, polling every readyPoll, rather than failing and waiting a
// retry's minutes, as every topic a node joins as it starts otherwise does.
func topicDiscovery(inner coredisc.Discovery, ready func() bool) (coredisc.Discovery, error) {
	cached, err := backoff.NewBackoffDiscovery(inner,
		backoff.NewExponentialDecorrelatedJitter(topicLookupMin, topicLookupMax, 2, mrand.NewSource(rand.Int64())))
	if err != nil {
		return nil, err
	}
	return pacedDiscovery{Discovery: cached, ready: ready}, nil
}

// pacedDiscovery bounds lookups and spreads the retries of failed
// advertisements.
type pacedDiscovery struct {
	coredisc.Discovery
	ready func() bool
}

// FindPeers looks up ns's subscribers through the backoff cache, at most
// topicLookupPeers of them unless the caller asks for fewer.
func (d pacedDiscovery) FindPeers(ctx context.Context, ns string, opts ...coredisc.Option) (<-chan peer.AddrInfo, error) {
	var o coredisc.Options
	if err := o.Apply(opts...); err != nil {
		return nil, err
	}
	if o.Limit <= 0 || o.Limit > topicLookupPeers {
		opts = append(opts, coredisc.Limit(topicLookupPeers))
	}
	return d.Discovery.FindPeers(ctx, ns, opts...)
}

// Advertise waits until the DHT has peers, then advertises as the wrapped
// discovery does; on failure it returns the jittered wait before the next
// attempt, which GossipSub then uses instead of its fixed 2 minutes.
func (d pacedDiscovery) Advertise(ctx context.Context, ns string, opts ...coredisc.Option) (time.Duration, error) {
	for !d.ready() {
		select {
		case <-time.After(readyPoll):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	ttl, err := d.Discovery.Advertise(ctx, ns, opts...)
	if err != nil {
		return advertiseRetry/2 + rand.N(advertiseRetry), err
	}
	return ttl, nil
}
