-- 0004: the operator's NIP-86 lists (package manage), shared by every
-- front-end of the node. One row per entry of a list, as manage.db keeps
-- one bbolt bucket per list: list is the list's name (manage.ListBannedPubkeys
-- and the others), key and value its entry's bytes. manage_head.version is
-- made larger by every change, in the change's transaction; a front-end
-- reads it (on NOTIFY fleetmesh_manage, and every poll) to know when to
-- load the lists again.

CREATE TABLE fleetmesh.manage_lists (
	list  text  NOT NULL,
	key   bytea NOT NULL,
	value bytea NOT NULL,
	PRIMARY KEY (list, key)
);

CREATE TABLE fleetmesh.manage_head (
	version bigint NOT NULL
);
INSERT INTO fleetmesh.manage_head (version) VALUES (0);
