// Package nostrkey keeps a secp256k1 Nostr secret key in a file of a node
// home: 64 hex characters and a newline, mode 0600, created once and never
// overwritten. The gateway's backend AUTH key and the mesh announcement key
// (package announce) are such keys; neither is ever the node's Ed25519 key.
//
// It is not a key store for users' keys: a node holds no user's key.
package nostrkey

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"fleetmesh.org/fleetmesh/nostr"
)

// LoadOrCreate reads the key at path, or creates one with mode 0600 if the
// file does not exist. It never overwrites a file, and refuses one that
// group or others can read. name prefixes its errors ("gateway: backend
// key").
func LoadOrCreate(path, name string) (key nostr.SecretKey, secret []byte, err error) {
	data, err := readFile(path, name)
	if errors.Is(err, fs.ErrNotExist) {
		k, gerr := nostr.GenerateSecretKey()
		if gerr != nil {
			return key, nil, gerr
		}
		werr := writeFile(path, name, k.Bytes())
		if werr == nil {
			return k, k.Bytes(), nil
		}
		if !errors.Is(werr, fs.ErrExist) {
			return key, nil, werr
		}
		// Another process won the race: use the key it wrote.
		data, err = readFile(path, name)
	}
	if err != nil {
		return key, nil, err
	}
	secret, err = hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(secret) != 32 {
		return key, nil, fmt.Errorf("%s %s: want 64 hex characters (a 32-byte secp256k1 secret)", name, path)
	}
	key, err = nostr.SecretKeyFromBytes(secret)
	return key, secret, err
}

func readFile(path, name string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is readable by group or others (mode %v); chmod 600 it", name, path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

func writeFile(path, name string, secret []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Written whole to a temporary file, then linked into place: a reader
	// racing the writer sees no file or a whole one, never a partial
	// key, and the link fails with ErrExist rather than overwrite.
	f, err := os.CreateTemp(dir, ".nostr-key-*")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := f.WriteString(hex.EncodeToString(secret) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
