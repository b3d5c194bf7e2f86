//go:build !(libsecp256k1 && cgo)

package nostr

import "github.com/btcsuite/btcd/btcec/v2"

// liftedKey is an author's key ready for verification: here, btcec's curve
// point.
type liftedKey = *btcec.JacobianPoint

// Backend names the Schnorr implementation this binary was built with.
const Backend = "btcec"

func liftKey(x [32]byte) (liftedKey, error) { return parsePubKey(x) }

func checkSig(e *Event, pk liftedKey) error { return verifySig(e, pk) }
