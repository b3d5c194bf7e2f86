-- 0001: events, their tag index, NIP-09 tombstones and the change feed.
-- Every index is named for the query shape it serves (query.go).

CREATE TABLE fleetmesh.events (
	serial     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         bytea   NOT NULL,
	pubkey     bytea   NOT NULL,
	created_at bigint  NOT NULL,
	kind       integer NOT NULL,
	-- The replacement slot's d: '' for a replaceable kind, the d tag for an
	-- addressable one, NULL for every other event.
	d          bytea,
	-- NIP-40 expiration, NULL when the event has none.
	expiration bigint,
	-- The event's NIP-01 JSON, as the relay writes it to clients.
	raw        bytea   NOT NULL
);

-- {"ids": [...]}, and the duplicate check of every save.
CREATE UNIQUE INDEX events_by_id ON fleetmesh.events (id);
-- One winner per replaceable or addressable slot (save.go).
CREATE UNIQUE INDEX events_by_slot ON fleetmesh.events (pubkey, kind, d) WHERE d IS NOT NULL;
-- {"authors": [...], "kinds": [...]}, newest first.
CREATE INDEX events_by_author_kind ON fleetmesh.events (pubkey, kind, created_at DESC, id);
-- {"authors": [...]}, newest first.
CREATE INDEX events_by_author ON fleetmesh.events (pubkey, created_at DESC, id);
-- {"kinds": [...]}, newest first.
CREATE INDEX events_by_kind ON fleetmesh.events (kind, created_at DESC, id);
-- {} and {"since": ..., "until": ...}, newest first.
CREATE INDEX events_by_time ON fleetmesh.events (created_at DESC, id);
-- The NIP-40 sweep.
CREATE INDEX events_by_expiration ON fleetmesh.events (expiration) WHERE expiration IS NOT NULL;

-- One row per distinct single-letter tag (letter, first value) of an event:
-- tv is the letter's byte followed by the value's.
CREATE TABLE fleetmesh.tags (
	serial     bigint NOT NULL REFERENCES fleetmesh.events ON DELETE CASCADE,
	tv         bytea  NOT NULL,
	created_at bigint NOT NULL
);
-- {"#x": [...]}, newest first.
CREATE INDEX tags_by_value ON fleetmesh.tags (tv, created_at DESC);
-- Removing an event's tags with it.
CREATE INDEX tags_by_event ON fleetmesh.tags (serial);

-- NIP-09 by id: the pubkey that last asked to delete id.
CREATE TABLE fleetmesh.deleted_ids (
	id     bytea PRIMARY KEY,
	pubkey bytea NOT NULL
);

-- NIP-09 by address: the slot is deleted up to created_at up_to.
CREATE TABLE fleetmesh.deleted_addresses (
	pubkey bytea   NOT NULL,
	kind   integer NOT NULL,
	d      bytea   NOT NULL,
	up_to  bigint  NOT NULL,
	PRIMARY KEY (pubkey, kind, d)
);

-- The change feed's counter: the sequence number of the last change. Each
-- writing transaction updates it as its last statement (feed.go).
CREATE TABLE fleetmesh.feed_head (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	seq bigint  NOT NULL
);
INSERT INTO fleetmesh.feed_head (seq) VALUES (0);

-- The change feed: op 1 an event stored (raw its JSON), 2 an event
-- removed, 3 an ephemeral event broadcast (raw its JSON, never stored).
CREATE TABLE fleetmesh.changes (
	seq bigint   PRIMARY KEY,
	op  smallint NOT NULL,
	id  bytea    NOT NULL,
	raw bytea
);
