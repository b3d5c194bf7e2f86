// Package conformance is fleetmesh's conformance suite: checks that run
// against any node by address, as an outside client would, and say in plain
// words what a node gets wrong. `fleetmesh conformance --target ADDR` runs
// it; the end-to-end tests run it against real processes.
//
// The suite covers what a node promises its clients (NIP-01 and the NIPs
// its NIP-11 document advertises, with the answers spec/relay.md names) and
// what it promises the mesh (the boundary rules of spec/boundary.md). The
// mesh-level checks (removing every bootstrap node) need several nodes and
// live in the mesh's tests.
//
// It is not a load test, and it leaves little behind on the target: the few
// events it publishes are tagged with a random run id and expire (NIP-40)
// an hour after the run by default, and its last step deletes them (NIP-09)
// and checks that none is served any more; only that deletion request
// stays, until it expires too.
package conformance
