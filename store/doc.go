// Package store is fleetmesh's embedded event store: durable NIP-01 events
// on Pebble, with the indexes that the filters clients actually send need,
// and the storage rules of each kind class (replaceable, addressable,
// NIP-09 deletion, NIP-40 expiration) applied atomically with the write.
//
// Why Pebble: it is an LSM tree, so ingest is sequential appends to a
// write-ahead log rather than B-tree page rewrites (bbolt) or a single
// writer lock around page writes (SQLite); its WAL gives crash safety
// without a second copy of each event; its block cache and memtables have
// fixed sizes, so memory stays bounded however large the store grows; and it
// is pure Go, so `fleetmesh` still cross-compiles for a Raspberry Pi or
// gomobile with no C toolchain.
//
// Why one writer: every save goes through a single goroutine that gathers
// whatever saves are waiting into one Pebble batch, applies the kind rules
// against that batch (so two versions of a replaceable event arriving at
// once cannot both win), commits it with one fsync, and only then answers
// each caller. This is strfry's batching writer: the fsync cost is shared
// by everything in the batch, and "saved" always means "on disk".
//
// Each save in a group is all or nothing: one that fails part way drops
// out and the batch is rebuilt without it. A commit that fails on disk
// (Pebble calls that fatal) stops writes, not the process: the database is
// reopened from disk and writes resume after a backoff step (failure.go).
// Delete, the mesh's hand-off of shards the node no longer holds, removes
// events by id on the same writer, all of one call or none.
// Saves are refused with ErrFull before the disk is full: at
// Options.MaxBytes (storage_max_bytes) or when the filesystem keeps less
// than a WAL's and a flush's worth free (bound.go).
//
// Why the event records live outside Pebble (records.go, recordgc.go):
// a query returns events scattered over the whole store (an author's
// notes, a tag's, an hour's), so with the records in Pebble each event
// cost a point read that found its 4 KiB block outside the block cache:
// a pread, a checksum, a decompression and a cache insert, on a store ten
// times the cache. The records are instead appended to segment files,
// and every index key, and the id key, holds the record's location
// (segment, offset, size): a query walks its index ranges and reads each
// record straight from the segment, mapped into memory on 64-bit Unix
// (an LMDB reader's cost: a slice of the page cache, no system call, no
// copy) and with pread elsewhere. No library here does this: Pebble's
// value separation still reads values through its block cache, and an
// mmap-backed B-tree (bbolt, LMDB) would give up the LSM's sequential
// writes. Segments are append-only and written before the batch that
// points at them commits, so a crash keeps no location to bytes that are
// not on disk; the dead records of removed events are reclaimed by
// compacting a segment once half of it is dead. A mapped segment keeps
// no descriptor open (the mapping outlives the close), so the store's
// descriptors are Pebble's, held to Options.MaxOpenFiles, and a few of
// the records' own, however large the store grows.
//
// Why an id filter in memory: every save must know whether its id is
// already stored or was deleted, and on a store of millions those two point
// reads cost more CPU than the rest of the writer's work, though nearly
// every answer is "no". knownIDs, a Bloom filter of the ids on disk (about
// 1.4 bytes per id, filled from the I and D keys by a goroutine at Open),
// answers most of them without a read.
//
// Key layout (all integers big-endian, so byte order is numeric order):
//
//	E serial                         → loc: the record's segment, offset, size (records.go)
//	I id                             → serial loc
//	C created_at serial              → loc (all events by time)
//	K kind created_at serial         → loc (by kind)
//	A pubkey created_at serial       → loc (by author)
//	P pubkey kind created_at serial  → loc (by author and kind)
//	T letter hash(value) created_at serial → loc (by single-letter tag)
//	R pubkey kind hash(d)            → serial of the current replaceable/addressable version
//	D id pubkey                      → (empty) NIP-09 tombstone: pubkey asked to delete id
//	F pubkey kind hash(d)            → created_at up to which an address is deleted (NIP-09 "a" tags)
//	X expiration serial              → loc (NIP-40 sweep)
//	0x00 "format"                    → the store's Format (uvarint; format.go)
//	0x00 "rectail"                   → the records' committed tail: segment, offset
//	0x00 "recseal" segment           → a sealed segment's committed end
//
// and in records/, segment files NNNNNN.rec of framed records (the
// binary encoding of codec.go), appended in serial order.
//
// Every index key ends in created_at and serial, so a filter is answered by
// walking one or more key ranges backwards (newest first) and merging them,
// all through one Pebble iterator per query, each key's value naming the
// record to read. QueryRaw hands each match out as its stored record
// (Raw), which a relay writes as JSON without decoding it; Query decodes
// it into a nostr.Event.
//
// It is not for policy (what may be stored is the relay's and the boundary's
// decision), not for ephemeral events (never stored), and not a network
// service: the relay package holds the interface it needs, narrow enough for
// another backend (PostgreSQL on a large anchor) to implement.
package store
