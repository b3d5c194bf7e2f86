// Package leaf is the leaf profile of a fleetmesh node (spec/leaf.md): the
// Go library a phone app embeds (gomobile bind) and that `fleetmesh leaf`
// runs on a desktop. A leaf has its own did:key identity, pairs with one or
// more home or anchor nodes from their out-of-band invitations, has them
// mediate its DIDComm messages (coordinate-mediation 3.0) while it sleeps,
// keeps a bounded local copy of the Nostr events its app subscribed to,
// and does all its networking in short wakes (Sync) that fit the ~30 s an
// OS gives a background app.
//
// What a leaf never does: run a libp2p host, join the DHT or gossip, or
// listen on a socket. It only dials out, and only inside Sync; between
// wakes it holds no socket, timer or goroutine, so a suspended leaf sends
// zero bytes.
//
// The exported API is shaped for gobind: only signed integers, strings,
// bools, []byte, error, and structs and interfaces of those (lists travel
// as JSON in []byte). No panic crosses the boundary: every exported
// function and method recovers and returns an error instead. Key storage
// is the KeyStore interface the app implements (Keychain, Android
// Keystore); FileKeyStore is the one for desktops and tests.
//
// State lives in one bbolt file (leaf.db under Config.Dir): picked-up
// messages, the local event store with its eviction index, the outbox,
// the delivery ids already stored, each subscription's catch-up
// progress, so a wake that is cut short is resumed by the next one, and
// the leaf's accounting: its figures per home per window and the
// receipts it co-signed with its homes (receipts.go; spec/leaf.md
// "Receipts"), exchanged at the end of each wake with the protocol of
// package accounting/exchange, the leaf always proposing.
//
// Its relay connections carry a DPoP proof of its did:key (package
// dpop), so its homes can meter them; the outbox goes to every home, the
// catch-up to one with another taking over when it fails, and, where the
// app allows it (SetServe), the events a home lacks are served to it
// (relaypool.go, outbox.go, serve.go; spec/leaf.md).
//
// It is not a relay (it serves no client; it only offers its own homes
// what they lack) and not a mediator: the home side is didcomm/agent and
// didcomm/mediator, including the push-wake registration
// (didcomm/mediator/push.go), and the relay's Identify and Served hooks
// (node/accounting.go). The NIP-01 client here is
// small and hand-written because the only one in the module is the
// gateway's, which is internal to it and keeps a connection for good,
// where a leaf dials fresh each wake.
package leaf
