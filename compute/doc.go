// Package compute is fleetmesh's compute market over DIDComm
// (docs/design.md §8; spec/compute.md): the job/1.0 protocol under
// https://fleetmesh.org/protocols/, by which a requester node has one or
// more executor nodes run a content-addressed WebAssembly module on an
// input, each bound by limits (fuel, memory pages, output size, call
// depth, deadline).
//
// A job's input and output travel sealed: an authcrypt JWE from the
// requester to the one executor (and back), inside the outer job
// message, so a node that relays or mediates the outer message reads
// neither. Every executor commits to a hash of its result before any
// reveals it (commit, then reveal), so an executor that copies
// another's answer has nothing to copy in time. Compute units burnt for
// others are metered (meter.ComputeUnits), granted and receipted like
// every other service.
//
// It holds the protocol's messages and their checks, the executor's
// side (Executor), the requester's side (Requester) and the Market that
// drives a requested job from plan to verdict: it has package
// compute/verify plan the job (executors by standing, warm-up, audits),
// runs it, audits it on the node's own sandbox, judges it and records
// the verdict, and answers `fleetmesh job run` on the control socket
// (ServeRun). It is not the sandbox that runs the modules (package
// compute/sandbox, spec/compute-sandbox.md) nor the choice of executors,
// audits and verdicts (package compute/verify): it drives them. The
// NIP-90 bridge is package compute/nip90.
package compute
