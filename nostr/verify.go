package nostr

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Verify checks the id and the BIP-340 signature by the event's pubkey.
func (e *Event) Verify() error {
	if !e.CheckID() {
		return ErrBadID
	}
	pk, err := liftKey(e.PubKey)
	if err != nil {
		return err
	}
	return checkSig(e, pk)
}

// Verifier checks events exactly as Event.Verify does, but keeps the parsed
// public keys of the authors it saw last. Lifting an x-only key onto the
// curve takes a field square root, a fifth of a verification, and a relay
// sees the same authors again and again, so the relay keeps one Verifier
// for all its connections. In the pure-Go build it also keeps, for a key
// it checks against a second time, a table of the key's multiples
// (keytable.go) that takes a third off each later check, for about 1.3 KB
// per key. It is safe for concurrent use.
type Verifier struct {
	keys *lru.Cache[[32]byte, liftedKey]
}

// NewVerifier makes a Verifier that remembers at most keys public keys.
func NewVerifier(keys int) *Verifier {
	c, err := lru.New[[32]byte, liftedKey](max(keys, 1))
	if err != nil {
		// lru.New fails only for a size below one, excluded above.
		panic(fmt.Sprintf("nostr: key cache: %v", err))
	}
	return &Verifier{keys: c}
}

// Verify checks the id and the BIP-340 signature by the event's pubkey.
func (v *Verifier) Verify(e *Event) error {
	if !e.CheckID() {
		return ErrBadID
	}
	pk, ok := v.keys.Get(e.PubKey)
	if !ok {
		var err error
		if pk, err = liftKey(e.PubKey); err != nil {
			return err
		}
		v.keys.Add(e.PubKey, pk)
	}
	return checkSig(e, pk)
}
