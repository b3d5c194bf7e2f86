package eventstore

import "testing"

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Stored: "stored", Duplicate: "duplicate", Superseded: "superseded", Deleted: "deleted", Expired: "expired", Result(9): "result(9)"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}
