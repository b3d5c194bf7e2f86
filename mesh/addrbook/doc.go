// Package addrbook is a node's persisted memory of the peers it has met: for
// each peer its libp2p multiaddrs and when it was last seen, kept in one JSON
// file in the node's home so that a restarted node can reconnect to the mesh
// with no bootstrap peer at all.
//
// The file format is specified in spec/mesh-discovery.md ("Address book").
// It is a new format, but a purely local one: it never travels between nodes.
// No library fits: go-libp2p's peerstore is in memory (its datastore-backed
// variant was removed), and it keeps neither a last-seen time nor a bound on
// the number of peers. The book is bounded (Config.MaxPeers peers of
// Config.MaxAddrsPerPeer addresses each); when full, the peer seen longest
// ago makes room. Writes are atomic (write a temporary file, fsync, rename,
// fsync the directory), so a crash leaves either the old or the new book.
//
// It is not for deciding whom to trust or which descriptor is current (see
// package descriptor and the mesh's peer exchange), and it does no
// networking: package mesh feeds it from connection events and dials what it
// remembers.
package addrbook
