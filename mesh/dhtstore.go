package mesh

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	pebbleds "github.com/ipfs/go-ds-pebble"
)

// The DHT's datastore holds the provider records other nodes announce to
// this one (spec/mesh-placement.md, "Content routing"): one for each
// durably held event and each of its holders, kept for the DHT's
// 48-hour provide validity. go-libp2p-kad-dht keeps them in a map in
// memory unless given a datastore, so a DHT server's heap would grow
// with every event the mesh takes for two days. On disk, what they cost
// in memory is this database's fixed buffers.
const (
	// dhtMemTableBytes is the write buffer of the DHT's database: records
	// are small and written one at a time, so a small one flushes often
	// and cheaply.
	dhtMemTableBytes = 1 << 20
	// dhtCacheBytes is its block cache: provider lookups are few (a
	// lookup that misses among connected peers), so a small cache serves.
	dhtCacheBytes = 2 << 20
	// dhtMaxOpenFiles bounds the database's open files to Pebble's
	// smallest table cache (64) and its own 10 (WAL, manifest, lock...):
	// Pebble's default of 1,000 would let it take the descriptors the
	// node's budget keeps for the store and the clients (spec/limits.md).
	dhtMaxOpenFiles = 64 + 10
)

// openDHTStore opens (creating it if need be) the DHT's on-disk datastore
// in dir. Writes are not synced: a record lost to a crash is announced
// again at its holder's next re-announcement pass, and until then a
// lookup finds the event's other holders or asks connected peers.
func openDHTStore(dir string, log *slog.Logger) (*pebbleds.Datastore, error) {
	cache := pebble.NewCache(dhtCacheBytes)
	defer cache.Unref() // the database holds its own reference
	opts := &pebble.Options{
		Cache:        cache,
		MemTableSize: dhtMemTableBytes,
		MaxOpenFiles: dhtMaxOpenFiles,
		Logger:       dhtLogger{log},
	}
	ds, err := pebbleds.NewDatastore(dir, pebbleds.WithPebbleOpts(opts))
	if err != nil {
		return nil, fmt.Errorf("mesh: DHT records in %s: %w", dir, err)
	}
	return ds, nil
}

// dhtLogger logs Pebble's flushes and compactions at debug and its
// errors as warnings (the DHT also gets them as errors); Fatalf is a
// broken invariant of the database, and panics as Pebble's own does.
type dhtLogger struct{ l *slog.Logger }

func (d dhtLogger) Infof(format string, args ...any) {
	d.l.Debug(fmt.Sprintf("mesh: DHT records: pebble: "+format, args...))
}

func (d dhtLogger) Errorf(format string, args ...any) {
	d.l.Warn(fmt.Sprintf("mesh: DHT records: pebble: "+format, args...))
}

func (d dhtLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("mesh: DHT records: pebble: "+format, args...))
}
