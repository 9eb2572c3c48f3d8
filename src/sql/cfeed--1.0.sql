/* src/sql/cfeed--1.0.sql */

\echo Use "CREATE EXTENSION cfeed" to load this file. \quit

CREATE SCHEMA cfeed;
COMMENT ON SCHEMA cfeed IS 'cfeed: race-safe change feeds with gapless per-shard sequence numbers';
GRANT USAGE ON SCHEMA cfeed TO PUBLIC;

/*
 * Catalogs.
 */

CREATE TABLE cfeed.feed (
	feed_id int PRIMARY KEY,
	name text NOT NULL UNIQUE
		CONSTRAINT feed_name_check CHECK (name OPERATOR(pg_catalog.~) '^[A-Za-z0-9_-]+$'),
	comment text,
	retention interval
		CONSTRAINT feed_retention_check CHECK (retention OPERATOR(pg_catalog.>) interval '0')
);
COMMENT ON TABLE cfeed.feed IS 'one row per feed; feed_id is chosen by the application';

CREATE TABLE cfeed.shard_config (
	feed_id int NOT NULL REFERENCES cfeed.feed ON DELETE CASCADE,
	shard int NOT NULL CONSTRAINT shard_shard_check CHECK (shard OPERATOR(pg_catalog.>=) 0),
	sweep_group int NOT NULL DEFAULT 0,
	longpoll bool NOT NULL DEFAULT true,
	start_sequence_number bigint NOT NULL DEFAULT 2000000000000000,
	PRIMARY KEY (feed_id, shard)
);
COMMENT ON TABLE cfeed.shard_config IS 'storage of cfeed.shard: what is set when a shard is created (no sweep ever updates it)';

CREATE SEQUENCE cfeed.change_id START WITH 1000000000000000 CACHE 1;
COMMENT ON SEQUENCE cfeed.change_id IS 'global change ids; CACHE 1 so that ids grow with time across backends';

CREATE FUNCTION cfeed._writer_xid() RETURNS xid8
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_writer_xid';
COMMENT ON FUNCTION cfeed._writer_xid() IS 'internal: the writing transaction''s top-level xid (default of cfeed.change.writer_xid)';

CREATE TABLE cfeed.change (
	feed_id int NOT NULL,
	shard int NOT NULL,
	change_id bigint NOT NULL,
	change_sequence_number bigint,
	stamped_at timestamptz,
	written_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	writer_xid xid8 NOT NULL DEFAULT cfeed._writer_xid(),
	CONSTRAINT change_shard_fkey FOREIGN KEY (feed_id, shard) REFERENCES cfeed.shard_config
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05,
		autovacuum_analyze_scale_factor = 0.05);
COMMENT ON TABLE cfeed.change IS 'changes: writers insert (feed_id, shard, change_id); the sweeper stamps change_sequence_number after commit';
COMMENT ON COLUMN cfeed.change.written_at IS 'start of the writing transaction';
COMMENT ON COLUMN cfeed.change.writer_xid IS 'internal: top-level xid of the writing transaction, used by the sweeper to find new changes';

-- Readers: "everything after my cursor" is a range scan of this index.
CREATE UNIQUE INDEX change_sequence_idx ON cfeed.change
	(feed_id, shard, change_sequence_number) WHERE change_sequence_number IS NOT NULL;
-- The sweeper: changes not yet stamped, by writing transaction.
CREATE INDEX change_pending_idx ON cfeed.change (writer_xid) WHERE change_sequence_number IS NULL;

/*
 * cfeed.shard: the shard's configuration plus its head.  The head is not
 * stored: last_change_sequence_number is the highest stamped number (one
 * backward probe of change_sequence_idx), so it equals it in every snapshot
 * by construction (SPEC §3 guarantee 5), and no sweep updates a row that
 * writers' foreign-key checks lock (a row updated per sweep grows a version
 * chain that cannot be pruned while the xmin horizon is held).
 */
CREATE VIEW cfeed.shard AS
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   COALESCE(h.change_sequence_number, s.start_sequence_number) AS last_change_sequence_number,
		   h.stamped_at AS last_sweep_time,
		   s.start_sequence_number
	FROM cfeed.shard_config s
	LEFT JOIN LATERAL (
		SELECT c.change_sequence_number, c.stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) s.start_sequence_number
		ORDER BY c.change_sequence_number DESC
		LIMIT 1) h ON true;
