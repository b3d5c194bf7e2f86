package receipt

import (
	"encoding/json"
	"testing"
)

// TestMissing: keys are compared only where the seen sketch is complete.
func TestMissing(t *testing.T) {
	full := EventSet{}
	for i := range SampleSize {
		full.Sample = append(full.Sample, Key(uint64(10*(i+1))))
	}
	for _, c := range []struct {
		name          string
		claimed, seen EventSet
		want          int
	}{
		{"same", EventSet{Sample: []string{Key(1), Key(2)}}, EventSet{Sample: []string{Key(1), Key(2)}}, 0},
		{"one lacking", EventSet{Sample: []string{Key(1), Key(2)}}, EventSet{Sample: []string{Key(2)}}, 1},
		{"beyond a full sketch", EventSet{Sample: []string{Key(5), Key(1000)}}, full, 1},
		{"nothing seen", EventSet{Sample: []string{Key(5)}}, EventSet{}, 1},
	} {
		if got := Missing(c.claimed, c.seen); len(got) != c.want {
			t.Errorf("%s: missing %v, want %d", c.name, got, c.want)
		}
	}
}

// FuzzEvidence: evidence from a peer is checked or refused; checked
// evidence is within bounds and compares without fault.
func FuzzEvidence(f *testing.F) {
	f.Add([]byte(`{"gave":{"events":2,"digest":"0000000000000003","sample":["0000000000000001","0000000000000002"]},"received":{"events":0,"digest":"0000000000000000","sample":[]}}`))
	f.Add([]byte(`{"gave":{"sample":["zz"]}}`))
	f.Add([]byte(`{"gave":{"sample":["0000000000000002","0000000000000001"]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e Evidence
		if json.Unmarshal(raw, &e) != nil || e.Check() != nil {
			return
		}
		if len(e.Gave.Sample) > SampleSize || len(e.Received.Sample) > SampleSize {
			t.Fatal("an oversized sample passed")
		}
		for _, k := range e.Gave.Sample {
			v, err := ParseKey(k)
			if err != nil || Key(v) != k {
				t.Fatalf("key %q", k)
			}
		}
		Missing(e.Gave, e.Received)
		Missing(e.Received, e.Gave)
	})
}
