package e2e

import (
	"encoding/hex"
	"testing"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestManageNIP86 drives the NIP-86 management API of a real node with
// NIP-98 authorizations built by nostr-tools (interop/nostr/nip86.mjs):
// the listed admin bans and unbans a pubkey, whose events are refused
// with blocked: meanwhile; a wrong payload hash, a stale time and an
// unlisted key are refused with 401 and 403.
func TestManageNIP86(t *testing.T) {
	needNode(t)
	admin, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	pk := admin.PubKey()
	cfg := nodeConfig(nil) + "\n[manage]\nadmins = [\"" + hex.EncodeToString(pk[:]) + "\"]\n"
	n := startNode(t, newHome(t, cfg))
	runScript(t, n, "nip86.mjs", map[string]any{"adminSecret": hex.EncodeToString(admin.Bytes())})
}