ALTER VIEW cfeed.shard ALTER COLUMN sweep_group SET DEFAULT 0;
ALTER VIEW cfeed.shard ALTER COLUMN longpoll SET DEFAULT true;
ALTER VIEW cfeed.shard ALTER COLUMN last_change_sequence_number SET DEFAULT 2000000000000000;
COMMENT ON VIEW cfeed.shard IS 'each (feed_id, shard) is an independent, gapless, ordered log; insert, update (sweep_group, longpoll) and delete shards here';
COMMENT ON COLUMN cfeed.shard.last_change_sequence_number IS 'highest stamped number of the shard (its start value before the first stamp)';
COMMENT ON COLUMN cfeed.shard.last_sweep_time IS 'when the shard''s last change was stamped';
COMMENT ON COLUMN cfeed.shard.start_sequence_number IS 'last_change_sequence_number the shard was created with: numbers at or below it form the migration range';

SELECT pg_catalog.pg_extension_config_dump('cfeed.feed', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.shard_config', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.change', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.change_id', '');

/*
 * Guards: keep the numbering in the sweeper's hands.
 */

CREATE FUNCTION cfeed._change_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_change_guard';
COMMENT ON FUNCTION cfeed._change_guard() IS 'internal: refuses writer-chosen sequence numbers outside the migration range';

CREATE TRIGGER change_guard BEFORE INSERT ON cfeed.change FOR EACH ROW
	WHEN (NEW.change_sequence_number IS NOT NULL OR NEW.stamped_at IS NOT NULL
		  OR NEW.writer_xid OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id())
	EXECUTE FUNCTION cfeed._change_guard();

CREATE FUNCTION cfeed._shard_write() RETURNS trigger
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
		INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, start_sequence_number)
		VALUES (NEW.feed_id, NEW.shard, COALESCE(NEW.sweep_group, 0), COALESCE(NEW.longpoll, true),
				NEW.last_change_sequence_number);
		NEW.sweep_group := COALESCE(NEW.sweep_group, 0);
		NEW.longpoll := COALESCE(NEW.longpoll, true);
		NEW.start_sequence_number := NEW.last_change_sequence_number;
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
		UPDATE cfeed.shard_config SET sweep_group = NEW.sweep_group, longpoll = NEW.longpoll
		WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
		RETURN NEW;
	END IF;
	DELETE FROM cfeed.shard_config WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
	RETURN OLD;
END
$$;
COMMENT ON FUNCTION cfeed._shard_write() IS 'internal: INSERT, UPDATE and DELETE on the cfeed.shard view';
-- Triggers fire whatever the caller's EXECUTE; only privileges on the view count.
REVOKE ALL ON FUNCTION cfeed._shard_write() FROM PUBLIC;

CREATE TRIGGER shard_write INSTEAD OF INSERT OR UPDATE OR DELETE ON cfeed.shard
	FOR EACH ROW EXECUTE FUNCTION cfeed._shard_write();

/*
 * Writing.
 */

CREATE FUNCTION cfeed.create_feed(name text, shards int DEFAULT 1, feed_id int DEFAULT NULL,
								  sweep_group int DEFAULT 0, longpoll bool DEFAULT true,
								  comment text DEFAULT NULL)
	RETURNS int
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_create_feed';
COMMENT ON FUNCTION cfeed.create_feed(text, int, int, int, bool, text) IS 'creates a feed with shards 0..shards-1 and returns its feed_id';

CREATE FUNCTION cfeed.publish(feed_id int, shard int,
							  change_id bigint DEFAULT pg_catalog.nextval('cfeed.change_id'))
	RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_publish';
COMMENT ON FUNCTION cfeed.publish(int, int, bigint) IS 'records a change in the caller''s transaction and returns its change_id';

CREATE FUNCTION cfeed.shard_for(feed_id int, key text) RETURNS int
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_shard_for';
COMMENT ON FUNCTION cfeed.shard_for(int, text) IS 'the shard of a partition key: FNV-1a 32-bit of the key''s UTF-8 bytes modulo the feed''s shard count';

/*
 * Sweeping.
 */

CREATE FUNCTION cfeed.sweep(sweep_group int DEFAULT 0)
	RETURNS TABLE (feed_id int, shard int, change_count int,
				   last_change_sequence_number bigint, lag_ms bigint)
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_sweep';
COMMENT ON FUNCTION cfeed.sweep(int) IS 'stamps the committed changes of a sweep group now; one row per shard that got changes';

CREATE PROCEDURE cfeed.sweep_loop(sweep_group int, wait_ms int, duration_ms int, sleep_ms int,
								  OUT change_count int, OUT max_lag_ms bigint, OUT iterations int)
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'cfeed_sweep_loop';
COMMENT ON PROCEDURE cfeed.sweep_loop(int, int, int, int, int, bigint, int) IS 'sweeps a group repeatedly for duration_ms, committing each sweep';

