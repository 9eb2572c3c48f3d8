/* src/sql/cfeed--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.1'" to load this file. \quit

/*
 * 1.1: lease names are at most 200 characters.
 *
 * In 1.0 a long group or owner name failed deep in the primary key's index
 * insertion (54000 "index row requires N bytes") or, when compressible, was
 * accepted.  Every function that writes a name into cfeed.lease (acquire
 * creates leases, takes and steals them) now gets 22023 naming the argument,
 * before anything is written.  A trigger rather than new function bodies:
 * one check covers every writer of the table, and the functions of 1.0 stay
 * as they are.  Rows restored from a dump pass through it too, and every row
 * 1.0 could store in the index passes it.
 */
CREATE FUNCTION cfeed._lease_names() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF char_length(NEW.group_name) > 200 THEN
		RAISE EXCEPTION 'group_name must be at most 200 characters, got %',
			char_length(NEW.group_name)
			USING ERRCODE = '22023';
	END IF;
	IF char_length(NEW.owner) > 200 THEN
		RAISE EXCEPTION 'owner must be at most 200 characters, got %',
			char_length(NEW.owner)
			USING ERRCODE = '22023';
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._lease_names() IS 'internal: refuses lease group and owner names longer than 200 characters (22023)';
REVOKE ALL ON FUNCTION cfeed._lease_names() FROM PUBLIC;

CREATE TRIGGER lease_names BEFORE INSERT OR UPDATE OF group_name, owner ON cfeed.lease
	FOR EACH ROW EXECUTE FUNCTION cfeed._lease_names();

/*
 * 1.1: release of a group that has no leases on the feed is 42704 (SPEC §7:
 * an unknown lease), as checkpoint's is; 1.0 returned 0.  An owner that
 * holds nothing in an existing group still gets 0 (release is idempotent).
 */
CREATE OR REPLACE FUNCTION cfeed.release(group_name text, feed_id int, owner text)
	RETURNS int
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_released int;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', release.group_name IS NULL), (2, 'feed_id', release.feed_id IS NULL),
				 (3, 'owner', release.owner IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	PERFORM cfeed._check_feed(release.feed_id);
	IF NOT EXISTS (SELECT FROM cfeed.lease l
				   WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id) THEN
		RAISE EXCEPTION 'group "%" has no leases on feed %', release.group_name, release.feed_id
			USING ERRCODE = '42704',
				  HINT = 'A group''s leases are created by cfeed.acquire(); cfeed.groups lists the groups.';
	END IF;

	-- Lock the owner's leases in shard order (the locking protocol of 1.0).
	WITH mine AS (
		SELECT l.shard FROM cfeed.lease l
		WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
		  AND l.owner = release.owner
		ORDER BY l.shard
		FOR UPDATE)
	UPDATE cfeed.lease l
	SET owner = NULL, expires_at = NULL, updated_at = pg_catalog.clock_timestamp()
	FROM mine
	WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
	  AND l.shard = mine.shard;
	GET DIAGNOSTICS v_released = ROW_COUNT;
	RETURN v_released;
END
$fn$;
