package compute

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/compute/sandbox"
)

// ErrRefused is wrapped by a Runner's error when the module itself is
// refused (it imports what the sandbox does not give, uses threads or
// SIMD, does not decode): every honest executor refuses it alike.
var ErrRefused = errors.New("compute: module refused")

// SandboxRunner runs jobs on r, a sandbox.Runner: the Runner a node
// executes, audits and re-checks with.
func SandboxRunner(r *sandbox.Runner) Runner {
	return func(ctx context.Context, module, input []byte, l Limits) (Run, error) {
		res, err := r.Run(ctx, module, input, sandbox.Limits{Fuel: l.Fuel, MemoryPages: l.MemoryPages, OutputBytes: int(l.OutputBytes),
			CallDepth: l.CallDepth, Deadline: time.Duration(l.DeadlineMS) * time.Millisecond})
		if errors.Is(err, sandbox.ErrRefused) {
			return Run{}, fmt.Errorf("%w: %v", ErrRefused, err)
		}
		if err != nil {
			return Run{}, err
		}
		return Run{Outcome: string(res.Outcome), Output: res.Output, Hash: res.Hash, Fuel: res.Fuel}, nil
	}
}
