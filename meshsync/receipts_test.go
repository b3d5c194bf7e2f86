package meshsync

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/receipt"
)

// TestReceiptsFrames: RECEIPTS is answered with the page Config.Receipts
// gives, records and cursor intact; a node without accounting records, and
// a source that refuses the query, answer CLOSED with the reason.
func TestReceiptsFrames(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	hs := mn.Hosts()
	want := receipt.Page{Receipts: [][]byte{[]byte("r1"), {0, 1, 2}}, Reports: [][]byte{[]byte("rep")}, Next: "cursor-2"}
	var asked []string
	nodes[1].svc.Close()
	nodes[1].svc = New(hs[1], nodes[1].local, nodes[1].pol, Config{Receipts: func(node, after string) (receipt.Page, error) {
		asked = append(asked, node, after)
		if node == "bad" {
			return receipt.Page{}, errors.New("node \"bad\": not a did:key")
		}
		return want, nil
	}}, nil)
	ctx := context.Background()
	got, err := nodes[0].svc.FetchReceipts(ctx, hs[1].ID(), "did:key:x", "cursor-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Receipts) != 2 || string(got.Receipts[1]) != "\x00\x01\x02" || len(got.Reports) != 1 || got.Next != "cursor-2" {
		t.Fatalf("page %+v", got)
	}
	if strings.Join(asked, " ") != "did:key:x cursor-1" {
		t.Fatalf("asked %v", asked)
	}
	if _, err := nodes[0].svc.FetchReceipts(ctx, hs[1].ID(), "bad", ""); err == nil || !strings.Contains(err.Error(), "not a did:key") {
		t.Fatalf("a refused query: %v", err)
	}
	if _, err := nodes[1].svc.FetchReceipts(ctx, hs[0].ID(), "did:key:x", ""); err == nil || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("a node without records: %v", err)
	}
}

// FuzzReceiptsQuery: whatever a RECEIPTS query holds, it is read or
// refused, and what is read has a node and writes back as read.
func FuzzReceiptsQuery(f *testing.F) {
	for _, s := range []string{`{"node":"did:key:z6Mk","after":"abc"}`, `{"node":""}`, `{"node":"x","extra":1}`, `[]`, `{"node":"x"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		q, err := parseReceiptsQuery(raw)
		if err != nil {
			return
		}
		if q.Node == "" {
			t.Fatal("a query without a node was read")
		}
		b, _ := json.Marshal(q)
		if q2, err := parseReceiptsQuery(b); err != nil || q2 != q {
			t.Fatalf("%+v wrote %s, read back %+v %v", q, b, q2, err)
		}
	})
}
