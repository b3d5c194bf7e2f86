package gateway

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

// LoadOrCreateBackendKey reads the backend AUTH key (64 hex characters and
// a newline), or creates one with mode 0600 if the file does not exist. It
// never overwrites a file, and refuses one that group or others can read.
func LoadOrCreateBackendKey(path string) (key nostr.SecretKey, secret []byte, err error) {
	data, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, gerr := nostr.GenerateSecretKey()
		if gerr != nil {
			return key, nil, gerr
		}
		werr := writeKeyFile(path, k.Bytes())
		if werr == nil {
			return k, k.Bytes(), nil
		}
		if !errors.Is(werr, fs.ErrExist) {
			return key, nil, werr
		}
		// Another process won the race: use the key it wrote.
		data, err = readKeyFile(path)
	}
	if err != nil {
		return key, nil, err
	}
	secret, err = hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(secret) != 32 {
		return key, nil, fmt.Errorf("gateway: backend key %s: want 64 hex characters (a 32-byte secp256k1 secret)", path)
	}
	key, err = nostr.SecretKeyFromBytes(secret)
	return key, secret, err
}

func readKeyFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: backend key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("gateway: backend key %s is readable by group or others (mode %v); chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: backend key: %w", err)
	}
	return data, nil
}

func writeKeyFile(path string, secret []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	// Written whole to a temporary file, then linked into place: a reader
	// racing the writer sees no file or a whole one, never a partial
	// key, and the link fails with ErrExist rather than overwrite.
	f, err := os.CreateTemp(dir, ".backend-key-*")
	if err != nil {
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(secret) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("gateway: backend key: %w", err)
	}
	return nil
}
