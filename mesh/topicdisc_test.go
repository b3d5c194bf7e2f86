package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coredisc "github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
)

// countingDiscovery stands in for the DHT under topicDiscovery: it counts
// lookups and answers each with the same subscribers, as a DHT does for a
// topic nobody joins or leaves.
type countingDiscovery struct {
	lookups    atomic.Int64
	peers      []peer.AddrInfo
	advertiseE error
}

func (c *countingDiscovery) Advertise(context.Context, string, ...coredisc.Option) (time.Duration, error) {
	if c.advertiseE != nil {
		return 0, c.advertiseE
	}
	return 3 * time.Hour, nil
}

func (c *countingDiscovery) FindPeers(context.Context, string, ...coredisc.Option) (<-chan peer.AddrInfo, error) {
	c.lookups.Add(1)
	// Answers come later, over the lookup's course, as from a DHT.
	ch := make(chan peer.AddrInfo)
	go func() {
		defer close(ch)
		for _, p := range c.peers {
			time.Sleep(5 * time.Millisecond)
			ch <- p
		}
	}()
	return ch, nil
}

// TestTopicDiscoveryPacing asks for a topic's subscribers as often as
// GossipSub does while a topic's mesh is short of peers, and checks that
// the DHT is asked once and the same subscribers come back from the cache;
// and that a failed advertisement is retried after a jittered wait.
func TestTopicDiscoveryPacing(t *testing.T) {
	subs := []peer.AddrInfo{{ID: peer.ID("a")}, {ID: peer.ID("b")}}
	inner := &countingDiscovery{peers: subs}
	var ready atomic.Bool
	d, err := topicDiscovery(inner, ready.Load)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		ch, err := d.FindPeers(context.Background(), "floodsub:"+TopicPrefix+"7")
		if err != nil {
			t.Fatal(err)
		}
		var got int
		for range ch {
			got++
		}
		if got != len(subs) {
			t.Fatalf("lookup %d returned %d subscribers, want %d", i, got, len(subs))
		}
	}
	// Well under topicLookupMin passes in this loop, so one DHT lookup
	// serves all 20.
	if n := inner.lookups.Load(); n != 1 {
		t.Fatalf("20 back-to-back lookups of one topic reached the DHT %d times, want 1", n)
	}
	if _, err := d.FindPeers(context.Background(), "floodsub:"+TopicPrefix+"8"); err != nil {
		t.Fatal(err)
	}
	if n := inner.lookups.Load(); n != 2 {
		t.Fatalf("another topic's first lookup: %d DHT lookups in all, want 2", n)
	}

	// With no DHT peers, advertising waits instead of failing.
	waited := make(chan error, 1)
	go func() {
		_, err := d.Advertise(context.Background(), "floodsub:"+TopicPrefix+"9")
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("advertised with an empty routing table (err %v)", err)
	case <-time.After(2 * readyPoll):
	}
	ready.Store(true)
	if err := <-waited; err != nil {
		t.Fatalf("advertising once the DHT had peers: %v", err)
	}

	inner.advertiseE = errors.New("lookup failed")
	seen := map[time.Duration]bool{}
	for range 50 {
		next, err := d.Advertise(context.Background(), "floodsub:"+TopicPrefix+"7")
		if err == nil {
			t.Fatal("a failed advertisement reported no error")
		}
		if next < advertiseRetry/2 || next >= advertiseRetry*3/2 {
			t.Fatalf("retry after %v, want %v to %v", next, advertiseRetry/2, advertiseRetry*3/2)
		}
		seen[next] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 failed advertisements gave only %d different retry waits", len(seen))
	}
	inner.advertiseE = nil
	if next, err := d.Advertise(context.Background(), "floodsub:"+TopicPrefix+"7"); err != nil || next != 3*time.Hour {
		t.Fatalf("a good advertisement: next %v, err %v; want the DHT's 3h and no error", next, err)
	}
}
