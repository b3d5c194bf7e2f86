package problemreport

import (
	"errors"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&didcomm.Problem{Code: didcomm.CodeSenderMismatch, Err: errors.New("from is not skid")}, didcomm.CodeSenderMismatch},
		{errors.New("disk full"), didcomm.CodeInternal},
	} {
		m, err := New(tc.err, "did:key:me", "did:key:you", "thread-1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(m)
		if err != nil || b.Code != tc.code || m.Pthid != "thread-1" || b.Comment == "" {
			t.Fatalf("parsed %+v %v", b, err)
		}
	}
	if _, err := Parse(&didcomm.Message{Type: "x"}); err == nil {
		t.Fatal("parsed a non-report")
	}
	if _, err := Parse(&didcomm.Message{Type: Type, Body: []byte(`{}`)}); err == nil {
		t.Fatal("parsed a report without a code")
	}
}
