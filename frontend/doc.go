// Package frontend runs one of several front-end processes of a node
// whose events are in PostgreSQL (config [store] backend = 'postgres'):
// each front-end serves its own WebSocket clients from the shared store,
// and this package holds what makes them one node.
//
//   - Follower follows the store's commit-ordered change feed and hands
//     every event, each once and in commit order, to the local relay's
//     live subscriptions (relay.Relay.Deliver), so that an event accepted
//     at one front-end reaches subscriptions at every other, also across
//     a dropped database connection: it resumes after the last position
//     it delivered.
//   - Role is the node's mesh role (libp2p, iroh, sync, accounting),
//     held by exactly one front-end at a time: a PostgreSQL session
//     advisory lock on a connection of its own. When that front-end
//     dies its session ends, the lock is free, and another front-end
//     waiting for it (WaitRole) takes the role over.
//   - Members registers a front-end in a table with a heartbeat, so that
//     `fleetmesh status` lists the front-ends and which holds the role;
//     through it the role's holder shares the node's standing view
//     (ShareStanding) with the others, which have no receipts to compute
//     it from, so that a policy reading standing judges alike at all.
//
// It is not the event store (package pgstore is) and not the wiring:
// package node decides what runs with and without the role. The lock and
// the table are plain SQL here, hand-written because they are a few
// statements, not a schema: pgstore owns the events' schema and its
// migrations. docs/operators.md ("Many front-ends over PostgreSQL") says
// how to deploy it and why pgbouncer must be in session mode.
package frontend
