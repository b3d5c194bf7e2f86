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

-- The NIP-98 authorizations the NIP-86 API has taken, so one used at a
-- front-end is refused at every other; rows older than the API's window
-- are deleted as new ones come.
CREATE TABLE fleetmesh.manage_auth_used (
	id   bytea  PRIMARY KEY,
	made bigint NOT NULL
);
