package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// KeyFileMode is the permission of a node key file: readable by its owner
// only.
const KeyFileMode = 0o600

// ErrKeyFilePermissions is returned when a key file can be read by others.
var ErrKeyFilePermissions = errors.New("key file is readable by group or others (chmod 600 it)")

// Key is a node's Ed25519 key and the names derived from it.
type Key struct {
	priv ed25519.PrivateKey
}

// NewKey wraps an Ed25519 private key.
func NewKey(priv ed25519.PrivateKey) *Key { return &Key{priv: priv} }

// GenerateKey makes a fresh random node key.
func GenerateKey() (*Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: generate key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// KeyFromSeed makes the key of a 32-byte RFC 8032 seed.
func KeyFromSeed(seed []byte) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity: seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	return &Key{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// LoadKey reads a PKCS#8 PEM Ed25519 key file. It refuses a file that group
// or others can read, since a leaked node key is a stolen identity.
func LoadKey(path string) (*Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("identity: %s: %w", path, ErrKeyFilePermissions)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("identity: %s: no PEM \"PRIVATE KEY\" block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("identity: %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("identity: %s: key is %T, want Ed25519", path, k)
	}
	return &Key{priv: priv}, nil
}

// LoadOrCreateKey loads the key at path, or creates one there if no file
// exists. It never overwrites a file: creation uses O_EXCL, so two processes
// racing to create the key cannot both win.
func LoadOrCreateKey(path string) (k *Key, created bool, err error) {
	k, err = LoadKey(path)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	k, err = GenerateKey()
	if err != nil {
		return nil, false, err
	}
	if err := k.write(path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			k, err = LoadKey(path)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}

func (k *Key) write(path string) error {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, KeyFileMode)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("identity: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("identity: sync %s: %w", path, err)
	}
	return f.Close()
}

// PrivateKey returns the Ed25519 private key.
func (k *Key) PrivateKey() ed25519.PrivateKey { return k.priv }

// PublicKey returns the Ed25519 public key.
func (k *Key) PublicKey() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign signs msg with Ed25519.
func (k *Key) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// DID returns the node's did:key DID.
func (k *Key) DID() string { return DIDFromPublicKey(k.PublicKey()) }

// X25519Private returns the X25519 private key derived from the node key,
// the private half of the DID document's key-agreement key.
func (k *Key) X25519Private() []byte { return X25519PrivateFromEd25519(k.priv) }

// Libp2pKey returns the key in go-libp2p's form, for a libp2p host.
func (k *Key) Libp2pKey() crypto.PrivKey {
	pk, err := crypto.UnmarshalEd25519PrivateKey(k.priv)
	if err != nil {
		// A 64-byte ed25519.PrivateKey always unmarshals.
		panic(fmt.Sprintf("identity: libp2p key: %v", err))
	}
	return pk
}

// PeerID returns the node's libp2p PeerID.
func (k *Key) PeerID() peer.ID { return mustPeerID(k.PublicKey()) }

// EndpointID returns the node's iroh EndpointId.
func (k *Key) EndpointID() string { return EndpointIDFromPublicKey(k.PublicKey()) }

// PeerIDFromPublicKey returns the libp2p PeerID of an Ed25519 key: the
// identity multihash of its protobuf encoding.
func PeerIDFromPublicKey(pub ed25519.PublicKey) (peer.ID, error) {
	lk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	return peer.IDFromPublicKey(lk)
}

func mustPeerID(pub ed25519.PublicKey) peer.ID {
	id, err := PeerIDFromPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return id
}

// PublicKeyFromPeerID extracts the Ed25519 key embedded in a PeerID.
func PublicKeyFromPeerID(id peer.ID) (ed25519.PublicKey, error) {
	lk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("identity: peer %s: %w", id, err)
	}
	if lk.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("identity: peer %s: key type %v, want Ed25519", id, lk.Type())
	}
	raw, err := lk.Raw()
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return ed25519.PublicKey(raw), nil
}

// DIDFromPeerID returns the did:key DID of the node with this PeerID.
func DIDFromPeerID(id peer.ID) (string, error) {
	pub, err := PublicKeyFromPeerID(id)
	if err != nil {
		return "", err
	}
	return DIDFromPublicKey(pub), nil
}

// PeerIDFromDID returns the libp2p PeerID of the node with this DID.
func PeerIDFromDID(did string) (peer.ID, error) {
	pub, err := PublicKeyFromDID(did)
	if err != nil {
		return "", err
	}
	return PeerIDFromPublicKey(pub)
}

// EndpointIDFromPublicKey returns the iroh EndpointId of an Ed25519 key in
// iroh's text form: the 32 key bytes in lowercase hex.
func EndpointIDFromPublicKey(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }

// PublicKeyFromEndpointID parses an iroh EndpointId.
func PublicKeyFromEndpointID(s string) (ed25519.PublicKey, error) {
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("identity: %q: %w", s, ErrBadEndpointID)
	}
	return ed25519.PublicKey(raw), nil
}
