package standing

import (
	"slices"
	"testing"
)

type mapReader map[string]float64

func (m mapReader) Of(did string) float64 { return m[did] }

// TestTrusted: at or above the threshold is trusted; below, unknown, or
// no reader at all is not.
func TestTrusted(t *testing.T) {
	r := mapReader{"a": 0.002, "b": 0.001, "c": 0.0009}
	for _, tc := range []struct {
		r    Reader
		did  string
		want bool
	}{{r, "a", true}, {r, "b", true}, {r, "c", false}, {r, "d", false}, {nil, "a", false}} {
		if got := Trusted(tc.r, tc.did, 0.001); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.did, got, tc.want)
		}
	}
}

// TestOrder: candidates with standing come first, highest first; equal
// ones (strangers above all) keep their order; a nil reader changes
// nothing.
func TestOrder(t *testing.T) {
	r := mapReader{"b": 0.5, "d": 1, "e": 0.5}
	type cand struct{ did, url string }
	for _, tc := range []struct {
		r    Reader
		in   []string
		want []string
	}{
		{r, []string{"a", "b", "c", "d", "e"}, []string{"d", "b", "e", "a", "c"}},
		{r, []string{"e", "c", "b", "a"}, []string{"e", "b", "c", "a"}},
		{r, []string{"c", "a"}, []string{"c", "a"}},
		{r, nil, nil},
		{nil, []string{"a", "d"}, []string{"a", "d"}},
	} {
		cs := make([]cand, len(tc.in))
		for i, d := range tc.in {
			cs[i] = cand{d, "http://" + d}
		}
		Order(tc.r, cs, func(c cand) string { return c.did })
		got := make([]string, len(cs))
		for i, c := range cs {
			if c.url != "http://"+c.did {
				t.Fatalf("%v: %+v lost its pair", tc.in, c)
			}
			got[i] = c.did
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.in, got, tc.want)
		}
	}
}
