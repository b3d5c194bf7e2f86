package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayRefusesWithoutFilters starts `fleetmesh gateway` on a home
// whose gateway.toml says nothing of what crosses: it must exit non-zero
// and name the keys that would let it start, before it serves anything.
func TestGatewayRefusesWithoutFilters(t *testing.T) {
	backend := startBackend(t)
	home := newHome(t, nodeConfig(nil))
	stdout, stderr, err := cli(t, "gateway", "--home", home, "--backend", backend.url(), "--listen", "127.0.0.1:0")
	if err == nil {
		t.Fatalf("a gateway without filters started\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	for _, want := range []string{"gateway.toml", "to_mesh (backend → mesh)", "to_backend (mesh → backend)", "carry_everything = true", "--carry-everything"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not name %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "relay ws://") {
		t.Errorf("a refused gateway served:\n%s", stdout)
	}
	written, err := os.ReadFile(filepath.Join(home, "gateway.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "carry_everything = true") {
		t.Errorf("the gateway.toml written for the operator does not show carry_everything:\n%s", written)
	}
}

// TestGatewayCarriesOnlyWhatFiltersAllow runs a gateway whose filters let
// only public notes out of the backend and only notes into it: each way,
// the events the filters allow cross and the others stay where they were
// published. The gateway prints what it carries each way when it starts.
func TestGatewayCarriesOnlyWhatFiltersAllow(t *testing.T) {
	backend := startBackend(t)
	home := newHome(t, nodeConfig(nil))
	conf := `to_mesh = [{ kinds = [1], "#t" = ["public"] }]
to_backend = [{ kinds = [1] }]
retry_min = "100ms"
retry_max = "1s"
`
	if err := os.WriteFile(filepath.Join(home, "gateway.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, home, backend)
	for _, want := range []string{
		`carries to_mesh (backend → mesh): events matching {"#t":["public"],"kinds":[1]}, if the boundary policy allows`,
		`carries to_backend (mesh → backend): events matching {"kinds":[1]}, if the boundary policy allows`,
	} {
		if !strings.Contains(gw.stdout.String(), want) {
			t.Errorf("the gateway did not print %q:\n%s", want, gw.output())
		}
	}

	alice, _ := newUser()
	now := time.Now().Unix()
	backendPrivate := []*event{
		gwSignAt(alice, now, 1, "a private note", nil),
		gwSignAt(alice, now, 1, "private, tagged otherwise", [][]string{{"t", "internal"}}),
		gwSignAt(alice, now, 7, "+", [][]string{{"t", "public"}}),
	}
	backendPublic := []*event{
		gwSignAt(alice, now, 1, "a public note", [][]string{{"t", "public"}}),
		gwSignAt(alice, now, 1, "another public note", [][]string{{"t", "public"}, {"t", "news"}}),
	}
	meshKept := []*event{
		gwSignAt(alice, now, 30023, "a long-form article", [][]string{{"d", "article"}}),
		gwSignAt(alice, now, 7, "+", nil),
	}
	meshNotes := []*event{
		gwSignAt(alice, now, 1, "a note from the mesh", nil),
		gwSignAt(alice, now, 1, "another note from the mesh", nil),
	}

	// What must not cross first, then what must: once every allowed event
	// arrived, a refused one published before it on the same path would
	// have arrived too.
	gwMustPublish(t, backend.url(), backendPrivate, true, "")
	gwMustPublish(t, gw.url, meshKept, true, "")
	gwMustPublish(t, backend.url(), backendPublic, true, "")
	gwMustPublish(t, gw.url, meshNotes, true, "")

	gwWaitServed(t, "backend → mesh", gw.url, gwIDs(backendPublic), gw, backend.proc)
	gwWaitServed(t, "mesh → backend", backend.url(), gwIDs(meshNotes), gw, backend.proc)
	gwNotServed(t, "backend → mesh", gw.url, backendPrivate)
	gwNotServed(t, "mesh → backend", backend.url(), meshKept)
}
