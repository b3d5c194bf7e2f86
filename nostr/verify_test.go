package nostr

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// TestBIP340Vectors runs the verification vectors 0-14 of BIP-340's
// test-vectors.csv (the final, even-y version) through verifySig and through
// the backend this binary was built with (the same code, or libsecp256k1
// with the libsecp256k1 build tag), with the message standing in for the
// event id.
func TestBIP340Vectors(t *testing.T) {
	const (
		pk1 = "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659"
		msg = "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89"
	)
	for _, tc := range []struct {
		index         int
		pub, msg, sig string
		want          bool
	}{
		{0, "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9", "0000000000000000000000000000000000000000000000000000000000000000", "E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0", true},
		{1, pk1, msg, "6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A", true},
		{2, "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8", "7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C", "5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7", true},
		{3, "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3", true},
		{4, "D69C3509BB99E412E68B0FE8544E72837DFA30746D8BE2AA65975F29D22DC7B9", "4DF3C3F68FCC83B27E9D42C90431A72499F17875C81A599B566C9889B9696703", "00000000000000000000003B78CE563F89A0ED9414F5AA28AD0D96D6795F9C6376AFB1548AF603B3EB45C9F8207DEE1060CB71C04E80F593060B07D28308D7F4", true},
		{5, "EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34", msg, "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
		{6, pk1, msg, "FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A14602975563CC27944640AC607CD107AE10923D9EF7A73C643E166BE5EBEAFA34B1AC553E2", false},
		{7, pk1, msg, "1FA62E331EDBC21C394792D2AB1100A7B432B013DF3F6FF4F99FCB33E0E1515F28890B3EDB6E7189B630448B515CE4F8622A954CFE545735AAEA5134FCCDB2BD", false},
		{8, pk1, msg, "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769961764B3AA9B2FFCB6EF947B6887A226E8D7C93E00C5ED0C1834FF0D0C2E6DA6", false},
		{9, pk1, msg, "0000000000000000000000000000000000000000000000000000000000000000123DDA8328AF9C23A94C1FEECFD123BA4FB73476F0D594DCB65C6425BD186051", false},
		{10, pk1, msg, "00000000000000000000000000000000000000000000000000000000000000017615FBAF5AE28864013C099742DEADB4DBA87F11AC6754F93780D5A1837CF197", false},
		{11, pk1, msg, "4A298DACAE57395A15D0795DDBFD1DCB564DA82B0F269BC70A74F8220429BA1D69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
		{12, pk1, msg, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
		{13, pk1, msg, "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141", false},
		{14, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC30", msg, "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
	} {
		var e Event
		for _, f := range []struct {
			dst []byte
			hex string
		}{{e.PubKey[:], tc.pub}, {e.ID[:], tc.msg}, {e.Sig[:], tc.sig}} {
			if _, err := hex.Decode(f.dst, []byte(f.hex)); err != nil {
				t.Fatal(err)
			}
		}
		pk, err := parsePubKey(e.PubKey)
		if err == nil {
			err = verifySig(&e, pk, nil)
		}
		if got := err == nil; got != tc.want {
			t.Errorf("vector %d: verified = %v (%v), want %v", tc.index, got, err, tc.want)
		}
		if pk != nil {
			err := verifySig(&e, pk, newKeyTable(pk))
			if got := err == nil; got != tc.want {
				t.Errorf("vector %d, key table: verified = %v (%v), want %v", tc.index, got, err, tc.want)
			}
		}
		lk, err := liftKey(e.PubKey)
		if err == nil {
			err = checkSig(&e, lk)
		}
		if got := err == nil; got != tc.want {
			t.Errorf("vector %d, %s: verified = %v (%v), want %v", tc.index, Backend, got, err, tc.want)
		}
	}
}

// TestVerifierMatchesVerify checks the cached path against the uncached one
// and both against btcec's own verification, on good and broken events,
// with more authors than the cache holds.
func TestVerifierMatchesVerify(t *testing.T) {
	v := NewVerifier(2)
	var keys []SecretKey
	for range 5 {
		keys = append(keys, mustKey(t))
	}
	for i := range 60 {
		e := &Event{CreatedAt: int64(i), Kind: 1, Tags: Tags{}, Content: "x"}
		if err := keys[i%len(keys)].Sign(e); err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 1:
			e.Sig[i%64] ^= 0x10
		case 2:
			e.Content = "tampered"
		case 3:
			e.PubKey[3] ^= 1
		}
		want := e.Verify()
		if got := v.Verify(e); !errors.Is(got, want) && got != want {
			t.Fatalf("event %d: Verifier %v, Verify %v", i, got, want)
		}
		if e.CheckID() {
			if lib := btcecVerify(e); lib != (want == nil) {
				t.Fatalf("event %d: btcec says %v, Verify %v", i, lib, want)
			}
		}
	}
}

// btcecVerify is btcec's BIP-340 verification of the event's signature.
func btcecVerify(e *Event) bool {
	pk, err := schnorr.ParsePubKey(e.PubKey[:])
	if err != nil {
		return false
	}
	sig, err := schnorr.ParseSignature(e.Sig[:])
	if err != nil {
		return false
	}
	return sig.Verify(e.ID[:], pk)
}

// FuzzVerify compares verifySig with btcec's verification on signatures,
// keys and messages the fuzzer mutates. The one allowed difference is
// s >= n, which BIP-340 rejects and btcec v2.3.5 reduces instead.
func FuzzVerify(f *testing.F) {
	sk, err := SecretKeyFromBytes(append(make([]byte, 31), 7))
	if err != nil {
		f.Fatal(err)
	}
	e := &Event{CreatedAt: 1, Kind: 1, Tags: Tags{}, Content: "fuzz"}
	if err := sk.Sign(e); err != nil {
		f.Fatal(err)
	}
	seed := append(append(e.ID[:], e.PubKey[:]...), e.Sig[:]...)
	f.Add(seed)
	f.Add(append(append([]byte{}, seed[:64]...), make([]byte, 64)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) != 128 {
			return
		}
		var ev Event
		copy(ev.ID[:], data[:32])
		copy(ev.PubKey[:], data[32:64])
		copy(ev.Sig[:], data[64:])
		pk, err := parsePubKey(ev.PubKey)
		if err == nil {
			err = verifySig(&ev, pk, nil)
			if terr := verifySig(&ev, pk, newKeyTable(pk)); (terr == nil) != (err == nil) {
				t.Fatalf("verifySig: %v, with key table: %v", err, terr)
			}
		}
		lk, berr := liftKey(ev.PubKey)
		if berr == nil {
			berr = checkSig(&ev, lk)
		}
		if (err == nil) != (berr == nil) {
			t.Fatalf("verifySig: %v, %s: %v", err, Backend, berr)
		}
		var s btcec.ModNScalar
		sTooBig := s.SetByteSlice(ev.Sig[32:])
		lib := btcecVerify(&ev)
		switch {
		case sTooBig && err == nil:
			t.Fatal("accepted a signature with s >= n")
		case !sTooBig && (err == nil) != lib:
			t.Fatalf("verifySig: %v, btcec: %v", err, lib)
		}
	})
}
