package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestFrontEndsShareLabels: two front-ends of one node over PostgreSQL
// with [labels] policy = 'refuse'. The label the node publishes at the
// front-end holding the mesh role (`fleetmesh label`) reaches the other
// through the database's change feed, and both refuse the labelled
// author's next events with blocked:, as one relay would; before the
// label both took them.
func TestFrontEndsShareLabels(t *testing.T) {
	needBinary(t)
	url := frontEndsDB(t)
	homes := frontEndHomes(t, url, 2, "\n[labels]\npolicy = 'refuse'\n")
	fes := []*node{startFrontEnd(t, homes[0]), startFrontEnd(t, homes[1])}
	holder := meshRoleHolder(t, homes)
	spammer, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for i, fe := range fes {
		if ok := publishMsg(t, &meshNode{node: fe}, spam(t, spammer, fmt.Sprint("before, at ", i))); !ok.Accepted {
			t.Fatalf("front-end %d refused the author before any label: %q", i, ok.Message)
		}
	}
	if out, errOut, err := cli(t, "label", "--home", homes[holder], "--author", spammer.pubHex, "--reason", "spam"); err != nil {
		t.Fatalf("fleetmesh label: %v\n%s%s", err, out, errOut)
	}
	n := 0
	for i, fe := range fes {
		eventually(t, func() error {
			n++
			ok := publishMsg(t, &meshNode{node: fe}, spam(t, spammer, fmt.Sprint("after, try ", n)))
			if ok.Accepted || !strings.HasPrefix(ok.Message, "blocked:") {
				return fmt.Errorf("front-end %d (holder %v) answers the labelled author with %v %q, want blocked:", i, i == holder, ok.Accepted, ok.Message)
			}
			return nil
		})
	}
}