REVOKE ALL ON FUNCTION cfeed.sweep(int) FROM PUBLIC;
REVOKE ALL ON PROCEDURE cfeed.sweep_loop(int, int, int, int, int, bigint, int) FROM PUBLIC;

/*
 * Reading.
 */

CREATE FUNCTION cfeed.read(feed_id int, shard int, cursor bigint DEFAULT NULL,
						   max_count int DEFAULT 1000, wait_ms int DEFAULT 0)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz)
	LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 1000
	AS 'MODULE_PATHNAME', 'cfeed_read';
COMMENT ON FUNCTION cfeed.read(int, int, bigint, int, int) IS 'stamped changes after the cursor, ascending; waits up to wait_ms when there are none';

CREATE FUNCTION cfeed.wait(feed_id int, shard int, cursor bigint, timeout_ms int DEFAULT 30000)
	RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_wait';
COMMENT ON FUNCTION cfeed.wait(int, int, bigint, int) IS 'blocks until the shard''s head passes the cursor or the timeout ends; returns the head';

CREATE FUNCTION cfeed.head(feed_id int, shard int) RETURNS bigint
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_head';
COMMENT ON FUNCTION cfeed.head(int, int) IS 'the shard''s last stamped number (its start value before the first stamp)';

CREATE FUNCTION cfeed.cursor_at(feed_id int, shard int, at timestamptz) RETURNS bigint
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_cursor_at';
COMMENT ON FUNCTION cfeed.cursor_at(int, int, timestamptz) IS 'the cursor from which reading returns the changes stamped at or after a time';

CREATE FUNCTION cfeed.channel(feed_id int, shard int) RETURNS text
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_channel';
COMMENT ON FUNCTION cfeed.channel(int, int) IS 'the LISTEN channel on which the sweeper announces a shard''s new head';

/*
 * Operations.
 */

CREATE FUNCTION cfeed._sweepers()
	RETURNS TABLE (pid int, datname name, sweep_group int, sweeps bigint,
				   changes_stamped bigint, last_sweep_time timestamptz, last_error text)
	LANGUAGE c VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_sweepers';
COMMENT ON FUNCTION cfeed._sweepers() IS 'internal: the background sweepers'' shared-memory counters';
REVOKE ALL ON FUNCTION cfeed._sweepers() FROM PUBLIC;

CREATE VIEW cfeed.sweepers AS
	SELECT pid, datname, sweep_group, sweeps, changes_stamped, last_sweep_time, last_error
	FROM cfeed._sweepers();
COMMENT ON VIEW cfeed.sweepers IS 'the running background sweepers of all databases';

CREATE VIEW cfeed.stats AS
	SELECT s.feed_id, f.name AS feed_name, s.shard, s.sweep_group,
		   s.last_change_sequence_number AS head, s.last_sweep_time,
		   COALESCE(p.pending, 0) AS pending,
		   pg_catalog.now() OPERATOR(pg_catalog.-) p.oldest_written_at AS oldest_pending_age,
		   NULL::text AS retention_held_by
	FROM cfeed.shard s
	JOIN cfeed.feed f ON f.feed_id OPERATOR(pg_catalog.=) s.feed_id
	LEFT JOIN (SELECT c.feed_id, c.shard, pg_catalog.count(*) AS pending,
					  pg_catalog.min(c.written_at) AS oldest_written_at
			   FROM cfeed.change c
			   WHERE c.change_sequence_number IS NULL
			   GROUP BY c.feed_id, c.shard) p
		   ON p.feed_id OPERATOR(pg_catalog.=) s.feed_id AND p.shard OPERATOR(pg_catalog.=) s.shard;
COMMENT ON VIEW cfeed.stats IS 'one row per shard: head, last sweep, committed changes waiting for a stamp';

/*
 * ======================================================================
 * Tracking tables (src/track.c, docs/track.md)
 * ======================================================================
 */

CREATE TABLE cfeed.row_image (
	change_id bigint NOT NULL,
	feed_id int NOT NULL,
	tbl regclass NOT NULL,
	op text NOT NULL,	-- 'insert', 'update' or 'delete' (no CHECK: it costs a parse per trigger call)
	"row" jsonb NOT NULL,
	PRIMARY KEY (change_id, feed_id)
);
COMMENT ON TABLE cfeed.row_image IS 'row images of tracked tables'' changes: the row as of the change (new row for insert/update, old row for delete); one jsonb copy per change, deleted with its change';
COMMENT ON COLUMN cfeed.row_image.tbl IS 'the tracked table (for a partitioned table, the table that was tracked, not the partition)';
COMMENT ON COLUMN cfeed.row_image.op IS 'insert, update or delete';
COMMENT ON COLUMN cfeed.row_image."row" IS 'the row as of the change, as to_jsonb(row)';
SELECT pg_catalog.pg_extension_config_dump('cfeed.row_image', '');

