// Package pgstore is fleetmesh's PostgreSQL event store, for an anchor
// that serves one node's clients from several front-end processes, on one
// or many machines, over one database. It keeps the embedded Pebble
// store's semantics (package store: NIP-01 replaceable and addressable
// kinds, NIP-09 deletion, NIP-40 expiration, the same query answers,
// checked by a differential test on random operation sequences) and
// serves the same consumers (relay.Store and its raw querier and lister,
// the mesh sync service's calls). It adds a change feed that every
// front-end follows, so that an event accepted at one reaches the
// subscriptions at all of them.
//
// It is not the default store (Pebble is, on one machine), not a policy
// (what may be stored is the relay's and the boundary's decision), and not
// for ephemeral events: Save refuses them, Broadcast puts one on the feed
// for the other front-ends without storing it. The SQL is hand-written
// over pgx (v5): each statement is shaped for one index, which a query
// builder or ORM would hide, and the transactions' lock order is the
// correctness argument below.
//
// # Schema
//
// Everything lives in the schema "fleetmesh" (so the database may hold
// other programs' tables, a khatru's say), created by numbered migrations
// (migrations/NNNN_name.sql, recorded in fleetmesh.schema_migrations). Open
// applies the missing ones under a session advisory lock, so of many
// front-ends starting together one migrates and the others wait for it
// and find nothing left to do; a database migrated by a newer build is
// refused with ErrSchemaNewer.
//
//	events(serial, id, pubkey, created_at, kind, d, expiration, raw)
//	    raw is the event's NIP-01 JSON, written to clients as it is;
//	    d is the replacement slot's d ('' for replaceable kinds), NULL
//	    for kinds never replaced. Indexes: events_by_id (unique),
//	    events_by_slot (unique (pubkey, kind, d) where d is not NULL),
//	    events_by_author_kind, events_by_author, events_by_kind,
//	    events_by_time (each ending in created_at DESC, id: newest
//	    first, ties lowest id), events_by_expiration.
//	tags(serial, tv, created_at, id)
//	    one row per distinct single-letter tag of an event: tv is the
//	    letter's byte and the first value's bytes, created_at and id
//	    the event's. tags_by_value_time_id (tv, created_at DESC, id)
//	    walks a tag's events in the order a REQ answers in, so a
//	    {"#t": [x], "limit": 50} reads about 50 rows however popular x
//	    is, where a GIN index over the values would fetch all of x's
//	    events and sort them. The walk's query runs without sorts,
//	    bitmap scans or JIT, so that it is the plan whatever the
//	    statistics say of the tag (query.go, tagWalkSetting).
//	deleted_ids(id, pubkey)            NIP-09 tombstones by id, one per deleter
//	deleted_addresses(pubkey, kind, d, up_to)  NIP-09 by address
//	feed_head(seq)                     the feed's counter: one row
//	changes(seq, op, id, raw)          the feed
//	manage_lists(list, key, value)     the operator's NIP-86 lists (package
//	    manage: one row per entry, as manage.db keeps one bbolt bucket
//	    per list), shared by the front-ends (ManageLists, lists.go)
//	manage_head(version)               made larger by every change of
//	    the lists, in its transaction, which also NOTIFYs
//	    fleetmesh_manage; each front-end reloads its view of the lists
//	    when the version it reads (on the NOTIFY, and every poll) moved
//	manage_auth_used(id, made)         NIP-98 authorizations the NIP-86
//	    API took, so none is taken twice at any front-end
//
// # One winner per slot, across processes
//
// Saves are committed in batches: each Store runs Options.Writers writer
// goroutines, each gathering the saves waiting (up to Options.MaxBatch)
// into one READ COMMITTED transaction (writer.go). The transaction first
// takes transaction-level advisory locks (pg_advisory_xact_lock) on every
// save's id, on its replacement slot if it has one, and, for a deletion
// request, on every id and address it names; all of them at once, in
// ascending key order, so two transactions never wait for each other in a
// cycle. Two saves that could decide each other's outcome (the same slot,
// the same id, a deletion and what it names) therefore run one after the
// other, whichever connection or process they come through, and the
// second's checks, each statement reading a fresh snapshot, see the
// first's commit: PostgreSQL releases a transaction's locks only after its
// commit is visible. Within a batch the saves run in order, each seeing
// the ones before it. The unique index events_by_slot backs the rule up:
// a second winner could not be inserted. Saves that touch different ids
// and slots do not wait for each other until the feed (below).
//
// Each save's checks and writes are one call of the SQL function
// fleetmesh.save_event (migrations/0002_save_event.sql, the Pebble store's
// apply in PL/pgSQL), so a batch takes two round trips however many saves
// it holds: BEGIN, the locks and every save_event call, pipelined; then
// the feed, the NOTIFY and the COMMIT. A batch that fails on a statement
// is run again one save at a time, so a bad save fails alone; one that
// loses its connection is run again whole, and a save that had committed
// is then answered Duplicate.
//
// # The change feed, gap-free in commit order
//
// Every transaction that changes the events (a save, a replacement, a
// NIP-09 or hand-off deletion, the expiration sweep) or broadcasts an
// ephemeral event ends with one statement that adds its count of changes
// to feed_head.seq and inserts its changes under the numbers it took,
// then commits. Why those numbers are handed out in commit order with no
// gap: the UPDATE holds feed_head's row lock until the transaction ends,
// so the next writer's UPDATE waits until this one has committed (or
// rolled back, undoing its increment: no gap) and then reads the value
// this one left. A transaction that took numbers n+1..n+k therefore became
// visible before any transaction that took a larger number even obtained
// it, so every snapshot, on the primary and on a streaming replica (which
// replays commits in WAL order), sees exactly the changes 1..H where H is
// the feed_head it sees. The cost is that writers serialise for the span
// of one statement and their commit; the rest of a save runs in parallel.
//
// Readers use that prefix property: Changes(after) returns after+1,
// after+2, ..., and a first change past after+1 can only mean pruned
// changes (ErrFeedTruncated, after Options.FeedKeep); QueryRawHead answers
// a REQ and reads the head in one REPEATABLE READ snapshot, so the stored
// answer holds exactly the events of the changes up to that head and a
// subscription that then follows the feed from it gets every later event
// once. That holds with the query on a streaming replica
// (Options.ReadURL) and the feed followed on the primary: the replica's
// snapshot is a prefix 1..H of the primary's changes too, and the
// follower reads the rest from H. NOTIFY (channel fleetmesh_feed, no
// payload) only wakes followers;
// they also read the feed every Options.FeedPoll while the listener is
// down (every Options.FeedPollListening while it is up: it wakes them as
// it drops and as it comes back), so a notification lost while the
// listener reconnects costs a poll's delay, never an event, and
// a follower whose read fails (pg_terminate_backend, a failover) retries
// from the last change it delivered.
package pgstore
