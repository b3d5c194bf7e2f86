package mediation

import "testing"

// The record of handled deliveries keeps the newest ids up to its bound.
func TestSeenBound(t *testing.T) {
	s, err := OpenSeen(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if err := s.Add(id); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if got, err := s.Has(id); err != nil || got != want {
			t.Fatalf("Has(%s) = %v %v, want %v", id, got, err, want)
		}
	}
}
