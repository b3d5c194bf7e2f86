//go:build libsecp256k1 && cgo

package nostr

/*
#cgo LDFLAGS: -lsecp256k1
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>
*/
import "C"

import "unsafe"

// liftedKey is an author's key ready for verification: here,
// libsecp256k1's parsed x-only key.
type liftedKey = *C.secp256k1_xonly_pubkey

// Backend names the Schnorr implementation this binary was built with.
const Backend = "libsecp256k1"

// verifyContext is created once and only read afterwards: libsecp256k1
// documents that a context used only through const pointers, as verification
// does, is safe to share between threads.
var verifyContext = C.secp256k1_context_create(C.SECP256K1_CONTEXT_VERIFY)

func liftKey(x [32]byte) (liftedKey, error) {
	pk := new(C.secp256k1_xonly_pubkey)
	if C.secp256k1_xonly_pubkey_parse(verifyContext, pk, (*C.uchar)(unsafe.Pointer(&x[0]))) != 1 {
		return nil, ErrBadPubKey
	}
	return pk, nil
}

func checkSig(e *Event, pk liftedKey) error {
	if C.secp256k1_schnorrsig_verify(verifyContext, (*C.uchar)(unsafe.Pointer(&e.Sig[0])), (*C.uchar)(unsafe.Pointer(&e.ID[0])), 32, pk) != 1 {
		return ErrBadSignature
	}
	return nil
}
