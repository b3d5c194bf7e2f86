package descriptor

import (
	"errors"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// fakeClock is a settable clock for the Verifier.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func signSeq(t *testing.T, k *identity.Key, seq uint64, exp int64) []byte {
	t.Helper()
	d := sample(k)
	d.Seq, d.Expires = seq, exp
	s, err := Sign(k, d, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s.JWS
}

func TestVerifierReplay(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	clock := &fakeClock{now: testNow}
	v := NewVerifier(VerifierConfig{Now: clock.Now})
	exp := testNow.Unix() + 3600
	steps := []struct {
		name string
		raw  []byte
		want error
	}{
		{"first", signSeq(t, k, 5, exp), nil},
		{"same again", signSeq(t, k, 5, exp), ErrReplayed},
		{"lower seq", signSeq(t, k, 4, exp), ErrReplayed},
		{"other DID, lower seq", signSeq(t, other, 1, exp), nil},
		{"higher seq", signSeq(t, k, 6, exp), nil},
		{"previous now replayed", signSeq(t, k, 5, exp), ErrReplayed},
		{"invalid is not recorded", signSeq(t, k, 100, testNow.Unix()), ErrExpired},
		{"higher than the invalid one's seq not needed", signSeq(t, k, 7, exp), nil},
	}
	for _, s := range steps {
		_, err := v.Accept(s.raw)
		if !errors.Is(err, s.want) {
			t.Fatalf("%s: Accept = %v, want %v", s.name, err, s.want)
		}
	}
	if seq, ok := v.LastSeq(k.DID()); !ok || seq != 7 {
		t.Fatalf("LastSeq = %d, %v; want 7", seq, ok)
	}
}

func TestVerifierBounded(t *testing.T) {
	clock := &fakeClock{now: testNow}
	const max = 4
	v := NewVerifier(VerifierConfig{MaxDIDs: max, Now: clock.Now})
	keys := make([]*identity.Key, 10)
	for i := range keys {
		keys[i] = testKey(t, byte(10+i))
		// Later keys' descriptors expire later, so the earliest ones are
		// the ones the table drops when full.
		if _, err := v.Accept(signSeq(t, keys[i], 1, testNow.Unix()+int64(100+i))); err != nil {
			t.Fatal(err)
		}
		if v.Len() > max {
			t.Fatalf("table holds %d DIDs, bound %d", v.Len(), max)
		}
	}
	for i, k := range keys {
		_, ok := v.LastSeq(k.DID())
		if want := i >= len(keys)-max; ok != want {
			t.Errorf("key %d remembered = %v, want %v (soonest-expiring entries go first)", i, ok, want)
		}
	}
	// Once every remembered descriptor has expired, the table empties.
	clock.Set(testNow.Add(time.Hour))
	k := testKey(t, 99)
	d := sample(k)
	d.IssuedAt, d.Expires = clock.Now().Unix(), clock.Now().Unix()+60
	s, err := Sign(k, d, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Accept(s.JWS); err != nil {
		t.Fatal(err)
	}
	if v.Len() != 1 {
		t.Fatalf("expired entries kept: %d DIDs", v.Len())
	}
}

func TestVerifierConcurrent(t *testing.T) {
	k := testKey(t, 1)
	clock := &fakeClock{now: testNow}
	v := NewVerifier(VerifierConfig{Now: clock.Now})
	raws := make([][]byte, 16)
	for i := range raws {
		raws[i] = signSeq(t, k, uint64(i+1), testNow.Unix()+3600)
	}
	var wg sync.WaitGroup
	for _, raw := range raws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.Accept(raw); err != nil && !errors.Is(err, ErrReplayed) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if seq, _ := v.LastSeq(k.DID()); seq != 16 {
		t.Fatalf("LastSeq after concurrent accepts = %d, want 16", seq)
	}
}
