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

// TestMerge: two parts of one window's events merge into the evidence of
// the whole: counts and digests add, the sample is the smallest keys of
// both, without repeats, within SampleSize.
func TestMerge(t *testing.T) {
	set := func(keys ...uint64) EventSet {
		s := EventSet{Digest: Key(0), Sample: []string{}}
		var sum uint64
		for _, k := range keys {
			sum += k
			s.Sample = append(s.Sample, Key(k))
		}
		s.Events, s.Digest = uint64(len(keys)), Key(sum)
		return s
	}
	var many, rest []uint64
	for i := range SampleSize {
		many = append(many, uint64(2*i+2))
		rest = append(rest, uint64(2*i+1))
	}
	for _, c := range []struct {
		name       string
		a, b       EventSet
		events     uint64
		digest     uint64
		first, max string
		n          int
	}{
		{"disjoint", set(1, 5), set(3), 3, 9, Key(1), Key(5), 3},
		{"one empty", set(), set(7), 1, 7, Key(7), Key(7), 1},
		{"no digest yet", EventSet{}, set(2), 1, 2, Key(2), Key(2), 1},
		{"a key in both", set(4), set(4), 2, 8, Key(4), Key(4), 1},
		{"beyond the sample", set(many...), set(rest...), 2 * SampleSize, uint64(SampleSize * (2*SampleSize + 1)), Key(1), Key(SampleSize), SampleSize},
	} {
		got := c.a.Merge(c.b)
		if got.Events != c.events || got.Digest != Key(c.digest) || len(got.Sample) != c.n || got.Sample[0] != c.first || got.Sample[len(got.Sample)-1] != c.max {
			t.Errorf("%s: %+v, want %d events, digest %s, %d keys from %s to %s", c.name, got, c.events, Key(c.digest), c.n, c.first, c.max)
		}
		if err := (Evidence{Gave: got, Received: got}).Check(); err != nil {
			t.Errorf("%s: the merged evidence fails its own check: %v", c.name, err)
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
