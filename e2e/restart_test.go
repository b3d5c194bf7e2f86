package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestStorageRulesSurviveKill checks that what the storage rules removed
// stays removed across a SIGKILL and restart: a replaced version does not
// come back, a deleted event is not served and is refused if published
// again, and an event that expired while the node was down is not served.
func TestStorageRulesSurviveKill(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	n := startNode(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), crashPhaseBudget)
	defer cancel()
	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	mustSign := func(createdAt int64, kind int, content string, tags [][]string) *event {
		e, err := u.signAt(createdAt, kind, content, tags)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	profileOld := mustSign(now-100, 0, "old profile", nil)
	profileNew := mustSign(now-50, 0, "new profile", nil)
	doomed := mustSign(now-40, 1, "to be deleted", nil)
	deletion := mustSign(now-30, 5, "", [][]string{{"e", doomed.ID}})
	shortLived := mustSign(now, 1, "expires soon", [][]string{{"expiration", strconv.FormatInt(now+2, 10)}})
	kept := mustSign(now-20, 1, "kept", nil)
	for _, e := range []*event{profileOld, profileNew, doomed, deletion, shortLived, kept} {
		m, err := publishOne(c, e)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Accepted {
			t.Fatalf("%q refused: %s", e.Content, m.Message)
		}
	}
	c.Close()
	n.kill()
	// Let the expiration pass while the node is down.
	for time.Now().Unix() <= now+2 {
		time.Sleep(100 * time.Millisecond)
	}
	n = startNode(t, home)
	all := []string{profileOld.ID, profileNew.ID, doomed.ID, deletion.ID, shortLived.ID, kept.ID}
	found, err := fetchIDs(ctx, n.url, all, len(all))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		e    *event
		want bool
	}{{profileOld, false}, {profileNew, true}, {doomed, false}, {deletion, true}, {shortLived, false}, {kept, true}} {
		if found[tc.e.ID] != tc.want {
			t.Errorf("after kill and restart, %q served = %v, want %v", tc.e.Content, found[tc.e.ID], tc.want)
		}
	}
	c, err = dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := publishOne(c, doomed)
	if err != nil {
		t.Fatal(err)
	}
	again, err := fetchIDs(ctx, n.url, []string{doomed.ID}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if again[doomed.ID] {
		t.Errorf("a deleted event published again after restart is served (OK %v %q)", m.Accepted, m.Message)
	}
}
