package verify

import (
	"crypto/sha256"
	"errors"
	"testing"
)

// TestCommitLayout: the commitment is SHA-256 over exactly the bytes
// the doc (and spec/compute.md) lists, built here by hand.
func TestCommitLayout(t *testing.T) {
	r, nonce := Result{Hash: hashOf(0xab)}, hashOf(0x11)
	var b []byte
	b = append(b, "fleetmesh-job-commit/1\x00"...)
	for _, s := range []string{"job-1", "did:key:z6Mk", ""} {
		b = append(b, byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s)))
		b = append(b, s...)
	}
	b = append(b, r.Hash[:]...)
	b = append(b, nonce[:]...)
	if got, want := Commit("job-1", "did:key:z6Mk", r, nonce), sha256.Sum256(b); got != want {
		t.Fatalf("Commit = %x, want %x", got, want)
	}
}

func TestCheckCommit(t *testing.T) {
	job, did, nonce := "job-1", "did:key:a", hashOf(1)
	r := ok(9)
	c := Commit(job, did, r, nonce)
	cases := []struct {
		name     string
		job, did string
		r        Result
		nonce    [32]byte
		wantErr  bool
	}{
		{"opens", job, did, r, nonce, false},
		{"other job", "job-2", did, r, nonce, true},
		{"other executor (a copied commitment)", job, "did:key:b", r, nonce, true},
		{"other result (a copied reveal)", job, did, ok(8), nonce, true},
		{"other nonce", job, did, r, hashOf(2), true},
		{"inconclusive instead", job, did, stopped("out_of_fuel"), nonce, true},
		{"shifted boundary between job and executor", job + "d", "id:key:a", r, nonce, true},
	}
	for _, tc := range cases {
		err := CheckCommit(tc.job, tc.did, tc.r, tc.nonce, c)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrCommitment)) {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
	// An inconclusive result commits to its reason, not to a hash.
	a := Commit(job, did, Result{Hash: hashOf(5), Inconclusive: "out_of_fuel"}, nonce)
	if a != Commit(job, did, stopped("out_of_fuel"), nonce) || a == Commit(job, did, stopped("stack_exhausted"), nonce) {
		t.Fatal("an inconclusive commitment must cover the reason and ignore the hash")
	}
}
