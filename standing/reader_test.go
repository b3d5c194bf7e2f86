package standing

import "testing"

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
