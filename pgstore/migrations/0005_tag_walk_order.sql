-- 0005: a tag query walks its index in the order it answers in. Up to
-- 0004 the tags table had no event id, so a query by tag ordered its rows
-- by (created_at DESC, the event's id) only after joining every row of the
-- tag value to its event: a popular hashtag's REQ of limit 50 joined and
-- sorted all of the tag's rows. Each row now carries its event's id, and
-- tags_by_value_time_id serves that order itself, so the walk stops at
-- the limit (query.go). save_event is 0003's, writing the id.

ALTER TABLE fleetmesh.tags ADD COLUMN id bytea;
UPDATE fleetmesh.tags t SET id = e.id FROM fleetmesh.events e WHERE e.serial = t.serial;
ALTER TABLE fleetmesh.tags ALTER COLUMN id SET NOT NULL;
CREATE INDEX tags_by_value_time_id ON fleetmesh.tags (tv, created_at DESC, id);
DROP INDEX fleetmesh.tags_by_value;

CREATE OR REPLACE FUNCTION fleetmesh.save_event(
	p_id bytea, p_pubkey bytea, p_created_at bigint, p_kind integer, p_d bytea,
	p_expiration bigint, p_raw bytea, p_tvs bytea[],
	p_del_ids bytea[], p_del_kinds integer[], p_del_ds bytea[], p_full boolean,
	OUT result integer, OUT replaced bytea, OUT deleted bytea[])
LANGUAGE plpgsql AS $$
DECLARE
	v_up_to   bigint;
	v_serial  bigint;
	v_cur     bigint;
	v_cur_id  bytea;
	v_cur_at  bigint;
	v_ids     bytea[];
BEGIN
	deleted := '{}';
	IF EXISTS (SELECT 1 FROM fleetmesh.events WHERE id = p_id) THEN
		result := 1; -- Duplicate
		RETURN;
	END IF;
	IF EXISTS (SELECT 1 FROM fleetmesh.deleted_ids WHERE id = p_id AND pubkey = p_pubkey) THEN
		result := 3; -- Deleted
		RETURN;
	END IF;
	IF p_d IS NOT NULL THEN
		SELECT up_to INTO v_up_to FROM fleetmesh.deleted_addresses
			WHERE pubkey = p_pubkey AND kind = p_kind AND d = p_d;
		IF v_up_to IS NOT NULL AND p_created_at <= v_up_to THEN
			result := 3; -- Deleted
			RETURN;
		END IF;
		SELECT serial, id, created_at INTO v_cur, v_cur_id, v_cur_at FROM fleetmesh.events
			WHERE pubkey = p_pubkey AND kind = p_kind AND d = p_d;
		-- NIP-01: the newest wins; on a tie, the lowest id.
		IF v_cur IS NOT NULL AND (v_cur_at > p_created_at OR (v_cur_at = p_created_at AND v_cur_id < p_id)) THEN
			result := 2; -- Superseded
			RETURN;
		END IF;
	END IF;
	IF p_full THEN
		result := -1;
		RETURN;
	END IF;
	IF v_cur IS NOT NULL THEN
		DELETE FROM fleetmesh.events WHERE serial = v_cur RETURNING id INTO replaced;
	END IF;
	INSERT INTO fleetmesh.events (id, pubkey, created_at, kind, d, expiration, raw)
		VALUES (p_id, p_pubkey, p_created_at, p_kind, p_d, p_expiration, p_raw)
		RETURNING serial INTO v_serial;
	INSERT INTO fleetmesh.tags (serial, tv, created_at, id)
		SELECT v_serial, tv, p_created_at, p_id FROM unnest(p_tvs) AS tv;
	IF cardinality(p_del_ids) > 0 THEN
		-- One tombstone per id and deleter, as the Pebble store keeps.
		INSERT INTO fleetmesh.deleted_ids (id, pubkey) SELECT x, p_pubkey FROM unnest(p_del_ids) AS x
			ON CONFLICT (id, pubkey) DO NOTHING;
		WITH gone AS (
			DELETE FROM fleetmesh.events WHERE id = ANY (p_del_ids) AND pubkey = p_pubkey AND kind <> 5 RETURNING id
		) SELECT coalesce(array_agg(id), '{}') INTO v_ids FROM gone;
		deleted := deleted || v_ids;
	END IF;
	FOR i IN 1 .. coalesce(cardinality(p_del_kinds), 0) LOOP
		INSERT INTO fleetmesh.deleted_addresses (pubkey, kind, d, up_to)
			VALUES (p_pubkey, p_del_kinds[i], p_del_ds[i], p_created_at)
			ON CONFLICT (pubkey, kind, d) DO UPDATE SET up_to = greatest(deleted_addresses.up_to, EXCLUDED.up_to);
		WITH gone AS (
			DELETE FROM fleetmesh.events
			WHERE pubkey = p_pubkey AND kind = p_del_kinds[i] AND d = p_del_ds[i] AND created_at <= p_created_at
			RETURNING id
		) SELECT coalesce(array_agg(id), '{}') INTO v_ids FROM gone;
		deleted := deleted || v_ids;
	END LOOP;
	result := 0; -- Stored
END
$$;
