// Package gateway is the meeting point of the mesh and one private relay
// backend (docs/design.md §5, spec/gateway.md): a fleetmesh node on one side and an
// ordinary NIP-01 client of the backend on the other. It carries events
// both ways according to configured filters, through the boundary policy in
// both directions, deduplicates, never sends an event back where it came
// from, and catches up without loss after either side was off.
//
// The mesh side is the gateway's own node: events from the backend are
// stored through the node's relay with origin FromBackend (and so reach the
// node's clients and, once the mesh is wired in, the mesh); events the node
// stores from its clients or the mesh reach the gateway through the relay's
// OnStored hook. The backend side is one WebSocket connection at a time,
// reconnected with capped exponential backoff and jitter. Progress is kept
// as two created_at cursors in the node home, written atomically, and only
// moved past events that are durable locally or acknowledged by the
// backend; catch-up uses NIP-77 (package negentropy) when the backend
// speaks it and since-window REQs otherwise, followed by a full walk of
// both sides by id and until pages (walk.go), which finds what a
// created_at cursor misses, and says how far it is (events moved of an
// estimate, rate, time left: Gateway.Progress). A backend that answers REQs
// with NOTICE or CLOSED instead of EOSE gets plain filters (no limit,
// since or until), and one that refuses those too is reported once, in
// /metrics and Health, while mesh → backend goes on (refusal.go).
//
// It also owns the gateway's config file (gateway.toml), its backend AUTH
// key, and the shared-nothing checks that refuse to start when the two
// sides share a directory, a key file, a secret or a config file.
//
// What it is not for: the boundary rules themselves (package boundary),
// relay protocol serving (package relay), or replication between nodes
// (package mesh). Its small relay-message decoder is hand-written because
// the project's nostr package parses only client messages and go-nostr
// would pull a second event model into the product module.
package gateway
