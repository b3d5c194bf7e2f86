package leaf

import (
	"crypto/rand"

	"fleetmesh.org/fleetmesh/identity"
)

// NewSeed returns 32 random bytes for a new key, for a KeyStore to store.
func NewSeed() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// FileKeyStore keeps the key in a PKCS#8 PEM file of mode 0600, the same
// file `fleetmesh init` makes (node.key), never overwritten.
type FileKeyStore struct {
	path string
}

// NewFileKeyStore returns the key store of the file at path.
func NewFileKeyStore(path string) *FileKeyStore { return &FileKeyStore{path: path} }

// Seed loads the key, creating the file the first time.
func (f *FileKeyStore) Seed() (seed []byte, err error) {
	defer protect(&err)
	k, _, err := identity.LoadOrCreateKey(f.path)
	if err != nil {
		return nil, err
	}
	return k.PrivateKey().Seed(), nil
}
