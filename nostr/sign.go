package nostr

import (
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// SecretKey is a Nostr user's secp256k1 secret key. A node never signs user
// events with it; the gateway uses one for NIP-42 AUTH towards a backend,
// and tests use them to act as clients.
type SecretKey struct{ k *btcec.PrivateKey }

// SecretKeyFromBytes wraps a 32-byte secret.
func SecretKeyFromBytes(b []byte) (SecretKey, error) {
	if len(b) != 32 {
		return SecretKey{}, fmt.Errorf("nostr: secret key is %d bytes, want 32", len(b))
	}
	k, _ := btcec.PrivKeyFromBytes(b)
	return SecretKey{k: k}, nil
}

// GenerateSecretKey makes a random secret key.
func GenerateSecretKey() (SecretKey, error) {
	k, err := btcec.NewPrivateKey()
	if err != nil {
		return SecretKey{}, fmt.Errorf("nostr: %w", err)
	}
	return SecretKey{k: k}, nil
}

// Bytes returns the 32-byte secret.
func (s SecretKey) Bytes() []byte { return s.k.Serialize() }

// PubKey returns the x-only public key.
func (s SecretKey) PubKey() [32]byte {
	var pk [32]byte
	copy(pk[:], schnorr.SerializePubKey(s.k.PubKey()))
	return pk
}

// Sign sets the event's pubkey, id and BIP-340 signature.
func (s SecretKey) Sign(e *Event) error {
	e.PubKey = s.PubKey()
	e.ID = e.ComputeID()
	sig, err := schnorr.Sign(s.k, e.ID[:])
	if err != nil {
		return fmt.Errorf("nostr: sign: %w", err)
	}
	copy(e.Sig[:], sig.Serialize())
	return nil
}
