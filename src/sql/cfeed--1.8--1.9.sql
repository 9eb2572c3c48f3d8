/* src/sql/cfeed--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.9'" to load this file. \quit

/*
 * 1.9: feeds that grow (resharding), and the rest listed in CHANGELOG.md.
 */

/* ---- dropped tracked tables ---- */

/*
 * A dropped table's number keeps its name and loses its table: tbl becomes
 * null when the table is dropped (by DROP TABLE, DROP SCHEMA ... CASCADE,
 * DROP OWNED or any other command), so that the number never names another
 * table that later gets the same OID, and a dump does not carry the dropped
 * table's bare OID into a database where it may be another table's.  The
 * changes keep their images; read_rows gives them with tbl null, to the
 * roles the read policy does not apply to (cfeed._may_read_image: a number
 * without a table shows its images to no other reader).
 */
CREATE FUNCTION cfeed._tracked_table_dropped() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.tracked_table t SET tbl = NULL
	WHERE t.tbl::oid IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
						 WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0
						   AND d.object_type = 'table');
END
$fn$;
COMMENT ON FUNCTION cfeed._tracked_table_dropped() IS 'internal: sql_drop event trigger: a dropped table''s number in cfeed.tracked_table loses its table (tbl null), keeping its name';
REVOKE ALL ON FUNCTION cfeed._tracked_table_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER cfeed_tracked_table_dropped ON sql_drop
	WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED')
	EXECUTE FUNCTION cfeed._tracked_table_dropped();

/*
 * The resolution by name applies to a number copied in (INSERT) or renamed
 * by its publisher (UPDATE of name), not to one whose table was dropped:
 * that one keeps tbl null even when another table has its name now.
 */
CREATE OR REPLACE FUNCTION cfeed._tracked_table_resolve() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF TG_OP = 'INSERT' THEN
		IF EXISTS (SELECT FROM cfeed.tracked_table t
				   WHERE t.table_no = NEW.table_no AND t.name IS NOT DISTINCT FROM NEW.name) THEN
			RETURN NULL;
		END IF;
		IF EXISTS (SELECT FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no) THEN
			RAISE EXCEPTION 'tracked table number % is % here, not %', NEW.table_no,
				(SELECT t.name FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no), NEW.name
				USING ERRCODE = '23505',
					  DETAIL = 'Two clusters gave one number to different tables; their changes cannot share cfeed.change.',
					  HINT = 'On the cluster where that table has no changes yet, delete its row of cfeed.tracked_table and run cfeed.track on it again (a new number).';
		END IF;
	END IF;
	IF NEW.tbl IS NULL AND NEW.name IS NOT NULL
	   AND (TG_OP = 'INSERT' OR NEW.name IS DISTINCT FROM OLD.name) THEN
		NEW.tbl := pg_catalog.to_regclass(NEW.name);
	END IF;
	RETURN NEW;
END
$fn$;

-- numbers whose table was dropped before the update
UPDATE cfeed.tracked_table t SET tbl = NULL
WHERE t.tbl IS NOT NULL
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.tbl::pg_catalog.oid);

/* ---- resharding: closed shards and their children ---- */

/*
 * A feed's layout: its shards 0..n-1, of which the highest m are open (the
 * ones cfeed.shard_for routes to) and the ones below are closed.  A shard
 * is closed by cfeed.reshard, which creates its children in the same
 * transaction: parent names the shard a child continues, so that a key's
 * changes are read on the parent to its end and then on the child.  A
 * closed shard never receives a change again; once no unstamped change is
 * left on it (the view's ended) its number can never grow.
 */
ALTER TABLE cfeed.shard_config ADD COLUMN parent int;
ALTER TABLE cfeed.shard_config ADD COLUMN closed bool NOT NULL DEFAULT false;
COMMENT ON COLUMN cfeed.shard_config.parent IS 'the shard this shard continues (cfeed.reshard), null for an original shard';
COMMENT ON COLUMN cfeed.shard_config.closed IS 'the shard receives no change any more (cfeed.reshard closed it)';

/*
 * The view gains parent, closed and ended at the end (CREATE OR REPLACE
 * keeps its defaults, triggers, grants and comments; it resets its
 * options, so security_barrier is set again).  ended is evaluated for a
 * closed shard only: the pending changes of a closed shard can only
 * become fewer, and no others come.
 */
CREATE OR REPLACE VIEW cfeed.shard AS
SELECT * FROM (
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   GREATEST(h.change_sequence_number, s.deleted_head, s.start_sequence_number)
			   AS last_change_sequence_number,
		   h.stamped_at AS last_sweep_time,
		   s.start_sequence_number,
		   s.parent,
		   s.closed,
		   CASE WHEN s.closed THEN NOT EXISTS (
				SELECT FROM cfeed.change p
				WHERE p.feed_id OPERATOR(pg_catalog.=) s.feed_id
				  AND p.shard OPERATOR(pg_catalog.=) s.shard
				  AND p.change_sequence_number IS NULL)
			   ELSE false END AS ended
	FROM cfeed.shard_config s
	LEFT JOIN LATERAL (
		SELECT c.change_sequence_number, c.stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) s.start_sequence_number
		ORDER BY c.change_sequence_number DESC
		LIMIT 1) h ON true) s
