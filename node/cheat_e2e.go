//go:build e2echeat

package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"fleetmesh.org/fleetmesh/compute"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
)

// In a binary built with the e2echeat tag (the e2e suite's dishonest
// executors, e2e/compute_test.go; never a release), FLEETMESH_E2E_CHEAT
// makes the executor:
//
//   - wrong: return a wrong output for every job, committed to as if
//     it were right;
//   - silent: the same, and meter none of the units it gives (it claims
//     nothing for its jobs, so only the requester's refusal of the
//     window disputes it);
//   - share: run honestly and leave each output in the directory
//     FLEETMESH_E2E_SHARE, for a colluder;
//   - copy: a lazy copier: commit to a guess without running, then at
//     the reveal send the output its colluder left in FLEETMESH_E2E_SHARE.
func init() {
	dir := os.Getenv("FLEETMESH_E2E_SHARE")
	key := func(module, input []byte) string {
		s := sha256.Sum256(append(append([]byte(nil), module...), input...))
		return hex.EncodeToString(s[:])
	}
	wrong := func(run compute.Runner) compute.Runner {
		return func(ctx context.Context, module, input []byte, l compute.Limits) (compute.Run, error) {
			r, err := run(ctx, module, input, l)
			if err == nil && r.Outcome == compute.OutcomeOK {
				r.Output = append([]byte("cheat:"), r.Output...)
				r.Hash = sha256.Sum256(r.Output)
			}
			return r, err
		}
	}
	switch os.Getenv("FLEETMESH_E2E_CHEAT") {
	case "wrong":
		cheatRunner = wrong
	case "silent":
		cheatRunner, cheatUncounted = wrong, true
	case "share":
		cheatRunner = func(run compute.Runner) compute.Runner {
			return func(ctx context.Context, module, input []byte, l compute.Limits) (compute.Run, error) {
				r, err := run(ctx, module, input, l)
				if err == nil {
					os.WriteFile(filepath.Join(dir, key(module, input)), r.Output, 0o644)
				}
				return r, err
			}
		}
	case "copy":
		var mu sync.Mutex
		var last string
		cheatRunner = func(compute.Runner) compute.Runner {
			return func(_ context.Context, module, input []byte, _ compute.Limits) (compute.Run, error) {
				mu.Lock()
				last = key(module, input)
				mu.Unlock()
				out := []byte("a guess")
				return compute.Run{Outcome: compute.OutcomeOK, Output: out, Hash: sha256.Sum256(out), Fuel: 1}, nil
			}
		}
		cheatHandler = func(k *identity.Key, h agent.Handler) agent.Handler {
			sealer, _ := compute.NewSealer(k)
			return func(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
				ans, err := h(ctx, u)
				if err != nil || ans == nil || ans.Type != compute.TypeResult {
					return ans, err
				}
				mu.Lock()
				copied, rerr := os.ReadFile(filepath.Join(dir, last))
				mu.Unlock()
				var res compute.Result
				if rerr != nil || json.Unmarshal(ans.Body, &res) != nil {
					return ans, err
				}
				sum := sha256.Sum256(copied)
				res.ResultHash = hex.EncodeToString(sum[:])
				if res.Sealed, err = sealer.Seal(u.Message.From, res.JobID, compute.KindOutput, copied); err != nil {
					return nil, err
				}
				return compute.Message(compute.TypeResult, ans.Thid, res)
			}
		}
	}
}
