// Package e2e holds the end-to-end tests of the fleetmesh binary: they build
// cmd/fleetmesh once, start real `fleetmesh run` processes on loopback with
// per-test homes and configs, and drive them with clients nobody here wrote
// (nostr-tools scripts under interop/nostr, run with Node) and with plain
// WebSocket clients for the crash-safety test.
//
// It is not for unit tests of any package, and it never edits or reaches
// into the packages it tests: it sees only the CLI contract (docs/design.md §11),
// the relay's WebSocket and HTTP endpoints, and the process's stdout.
//
// The hostile-load suite's attacker is a program of its own, e2e/attacker,
// which the suite builds and runs as a separate process.
//
// The tests need Node and interop/node_modules (scripts/test.sh installs
// them with `npm ci`); without them the tests fail with a message that says
// so, because CI always installs them.
package e2e
