package announce

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/internal/nostrkey"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/nostr"
)

// KeyFile is the announcement key's file name in a node home.
const KeyFile = "announce.key"

// LoadOrCreateKey reads the announcement key at path, or creates one
// (mode 0600). It is a Nostr key of its own: the node key is Ed25519 and
// never signs Nostr events.
func LoadOrCreateKey(path string) (nostr.SecretKey, error) {
	k, _, err := nostrkey.LoadOrCreate(path, "announce: key")
	return k, err
}

// Defaults of an Announcer.
const (
	// DefaultEvery is how often an unchanged descriptor is announced
	// again: often enough that relays always hold one far from expiry
	// (nodes sign descriptors for a day), seldom enough not to burden
	// relays nobody here runs.
	DefaultEvery = time.Hour
	// DefaultRetry is how soon a relay that failed is tried again.
	DefaultRetry = time.Minute
	// publishTimeout bounds one publication to one relay.
	publishTimeout = 15 * time.Second
)

// Announcer keeps the node's latest descriptor announced on its relays:
// at once when what a peer dials (addresses, class) changes, every Every
// otherwise, and again within Retry when a relay failed.
type Announcer struct {
	key    nostr.SecretKey
	relays []string
	log    *slog.Logger
	// Every and Retry are the republication and retry intervals; zero
	// takes the defaults. Set them before Run.
	Every, Retry time.Duration

	mu      sync.Mutex
	latest  *descriptor.Signed
	changed chan struct{}
}

// NewAnnouncer announces with key to relays, each of which must pass
// CheckRelayURL.
func NewAnnouncer(key nostr.SecretKey, relays []string, log *slog.Logger) (*Announcer, error) {
	for _, r := range relays {
		if err := CheckRelayURL(r); err != nil {
			return nil, err
		}
	}
	return &Announcer{key: key, relays: slices.Clone(relays), log: log, changed: make(chan struct{}, 1)}, nil
}

// Set hands the announcer the node's newest descriptor. It never blocks.
func (a *Announcer) Set(d *descriptor.Signed) {
	a.mu.Lock()
	a.latest = d
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// Run announces until ctx ends. It looks every Retry, and at once on Set,
// whether an announcement is due: never made, failed somewhere, what a
// peer dials changed, or Every passed since the last.
func (a *Announcer) Run(ctx context.Context) {
	every, retry := a.Every, a.Retry
	if every <= 0 {
		every = DefaultEvery
	}
	if retry <= 0 {
		retry = DefaultRetry
	}
	var (
		sent    *descriptor.Signed // last announced
		sentAt  time.Time
		created int64
		failed  bool
	)
	periodic.Run(ctx, retry, retry, a.changed, func() {
		a.mu.Lock()
		d := a.latest
		a.mu.Unlock()
		if d == nil || (!failed && sent != nil && !dialChanged(sent, d) && time.Since(sentAt) < every) {
			return
		}
		// Strictly increasing, so a relay replaces the previous one even
		// within the same second (NIP-01 keeps the newest created_at).
		created = max(time.Now().Unix(), created+1)
		failed = !a.publish(ctx, d, created)
		sent, sentAt = d, time.Now()
	})
}

// publish announces d on every relay; it reports whether all took it.
func (a *Announcer) publish(ctx context.Context, d *descriptor.Signed, created int64) bool {
	ev, err := NewEvent(a.key, d, created)
	if err != nil {
		a.log.Warn("announce: sign", "err", err)
		return false
	}
	var wg sync.WaitGroup
	oks := make([]bool, len(a.relays))
	for i, r := range a.relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, publishTimeout)
			defer cancel()
			if err := publish(pctx, r, ev); err != nil {
				a.log.Warn("announce: publish", "relay", r, "err", err)
				return
			}
			oks[i] = true
			a.log.Debug("announce: published", "relay", r, "seq", d.Descriptor.Seq)
		}()
	}
	wg.Wait()
	return !slices.Contains(oks, false)
}

// dialChanged says whether what a peer needs to reach the node differs
// between two descriptors. The host lists its addresses in no fixed
// order, so they are compared as sets.
func dialChanged(a, b *descriptor.Signed) bool {
	x, y := slices.Clone(a.Descriptor.Addresses.Libp2p), slices.Clone(b.Descriptor.Addresses.Libp2p)
	slices.Sort(x)
	slices.Sort(y)
	return a.Descriptor.Class != b.Descriptor.Class || !slices.Equal(x, y)
}
