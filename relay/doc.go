// Package relay is a complete Nostr relay for clients: NIP-01 over
// WebSocket (EVENT, REQ, CLOSE, EOSE, OK, NOTICE, CLOSED), with NIP-09
// deletion, NIP-11 information document, NIP-40 expiration, NIP-42 AUTH,
// NIP-45 COUNT and NIP-70 protected events, every limit configurable and
// every refusal answered with NIP-01's machine-readable prefixes.
//
// Like khatru, the relay core knows nothing about the mesh, the boundary or
// accounting. They plug in through a few narrow hooks: RejectEvent (a
// policy may refuse an event with a reason), OnStored (the mesh hears what
// clients published), AddEvent (the mesh hands in what other nodes
// sent, which then reaches this relay's live subscribers), and Identify
// and Served (accounting names the party behind a connection from its
// upgrade request, a leaf's DPoP proof, and is told of the events that
// connection was sent and had accepted). Storage is the
// Store interface, which package store implements on Pebble.
//
// A client pipelining EVENTs gets its OKs in bursts, as the store commits
// saves in batches, and gorilla/websocket writes every message with its own
// syscall. So a connection served through Relay.Listener is corked: its
// writer hands the kernel the replies already queued in one write (never
// waiting for more). Gorilla has no API for this, hence the small net.Conn
// wrapper below gorilla in cork.go.
//
// Against hostile load (spec/limits.md) the relay bounds what any one
// address can take: connections are counted at accept in Relay.Listener
// (gate.go), below net/http, so a flood of half-open handshakes cannot
// reach the file limit, which is split between the store, the mesh and
// clients (budget.go); store work per REQ, COUNT and NEG-OPEN is metered
// and charged against per-connection and per-address budgets (budgets.go,
// on package workbudget's debt buckets). Live delivery of stored events
// runs off the publisher's path, in a bounded queue with one worker
// (broadcasting.go), so a publisher's OK never waits on subscribers.
//
// The spec pages are spec/relay.md and spec/limits.md.
//
// It is not a client, does no replication and holds no policy beyond the
// protocol's own rules and the configured limits.
package relay