WHERE cfeed._may_read(s.feed_id);
ALTER VIEW cfeed.shard SET (security_barrier = true);
COMMENT ON COLUMN cfeed.shard.parent IS 'the shard this shard continues: read the parent to its end (ended) before this one; null for an original shard';
COMMENT ON COLUMN cfeed.shard.closed IS 'the shard receives no change any more (cfeed.reshard closed it); cfeed.shard_for routes to the open shards only';
COMMENT ON COLUMN cfeed.shard.ended IS 'closed and no unstamped change left: last_change_sequence_number can never grow again';

/*
 * The view's writes: parent, closed and ended belong to cfeed.reshard.  A
 * shard inserted by hand is open and has no parent.
 */
CREATE OR REPLACE FUNCTION cfeed._shard_write() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		NEW.last_change_sequence_number := COALESCE(NEW.last_change_sequence_number, 2000000000000000);
		IF NEW.start_sequence_number IS DISTINCT FROM NEW.last_change_sequence_number
		   AND NEW.start_sequence_number IS NOT NULL OR NEW.last_sweep_time IS NOT NULL THEN
			RAISE EXCEPTION 'a new shard % of feed % must start at its last_change_sequence_number', NEW.shard, NEW.feed_id
				USING ERRCODE = '22023',
					  HINT = 'Set only last_change_sequence_number (the start value), or leave it to its default.';
		END IF;
		IF NEW.parent IS NOT NULL OR NEW.closed OR NEW.ended THEN
			RAISE EXCEPTION 'a new shard % of feed % cannot have a parent or be closed', NEW.shard, NEW.feed_id
				USING ERRCODE = '22023',
					  HINT = 'cfeed.reshard() closes shards and creates their children.';
		END IF;
		INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, start_sequence_number)
		VALUES (NEW.feed_id, NEW.shard, COALESCE(NEW.sweep_group, 0), COALESCE(NEW.longpoll, true),
				NEW.last_change_sequence_number);
		NEW.sweep_group := COALESCE(NEW.sweep_group, 0);
		NEW.longpoll := COALESCE(NEW.longpoll, true);
		NEW.start_sequence_number := NEW.last_change_sequence_number;
		NEW.closed := false;
		NEW.ended := false;
		RETURN NEW;
	ELSIF TG_OP = 'UPDATE' THEN
		IF NEW.feed_id IS DISTINCT FROM OLD.feed_id OR NEW.shard IS DISTINCT FROM OLD.shard
		   OR NEW.last_change_sequence_number IS DISTINCT FROM OLD.last_change_sequence_number
		   OR NEW.start_sequence_number IS DISTINCT FROM OLD.start_sequence_number
		   OR NEW.last_sweep_time IS DISTINCT FROM OLD.last_sweep_time THEN
			RAISE EXCEPTION 'the numbering of shard % of feed % cannot be changed', OLD.shard, OLD.feed_id
				USING ERRCODE = '22023',
					  DETAIL = 'last_change_sequence_number and last_sweep_time follow the stamped changes, and start_sequence_number is fixed when the shard is created.',
					  HINT = 'Update only sweep_group or longpoll of a shard.';
		END IF;
		IF NEW.parent IS DISTINCT FROM OLD.parent OR NEW.closed IS DISTINCT FROM OLD.closed
		   OR NEW.ended IS DISTINCT FROM OLD.ended THEN
			RAISE EXCEPTION 'the layout of shard % of feed % cannot be changed here', OLD.shard, OLD.feed_id
				USING ERRCODE = '22023',
					  DETAIL = 'parent and closed are set by cfeed.reshard(), and ended follows the stamped changes.',
					  HINT = 'Update only sweep_group or longpoll of a shard.';
		END IF;
		UPDATE cfeed.shard_config SET sweep_group = NEW.sweep_group, longpoll = NEW.longpoll
		WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
		RETURN NEW;
	END IF;
	DELETE FROM cfeed.shard_config WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
	RETURN OLD;
END
$$;

/*
 * Closing a shard (or opening it again by hand) changes where keys go:
 * the guard trigger takes the feed's shards lock in exclusive mode for it
 * and sends shard_config's invalidation, as for a shard that goes away.
 */
DROP TRIGGER shard_config_guard ON cfeed.shard_config;
CREATE TRIGGER shard_config_guard BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard, sweep_group, closed
	ON cfeed.shard_config FOR EACH ROW EXECUTE FUNCTION cfeed._shard_config_guard();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_guard;

/*
 * cfeed.reshard: the feed's open shards are closed and their children
 * created, once the writers that placed changes by the old layout have
 * committed (src/reshard.c, docs/design.md "Resharding").  The extension's
 * owner's and superusers' alone: it checks that itself too, for a role
 * granted EXECUTE.
 */
CREATE FUNCTION cfeed.reshard(feed_id int, shards int, wait_ms int DEFAULT 10000)
	RETURNS TABLE(shard int, parent int)
	LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 16
	AS 'MODULE_PATHNAME', 'cfeed_reshard';
COMMENT ON FUNCTION cfeed.reshard(int, int, int) IS 'closes the feed''s open shards and creates shards children after its highest shard (a multiple of the open ones, at least twice as many), waiting up to wait_ms for the feed''s writers; returns the children and their parents';
REVOKE ALL ON FUNCTION cfeed.reshard(int, int, int) FROM PUBLIC;

COMMENT ON FUNCTION cfeed.shard_for(int, text) IS 'the shard of a partition key: the feed''s first open shard plus FNV-1a 32-bit of the key''s UTF-8 bytes modulo the number of open shards';
