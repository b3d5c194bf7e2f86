// Package canon is fleetmesh's canonical binary form for signed records
// (receipts, reports, fork proofs, grants): deterministic CBOR, the core
// deterministic encoding of RFC 8949 §4.2.1, through fxamacker/cbor/v2.
//
// Decoding is strict: duplicate map keys, indefinite lengths, tags,
// unknown fields and invalid UTF-8 are refused, and the input must be the
// canonical encoding of what it decodes to (Unmarshal re-encodes and
// compares), so two different byte strings never stand for one record and
// a signature always covers the only encoding there is. spec/receipts.md
// says why CBOR rather than JCS.
//
// It is not a general CBOR codec: records with floats or maps keyed by
// anything but short text have no place here.
package canon

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// MaxBytes bounds one record on decode.
const MaxBytes = 64 << 10

var (
	enc cbor.EncMode
	dec cbor.DecMode
)

func init() {
	var err error
	eo := cbor.CoreDetEncOptions()
	eo.Time = cbor.TimeUnix
	if enc, err = eo.EncMode(); err != nil {
		panic(err)
	}
	if dec, err = (cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   8,
		MaxArrayElements:  4096,
		MaxMapPairs:       64,
		UTF8:              cbor.UTF8RejectInvalid,
	}).DecMode(); err != nil {
		panic(err)
	}
}

// ErrNotCanonical is returned for input that decodes but is not the
// canonical encoding of the value it decodes to.
var ErrNotCanonical = errors.New("not in canonical form (deterministic CBOR, RFC 8949 §4.2.1)")

// Marshal returns the canonical encoding of v.
func Marshal(v any) ([]byte, error) { return enc.Marshal(v) }

// Unmarshal decodes data into v and checks that data is the canonical
// encoding of v.
func Unmarshal(data []byte, v any) error {
	if err := Decode(data, v); err != nil {
		return err
	}
	return CheckCanonical(data, v)
}

// Decode decodes data into v strictly but does not check that data is
// canonical; a caller that wants to report a more specific fault first
// calls CheckCanonical after its own checks.
func Decode(data []byte, v any) error {
	if len(data) > MaxBytes {
		return fmt.Errorf("%d bytes exceeds %d", len(data), MaxBytes)
	}
	return dec.Unmarshal(data, v)
}

// CheckCanonical checks that data is the canonical encoding of v.
func CheckCanonical(data []byte, v any) error {
	again, err := enc.Marshal(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, data) {
		return ErrNotCanonical
	}
	return nil
}

// Null is the encoding of CBOR null, the only value a reserved field such
// as a receipt's settlement may hold in this version.
var Null = cbor.RawMessage{0xf6}

// RawMessage is an encoded CBOR value kept as bytes.
type RawMessage = cbor.RawMessage
