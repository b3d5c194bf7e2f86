package gateway

import (
	"fleetmesh.org/fleetmesh/internal/nostrkey"
	"fleetmesh.org/fleetmesh/nostr"
)

// LoadOrCreateBackendKey reads the backend AUTH key (64 hex characters and
// a newline), or creates one with mode 0600 if the file does not exist. It
// never overwrites a file, and refuses one that group or others can read.
func LoadOrCreateBackendKey(path string) (key nostr.SecretKey, secret []byte, err error) {
	return nostrkey.LoadOrCreate(path, "gateway: backend key")
}