-- Retention: images follow their changes.  A statement trigger with a
-- transition table deletes them in one set operation per DELETE on
-- cfeed.change, whoever deletes (hence SECURITY DEFINER: it only removes the
-- images of the changes the caller has just deleted).
CREATE FUNCTION cfeed._row_image_cleanup() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	DELETE FROM cfeed.row_image i
	USING deleted_changes d
	WHERE i.change_id OPERATOR(pg_catalog.=) d.change_id
	  AND i.feed_id OPERATOR(pg_catalog.=) d.feed_id;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION cfeed._row_image_cleanup() IS 'internal: deletes the row images of deleted changes';
REVOKE ALL ON FUNCTION cfeed._row_image_cleanup() FROM PUBLIC;

CREATE TRIGGER change_row_image_cleanup AFTER DELETE ON cfeed.change
	REFERENCING OLD TABLE AS deleted_changes
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._row_image_cleanup();

CREATE FUNCTION cfeed._track_row() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_row';
COMMENT ON FUNCTION cfeed._track_row() IS 'internal: AFTER ROW trigger of a tracked table; publishes the change and its row image';

CREATE FUNCTION cfeed._track_change_id() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_change_id';
COMMENT ON FUNCTION cfeed._track_change_id() IS 'internal: BEFORE ROW trigger of a tracked table; sets its change_id column';

CREATE FUNCTION cfeed._track_truncate() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_truncate';
COMMENT ON FUNCTION cfeed._track_truncate() IS 'internal: BEFORE TRUNCATE trigger of a tracked table; refuses TRUNCATE';

CREATE FUNCTION cfeed._track_key(tbl regclass, r record) RETURNS text
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_track_key';
COMMENT ON FUNCTION cfeed._track_key(regclass, record) IS 'internal: the key text form of a row of a tracked table, as the triggers shard it';

CREATE FUNCTION cfeed.track(tbl regclass, feed_id int, key text DEFAULT NULL) RETURNS void
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_track';
COMMENT ON FUNCTION cfeed.track(regclass, int, text) IS 'publishes every INSERT, UPDATE and DELETE of a table to a feed, with row images, sharded by the key (primary key when null); caller must own the table';

CREATE FUNCTION cfeed.untrack(tbl regclass) RETURNS void
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_untrack';
COMMENT ON FUNCTION cfeed.untrack(regclass) IS 'stops publishing a tracked table''s changes; published changes stay';

CREATE FUNCTION cfeed.backfill(tbl regclass, feed_id int, order_by text DEFAULT NULL) RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_backfill';
COMMENT ON FUNCTION cfeed.backfill(regclass, int, text) IS 'numbers a tracked table''s existing rows into the migration range just below each shard''s start, as history before the live changes; once per feed';

CREATE FUNCTION cfeed.read_rows(feed_id int, shard int, cursor bigint DEFAULT NULL,
								max_count int DEFAULT 1000, wait_ms int DEFAULT 0)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz,
				   tbl regclass, op text, "row" jsonb)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1000
	AS $$
DECLARE
	v_numbers bigint[];
	v_ids bigint[];
	v_times timestamptz[];
BEGIN
	-- cfeed.read checks the arguments, reads and waits; the images are read
	-- by a second statement, whose newer snapshot sees the images of every
	-- change the first one returned (written by transactions that committed
	-- before the sweep that stamped them).
	SELECT pg_catalog.array_agg(r.change_sequence_number ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.change_id ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.stamped_at ORDER BY r.change_sequence_number)
	  INTO v_numbers, v_ids, v_times
	  FROM cfeed.read(read_rows.feed_id, read_rows.shard, read_rows.cursor,
					  read_rows.max_count, read_rows.wait_ms) r;
	IF v_numbers IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
		SELECT u.n, u.id, u.t, i.tbl, i.op, i."row"
		FROM ROWS FROM (pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_ids),
						pg_catalog.unnest(v_times)) AS u(n, id, t)
		LEFT JOIN cfeed.row_image i
			   ON i.change_id OPERATOR(pg_catalog.=) u.id
			  AND i.feed_id OPERATOR(pg_catalog.=) read_rows.feed_id
		ORDER BY u.n;
END
$$;
COMMENT ON FUNCTION cfeed.read_rows(int, int, bigint, int, int) IS 'like cfeed.read, with each change''s table, operation and row as of the change (null for changes published without a row image)';
