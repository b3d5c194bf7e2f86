package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/nostr"
)

// nip86 makes a NIP-86 call at n's relay URL, authorized by a NIP-98
// event of admin's with the payload hash, and returns its error field.
func nip86(t *testing.T, n *node, admin nostr.SecretKey, method string, params ...any) error {
	t.Helper()
	body := nip86Body(method, params...)
	status, r := nip86Post(t, n, n, nip86Auth(t, admin, n, body), body)
	if status != http.StatusOK {
		t.Fatalf("NIP-86 %s: status %d, answer %+v", method, status, r)
	}
	if r.Error != "" {
		return fmt.Errorf("NIP-86 %s: %s", method, r.Error)
	}
	return nil
}

func nip86Body(method string, params ...any) []byte {
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"method": method, "params": params})
	return body
}

// nip86Auth is a NIP-98 Authorization header of admin's for body POSTed
// to n's relay URL.
func nip86Auth(t *testing.T, admin nostr.SecretKey, n *node, body []byte) string {
	t.Helper()
	sum := sha256.Sum256(body)
	ev := &nostr.Event{Kind: manage.KindHTTPAuth, CreatedAt: time.Now().Unix(), Tags: nostr.Tags{
		{"u", n.httpURL() + "/"}, {"method", "POST"}, {"payload", hex.EncodeToString(sum[:])},
	}}
	if err := admin.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return "Nostr " + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil))
}

// nip86Post POSTs a NIP-86 body to front-end to, with the Host header of
// front-end as, as a load balancer in front of both would forward it.
func nip86Post(t *testing.T, to, as *node, auth string, body []byte) (int, manage.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, to.httpURL()+"/", bytes.NewReader(body))
	req.Host = strings.TrimPrefix(as.httpURL(), "http://")
	req.Header.Set("Content-Type", "application/nostr+json+rpc")
	req.Header.Set("Authorization", auth)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("NIP-86 POST: %v", err)
	}
	defer res.Body.Close()
	var r manage.Response
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatalf("NIP-86 answer (status %d) is not JSON: %v", res.StatusCode, err)
	}
	return res.StatusCode, r
}

// publishAs publishes a fresh kind 1 event of u at url and returns the
// relay's OK.
func publishAs(t *testing.T, url string, u *user, what string) okMessage {
	t.Helper()
	ev, err := u.sign(1, randomContent(what), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oks, err := gwPublish(ctx, url, []*event{ev})
	if err != nil {
		t.Fatal(err)
	}
	return oks[ev.ID]
}

// TestFrontEndsShareLists: the operator's NIP-86 lists hold at every
// front-end of a node over PostgreSQL. A ban moved in from the node's
// manage.db by `fleetmesh store migrate` holds at both front-ends; then a
// pubkey banned through front-end A is refused with blocked: at B, an
// address blocked through A has its open connection at B closed and its
// new ones refused, and the relay name changed through A is B's NIP-11
// name, each within a bounded wait; an authorization used at A is
// refused at B.
func TestFrontEndsShareLists(t *testing.T) {
	needBinary(t)
	url := frontEndsDB(t)
	admin, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	pk := admin.PubKey()
	adminsConfig := "\n[manage]\nadmins = [\"" + hex.EncodeToString(pk[:]) + "\"]\n"

	// A node on one machine banned an author in its manage.db; migrate
	// copies the ban into the database.
	old, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	oldHome := newHome(t, nodeConfig(nil)+adminsConfig)
	fs, err := manage.OpenFile(oldHome)
	if err != nil {
		t.Fatal(err)
	}
	oldLists, err := manage.New(context.Background(), fs, manage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldPK, _ := manage.ParseHex32(old.pubHex)
	if err := oldLists.BanPubkey(context.Background(), oldPK, "banned before the move"); err != nil {
		t.Fatal(err)
	}
	oldLists.Close()
	fs.Close()
	out, errOut, err := cli(t, "store", "migrate", "--home", oldHome, "--to", url)
	if err != nil || !strings.Contains(out, "copied 1 entries of the operator's lists") {
		t.Fatalf("fleetmesh store migrate: %v\n%s\n%s", err, out, errOut)
	}

	homes := frontEndHomes(t, url, 2, adminsConfig)
	a, b := startFrontEnd(t, homes[0]), startFrontEnd(t, homes[1])
	for _, fe := range []*node{a, b} {
		if ok := publishAs(t, fe.url, old, "moved ban"); ok.Accepted || !strings.HasPrefix(ok.Message, "blocked:") {
			t.Fatalf("the author banned in manage.db, at %s after the move: %+v", fe.url, ok)
		}
	}

	t.Run("ban", func(t *testing.T) {
		spammer, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		if ok := publishAs(t, b.url, spammer, "before"); !ok.Accepted {
			t.Fatalf("before any ban, B refused: %+v", ok)
		}
		if err := nip86(t, a, admin, "banpubkey", spammer.pubHex, "spam"); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() error {
			if ok := publishAs(t, b.url, spammer, "after"); ok.Accepted || !strings.HasPrefix(ok.Message, "blocked:") {
				return fmt.Errorf("banned at A, B answers %+v", ok)
			}
			return nil
		})
	})

	t.Run("block address", func(t *testing.T) {
		const ip = "127.0.0.5"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		open, _, err := dialFrom(ctx, b.url, ip)
		if err != nil {
			t.Fatalf("before the block, B refused %s: %v", ip, err)
		}
		defer open.Close()
		if err := nip86(t, a, admin, "blockip", ip, "flood"); err != nil {
			t.Fatal(err)
		}
		// B closes the connection it had open from the address.
		open.SetReadDeadline(time.Now().Add(time.Minute))
		for {
			_, _, err := open.ReadMessage()
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("a minute after %s was blocked at A, B still holds its connection open", ip)
			}
			if err != nil {
				break
			}
		}
		eventually(t, func() error {
			c, res, err := dialFrom(ctx, b.url, ip)
			if err == nil {
				c.Close()
				return fmt.Errorf("blocked at A, B still takes %s", ip)
			}
			if res == nil || res.StatusCode != http.StatusForbidden {
				return fmt.Errorf("blocked at A, B's answer to %s: %v", ip, err)
			}
			return nil
		})
	})

	// Behind one load balancer the front-ends share a URL: an
	// authorization taken at A is refused when sent again to B.
	t.Run("authorization used once", func(t *testing.T) {
		body := nip86Body("listbannedpubkeys")
		auth := nip86Auth(t, admin, a, body)
		if st, r := nip86Post(t, a, a, auth, body); st != http.StatusOK || r.Error != "" {
			t.Fatalf("first use at A: %d %+v", st, r)
		}
		if st, r := nip86Post(t, b, a, auth, body); st != http.StatusUnauthorized || !strings.Contains(r.Error, "already used") {
			t.Fatalf("the same authorization again, at B: %d %+v, want 401", st, r)
		}
	})

	t.Run("relay name", func(t *testing.T) {
		if err := nip86(t, a, admin, "changerelayname", "one relay, two front-ends"); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() error {
			_, body := get(t, b.httpURL()+"/", "application/nostr+json")
			var info struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal([]byte(body), &info); err != nil || info.Name != "one relay, two front-ends" {
				return fmt.Errorf("renamed at A, B's NIP-11 name is %q (%v)", info.Name, err)
			}
			return nil
		})
	})
}
