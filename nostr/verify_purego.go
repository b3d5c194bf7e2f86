//go:build !(libsecp256k1 && cgo)

package nostr

import (
	"sync/atomic"

	"github.com/btcsuite/btcd/btcec/v2"
)

// liftedKey is an author's key ready for verification: here, btcec's curve
// point and, once the key has been checked against a second time, its
// keyTable.
type liftedKey = *pureKey

// pureKey is what a Verifier keeps of an author's key in the pure-Go build.
type pureKey struct {
	p     btcec.JacobianPoint
	uses  atomic.Uint32
	table atomic.Pointer[keyTable]
}

// Backend names the Schnorr implementation this binary was built with.
const Backend = "btcec"

func liftKey(x [32]byte) (liftedKey, error) {
	p, err := parsePubKey(x)
	if err != nil {
		return nil, err
	}
	return &pureKey{p: *p}, nil
}

// checkSig builds the key's table on its second use: a key used once (an
// uncached Event.Verify, or an author seen once) would not repay it.
func checkSig(e *Event, pk liftedKey) error {
	t := pk.table.Load()
	if t == nil && pk.uses.Add(1) == 2 {
		t = newKeyTable(&pk.p)
		pk.table.Store(t)
	}
	return verifySig(e, &pk.p, t)
}
