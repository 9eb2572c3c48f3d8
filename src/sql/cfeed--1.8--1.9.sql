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
 * Stamps in ranges (docs/design.md, "Storage in ranges").  A shard's
 * storage is 'rows' (each change's row is updated with its number) or
 * 'ranges' (a change's row is written once by its writer and never
 * updated: a sweep appends one cfeed.stamp row per shard it numbers,
 * holding the range of numbers and the change_ids in number order).  New
 * shards take cfeed.default_storage; a resharded shard's children take
 * their parent's.  A shard's storage is fixed when it is created.
 */
ALTER TABLE cfeed.shard_config ADD COLUMN storage text NOT NULL DEFAULT 'rows'
	CONSTRAINT shard_config_storage_check CHECK (storage OPERATOR(pg_catalog.=) ANY (ARRAY['rows', 'ranges']));
ALTER TABLE cfeed.shard_config ALTER COLUMN storage
	SET DEFAULT COALESCE(pg_catalog.current_setting('cfeed.default_storage', true), 'rows');
COMMENT ON COLUMN cfeed.shard_config.storage IS 'rows: a sweep numbers a change by updating its row; ranges: by appending a cfeed.stamp row (fixed at creation, from cfeed.default_storage)';

/*
 * A range shard's stamps name changes that may have been deleted since:
 * read() then looks each change up in cfeed.change.  changes_deleted says
 * that one may have been: set by the first DELETE of one of the shard's
 * unnumbered changes (_change_deleted), by a TRUNCATE of cfeed.change that
 * leaves the shard's stamps (_change_truncated), and for a shard given the
 * key of a dropped one whose stamps are left (_shard_config_storage);
 * retention, which deletes whole stamps with their changes, unsets what
 * its own delete set.  While it is false, read() answers from the stamps
 * alone (read.c).  Only its first setting writes the row, so that
 * deleters do not queue on it.
 */
ALTER TABLE cfeed.shard_config ADD COLUMN changes_deleted bool NOT NULL DEFAULT false;
COMMENT ON COLUMN cfeed.shard_config.changes_deleted IS 'of a shard stored in ranges: one of its unnumbered changes was deleted other than by retention (or cfeed.change truncated, or it took the key of a dropped shard whose stamps are left); while false, cfeed.read answers from its stamps alone';

/*
 * The pending index also finds a range change from its stamp: a range
 * change stays in it (its number is never written into its row), and its
 * stamp keeps each change's writer_xid beside its change_id.
 */
DROP INDEX cfeed.change_pending_idx;
CREATE INDEX change_pending_idx ON cfeed.change (writer_xid, change_id) WHERE change_sequence_number IS NULL;

CREATE TABLE cfeed.stamp (
	feed_id int NOT NULL,
	shard int NOT NULL,
	first_number bigint NOT NULL,
	last_number bigint NOT NULL,
	stamped_at timestamptz NOT NULL,
	-- each change by its offsets from the row's first (4 bytes each, not 8:
	-- most of a stamp's write is the arrays): a sweep starts a new row
	-- where a change_id is too far from the first for an int
	first_change_id bigint NOT NULL,
	change_id_deltas int[] NOT NULL,
	first_writer_xid xid8 NOT NULL,
	writer_xid_deltas int[] NOT NULL,
	-- the tables (their numbers, cfeed.tracked_table) of the row images
	-- of the changes it numbers, which the read policy may hide from a
	-- reader: empty for none; null where a sweep did not say (a stamp
	-- written by hand, or one of changes of more than 64 tables), whose
	-- changes read() looks up in cfeed.change
	image_tables int[],
	PRIMARY KEY (feed_id, shard, last_number)
);
COMMENT ON TABLE cfeed.stamp IS 'the numbers of the changes of shards stored in ranges: number first_number + i - 1 is change_id first_change_id + change_id_deltas[i], written by first_writer_xid + writer_xid_deltas[i]';
COMMENT ON COLUMN cfeed.stamp.image_tables IS 'the tables (numbers of cfeed.tracked_table) of the row images of the changes the stamp numbers, empty for none (null: not known)';
-- (no CHECK of the arrays' lengths: the sweep alone writes stamps, and a
-- CHECK's expression is read anew by every INSERT, a tenth of a sweep's time)
SELECT pg_catalog.pg_extension_config_dump('cfeed.stamp', '');
REVOKE ALL ON cfeed.stamp FROM PUBLIC;

/*
 * A sweep group's mark: the snapshot of its last sweep, with the xids of
 * the changes it left.  A range change is stamped exactly when its
 * writer_xid is below xmax and not in xip of its group's latest mark.
 */
CREATE TABLE cfeed.sweep_mark (
	sweep_group int NOT NULL,
	next_xid xid8 NOT NULL,
	running xid8[] NOT NULL,
	system_identifier bigint NOT NULL,
	made_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- the cluster in the key: a restore's first mark (shard_config_storage)
	-- never takes the key of the dumped mark, which must come through
	PRIMARY KEY (sweep_group, system_identifier, next_xid)
);
COMMENT ON TABLE cfeed.sweep_mark IS 'internal: per sweep group with range shards, which writer_xids its sweeps have stamped (those below next_xid and not in running)';
SELECT pg_catalog.pg_extension_config_dump('cfeed.sweep_mark', '');
REVOKE ALL ON cfeed.sweep_mark FROM PUBLIC;

/*
 * cfeed._shard_ended (src/splits.c): ended of a closed shard (the view
 * cfeed.shard's).  Its unstamped changes are those its group's mark
 * points at (written by an xid from next_xid on, or in running), as
 * cfeed.stats counts them: every change of a range shard stays without a
 * number, and the mark is the record of a row shard's in the same group
 * too (its sweeps look nowhere else); a row shard of a group without a
 * mark, or with another cluster's, has those without a number.  The mark is
 * the group's latest of this cluster, found as a sweep finds it (backward
 * in sweep_mark_pkey: not through the dead version each sweep leaves
 * under a held xmin horizon); while the group has a mark of another
 * cluster (a restore or pg_upgrade not yet adopted: cfeed.adopt_marks),
 * the shard has not ended, since which of its changes are stamped is
 * unknown, and no error is raised, as the view is read by every reader.
 * Null for a feed the caller may not read; any role may call it, as
 * cfeed._read_to_end.
 */
CREATE FUNCTION cfeed._shard_ended(feed_id int, shard int) RETURNS bool
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_shard_ended';
COMMENT ON FUNCTION cfeed._shard_ended(int, int) IS 'internal: the shard is closed and has nothing unstamped left, false for a range shard while its group has another cluster''s mark (null for a feed the caller may not read)';

/*
 * The view gains parent, closed, ended and storage at the end (CREATE OR
 * REPLACE keeps its defaults, triggers, grants and comments; it resets its
 * options, so security_barrier is set again).  ended is evaluated for a
 * closed shard only: the pending changes of a closed shard can only
 * become fewer, and no others come.  A range shard's head is its last
 * stamp's last number.  Whether a closed shard has ended is
 * cfeed._shard_ended's, a row shard's too: in a sweep group with a mark
 * (a feed moved to ranges by cfeed.set_storage keeps its old row shards in
 * their groups, beside their range children) the mark says which of its
 * changes can still be unstamped, a few probes where a query would walk
 * every entry of change_pending_idx, which holds every range change.
 */
CREATE OR REPLACE VIEW cfeed.shard AS
SELECT * FROM (
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   GREATEST(h.change_sequence_number, r.last_number, s.deleted_head, s.start_sequence_number)
			   AS last_change_sequence_number,
		   COALESCE(r.stamped_at, h.stamped_at) AS last_sweep_time,
		   s.start_sequence_number,
		   s.parent,
		   s.closed,
		   CASE WHEN NOT s.closed THEN false
				ELSE cfeed._shard_ended(s.feed_id, s.shard)
			   END AS ended,
		   s.storage
	FROM cfeed.shard_config s
	LEFT JOIN LATERAL (
		SELECT c.change_sequence_number, c.stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) s.start_sequence_number
		ORDER BY c.change_sequence_number DESC
		LIMIT 1) h ON true
	LEFT JOIN LATERAL (
		SELECT t.last_number, t.stamped_at
		FROM cfeed.stamp t
		WHERE s.storage OPERATOR(pg_catalog.=) 'ranges'
		  AND t.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND t.shard OPERATOR(pg_catalog.=) s.shard
		ORDER BY t.last_number DESC
		LIMIT 1) r ON true) s
WHERE cfeed._may_read(s.feed_id);
ALTER VIEW cfeed.shard SET (security_barrier = true);
COMMENT ON COLUMN cfeed.shard.storage IS 'rows or ranges: how the shard''s changes are numbered (cfeed.default_storage when it was created)';
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
 * The view's writes per feed: INSERT, UPDATE and DELETE through cfeed.shard
 * take, beyond the privilege on the view, a write grant of the feed, or a
 * feed the same transaction created (cfeed.create_feed adds its shards
 * through the view, as the caller).  A trigger that runs as the caller,
 * before shard_write (SECURITY DEFINER, which writes shard_config as the
 * owner and so cannot ask who called): before this, a role with INSERT on
 * the view (what create_feed needs) added shards to any feed, which moved
 * its keys and held its writers on the shards lock, and told from the
 * errors which feeds and shards exist.  A feed it may not write and one
 * that does not exist get the same error.
 */
CREATE FUNCTION cfeed._feed_created_here(feed_id int) RETURNS bool
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_feed_created_here';
COMMENT ON FUNCTION cfeed._feed_created_here(int) IS 'internal: whether this transaction created the feed (its shards may be added through cfeed.shard)';

/*
 * A sweep group in use: one with a shard.  Each sweep group of each
 * database has a background sweeper of its own, from the cluster's
 * cfeed.max_workers and max_worker_processes, so a new one is the
 * extension owner's to start (shard_access): before, a role that may
 * create feeds in one database took every sweeper slot of the cluster
 * with feeds in new groups, and another database's groups went unswept.
 * In C: it reads shard_config without the caller's privileges, and tells
 * any role whether a group number is in use, nothing of feeds.
 */
CREATE FUNCTION cfeed._sweep_group_in_use(sweep_group int) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_sweep_group_in_use_sql';
COMMENT ON FUNCTION cfeed._sweep_group_in_use(int) IS 'internal: whether a sweep group has shards (0 always counts): only the extension''s owner starts a new one';

CREATE FUNCTION cfeed._shard_access() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	v_feed int := CASE WHEN TG_OP = 'INSERT' THEN NEW.feed_id ELSE OLD.feed_id END;
	v_group int := CASE WHEN TG_OP = 'INSERT' THEN COALESCE(NEW.sweep_group, 0)
						WHEN TG_OP = 'UPDATE' AND NEW.sweep_group IS DISTINCT FROM OLD.sweep_group THEN NEW.sweep_group END;
BEGIN
	IF NOT cfeed._may_write(v_feed) AND NOT cfeed._feed_created_here(v_feed) THEN
		RAISE EXCEPTION 'permission denied to write feed %', v_feed
			USING ERRCODE = '42501',
				  DETAIL = 'Adding, changing or removing a shard through cfeed.shard takes a write grant on its feed.',
				  HINT = format('The extension''s owner grants it with cfeed.grant_write(%s, role).', v_feed);
	END IF;
	IF v_group IS NULL AND NOT (TG_OP = 'INSERT' AND NEW.last_change_sequence_number > 4611686018427387903) THEN
		RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
	END IF;
	-- the owner first: the group's look is a scan of shard_config
	IF pg_has_role(CURRENT_USER, (SELECT c.relowner FROM pg_class c WHERE c.oid = 'cfeed.shard_config'::regclass), 'USAGE') THEN
		RETURN NEW;
	END IF;
	IF v_group IS NOT NULL AND NOT cfeed._sweep_group_in_use(v_group) THEN
		RAISE EXCEPTION 'permission denied to start sweep group %', v_group
			USING ERRCODE = '42501',
				  DETAIL = 'Each sweep group of each database has a background sweeper of its own, from the cluster''s cfeed.max_workers; only the extension''s owner starts a new group.',
				  HINT = 'Use a sweep group that has shards (group 0 always), or have the extension''s owner create the first shard of the new group.';
	END IF;
	-- a shard that runs out of numbers stops its sweep group's sweeps (a
	-- range shard's in the C edition, any shard's in the SQL edition): one
	-- that starts above 2^62 - 1 could, with a few changes
	IF TG_OP = 'INSERT' AND NEW.last_change_sequence_number > 4611686018427387903 THEN
		RAISE EXCEPTION 'permission denied to start shard % of feed % at %', NEW.shard, v_feed, NEW.last_change_sequence_number
			USING ERRCODE = '42501',
				  DETAIL = 'A shard that starts above 4611686018427387903 (2^62 - 1) can run out of numbers, which stops the sweeps of its whole sweep group; only the extension''s owner starts one there.',
				  HINT = 'Start the shard lower, or leave last_change_sequence_number to its default.';
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION cfeed._shard_access() IS 'internal: trigger of the view cfeed.shard, as the caller: its writes take a write grant of the feed (or a feed created by the same transaction)';
REVOKE ALL ON FUNCTION cfeed._shard_access() FROM PUBLIC;
CREATE TRIGGER shard_access INSTEAD OF INSERT OR UPDATE OR DELETE ON cfeed.shard
	FOR EACH ROW EXECUTE FUNCTION cfeed._shard_access();

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

/*
 * cfeed.set_storage: how a feed moves between storages, a shard's being
 * fixed when it is created: a reshard into one child per open shard, the
 * children stored in the storage given (src/reshard.c).
 */
CREATE FUNCTION cfeed.set_storage(feed_id int, storage text, wait_ms int DEFAULT 10000)
	RETURNS TABLE(shard int, parent int)
	LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 16
	AS 'MODULE_PATHNAME', 'cfeed_set_storage';
COMMENT ON FUNCTION cfeed.set_storage(int, text, int) IS 'unless the feed''s open shards are all stored in storage (rows or ranges) already, closes them and creates one child each stored in it, waiting up to wait_ms for the feed''s writers, as cfeed.reshard; returns the children and their parents';
REVOKE ALL ON FUNCTION cfeed.set_storage(int, text, int) FROM PUBLIC;

COMMENT ON FUNCTION cfeed.shard_for(int, text) IS 'the shard of a partition key: the feed''s first open shard plus FNV-1a 32-bit of the key''s UTF-8 bytes modulo the number of open shards';

/* ---- consumer groups follow splits ---- */

/*
 * A child shard (a row of shard_config with a parent: cfeed.reshard's, or
 * one a logical subscriber's operator inserts, docs/replication.md) gets,
 * in the transaction that creates it, a free lease at its start (owner
 * null, epoch 0, as acquire's new leases) for every group with a lease on
 * its parent.  The group reads the parent to its end and then the child
 * from its start (acquire hands the child out once the parent is
 * consumed), whatever start_at its members pass and however many splits
 * happen before they call again; retention, which keeps every change
 * after a lease's cursor, keeps the child's changes for it meanwhile.  A
 * group whose first leases commit while the feed is resharded gets its
 * leases on the children at its next acquire, as a new group.  SECURITY
 * DEFINER: whoever may create a shard gives the groups their leases on
 * it, whatever its own privileges on cfeed.lease and its read policy.
 */
CREATE FUNCTION cfeed._child_leases() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	INSERT INTO cfeed.lease (group_name, feed_id, shard, owner, cursor, epoch, expires_at)
	SELECT l.group_name, c.feed_id, c.shard, NULL, c.start_sequence_number, 0, NULL
	FROM new_shards c
	JOIN cfeed.lease l ON l.feed_id = c.feed_id AND l.shard = c.parent
	ORDER BY l.group_name, c.feed_id, c.shard
	ON CONFLICT DO NOTHING;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._child_leases() IS 'internal: trigger of shard_config: a new child shard gets a free lease at its start for every group with a lease on its parent';
REVOKE ALL ON FUNCTION cfeed._child_leases() FROM PUBLIC;
CREATE TRIGGER shard_config_child_leases AFTER INSERT ON cfeed.shard_config
	REFERENCING NEW TABLE AS new_shards
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._child_leases();

/*
 * cfeed._read_to_end (src/splits.c): whether a cursor has read a closed
 * shard to its end: no change after it, and no unstamped change left on
 * the shard (ended: its head can never grow).  The head may be a number
 * whose change was deleted, which no member can read and checkpoint, so
 * it is "no change after the cursor", over every change of the shard: a
 * member that may not see some of them (the read policy of cfeed.change)
 * must not decide the group consumed the shard early.  Answers only that
 * boolean, for a feed the caller may read (null otherwise); the scan of
 * the unstamped changes comes last, when the rest says yes.
 */
CREATE FUNCTION cfeed._read_to_end(feed_id int, shard int, cursor bigint) RETURNS bool
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_read_to_end';
COMMENT ON FUNCTION cfeed._read_to_end(int, int, bigint) IS 'internal: the shard is closed, has no change after cursor and nothing unstamped left (null for a feed the caller may not read)';

/*
 * cfeed._lease_start: where a group's new lease of a shard starts
 * (cfeed.acquire without start_at): just before the shard's first stored
 * change, whether the caller may read its row image or not.  Found below
 * the read policy, for a caller that may read the feed (null otherwise,
 * and for a shard that stores no change): a member that does not see the
 * first changes must not start its group after them, where every member
 * would skip them.  Until 1.9 acquire found it with the caller's
 * privileges.
 */
CREATE FUNCTION cfeed._lease_start(feed_id int, shard int) RETURNS bigint
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_lease_start';
COMMENT ON FUNCTION cfeed._lease_start(int, int) IS 'internal: the position just before the shard''s first stored change, whoever may read it (null for a feed the caller may not read, or a shard that stores none)';

/*
 * cfeed._consumed: whether a group has consumed a shard: its lease on it
 * has read the closed shard to its end (cfeed._read_to_end).  A child of
 * a shard is handed to an owner only once the group has consumed the
 * parent, and a consumed shard holds no lease any more (cfeed.acquire).
 * One lookup of the lease by primary key, with the caller's privileges.
 */
CREATE FUNCTION cfeed._consumed(group_name text, feed_id int, shard int) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT EXISTS (
		SELECT FROM cfeed.lease l
		WHERE l.group_name = $1 AND l.feed_id = $2 AND l.shard = $3
		  AND cfeed._read_to_end(l.feed_id, l.shard, l.cursor))
$fn$;
COMMENT ON FUNCTION cfeed._consumed(text, int, int) IS 'internal: the group''s lease on the shard has read the closed shard to its end (cfeed.acquire)';

/*
 * cfeed._parked: whether a group's lease on a shard is parked (cfeed.acquire):
 * the shard is closed and consumed, or a child whose parent the group has
 * not consumed.  closed and parent are the shard's.
 */
CREATE FUNCTION cfeed._parked(group_name text, feed_id int, shard int, closed bool, parent int) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT ($4 AND cfeed._consumed($1, $2, $3))
		OR ($5 IS NOT NULL AND NOT cfeed._consumed($1, $2, $5))
$fn$;
COMMENT ON FUNCTION cfeed._parked(text, int, int, bool, int) IS 'internal: the group''s lease on the shard is parked: a closed shard consumed, or a child of a parent not consumed (cfeed.acquire)';

/*
 * cfeed._share_rank: how acquire ranks the live owners for the S mod N
 * extra shares of a split (owners of n leases, S shards, N owners): by
 * what they hold when above floor(S/N), most first, then by name.  1.8
 * ranked every owner by what it held, which changed between the owners'
 * calls when leases were free and could leave a lease no owner's target
 * covered after every owner had called (c holding 4 of 11 shards, f 3,
 * 4 free: f's call gave c the extra and took 2; c's gave it to f, which
 * now held more, and took 1).  An owner at or below floor(S/N) that
 * takes its target keeps its place, so one round of calls after a
 * change in membership settles the split; an owner holding the extra
 * keeps it, so a settled split stays as it is.
 */
CREATE FUNCTION cfeed._share_rank(n int, shards int, owners int) RETURNS int
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $fn$
	SELECT CASE WHEN $1 OPERATOR(pg_catalog.>) ($2 OPERATOR(pg_catalog./) $3) THEN $1 ELSE 0 END
$fn$;
COMMENT ON FUNCTION cfeed._share_rank(int, int, int) IS 'internal: an owner''s rank for the extra shares of a consumer group''s split (cfeed.acquire)';

/*
 * cfeed._ancestors: a shard's parent, its parent's parent, and so on (a
 * feed split more than once).  cfeed._held_for_ancestors: the first (by
 * name) of the groups that lease an ancestor of a shard but not the shard:
 * a split that committed while such a group's leases on the parents did
 * not gave it none on the children (cfeed._child_leases could not see
 * them), nor a later split on theirs; its next acquire makes them at the
 * shard's start, and until then retention keeps the shard's changes for
 * it (cfeed._apply_retention, cfeed._retention_held_by).  Null when there
 * is none, as for a shard never split off.  With the caller's privileges:
 * the shards of the feeds it may read (cfeed.shard).
 */
CREATE FUNCTION cfeed._ancestors(feed_id int, shard int) RETURNS TABLE (shard int)
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	WITH RECURSIVE a(shard) AS (
		SELECT c.parent FROM cfeed.shard c
		WHERE c.feed_id = $1 AND c.shard = $2 AND c.parent IS NOT NULL
		UNION ALL
		SELECT c.parent FROM a JOIN cfeed.shard c ON c.feed_id = $1 AND c.shard = a.shard
		WHERE c.parent IS NOT NULL)
	SELECT a.shard FROM a
$fn$;
COMMENT ON FUNCTION cfeed._ancestors(int, int) IS 'internal: the shards a shard was split off from, its parent first (cfeed.acquire, retention)';

CREATE FUNCTION cfeed._held_for_ancestors(feed_id int, shard int) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT p.group_name
	FROM cfeed._ancestors($1, $2) a
	JOIN cfeed.lease p ON p.feed_id = $1 AND p.shard = a.shard
	WHERE NOT EXISTS (SELECT FROM cfeed.lease y
					  WHERE y.group_name = p.group_name AND y.feed_id = $1 AND y.shard = $2)
	ORDER BY p.group_name LIMIT 1
$fn$;
COMMENT ON FUNCTION cfeed._held_for_ancestors(int, int) IS 'internal: a group that leases an ancestor of the shard but not the shard, whose changes retention keeps for it (null: none)';

/*
 * cfeed.acquire: as in 1.8, following splits (cfeed.reshard).  A lease is
 * *parked* when its shard is closed and consumed by the group
 * (cfeed._consumed: nothing is left to read on it), or when its shard is
 * a child whose parent the group has not consumed yet (reading the child
 * now would give a key's later changes before its earlier ones).  Parked
 * leases are freed (owner and expiry null, epoch and cursor kept, as by
 * cfeed.release), taken by no one and left out of the fair shares, so
 * the split is among the shards there is something to read on.  Their
 * owners still count as live in the call that frees them (they were, a
 * moment ago), so that the first member to call after a parent is
 * consumed does not take every child alone.  A parent's lease is
 * consumed by its holder's last checkpoint; the next acquire of any
 * member frees it and hands its children out.  A child held while its
 * parent is not consumed (an operator seeked the parent back) is freed
 * too: its holder's next checkpoint is refused, and the child is handed
 * out again once the parent is consumed again.
 *
 * The groups that had a lease on a parent got theirs on its children
 * when the children were created (cfeed._child_leases), at the
 * children's start (whatever start_at their members pass, and however
 * many splits happen between two calls).  The
 * leases acquire creates are a new group's, or a group's that began
 * while the feed was resharded: every shard at start_at (a time before
 * the split gives a cursor in the parent and the child's beginning, a
 * later one the parent's head and a cursor in the child).
 *
 * The parked shards are found by one scan of the feed's closed shards and
 * children (none on a feed never resharded), with a lookup of the leases
 * per shard (no join with a scan of the group's leases: a new group's
 * leases have no statistics); the leases to count, free and take are
 * named by constant arrays, which PostgreSQL looks rows up in by hashing
 * (see 1.8).
 */
CREATE OR REPLACE FUNCTION cfeed.acquire(group_name text, feed_id int, owner text,
										 ttl_ms int DEFAULT 30000, start_at timestamptz DEFAULT NULL)
	RETURNS TABLE (shard int, cursor bigint, epoch bigint, expires_at timestamptz)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := acquire.group_name;
	v_feed int := acquire.feed_id;
	v_owner text := acquire.owner;
	v_now timestamptz := pg_catalog.clock_timestamp();
	v_expires timestamptz;
	v_shards int;
	v_have int;
	v_owners int;
	v_target int;
	v_need int;
	v_names text[];
	v_targets int[];
	v_parked int[];
	v_idle text[] := '{}';
	v_take int[];
BEGIN
	IF v_group IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF v_feed IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF v_owner IS NULL THEN PERFORM cfeed._null_arg('owner'); END IF;
	IF acquire.ttl_ms IS NULL THEN PERFORM cfeed._null_arg('ttl_ms'); END IF;
	IF v_group = '' OR v_owner = '' THEN
		RAISE EXCEPTION 'group_name and owner must not be empty'
			USING ERRCODE = '22023',
				  HINT = 'Name the consumer group and the member calling (owner: unique per member, e.g. host and process id).';
	END IF;
	IF acquire.ttl_ms <= 0 THEN
		RAISE EXCEPTION 'argument "ttl_ms" must be positive, got %', acquire.ttl_ms
			USING ERRCODE = '22023', HINT = 'Pass ttl_ms => 1 or more: how long the leases last without a renewal, in milliseconds.';
	END IF;
	PERFORM cfeed._check_feed(v_feed);
	v_expires := v_now + pg_catalog.make_interval(secs => acquire.ttl_ms / 1000.0);

	-- Missing leases: free, positioned just before the shard's first
	-- stored change, whoever may read it (cfeed._lease_start), or at its
	-- head; a descendant's of a shard the group leased before this call,
	-- at its start, as a split would have made it (cfeed._child_leases): a
	-- split that committed while the group's first leases did not made
	-- none of the group's on the children (nor a later split on theirs),
	-- whose changes the group must read from there, whatever start_at its
	-- members pass (and retention kept them for it meanwhile:
	-- cfeed._held_for_ancestors).
	INSERT INTO cfeed.lease AS l (group_name, feed_id, shard, owner, cursor, epoch,
								  expires_at, updated_at)
	SELECT v_group, s.feed_id, s.shard, NULL,
		   CASE WHEN s.parent IS NOT NULL
					 AND EXISTS (SELECT FROM cfeed._ancestors(s.feed_id, s.shard) a
								 JOIN cfeed.lease p ON p.group_name = v_group AND p.feed_id = s.feed_id
													AND p.shard = a.shard) THEN s.start_sequence_number
				WHEN acquire.start_at IS NULL THEN
				COALESCE(cfeed._lease_start(s.feed_id, s.shard), s.last_change_sequence_number)
		   ELSE cfeed.cursor_at(s.feed_id, s.shard, acquire.start_at) END,
		   0, NULL, v_now
	FROM cfeed.shard s
	WHERE s.feed_id = v_feed
	  AND NOT EXISTS (SELECT FROM cfeed.lease x
					  WHERE x.group_name = v_group AND x.feed_id = s.feed_id
						AND x.shard = s.shard)
	ORDER BY s.shard
	ON CONFLICT DO NOTHING;

	-- Serialize with every other acquire of this (group, feed).
	PERFORM FROM cfeed.lease l
	WHERE l.group_name = v_group AND l.feed_id = v_feed
	ORDER BY l.shard
	FOR UPDATE;

	-- Parked leases (consumed closed shards, children of unconsumed
	-- parents) are freed, whoever holds them.
	v_parked := ARRAY(
		SELECT s.shard FROM cfeed.shard s
		WHERE s.feed_id = v_feed AND (s.closed OR s.parent IS NOT NULL)
		  AND cfeed._parked(v_group, s.feed_id, s.shard, s.closed, s.parent)
		ORDER BY s.shard);
	IF pg_catalog.cardinality(v_parked) > 0 THEN
		EXECUTE pg_catalog.format(
			'SELECT ARRAY(SELECT DISTINCT l.owner FROM cfeed.lease l '
			'WHERE l.group_name = $1 AND l.feed_id = $2 AND l.owner IS NOT NULL AND l.expires_at > $3 '
			'AND l.shard = ANY (%L::pg_catalog.int4[]))', v_parked)
		INTO v_idle
		USING v_group, v_feed, v_now;
		EXECUTE pg_catalog.format(
			'UPDATE cfeed.lease l SET owner = NULL, expires_at = NULL, updated_at = $1 '
			'WHERE l.group_name = $2 AND l.feed_id = $3 AND l.owner IS NOT NULL '
			'AND l.shard = ANY (%L::pg_catalog.int4[])', v_parked)
		USING v_now, v_group, v_feed;
	END IF;

	-- Renew: still ours, expired or not, as long as nobody took it.
	UPDATE cfeed.lease l SET expires_at = v_expires, updated_at = v_now
	WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.owner = v_owner;
	GET DIAGNOSTICS v_have = ROW_COUNT;

	-- Targets of the live owners (the caller included, and those whose
	-- live leases were just parked): see the 1.0 script; the shards shared
	-- are the leases not parked.
	EXECUTE pg_catalog.format(
		'SELECT pg_catalog.count(*) FROM cfeed.lease l WHERE l.group_name = $1 AND l.feed_id = $2 '
		'AND NOT (l.shard = ANY (%L::pg_catalog.int4[]))', v_parked)
	INTO v_shards
	USING v_group, v_feed;

	WITH held AS (
		SELECT l.owner AS o, pg_catalog.count(*)::int AS n
		FROM cfeed.lease l
		WHERE l.group_name = v_group AND l.feed_id = v_feed
		  AND l.owner IS NOT NULL AND l.expires_at > v_now
		GROUP BY l.owner
		UNION ALL
		SELECT i.o, 0 FROM pg_catalog.unnest(v_idle OPERATOR(pg_catalog.||) v_owner) i(o)
	), live AS (
		SELECT h.o, pg_catalog.sum(h.n)::int AS n, pg_catalog.count(*) OVER () AS owners
		FROM held h GROUP BY h.o
	), ranked AS (
		-- the extra shares: to the owners above floor(S/N), most first, then
		-- by name (cfeed._share_rank)
		SELECT h.o, h.n,
			   pg_catalog.row_number() OVER (ORDER BY cfeed._share_rank(h.n, v_shards, h.owners::int) DESC,
											 h.o) AS rk,
			   h.owners
		FROM live h
	)
	SELECT pg_catalog.array_agg(r.o ORDER BY r.rk),
		   pg_catalog.array_agg((v_shards / r.owners
								 + CASE WHEN r.rk <= v_shards % r.owners THEN 1 ELSE 0 END)::int
								ORDER BY r.rk)
	INTO v_names, v_targets
	FROM ranked r;

	v_owners := pg_catalog.cardinality(v_names);
	v_target := v_targets[pg_catalog.array_position(v_names, v_owner)];
	v_need := v_target - v_have;

	IF v_need > 0 THEN
		-- Free and expired leases first, lowest shards first, up to v_need
		-- of them, none parked: neither one found parked above, nor one
		-- parked now.  A split that committed since the statements above
		-- made free leases on children whose parents the group has not
		-- consumed; handing one out would read a key's later changes
		-- before its earlier ones (isolation spec acquire_vs_split).
		EXECUTE pg_catalog.format(
			'WITH parked_now AS MATERIALIZED ('
			'SELECT s.shard FROM cfeed.shard s '
			'WHERE s.feed_id = $2 AND (s.closed OR s.parent IS NOT NULL) '
			'AND cfeed._parked($1, s.feed_id, s.shard, s.closed, s.parent)) '
			'SELECT ARRAY(SELECT x.shard FROM cfeed.lease x '
			'WHERE x.group_name = $1 AND x.feed_id = $2 '
			'AND (x.owner IS NULL OR x.expires_at IS NULL OR x.expires_at <= $3) '
			'AND NOT (x.shard = ANY (%L::pg_catalog.int4[])) '
			'AND NOT EXISTS (SELECT FROM parked_now p WHERE p.shard = x.shard) '
			'ORDER BY x.shard LIMIT $4)', v_parked)
		INTO v_take
		USING v_group, v_feed, v_now, v_need;
		EXECUTE pg_catalog.format(
			'UPDATE cfeed.lease l SET owner = $1, epoch = l.epoch + 1, expires_at = $2, updated_at = $3 '
			'WHERE l.group_name = $4 AND l.feed_id = $5 AND l.shard = ANY (%L::pg_catalog.int4[])', v_take)
		USING v_owner, v_expires, v_now, v_group, v_feed;
		v_need := v_need - pg_catalog.cardinality(v_take);
	END IF;

	IF v_need > 0 THEN
		-- Then steal from owners above their target, round-robin, each
		-- losing its highest shards (as in 1.8; parked leases have no
		-- owner).
		v_take := ARRAY(
				SELECT r.shard
				FROM (SELECT h.shard, h.o, h.k,
							 h.n - (v_shards / v_owners
									+ CASE WHEN pg_catalog.dense_rank() OVER (
													ORDER BY cfeed._share_rank(h.n::int, v_shards, v_owners) DESC, h.o)
												+ CASE WHEN (cfeed._share_rank(v_have, v_shards, v_owners), h.o)
															> (cfeed._share_rank(h.n::int, v_shards, v_owners), v_owner)
													   THEN 1 ELSE 0 END
												<= v_shards % v_owners
										   THEN 1 ELSE 0 END) AS excess
					  FROM (SELECT x.shard, x.owner AS o,
								   pg_catalog.count(*) OVER (PARTITION BY x.owner) AS n,
								   pg_catalog.row_number() OVER (PARTITION BY x.owner ORDER BY x.shard DESC) AS k
							FROM cfeed.lease x
							WHERE x.group_name = v_group AND x.feed_id = v_feed
							  AND x.owner IS NOT NULL AND x.owner <> v_owner
							  AND x.expires_at > v_now) h) r
				WHERE r.k <= r.excess
				ORDER BY r.k, r.excess DESC, r.o LIMIT v_need);
		EXECUTE pg_catalog.format(
			'UPDATE cfeed.lease l SET owner = $1, epoch = l.epoch + 1, expires_at = $2, updated_at = $3 '
			'WHERE l.group_name = $4 AND l.feed_id = $5 AND l.shard = ANY (%L::pg_catalog.int4[])', v_take)
		USING v_owner, v_expires, v_now, v_group, v_feed;
	END IF;

	RETURN QUERY
		SELECT l.shard, l.cursor, l.epoch, l.expires_at FROM cfeed.lease l
		WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.owner = v_owner
		ORDER BY l.shard;
END
$fn$;

/*
 * cfeed.seek: as in 1.8; since 1.9 a seek that leaves a closed shard not
 * consumed by the group (a replay of a parent) frees the group's leases on
 * its children at once, as the next acquire would (cfeed._parked): their
 * holders' checkpoints and fails are refused from the seek on, so that no
 * child's change is processed or set aside before the parent's replay.
 * Before, the holder of a child could go on until a member's acquire.
 */
CREATE OR REPLACE FUNCTION cfeed.seek(group_name text, feed_id int, shard int, cursor bigint)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_head bigint;
	v_lowest bigint;
	v_epoch bigint;
	v_children int[];
BEGIN
	IF seek.group_name IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF seek.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF seek.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF seek.cursor IS NULL THEN PERFORM cfeed._null_arg('cursor'); END IF;
	IF seek.group_name = '' THEN
		RAISE EXCEPTION 'group_name must not be empty' USING ERRCODE = '22023';
	END IF;
	v_head := cfeed.head(seek.feed_id, seek.shard);	-- 42704 for an unknown feed or shard
	IF seek.cursor > v_head THEN
		RAISE EXCEPTION 'cursor % is beyond the head % of shard % of feed %',
			seek.cursor, v_head, seek.shard, seek.feed_id
			USING ERRCODE = '22023',
				  HINT = 'To skip everything written so far, seek to cfeed.head().';
	END IF;
	SELECT cfeed._lowest_cursor(s.start_sequence_number) INTO v_lowest
	FROM cfeed.shard s WHERE s.feed_id = seek.feed_id AND s.shard = seek.shard;
	IF seek.cursor < v_lowest THEN
		RAISE EXCEPTION 'cursor % is below the lowest cursor % of shard % of feed %',
			seek.cursor, v_lowest, seek.shard, seek.feed_id
			USING ERRCODE = '22023',
				  HINT = pg_catalog.format('To replay everything the shard still has, seek to %s.', v_lowest);
	END IF;

	INSERT INTO cfeed.lease AS l (group_name, feed_id, shard, owner, cursor, epoch, expires_at,
								  updated_at)
	VALUES (seek.group_name, seek.feed_id, seek.shard, NULL, seek.cursor, 0, NULL,
			pg_catalog.clock_timestamp())
	ON CONFLICT ON CONSTRAINT lease_pkey DO UPDATE
		SET cursor = EXCLUDED.cursor, epoch = l.epoch + 1, updated_at = EXCLUDED.updated_at
	RETURNING l.epoch INTO v_epoch;

	-- the children of a parent the group has not consumed now are parked
	-- (named by a constant array, which PostgreSQL looks rows up in by
	-- hashing: see acquire)
	v_children := ARRAY(SELECT s.shard FROM cfeed.shard s
						WHERE s.feed_id = seek.feed_id AND s.parent = seek.shard);
	IF pg_catalog.cardinality(v_children) > 0
	   AND NOT cfeed._consumed(seek.group_name, seek.feed_id, seek.shard) THEN
		EXECUTE pg_catalog.format(
			'UPDATE cfeed.lease l SET owner = NULL, expires_at = NULL, updated_at = $1 '
			'WHERE l.group_name = $2 AND l.feed_id = $3 AND l.owner IS NOT NULL '
			'AND l.shard = ANY (%L::pg_catalog.int4[])', v_children)
		USING pg_catalog.clock_timestamp(), seek.group_name, seek.feed_id;
	END IF;
	RETURN v_epoch;
END
$fn$;

/*
 * A range shard's storage is fixed, and so is its sweep group: the group's
 * mark says which of its changes are stamped, so moving it to another
 * group's mark is refused.  The first range shard of a group gives the
 * group its first mark, the snapshot of the statement that creates it (no
 * range change of the group can be visible to it) with the creating
 * transaction's own xid, which may write to the new shard, in xip when it
 * is below xmax (xip holds only xids below xmax: each is looked at once).
 * The mark is the group's whole watermark, its row shards' too: the first
 * one also holds the writers of the row shards' unstamped changes as of
 * its snapshot, and a row shard with unstamped changes may not move into
 * a group with a mark (in READ COMMITTED, the only isolation level where
 * the check sees every change committed before the sweep locks); otherwise
 * no sweep of the group would look at those changes again.
 */
CREATE FUNCTION cfeed._shard_config_storage() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		IF NEW.storage IS DISTINCT FROM OLD.storage THEN
			RAISE EXCEPTION 'the storage of shard % of feed % cannot be changed', OLD.shard, OLD.feed_id
				USING ERRCODE = '0A000',
					  DETAIL = 'A shard''s storage is fixed when it is created.';
		END IF;
		IF OLD.storage = 'ranges' AND NEW.sweep_group IS DISTINCT FROM OLD.sweep_group THEN
			RAISE EXCEPTION 'shard % of feed % is stored in ranges and cannot move to another sweep group', OLD.shard, OLD.feed_id
				USING ERRCODE = '0A000',
					  DETAIL = 'The sweep group''s mark records which of its changes are stamped.';
		END IF;
		IF NEW.sweep_group IS DISTINCT FROM OLD.sweep_group
		   AND EXISTS (SELECT FROM cfeed.sweep_mark m
					   WHERE m.sweep_group OPERATOR(pg_catalog.=) NEW.sweep_group)
		   AND (pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed'
				OR EXISTS (SELECT FROM cfeed.change c
						   WHERE c.feed_id OPERATOR(pg_catalog.=) OLD.feed_id
							 AND c.shard OPERATOR(pg_catalog.=) OLD.shard
							 AND c.change_sequence_number IS NULL)) THEN
			-- a row shard joins a group with a mark: the mark does not point
			-- at the writers of its committed unstamped changes (and may
			-- not: one with a stamped range change in the group would be
			-- stamped again).  The guard trigger holds both groups' sweep
			-- locks, and this statement's snapshot is taken after them.
			RAISE EXCEPTION 'shard % of feed % cannot move to sweep group % while it has unstamped changes', OLD.shard, OLD.feed_id, NEW.sweep_group
				USING ERRCODE = '55000',
					  DETAIL = pg_catalog.format('Sweep group %s has a shard stored in ranges: its mark records which writers are stamped.', NEW.sweep_group),
					  HINT = pg_catalog.format('Stop writing to the shard, then sweep group %s and move the shard in one READ COMMITTED transaction (SELECT cfeed.sweep(%s) first): a change committed between the sweep and the move keeps it from moving.', OLD.sweep_group, OLD.sweep_group);
		END IF;
		IF NEW.storage = 'ranges' AND (NEW.feed_id, NEW.shard) IS DISTINCT FROM (OLD.feed_id, OLD.shard)
		   AND EXISTS (SELECT FROM cfeed.stamp t
					   WHERE t.feed_id OPERATOR(pg_catalog.=) NEW.feed_id
						 AND t.shard OPERATOR(pg_catalog.=) NEW.shard) THEN
			NEW.changes_deleted := true;
		END IF;
		RETURN NEW;
	END IF;
	-- a shard that was dropped (its changes deleted) leaves its stamps: a
	-- new one of its key must not be read from them (read.c)
	IF NEW.storage = 'ranges'
	   AND EXISTS (SELECT FROM cfeed.stamp t
				   WHERE t.feed_id OPERATOR(pg_catalog.=) NEW.feed_id
					 AND t.shard OPERATOR(pg_catalog.=) NEW.shard) THEN
		NEW.changes_deleted := true;
	END IF;
	IF NEW.storage = 'ranges' THEN
		-- a mark made here (cfeed._sweep_mark_restored)
		PERFORM pg_catalog.set_config('cfeed_mark.maker', pg_catalog.pg_current_xact_id()::text, true);
		INSERT INTO cfeed.sweep_mark (sweep_group, next_xid, running, system_identifier)
		SELECT NEW.sweep_group, pg_catalog.pg_snapshot_xmax(s),
			   ARRAY(SELECT pg_catalog.pg_snapshot_xip(s)
					 UNION ALL
					 SELECT x FROM pg_catalog.pg_current_xact_id() x
					 WHERE x OPERATOR(pg_catalog.<) pg_catalog.pg_snapshot_xmax(s)
					 UNION
					 -- the unstamped changes of row shards, as of the same
					 -- snapshot: the mark is the group's watermark from now
					 -- on.  Every group's: a shard moving into this one
					 -- while the mark is made does not see the mark
					 SELECT c.writer_xid FROM cfeed.change c
					 JOIN cfeed.shard_config sc
					   ON sc.feed_id OPERATOR(pg_catalog.=) c.feed_id
					  AND sc.shard OPERATOR(pg_catalog.=) c.shard
					 WHERE c.change_sequence_number IS NULL
					   AND sc.storage OPERATOR(pg_catalog.=) 'rows'
					   AND c.writer_xid OPERATOR(pg_catalog.<) pg_catalog.pg_snapshot_xmax(s)),
			   (SELECT c.system_identifier FROM pg_catalog.pg_control_system() c)
		FROM pg_catalog.pg_current_snapshot() s
		WHERE NOT EXISTS (SELECT FROM cfeed.sweep_mark m WHERE m.sweep_group OPERATOR(pg_catalog.=) NEW.sweep_group)
		ON CONFLICT DO NOTHING;
		-- for this insert only: a restore in one transaction inserts the
		-- dumped marks after
		PERFORM pg_catalog.set_config('cfeed_mark.maker', '', true);
	END IF;
	RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION cfeed._shard_config_storage() FROM PUBLIC;
COMMENT ON FUNCTION cfeed._shard_config_storage() IS 'internal: trigger of cfeed.shard_config: a shard''s storage is fixed, a range shard stays in its sweep group; the first range shard of a sweep group makes its mark; a range shard given the key of a dropped one whose stamps are left is marked changes_deleted';
CREATE TRIGGER shard_config_storage BEFORE INSERT OR UPDATE OF storage, sweep_group, feed_id, shard
	ON cfeed.shard_config FOR EACH ROW EXECUTE FUNCTION cfeed._shard_config_storage();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_storage;

/*
 * A mark names writers by their xids, which mean something only in the
 * database whose transactions made it.  A mark restored from a dump (COPY
 * in pg_restore or psql), even of a database of this very cluster, names
 * the dumped database's writers, while the restore gives the change rows
 * the restoring transaction's xid (change_guard): the restored mark and
 * stamps no longer match the changes.  Another cluster's mark is known by
 * its system_identifier; one dumped in this cluster has this cluster's.  So
 * a mark inserted by anything but cfeed's own marking (the sweeps,
 * cfeed._shard_config_storage, cfeed.adopt_marks and the move between the
 * editions, which set cfeed_mark.maker to their transaction's xid for
 * their insert only: a restore in one transaction, pg_restore -1, may make
 * a first mark before it inserts the dumped ones) with this cluster's
 * identifier gets 0 instead: another cluster's, which the group's sweeps
 * and reads refuse (55000) until cfeed.adopt_marks() matches the stamps to
 * the restored changes.  Before 1.9 was released a same-cluster restore
 * went on with the mismatch: the changes pending at the dump were never
 * stamped, and read_rows found none of the stamped ones.
 */
CREATE FUNCTION cfeed._sweep_mark_restored() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF NEW.system_identifier OPERATOR(pg_catalog.=) (SELECT c.system_identifier FROM pg_catalog.pg_control_system() c) THEN
		NEW.system_identifier := 0;
	END IF;
	RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION cfeed._sweep_mark_restored() FROM PUBLIC;
COMMENT ON FUNCTION cfeed._sweep_mark_restored() IS 'internal: trigger of cfeed.sweep_mark: a mark not made by cfeed here (a restore, even of a dump of this cluster) is another cluster''s, to adopt';
CREATE TRIGGER sweep_mark_restored BEFORE INSERT ON cfeed.sweep_mark FOR EACH ROW
	WHEN (pg_catalog.current_setting('cfeed_mark.maker', true) IS DISTINCT FROM pg_catalog.pg_current_xact_id()::text)
	EXECUTE FUNCTION cfeed._sweep_mark_restored();
ALTER TABLE cfeed.sweep_mark ENABLE ALWAYS TRIGGER sweep_mark_restored;

/*
 * cfeed._marks_local: whether every mark of a sweep group is this
 * cluster's (none is: cfeed.adopt_marks() has not run after a restore or
 * pg_upgrade).  Retention leaves such a group's range shards alone: its
 * stamps name the old cluster's writers, and deleting a stamp's changes
 * would miss them.
 */
CREATE FUNCTION cfeed._marks_local(sweep_group int) RETURNS bool
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	-- two ranges of sweep_mark_pkey, below and above this cluster's
	-- identifier: not through this cluster's marks, whose dead versions a
	-- held xmin horizon keeps
	SELECT NOT EXISTS (
			SELECT FROM cfeed.sweep_mark m
			WHERE m.sweep_group = $1 AND m.system_identifier < i.system_identifier)
		   AND NOT EXISTS (
			SELECT FROM cfeed.sweep_mark m
			WHERE m.sweep_group = $1 AND m.system_identifier > i.system_identifier)
	FROM pg_catalog.pg_control_system() i
$fn$;
REVOKE ALL ON FUNCTION cfeed._marks_local(int) FROM PUBLIC;
COMMENT ON FUNCTION cfeed._marks_local(int) IS 'internal: every mark of the sweep group is this cluster''s (retention)';

/*
 * cfeed.adopt_marks(): a sweep group's mark made in another cluster (a dump
 * restored here, a pg_upgrade'd cluster) names writers by that cluster's
 * transaction ids, and so do its stamps: a restore gave the change rows
 * the restoring transaction's xid instead.  The group's sweeps and the
 * reads of its range shards refuse such a mark (55000), and retention
 * leaves them alone (cfeed._marks_local), until this function, run by
 * cfeed's owner (a superuser), makes the group's stamps and mark this
 * cluster's, in one transaction, per group with a foreign mark.  A group
 * with a range shard and no mark at all (deleted by hand: its sweeps refuse
 * to number its range changes, which they would number twice) is made a
 * mark the same way, from its stamps:
 *
 *  1. every change its stamps name (matched by feed, shard and change_id,
 *     as many of a change_id as the stamps hold, lowest writer_xid first)
 *     and every entry of those stamps get the writer_xid 2: the adopted
 *     writer, FrozenTransactionId, which no transaction has;
 *  2. the group's marks are replaced by one made from the function's
 *     snapshot, as the group's first mark is: next_xid its xmax, running
 *     its running xids, this transaction's own xid (whatever it writes is
 *     stamped by a sweep), and the writers of every unnumbered change of a
 *     row shard and of every range change of the group that no stamp
 *     names.  The adopted writer is below next_xid and never running: its
 *     changes are stamped.  The next sweep stamps the others, after the
 *     shards' heads.  A range change no stamp names whose writer_xid is
 *     at or above the snapshot's xmax (another cluster's, copied by a
 *     data-only restore with --disable-triggers, which kept the guard from
 *     giving it the restoring transaction's) is given this transaction's:
 *     no mark could say whether such a writer is stamped (next_xid stays
 *     below it), and every sweep would stamp it again.
 *
 * cfeed.stamp is locked first in EXCLUSIVE mode: the sweeps, which lock it
 * before their snapshot (sweep.c), wait for the adoption; writers go on.
 * The rewrite of writer_xid passes the guard that refuses it
 * (change_stamped_keys_guard, origin mode only) in replica mode, for its
 * one statement.  A change whose stamp was deleted by hand is stamped
 * again: no stamp names it any more.
 */
CREATE FUNCTION cfeed.adopt_marks()
	RETURNS TABLE (sweep_group int, stamps bigint, changes bigint, unstamped_writers int)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_sysid bigint := (SELECT c.system_identifier FROM pg_catalog.pg_control_system() c);
	v_adopted xid8 := '2';
	v_me xid8 := pg_catalog.pg_current_xact_id();
	v_role text := pg_catalog.current_setting('session_replication_role');
	v_group int;
BEGIN
	IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'cfeed.adopt_marks() must run in a READ COMMITTED transaction'
			USING ERRCODE = '25000',
				  DETAIL = 'The new marks are made from a fresh snapshot, as a sweep''s.';
	END IF;
	LOCK TABLE cfeed.stamp, cfeed.sweep_mark IN EXCLUSIVE MODE;
	-- the groups with another cluster's mark, and those with a range shard
	-- but no mark at all (one deleted by hand: their sweeps refuse too)
	FOR v_group IN SELECT m.sweep_group FROM cfeed.sweep_mark m
				   WHERE m.system_identifier <> v_sysid
				   UNION
				   SELECT sc.sweep_group FROM cfeed.shard_config sc
				   WHERE sc.storage = 'ranges'
					 AND NOT EXISTS (SELECT FROM cfeed.sweep_mark m WHERE m.sweep_group = sc.sweep_group)
				   ORDER BY 1 LOOP
		sweep_group := v_group;
		BEGIN
			PERFORM pg_catalog.set_config('session_replication_role', 'replica', true);
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE EXCEPTION 'cfeed.adopt_marks() needs to set session_replication_role, which cfeed''s owner may not'
				USING ERRCODE = '42501',
					  DETAIL = 'It rewrites the writers of stamped changes, which a guard of cfeed.change refuses outside replica mode.',
					  HINT = pg_catalog.format('As a superuser: GRANT SET ON PARAMETER session_replication_role TO %I; then run cfeed.adopt_marks() again.', pg_catalog.current_user());
		END;
		WITH named AS (
			SELECT st.feed_id, st.shard, e.change_id, pg_catalog.count(*) AS n
			FROM cfeed.stamp st
			JOIN cfeed.shard_config sc ON sc.feed_id = st.feed_id AND sc.shard = st.shard
			CROSS JOIN LATERAL pg_catalog.unnest(st.change_id_deltas) AS d(delta)
			CROSS JOIN LATERAL (SELECT st.first_change_id + d.delta) AS e(change_id)
			WHERE sc.sweep_group = v_group AND sc.storage = 'ranges'
			GROUP BY st.feed_id, st.shard, e.change_id
		), candidates AS (
			SELECT c.ctid AS tid, c.feed_id, c.shard, c.change_id,
				   pg_catalog.row_number() OVER (PARTITION BY c.feed_id, c.shard, c.change_id
												 ORDER BY c.writer_xid, c.ctid) AS rn
			FROM cfeed.change c
			JOIN cfeed.shard_config sc ON sc.feed_id = c.feed_id AND sc.shard = c.shard
			WHERE c.change_sequence_number IS NULL AND sc.sweep_group = v_group AND sc.storage = 'ranges'
		)
		UPDATE cfeed.change c SET writer_xid = v_adopted
		FROM candidates r JOIN named n USING (feed_id, shard, change_id)
		WHERE c.ctid = r.tid AND r.rn <= n.n;
		GET DIAGNOSTICS changes = ROW_COUNT;
		-- a change no stamp names whose writer_xid no transaction here has
		-- had yet (copied by a data-only restore that disabled the guard)
		UPDATE cfeed.change c SET writer_xid = v_me
		FROM cfeed.shard_config sc
		WHERE sc.feed_id = c.feed_id AND sc.shard = c.shard
		  AND sc.sweep_group = v_group AND sc.storage = 'ranges'
		  AND c.change_sequence_number IS NULL AND c.writer_xid <> v_adopted
		  AND c.writer_xid >= pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot());
		PERFORM pg_catalog.set_config('session_replication_role', v_role, true);
		UPDATE cfeed.stamp st
		SET first_writer_xid = v_adopted,
			writer_xid_deltas = pg_catalog.array_fill(0, ARRAY[pg_catalog.cardinality(st.change_id_deltas)])
		FROM cfeed.shard_config sc
		WHERE sc.feed_id = st.feed_id AND sc.shard = st.shard
		  AND sc.sweep_group = v_group AND sc.storage = 'ranges';
		GET DIAGNOSTICS stamps = ROW_COUNT;
		DELETE FROM cfeed.sweep_mark m WHERE m.sweep_group = v_group;
		PERFORM pg_catalog.set_config('cfeed_mark.maker', v_me::text, true);
		INSERT INTO cfeed.sweep_mark AS m (sweep_group, next_xid, running, system_identifier)
		SELECT v_group, pg_catalog.pg_snapshot_xmax(s),
			   ARRAY(SELECT x FROM pg_catalog.pg_snapshot_xip(s) x
					 UNION
					 SELECT v_me WHERE v_me < pg_catalog.pg_snapshot_xmax(s)
					 UNION
					 SELECT c.writer_xid FROM cfeed.change c
					 JOIN cfeed.shard_config sc ON sc.feed_id = c.feed_id AND sc.shard = c.shard
					 WHERE c.change_sequence_number IS NULL AND c.writer_xid <> v_adopted
					   AND c.writer_xid < pg_catalog.pg_snapshot_xmax(s)
					   AND (sc.storage = 'rows' OR sc.sweep_group = v_group)),
			   v_sysid
		FROM pg_catalog.pg_current_snapshot() s
		RETURNING pg_catalog.cardinality(m.running) INTO unstamped_writers;
		PERFORM pg_catalog.set_config('cfeed_mark.maker', '', true);
		RETURN NEXT;
	END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION cfeed.adopt_marks() FROM PUBLIC;
COMMENT ON FUNCTION cfeed.adopt_marks() IS 'makes the stamps and marks of sweep groups restored from another cluster (a dump, pg_upgrade) this cluster''s, and makes again the mark of a group with range shards whose mark was deleted, so that their sweeps go on';

/*
 * A range change's stamp names it by (feed_id, shard, change_id,
 * writer_xid), and its group's mark says by its writer_xid whether it is
 * stamped: an UPDATE of those columns of an unnumbered change would lose a
 * stamped change or stamp it again.  So a change of a range shard keeps
 * them, a change cannot move into a range shard, no unnumbered change's
 * writer_xid changes, and an unnumbered change stays in its sweep group:
 * the other group's sweeps look only at the writers not finished at their
 * last sweep (its mark, or each backend's watermark in a group of row
 * shards), which may have passed its writer over for good.  (Even an
 * unstamped range change may not move: a sweep stamping it at that moment
 * names its old shard, and no row lock tells it.)  Fires after
 * change_shard_guard (by name), so a missing shard is 23503 first; in
 * origin mode only, as the other guards of an UPDATE.
 */
CREATE FUNCTION cfeed._change_ranges_guard() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NEW.writer_xid IS DISTINCT FROM OLD.writer_xid
	   OR EXISTS (SELECT FROM cfeed.shard_config s
				  WHERE s.storage = 'ranges'
					AND ((s.feed_id = OLD.feed_id AND s.shard = OLD.shard)
						 OR (s.feed_id = NEW.feed_id AND s.shard = NEW.shard)))
	   OR EXISTS (SELECT FROM cfeed.shard_config o, cfeed.shard_config n
				  WHERE o.feed_id = OLD.feed_id AND o.shard = OLD.shard
					AND n.feed_id = NEW.feed_id AND n.shard = NEW.shard
					AND n.sweep_group <> o.sweep_group) THEN
		RAISE EXCEPTION 'change % of shard % of feed % cannot be moved or re-keyed', OLD.change_id, OLD.shard, OLD.feed_id
			USING ERRCODE = '0A000',
				  DETAIL = 'An unnumbered change stays in its sweep group, whose sweeps look for it by its writer_xid; one of a shard stored in ranges, or moving into one, keeps its feed_id, shard, change_id and writer_xid: its stamp and its group''s mark name it by them.',
				  HINT = 'Delete the change and publish a new one.';
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_ranges_guard() IS 'internal: refuses an UPDATE that moves or re-keys an unnumbered change its stamp or its group''s mark names, or moves one to another sweep group';
REVOKE ALL ON FUNCTION cfeed._change_ranges_guard() FROM PUBLIC;
CREATE TRIGGER change_stamped_keys_guard BEFORE UPDATE OF feed_id, shard, change_id, writer_xid ON cfeed.change
	FOR EACH ROW
	WHEN (OLD.change_sequence_number IS NULL
		  AND (NEW.feed_id IS DISTINCT FROM OLD.feed_id OR NEW.shard IS DISTINCT FROM OLD.shard
			   OR NEW.change_id IS DISTINCT FROM OLD.change_id OR NEW.writer_xid IS DISTINCT FROM OLD.writer_xid))
	EXECUTE FUNCTION cfeed._change_ranges_guard();

/*
 * An UPDATE that gives an unnumbered change a number is checked as an
 * INSERT's number is (history only, 22023; never in a shard stored in
 * ranges, 0A000: its number may be a stamp's already): before 1.9 the
 * WHEN clause let every such UPDATE pass, which could number a range
 * change twice or leave a gap above a row shard's head.  The sweeps' own
 * updates pass: the C extension's (src/stamp.c's SQL path) in the trigger
 * function, the SQL edition's here, by its transaction-local setting
 * cfeed_sqled.stamping, which holds the sweeping transaction's id while
 * its UPDATE runs (a value set by mistake for a role or a database names
 * no transaction).
 */
DROP TRIGGER change_stamp_guard ON cfeed.change;
CREATE TRIGGER change_stamp_guard
	BEFORE UPDATE OF feed_id, shard, change_sequence_number, stamped_at ON cfeed.change
	FOR EACH ROW
	WHEN (OLD.change_sequence_number IS NOT NULL
		  OR (NEW.change_sequence_number IS NOT NULL
			  AND pg_catalog.current_setting('cfeed_sqled.stamping', true)
				  IS DISTINCT FROM pg_catalog.pg_current_xact_id()::text))
	EXECUTE FUNCTION cfeed._change_stamp_guard();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_stamp_guard;
COMMENT ON FUNCTION cfeed._change_stamp_guard() IS 'internal: refuses renumbering or moving a change the sweeper stamped, and giving an unnumbered change a number outside the migration range';

/*
 * A range shard's numbers are its stamps': a stamp deleted or truncated by
 * hand must not let its numbers be issued again.  As for cfeed.change
 * (1.4: _change_deleted, _change_truncated), the shard's floor,
 * deleted_head, keeps the highest number deleted while it was the head.
 * Retention keeps the head's stamp, so its deletes change nothing.  A sweep
 * locks cfeed.stamp before its snapshot (sweep.c), so a TRUNCATE waits for
 * it, and one that committed before is in its snapshot.
 */
CREATE FUNCTION cfeed._stamp_deleted() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.shard_config s
	SET deleted_head = GREATEST(s.deleted_head, d.top)
	FROM (SELECT o.feed_id, o.shard, max(o.last_number) AS top
		  FROM cfeed_deleted_stamps o
		  GROUP BY o.feed_id, o.shard) d
	WHERE s.feed_id = d.feed_id AND s.shard = d.shard
	  AND d.top > GREATEST(s.start_sequence_number, s.deleted_head)
	  AND NOT EXISTS (SELECT FROM cfeed.stamp t
					  WHERE t.feed_id = d.feed_id AND t.shard = d.shard
						AND t.last_number > d.top);
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._stamp_deleted() IS 'internal: remembers the last number of a deleted head stamp, so that it is never issued again';
REVOKE ALL ON FUNCTION cfeed._stamp_deleted() FROM PUBLIC;
CREATE TRIGGER stamp_deleted AFTER DELETE ON cfeed.stamp
	REFERENCING OLD TABLE AS cfeed_deleted_stamps
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._stamp_deleted();
ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_deleted;
/*
 * _change_deleted (1.4) also marks a range shard whose changes a DELETE
 * removed (shard_config.changes_deleted): its stamps may name them.  Every
 * unnumbered change of the shard counts, stamped or not (a sweep running
 * beside the DELETE may stamp it before the DELETE commits).
 */
CREATE OR REPLACE FUNCTION cfeed._change_deleted() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.shard_config s
	SET deleted_head = GREATEST(s.deleted_head, d.top)
	FROM (SELECT o.feed_id, o.shard, max(o.change_sequence_number) AS top
		  FROM cfeed_deleted_changes o
		  WHERE o.change_sequence_number IS NOT NULL
		  GROUP BY o.feed_id, o.shard) d
	WHERE s.feed_id = d.feed_id AND s.shard = d.shard
	  AND d.top > GREATEST(s.start_sequence_number, s.deleted_head)
	  AND NOT EXISTS (SELECT FROM cfeed.change c
					  WHERE c.feed_id = d.feed_id AND c.shard = d.shard
						AND c.change_sequence_number > d.top);
	-- the first setting only: from then on, deleters leave the row alone
	UPDATE cfeed.shard_config s
	SET changes_deleted = true
	FROM (SELECT DISTINCT o.feed_id, o.shard
		  FROM cfeed_deleted_changes o
		  WHERE o.change_sequence_number IS NULL) d
	WHERE s.feed_id = d.feed_id AND s.shard = d.shard AND s.storage = 'ranges'
	  AND NOT s.changes_deleted;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_deleted() IS 'internal: remembers the number of a deleted head row, so that it is never issued again, and marks a range shard whose changes were deleted (shard_config.changes_deleted)';

/*
 * _change_truncated: a TRUNCATE of cfeed.change also marks each range
 * shard with stamps (shard_config.changes_deleted: the stamps outlive
 * their changes).  A sweep holds its lock on cfeed.change until it commits, so
 * the stamps are all seen here.
 */
CREATE OR REPLACE FUNCTION cfeed._change_truncated() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'cfeed.% can only be truncated in a READ COMMITTED transaction', TG_TABLE_NAME
			USING ERRCODE = '25000',
				  DETAIL = 'TRUNCATE records each shard''s head, so that no number is issued again; a transaction snapshot can miss the latest stamps.',
				  HINT = 'Run TRUNCATE in its own READ COMMITTED transaction.';
	END IF;
	UPDATE cfeed.shard_config s
	SET deleted_head = h.last_change_sequence_number
	FROM cfeed.shard h
	WHERE h.feed_id = s.feed_id AND h.shard = s.shard
	  AND h.last_change_sequence_number > GREATEST(s.start_sequence_number, s.deleted_head);
	IF TG_TABLE_NAME = 'change' THEN
		UPDATE cfeed.shard_config s
		SET changes_deleted = true
		WHERE s.storage = 'ranges' AND NOT s.changes_deleted
		  AND EXISTS (SELECT FROM cfeed.stamp t WHERE t.feed_id = s.feed_id AND t.shard = s.shard);
	END IF;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_truncated() IS 'internal: remembers every shard''s head before TRUNCATE of cfeed.change or cfeed.stamp, so that no number is issued again, and marks each range shard with stamps at a TRUNCATE of cfeed.change (shard_config.changes_deleted)';
CREATE TRIGGER stamp_truncated BEFORE TRUNCATE ON cfeed.stamp
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._change_truncated();
ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_truncated;

/*
 * cfeed._stamp_replicated (src/upstream.c): a publisher's stamp applied by
 * logical replication, topology A for feeds stored in ranges
 * (docs/replication.md): checked to name a range shard of this cluster and
 * to follow its head, its changes named by the writer the guard gave them,
 * the shard's waiters woken and its channel notified at commit.  Enabled
 * ALWAYS, as the other triggers the apply must fire; it acts in a logical
 * replication worker only, and any other insert (a sweep's, a restore's)
 * passes as it is.
 */
CREATE FUNCTION cfeed._stamp_replicated() RETURNS trigger
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'cfeed_stamp_replicated';
REVOKE ALL ON FUNCTION cfeed._stamp_replicated() FROM PUBLIC;
COMMENT ON FUNCTION cfeed._stamp_replicated() IS 'internal: takes a publisher''s stamp applied by logical replication into a shard stored in ranges';
CREATE TRIGGER stamp_replicated BEFORE INSERT ON cfeed.stamp
	FOR EACH ROW EXECUTE FUNCTION cfeed._stamp_replicated();
ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_replicated;

/*
 * cfeed._pending (src/pending.c): each shard's changes committed and not
 * stamped yet, found by direct index access whatever the table's
 * statistics: a range shard's are those its group's mark has not stamped
 * (writer_xid at or above next_xid, or in running; the group's mark is its
 * highest of any cluster: after pg_upgrade, before adopt_marks, the old
 * cluster's is the right one), a row shard's those without a number.  As a
 * query, the probe of running became a sequential scan of cfeed.change per
 * range shard once the statistics saw few writers (a bulk insert).  The walk
 * of change_pending_idx for row shards, which also holds every range
 * change, runs only when some shard is stored in rows, so that with every
 * shard in ranges a read of the view does not grow with every change the
 * feeds hold (cfeed serve reads it at every round of its streams).  Rows of
 * the feeds the caller may read only: any role may call it.
 */
CREATE FUNCTION cfeed._pending(OUT feed_id int, OUT shard int, OUT pending bigint,
							   OUT oldest_written_at timestamptz)
	RETURNS SETOF record
	LANGUAGE c STABLE PARALLEL SAFE ROWS 10
	AS 'MODULE_PATHNAME', 'cfeed_pending';
COMMENT ON FUNCTION cfeed._pending() IS 'internal: each shard''s changes not stamped yet and the oldest one''s written_at (cfeed.stats), of the feeds the caller may read';

CREATE OR REPLACE VIEW cfeed.stats AS
	SELECT s.feed_id, f.name AS feed_name, s.shard, s.sweep_group,
		   s.last_change_sequence_number AS head, s.last_sweep_time,
		   COALESCE(p.pending, 0) AS pending,
		   CASE WHEN p.oldest_written_at IS NOT NULL
				THEN GREATEST(pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p.oldest_written_at,
							  interval '0')
		   END AS oldest_pending_age,
		   cfeed._retention_held_by(s.feed_id, s.shard) AS retention_held_by
	FROM cfeed.shard s
	JOIN cfeed.feed f ON f.feed_id OPERATOR(pg_catalog.=) s.feed_id
	LEFT JOIN cfeed._pending() p
		   ON p.feed_id OPERATOR(pg_catalog.=) s.feed_id AND p.shard OPERATOR(pg_catalog.=) s.shard;
ALTER VIEW cfeed.stats SET (security_barrier = true);

/*
 * cfeed.consumer_lag: a range shard's oldest unread change was stamped by
 * its first stamp after the cursor.
 */
CREATE OR REPLACE VIEW cfeed.consumer_lag AS
	SELECT v.group_name, v.feed_id, v.shard, v.owner, v.epoch, v.cursor, v.head, v.behind,
		   v.oldest_unread_age, v.expires_at,
		   f.change_sequence_number AS failing, f.attempts, f.last_error, f.retry_at,
		   (SELECT pg_catalog.count(*) FROM cfeed.failed_change d
			WHERE d.group_name OPERATOR(pg_catalog.=) v.group_name
			  AND d.feed_id OPERATOR(pg_catalog.=) v.feed_id AND d.shard OPERATOR(pg_catalog.=) v.shard
			  AND d.dead_lettered_at IS NOT NULL) AS dead_letters
	FROM (
		SELECT l.group_name, s.feed_id, s.shard, l.owner, l.epoch, l.cursor,
			   s.last_change_sequence_number AS head,
			   cfeed._behind(s.last_change_sequence_number, l.cursor) AS behind,
			   CASE WHEN COALESCE(u.stamped_at, t.stamped_at) IS NOT NULL
					THEN GREATEST(pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) COALESCE(u.stamped_at, t.stamped_at),
								  interval '0')
			   END AS oldest_unread_age,
			   l.expires_at
		FROM cfeed.shard s
		CROSS JOIN LATERAL (
			SELECT x.group_name, x.owner, x.epoch, x.cursor, x.expires_at
			FROM cfeed.lease x
			WHERE x.feed_id OPERATOR(pg_catalog.=) s.feed_id AND x.shard OPERATOR(pg_catalog.=) s.shard
			OFFSET 0) l	-- not pulled up: the view's shards stay the outer side
		LEFT JOIN LATERAL (
			SELECT COALESCE(c.stamped_at, c.written_at) AS stamped_at
			FROM cfeed.change c
			WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
			  AND c.change_sequence_number OPERATOR(pg_catalog.>) l.cursor
			ORDER BY c.change_sequence_number
			LIMIT 1) u ON true
		LEFT JOIN LATERAL (
			SELECT y.stamped_at
			FROM cfeed.stamp y
			WHERE s.storage OPERATOR(pg_catalog.=) 'ranges'
			  AND y.feed_id OPERATOR(pg_catalog.=) s.feed_id AND y.shard OPERATOR(pg_catalog.=) s.shard
			  AND y.last_number OPERATOR(pg_catalog.>) l.cursor
			ORDER BY y.last_number
			LIMIT 1) t ON true) v
	LEFT JOIN LATERAL (
		SELECT x.change_sequence_number, x.attempts, x.last_error, x.retry_at
		FROM cfeed.failed_change x
		WHERE x.group_name OPERATOR(pg_catalog.=) v.group_name
		  AND x.feed_id OPERATOR(pg_catalog.=) v.feed_id AND x.shard OPERATOR(pg_catalog.=) v.shard
		  AND x.change_sequence_number OPERATOR(pg_catalog.>) v.cursor AND x.dead_lettered_at IS NULL
		ORDER BY x.change_sequence_number
		LIMIT 1) f ON true;
ALTER VIEW cfeed.consumer_lag SET (security_barrier = true);

/*
 * Retention on a range shard deletes whole stamps, oldest first, and their
 * changes: those entirely below the limit (the cutoff's cursor, the
 * groups' cursors, the first dead letter, and never the head), stamped
 * before the cutoff.  Its history (numbered rows at or below its start
 * value) goes first, as on any shard.  Planned with sequential scans off:
 * the group-0 sweeper runs it with generic plans (cfeed_spi_connect) and
 * keeps them, and made while cfeed.change was analyzed small, the probe of
 * a range stamp's changes was a sequential scan of the table per change,
 * kept as the table grew (11 s and 50 million tuples to delete 5,000
 * changes among 5,000; t/096_read_plans.pl).  Every statement here has an
 * index to use.  JIT off: a plan with sequential scans off costs more than
 * jit_above_cost whenever a scan has no index (cfeed.feed's retention), so
 * every statement was compiled: cfeed.apply_retention() took 0.2-1.3 s in
 * a new session with jit on (PostgreSQL's default), against 0.3 ms without.
 */
CREATE OR REPLACE FUNCTION cfeed._apply_retention(max_rows int DEFAULT 10000, ignore_leases bool DEFAULT false)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off
	AS $fn$
DECLARE
	r record;
	v_deleted bigint := 0;
	v_count bigint;
	v_cutoff timestamptz;
	v_first bigint;
	v_first_at timestamptz;
	v_limit bigint;
	v_marked bool;
	v_stamps bigint[];
	v_named bigint;
	v_victims tid[];
BEGIN
	IF max_rows IS NULL THEN PERFORM cfeed._null_arg('max_rows'); END IF;
	IF ignore_leases IS NULL THEN PERFORM cfeed._null_arg('ignore_leases'); END IF;
	IF max_rows <= 0 THEN
		RAISE EXCEPTION 'argument "max_rows" must be positive, got %', max_rows USING ERRCODE = '22023';
	END IF;

	FOR r IN
		SELECT s.feed_id, s.shard, s.storage, s.sweep_group, s.last_change_sequence_number AS head, f.retention,
			   LEAST((SELECT pg_catalog.min(l.cursor) FROM cfeed.lease l
					  WHERE l.feed_id = s.feed_id AND l.shard = s.shard),
					 CASE WHEN s.parent IS NOT NULL
							   AND cfeed._held_for_ancestors(s.feed_id, s.shard) IS NOT NULL
						  THEN s.start_sequence_number END) AS held,
			   (SELECT GREATEST(d.change_sequence_number, -9223372036854775807) - 1
				FROM cfeed.failed_change d
				WHERE d.feed_id = s.feed_id AND d.shard = s.shard AND d.dead_lettered_at IS NOT NULL
				ORDER BY d.change_sequence_number LIMIT 1) AS dead
		FROM cfeed.feed f JOIN cfeed.shard s ON s.feed_id = f.feed_id
		WHERE f.retention IS NOT NULL
		ORDER BY s.feed_id, s.shard
	LOOP
		EXIT WHEN v_deleted >= max_rows;
		v_cutoff := pg_catalog.now() - r.retention;

		-- The oldest change left: anything to do at all?
		SELECT c.change_sequence_number, COALESCE(c.stamped_at, c.written_at)
		INTO v_first, v_first_at
		FROM cfeed.change c
		WHERE c.feed_id = r.feed_id AND c.shard = r.shard AND c.change_sequence_number IS NOT NULL
		ORDER BY c.change_sequence_number LIMIT 1;
		IF r.storage = 'ranges' AND v_first IS NULL THEN
			-- not while the group's stamps name another cluster's writers
			CONTINUE WHEN NOT cfeed._marks_local(r.sweep_group);
			-- whole stamps, oldest first, each with its changes; never the head's
			SELECT t.first_number, t.stamped_at INTO v_first, v_first_at
			FROM cfeed.stamp t
			WHERE t.feed_id = r.feed_id AND t.shard = r.shard
			ORDER BY t.last_number LIMIT 1;
			CONTINUE WHEN v_first IS NULL OR v_first_at >= v_cutoff OR v_first >= r.head
				OR (NOT ignore_leases AND v_first > r.held) OR v_first > r.dead;
			v_limit := LEAST(cfeed.cursor_at(r.feed_id, r.shard, v_cutoff), r.head - 1,
							 CASE WHEN ignore_leases THEN NULL ELSE r.held END, r.dead);
			-- Retention waits for no writer: the group-0 sweeper runs it,
			-- and would stall (an open or prepared DELETE), or deadlock
			-- with a DELETE whose statement trigger wants the shard's
			-- row (_change_deleted).  So it takes every lock it needs
			-- without waiting, and leaves the shard to its next pass when
			-- one is taken: the changes of the stamps to delete, then the
			-- shard's row, whose mark of deleted changes (changes_deleted)
			-- it notes before its delete sets it.
			SELECT pg_catalog.array_agg(w.last_number) INTO v_stamps
			FROM (SELECT x.last_number, x.last_number - x.first_number + 1 AS n,
						 pg_catalog.sum(x.last_number - x.first_number + 1)
							 OVER (ORDER BY x.last_number) AS upto
				  FROM cfeed.stamp x
				  WHERE x.feed_id = r.feed_id AND x.shard = r.shard
					AND x.last_number <= v_limit AND x.stamped_at < v_cutoff) w
			WHERE w.upto - w.n < max_rows - v_deleted;
			CONTINUE WHEN v_stamps IS NULL;
			-- as many changes of a (change_id, writer_xid) as the stamps
			-- name, lowest first (read()'s order): a later stamp may name
			-- the same pair (one writer, or writers adopt_marks made one);
			-- one probe of change_pending_idx per pair, whatever the
			-- table's statistics (as read() looks its pages up)
			WITH named AS (
				SELECT g.first_change_id + u.dc AS id,
					   ((g.first_writer_xid::text)::bigint + u.dx)::text::xid8 AS x, pg_catalog.count(*) AS n
				FROM cfeed.stamp g, ROWS FROM (pg_catalog.unnest(g.change_id_deltas), pg_catalog.unnest(g.writer_xid_deltas)) AS u(dc, dx)
				WHERE g.feed_id = r.feed_id AND g.shard = r.shard AND g.last_number = ANY (v_stamps)
				GROUP BY 1, 2),
			found AS (
				SELECT v.tid FROM named m CROSS JOIN LATERAL (
					SELECT c.ctid AS tid FROM cfeed.change c
					WHERE c.writer_xid = m.x AND c.change_id = m.id
					  AND c.change_sequence_number IS NULL
					  AND c.feed_id = r.feed_id AND c.shard = r.shard
					ORDER BY c.ctid LIMIT m.n) v)
			SELECT pg_catalog.count(*), pg_catalog.array_agg(l.tid) FILTER (WHERE l.tid IS NOT NULL)
			INTO v_named, v_victims
			FROM found f LEFT JOIN LATERAL (
				SELECT c.ctid AS tid FROM cfeed.change c WHERE c.ctid = f.tid
				FOR UPDATE SKIP LOCKED) l ON true;
			CONTINUE WHEN COALESCE(pg_catalog.cardinality(v_victims), 0) < v_named;
			SELECT s.changes_deleted INTO v_marked
			FROM cfeed.shard_config s
			WHERE s.feed_id = r.feed_id AND s.shard = r.shard
			FOR NO KEY UPDATE SKIP LOCKED;
			CONTINUE WHEN NOT FOUND;
			DELETE FROM cfeed.stamp t
			WHERE t.feed_id = r.feed_id AND t.shard = r.shard AND t.last_number = ANY (v_stamps);
			DELETE FROM cfeed.change c WHERE c.ctid = ANY (v_victims);
			GET DIAGNOSTICS v_count = ROW_COUNT;
			v_deleted := v_deleted + v_count;
			-- their stamps went with them, so no stamp names them: the
			-- mark _change_deleted set for them alone is taken back
			IF NOT v_marked THEN
				UPDATE cfeed.shard_config s
				SET changes_deleted = false
				WHERE s.feed_id = r.feed_id AND s.shard = r.shard AND s.changes_deleted;
			END IF;
			CONTINUE;
		END IF;
		CONTINUE WHEN v_first IS NULL OR v_first_at >= v_cutoff OR v_first >= r.head
			OR (NOT ignore_leases AND v_first > r.held) OR v_first > r.dead;

		v_limit := LEAST(cfeed.cursor_at(r.feed_id, r.shard, v_cutoff), r.head - 1,
						 CASE WHEN ignore_leases THEN NULL ELSE r.held END, r.dead);
		-- Numbers above the start value are gapless, so this range bounds the batch;
		-- the age test keeps young backfilled rows of the migration range.
		v_limit := LEAST(v_limit::pg_catalog.numeric,
						 v_first::pg_catalog.numeric + (max_rows - v_deleted) - 1)::bigint;
		-- without waiting, as for range shards: a change another
		-- transaction has locked (a deleter of its feed keeping its DELETE
		-- open) stays for the next pass, rather than stall the group-0
		-- sweeper and the stamping of every feed it sweeps
		SELECT pg_catalog.array_agg(v.tid) INTO v_victims
		FROM (SELECT x.ctid AS tid FROM cfeed.change x
			  WHERE x.feed_id = r.feed_id AND x.shard = r.shard
				AND x.change_sequence_number BETWEEN v_first AND v_limit
				AND COALESCE(x.stamped_at, x.written_at) < v_cutoff
			  FOR UPDATE SKIP LOCKED) v;
		CONTINUE WHEN v_victims IS NULL;
		DELETE FROM cfeed.change c WHERE c.ctid = ANY (v_victims);
		GET DIAGNOSTICS v_count = ROW_COUNT;
		v_deleted := v_deleted + v_count;
	END LOOP;
	RETURN v_deleted;
END
$fn$;


/*
 * The group holding retention back: on a range shard, the oldest stamp
 * after its cursor (retention deletes whole stamps, never the head's).
 */
CREATE OR REPLACE FUNCTION cfeed._retention_held_by(feed_id int, shard int) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT l.group_name
	FROM (SELECT h.group_name, h.cursor
		  FROM ((SELECT x.group_name, x.cursor FROM cfeed.lease x
				 WHERE x.feed_id = $1 AND x.shard = $2
				 ORDER BY x.cursor, x.group_name LIMIT 1)
				UNION ALL
				(SELECT cfeed._held_for_ancestors($1, $2), c.start_sequence_number
				 FROM cfeed.shard_config c
				 WHERE c.feed_id = $1 AND c.shard = $2 AND c.parent IS NOT NULL
				   AND cfeed._held_for_ancestors($1, $2) IS NOT NULL)
				UNION ALL
				(SELECT d.group_name, GREATEST(d.change_sequence_number, -9223372036854775807) - 1
				 FROM cfeed.failed_change d
				 WHERE d.feed_id = $1 AND d.shard = $2 AND d.dead_lettered_at IS NOT NULL
				 ORDER BY d.change_sequence_number, d.group_name LIMIT 1)) h
		  ORDER BY h.cursor, h.group_name LIMIT 1) l,
		 cfeed.shard s, cfeed.feed f,
		 LATERAL (SELECT v.last, v.stamped_at
				  FROM ((SELECT c.change_sequence_number AS last,
								COALESCE(c.stamped_at, c.written_at) AS stamped_at
						 FROM cfeed.change c
						 WHERE c.feed_id = $1 AND c.shard = $2
						   AND c.change_sequence_number > l.cursor
						 ORDER BY c.change_sequence_number LIMIT 1)
						UNION ALL
						(SELECT t.last_number, t.stamped_at
						 FROM cfeed.stamp t
						 WHERE s.storage = 'ranges' AND t.feed_id = $1 AND t.shard = $2
						   AND t.last_number > l.cursor
						 ORDER BY t.last_number LIMIT 1)) v
				  ORDER BY v.last LIMIT 1) u
	WHERE s.feed_id = $1 AND s.shard = $2 AND f.feed_id = $1
	  AND f.retention IS NOT NULL
	  AND u.last < s.last_change_sequence_number
	  AND u.stamped_at < now() - f.retention
$fn$;

/*
 * A lease's epoch goes up by one at each change of its owner (acquire,
 * seek): bounded far below the top of bigint, so that no bump overflows
 * whatever a consumer writes with its grants on cfeed.lease (NOT VALID:
 * rows of earlier versions are not checked again, only their updates).
 */
ALTER TABLE cfeed.lease ADD CONSTRAINT lease_epoch_check
	CHECK (epoch OPERATOR(pg_catalog.>=) 0 AND epoch OPERATOR(pg_catalog.<) 4611686018427387904) NOT VALID;

/*
 * cfeed._read_as: the numbers of the changes after a cursor that
 * cfeed.read gives a role, read as that role (src/dead_letters.c).
 * cfeed._fail runs as the extension's owner, who sees every change; it
 * asks this which change its member processes next.
 */
CREATE FUNCTION cfeed._read_as(reader oid, feed_id int, shard int, cursor bigint, max_count int)
	RETURNS TABLE (change_sequence_number bigint)
	LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_read_as';
COMMENT ON FUNCTION cfeed._read_as(oid, int, int, bigint, int) IS 'internal: the numbers of the changes after the cursor that cfeed.read gives the role reader, read as it (cfeed._fail)';
REVOKE ALL ON FUNCTION cfeed._read_as(oid, int, int, bigint, int) FROM PUBLIC;

/*
 * cfeed._fail as in 1.8, with the member that reports the failure (the
 * reader, which cfeed.fail passes) deciding whether the change is the next
 * one to process: until 1.9 it was decided over every change, so that a
 * change the member may not read (a tracked table it may not SELECT),
 * which its checkpoints pass over, kept a poison change right after it
 * from ever being set aside, and the shard was stuck until a seek.  The
 * error text kept is its first 8000 characters (before, all of it).
 */
DROP FUNCTION cfeed._fail(text, int, int, text, bigint, bigint, text);
CREATE FUNCTION cfeed._fail(group_name text, feed_id int, shard int, owner text, epoch bigint,
							change_sequence_number bigint, error text, reader oid)
	RETURNS TABLE (attempts int, retry_at timestamptz, dead_letter bool)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := _fail.group_name;
	v_feed int := _fail.feed_id;
	v_shard int := _fail.shard;
	v_number bigint := _fail.change_sequence_number;
	v_now timestamptz := pg_catalog.clock_timestamp();
	v_cursor bigint;
	v_head bigint;
	v_change_id bigint;
	v_attempts int;
	v_retry timestamptz;
	v_dead bigint;
	v_next bigint;
	p record;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', v_group IS NULL), (2, 'feed_id', v_feed IS NULL),
				 (3, 'shard', v_shard IS NULL), (4, 'owner', _fail.owner IS NULL),
				 (5, 'epoch', _fail.epoch IS NULL), (6, 'change_sequence_number', v_number IS NULL),
				 (7, 'error', _fail.error IS NULL), (8, 'reader', _fail.reader IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	v_cursor := cfeed._held_lease(v_group, v_feed, v_shard, _fail.owner, _fail.epoch);
	IF v_number <= v_cursor THEN
		RAISE EXCEPTION 'change % of shard % of feed % is at or before the cursor % of group "%"',
			v_number, v_shard, v_feed, v_cursor, v_group
			USING ERRCODE = '55000',
				  DETAIL = 'The group has processed it, or set it aside as a dead letter.',
				  HINT = 'Report failures of changes after the cursor cfeed.acquire() returns.';
	END IF;
	SELECT r.change_id INTO v_change_id FROM cfeed.read(v_feed, v_shard, v_number - 1, 1) r
	WHERE r.change_sequence_number = v_number;
	IF NOT FOUND THEN
		SELECT s.last_change_sequence_number INTO v_head FROM cfeed.shard s
		WHERE s.feed_id = v_feed AND s.shard = v_shard;
		IF v_number > v_head THEN
			RAISE EXCEPTION 'change_sequence_number % is beyond the head % of shard % of feed %',
				v_number, v_head, v_shard, v_feed
				USING ERRCODE = '22023',
					  HINT = 'Report the change_sequence_number of the change whose processing failed.';
		END IF;
		RAISE EXCEPTION 'change % of shard % of feed % does not exist', v_number, v_shard, v_feed
			USING ERRCODE = '42704',
				  HINT = 'Report the change_sequence_number of a change cfeed.read_group() returned.';
	END IF;
	IF EXISTS (SELECT FROM cfeed.failed_change d
			   WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
				 AND d.change_sequence_number = v_number AND d.dead_lettered_at IS NOT NULL) THEN
		RAISE EXCEPTION 'change % of shard % of feed % is a dead letter of group "%"',
			v_number, v_shard, v_feed, v_group
			USING ERRCODE = '55000',
				  HINT = 'cfeed.read_group() leaves dead letters out; an operator replays them with cfeed.read_dead_letters() and cfeed.resolve_dead_letter().';
	END IF;

	SELECT x.max_attempts, x.backoff_ms, x.max_backoff_ms, x.dead_letter INTO p
	FROM cfeed.failure_policy x WHERE x.group_name = v_group AND x.feed_id = v_feed;
	IF NOT FOUND THEN
		SELECT 5 AS max_attempts, 0 AS backoff_ms, 60000 AS max_backoff_ms, false AS dead_letter INTO p;
	END IF;

	INSERT INTO cfeed.failed_change AS f (group_name, feed_id, shard, change_sequence_number, change_id,
										  attempts, last_error, first_failed_at, failed_at)
	VALUES (v_group, v_feed, v_shard, v_number, v_change_id, 1, pg_catalog."left"(_fail.error, 8000), v_now, v_now)
	ON CONFLICT ON CONSTRAINT failed_change_pkey DO UPDATE
		SET attempts = LEAST(f.attempts::bigint + 1, 2147483647)::int,
			last_error = EXCLUDED.last_error, failed_at = EXCLUDED.failed_at
	RETURNING f.attempts INTO v_attempts;

	IF p.dead_letter AND v_attempts >= p.max_attempts THEN
		-- The next change the member processes?  Those between the cursor
		-- and it that the member reads must be dead letters: its first
		-- change after the cursor that is not one, among the first v_dead + 1
		-- it reads (all of them, for a member that reads every change).
		SELECT pg_catalog.count(*) INTO v_dead FROM cfeed.failed_change d
		WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
		  AND d.change_sequence_number > v_cursor AND d.change_sequence_number < v_number
		  AND d.dead_lettered_at IS NOT NULL;
		SELECT pg_catalog.min(r.change_sequence_number) INTO v_next
		FROM cfeed._read_as(_fail.reader, v_feed, v_shard, v_cursor, LEAST(v_dead + 1, 2147483647)::int) r
		WHERE NOT EXISTS (SELECT FROM cfeed.failed_change d
						  WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
							AND d.change_sequence_number = r.change_sequence_number
							AND d.dead_lettered_at IS NOT NULL);
		IF v_next = v_number THEN
			UPDATE cfeed.failed_change f SET dead_lettered_at = v_now, retry_at = NULL
			WHERE f.group_name = v_group AND f.feed_id = v_feed AND f.shard = v_shard
			  AND f.change_sequence_number = v_number;
			UPDATE cfeed.lease l SET cursor = v_number, updated_at = v_now
			WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.shard = v_shard;
			RETURN QUERY SELECT v_attempts, NULL::timestamptz, true;
			RETURN;
		END IF;
	END IF;

	-- After the last attempt (retried for ever): the longest backoff, none
	-- when backoff_ms is 0 (the defaults behave as no policy).
	v_retry := v_now + pg_catalog.make_interval(secs =>
		CASE WHEN v_attempts >= p.max_attempts AND p.backoff_ms > 0
			 THEN p.max_backoff_ms::pg_catalog.numeric
			 ELSE LEAST(p.max_backoff_ms::pg_catalog.numeric,
						p.backoff_ms * pg_catalog.power(2::pg_catalog.numeric, LEAST(v_attempts - 1, 40)))
		END / 1000);
	UPDATE cfeed.failed_change f SET retry_at = v_retry
	WHERE f.group_name = v_group AND f.feed_id = v_feed AND f.shard = v_shard
	  AND f.change_sequence_number = v_number;
	RETURN QUERY SELECT v_attempts, v_retry, false;
END
$fn$;
COMMENT ON FUNCTION cfeed._fail(text, int, int, text, bigint, bigint, text, oid) IS 'internal: cfeed.fail as the extension''s owner, after the caller''s checks: reports that processing a change failed (fenced like checkpoint): counts the attempt, sets the retry time, and after the last attempt of a dead-letter policy sets the change aside and moves the cursor past it when it is the next change the reader (the caller) processes';
REVOKE ALL ON FUNCTION cfeed._fail(text, int, int, text, bigint, bigint, text, oid) FROM PUBLIC;

/*
 * A lease's cursor that moves onto the change before dead letters of its
 * group moves on over them, and over the numbers among them that no stored
 * change has (deleted changes), up to the first stored change that is not
 * one of its dead letters: read_group gives none of them, so no member
 * checkpoints them.  A cursor that moves forward (a checkpoint, a seek
 * forward, a report that sets a change aside) moves so, as in 1.8, where
 * only dead letters right after it were passed (a deleted change among them
 * stopped it).  Since 1.9 one that moves back (a seek) moves so when no
 * stored change follows them: no member would be given anything after it
 * to checkpoint, so the cursor stayed there, the dead letters could not be
 * resolved (they lie after the cursor) and a closed shard's children stayed
 * parked, until a later change came or an operator sought forward onto the
 * last dead letter.  Dead letters followed by a change the group has to
 * process again stay after a cursor moved back, as before: the group
 * passes them with its next checkpoint after that change.  The walk runs
 * only when a dead letter lies after the cursor (one probe of failed_change
 * otherwise), looks the changes up as the owner (every change), and locks
 * the dead letters it walks over (FOR KEY SHARE): a resolve holds the
 * lease while it deletes one, so under READ COMMITTED the walk sees it
 * resolved, and under REPEATABLE READ or SERIALIZABLE one resolved after
 * the snapshot fails the statement (40001), rather than the cursor passing
 * a change the seek was to give the group again.  A range shard whose group has another cluster's mark
 * (before cfeed.adopt_marks) cannot be read: the cursor stays as it was
 * put.
 */
CREATE OR REPLACE FUNCTION cfeed._lease_skip_dead_letters() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_at bigint := NEW.cursor;
	v_next bigint;
BEGIN
	IF NOT EXISTS (SELECT FROM cfeed.failed_change f
				   WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
					 AND f.change_sequence_number > NEW.cursor AND f.dead_lettered_at IS NOT NULL) THEN
		RETURN NEW;
	END IF;
	BEGIN
		LOOP
			SELECT r.change_sequence_number INTO v_next FROM cfeed.read(NEW.feed_id, NEW.shard, v_at, 1) r;
			IF NOT FOUND THEN
				v_next := NULL;
				EXIT;
			END IF;
			PERFORM FROM cfeed.failed_change f
			WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
			  AND f.change_sequence_number = v_next AND f.dead_lettered_at IS NOT NULL
			FOR KEY SHARE;
			EXIT WHEN NOT FOUND;
			v_at := v_next;
		END LOOP;
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		RETURN NEW;
	END;
	IF v_next IS NULL THEN
		-- nothing stored after: past the dead letters of deleted changes too
		PERFORM FROM cfeed.failed_change f
		WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
		  AND f.change_sequence_number > v_at AND f.dead_lettered_at IS NOT NULL
		FOR KEY SHARE;
		SELECT GREATEST(v_at, pg_catalog.max(f.change_sequence_number)) INTO v_at
		FROM cfeed.failed_change f
		WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
		  AND f.change_sequence_number > v_at AND f.dead_lettered_at IS NOT NULL;
	ELSIF NEW.cursor < OLD.cursor THEN
		RETURN NEW;				-- a change to process again follows them
	END IF;
	NEW.cursor := v_at;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._lease_skip_dead_letters() IS 'internal: moves a lease''s cursor over the dead letters of its group (and the deleted numbers among them) after it: on a forward move up to the first stored change that is not one, on a move back only when no stored change follows them';
-- not for a row moved to another feed, which only the owner may do (the
-- lease's policy refuses the new row to others, but after this trigger: it
-- timed another feed's dead letters, and waited for their locks, for them)
DROP TRIGGER lease_skip_dead_letters ON cfeed.lease;
CREATE TRIGGER lease_skip_dead_letters BEFORE UPDATE OF cursor ON cfeed.lease
	FOR EACH ROW WHEN (NEW.cursor <> OLD.cursor AND NEW.feed_id = OLD.feed_id)
	EXECUTE FUNCTION cfeed._lease_skip_dead_letters();

/*
 * The guards of cfeed.change: PUBLIC may not make triggers with them.  A
 * role's trigger on a table of its own shaped like cfeed.change had
 * _change_guard check the feed and shard of each row (telling a missing
 * feed, a closed or missing shard, a shard's start value) and take the
 * feed's shards lock for it.  Triggers fire whoever may execute their
 * function, so cfeed.change's own are unaffected; the C functions also
 * refuse to run on any other table (cfeed_trigger_on).
 */
REVOKE EXECUTE ON FUNCTION cfeed._change_guard(), cfeed._change_stamp_guard() FROM PUBLIC;

/*
 * The read checks on an index of feed_id (cfeed._may_read_support): the
 * index condition feed_id = ANY (cfeed._readable_feeds()), so that a
 * reader's index scan never reaches another feed's rows, which EXPLAIN
 * ANALYZE counted.  Every role may call it: the condition runs as the
 * reader.
 */
CREATE FUNCTION cfeed._readable_feeds() RETURNS int[]
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_readable_feeds';
COMMENT ON FUNCTION cfeed._readable_feeds() IS 'internal: the feeds the caller may read (each feed when it may read every feed), for the index condition of the read policies (cfeed._may_read_support)';

/*
 * Names have at most 200 characters: cfeed._name_lengths checks the
 * columns its trigger names.  It takes over from cfeed._lease_names (1.1)
 * on cfeed.lease, and checks cfeed.failure_policy's group names too:
 * set_failure_policy stored a longer one, a policy for a group no lease
 * could ever name.
 */
CREATE FUNCTION cfeed._name_lengths() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_column text;
	v_length int;
BEGIN
	FOREACH v_column IN ARRAY TG_ARGV LOOP
		v_length := char_length(to_jsonb(NEW) ->> v_column);
		IF v_length > 200 THEN
			RAISE EXCEPTION '% must be at most 200 characters, got %', v_column, v_length
				USING ERRCODE = '22023';
		END IF;
	END LOOP;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._name_lengths() IS 'internal: refuses names longer than 200 characters in the columns its trigger names (22023)';
REVOKE ALL ON FUNCTION cfeed._name_lengths() FROM PUBLIC;
DROP TRIGGER lease_names ON cfeed.lease;
CREATE TRIGGER lease_names BEFORE INSERT OR UPDATE OF group_name, owner ON cfeed.lease
	FOR EACH ROW EXECUTE FUNCTION cfeed._name_lengths('group_name', 'owner');
DROP FUNCTION cfeed._lease_names();
-- a policy 1.8 stored for a longer name applied to no group: gone, so that
-- a dump of the updated database restores
DELETE FROM cfeed.failure_policy WHERE char_length(group_name) > 200;
CREATE TRIGGER failure_policy_name BEFORE INSERT OR UPDATE OF group_name ON cfeed.failure_policy
	FOR EACH ROW EXECUTE FUNCTION cfeed._name_lengths('group_name');

/*
 * 1.9: cfeed's tables reference each other by triggers, not by foreign
 * keys, so that a parallel pg_restore (-j) restores a dump.
 *
 * pg_dump orders the data of an extension's tables by their foreign keys,
 * but its archive records no dependency between them: the workers of a
 * parallel pg_restore copied them in any order, and the foreign keys
 * refused cfeed.shard_config's rows before cfeed.feed's, cfeed.lease's
 * before cfeed.shard_config's (the database came out without shards or
 * leases).  Each foreign key is now five triggers that keep its name and
 * behaviour (MATCH SIMPLE, ON DELETE CASCADE, ON UPDATE NO ACTION), and,
 * as its triggers did, fire in origin mode only (not in logical
 * replication's apply):
 *
 *  - <name> on the referencing table, after each INSERT statement, and
 *    <name>_update after an UPDATE of a row's key: the referenced rows
 *    must exist; they are locked FOR KEY SHARE until the transaction ends,
 *    so that a concurrent DELETE waits for it and then cascades to the new
 *    rows (23503 otherwise, in the foreign key's words).  A restore's
 *    INSERT (check_function_bodies off, as every pg_dump script and
 *    pg_restore session sets it, by a session user with the privileges of
 *    the table's owner) is not refused a missing row: the referenced
 *    table's data may come later.
 *  - <name>_cascade on the referenced table, after each DELETE statement:
 *    deletes the rows that referenced the deleted ones, with the latest
 *    snapshot and, in REPEATABLE READ and SERIALIZABLE, the transaction's
 *    as crosscheck (a row committed since fails it with 40001, as a
 *    foreign key's cascade; src/reference.c); <name>_truncate truncates the
 *    referencing table with it (as TRUNCATE ... CASCADE);
 *  - <name>_restrict after an UPDATE of a referenced row's key: refused
 *    while rows still reference it (23503).
 *
 * Roles that write these tables (consumers cfeed.lease, creators cfeed.shard)
 * get the checks; the restore's exception is the owner's.
 */
CREATE FUNCTION cfeed._reference_check() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	-- TG_ARGV: the reference's name, the referenced table, the key's columns
	v_name text := TG_ARGV[0];
	v_parent text := TG_ARGV[1];
	v_columns text[] := TG_ARGV[2:TG_NARGS - 1];
	v_source text;
	v_missing text;
BEGIN
	IF TG_TABLE_SCHEMA <> 'cfeed' THEN
		RAISE EXCEPTION 'function cfeed._reference_check() must be fired on a table of cfeed' USING ERRCODE = '39P01';
	END IF;
	IF TG_LEVEL = 'ROW' THEN
		v_source := format('SELECT %s WHERE %s',
						   (SELECT string_agg(format('$1.%I', c), ', ') FROM unnest(v_columns) c),
						   (SELECT string_agg(format('$1.%I IS NOT NULL', c), ' AND ') FROM unnest(v_columns) c));
	ELSE
		v_source := format('SELECT DISTINCT %s FROM new_rows WHERE %s',
						   (SELECT string_agg(format('%I', c), ', ') FROM unnest(v_columns) c),
						   (SELECT string_agg(format('%I IS NOT NULL', c), ' AND ') FROM unnest(v_columns) c));
	END IF;
	EXECUTE format('SELECT concat_ws(%L, %s) FROM (%s) n WHERE NOT EXISTS (SELECT FROM cfeed.%I p WHERE %s FOR KEY SHARE) LIMIT 1',
				   ', ',
				   (SELECT string_agg(format('n.%I', c), ', ') FROM unnest(v_columns) c),
				   v_source, v_parent,
				   (SELECT string_agg(format('p.%1$I = n.%1$I', c), ' AND ') FROM unnest(v_columns) c))
		INTO v_missing USING NEW;
	-- a restore: pg_dump's scripts and pg_restore turn check_function_bodies
	-- off, and restore as the tables' owner (any role may turn it off: the
	-- session's user, which a SECURITY DEFINER function does not change,
	-- must have the owner's privileges)
	IF v_missing IS NOT NULL
	   AND NOT (TG_OP = 'INSERT' AND pg_catalog.current_setting('check_function_bodies') = 'off'
				AND pg_catalog.pg_has_role(SESSION_USER,
										   (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID),
										   'USAGE')) THEN
		RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"', TG_TABLE_NAME, v_name
			USING ERRCODE = '23503', SCHEMA = 'cfeed', TABLE = TG_TABLE_NAME, CONSTRAINT = v_name,
				  DETAIL = format('Key (%s)=(%s) is not present in table "%s".',
								  array_to_string(v_columns, ', '), v_missing, v_parent);
	END IF;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._reference_check() IS 'internal: the foreign key of a cfeed table, its referencing side: the referenced rows exist (23503) and are locked FOR KEY SHARE; a restore''s INSERT is not checked';
REVOKE ALL ON FUNCTION cfeed._reference_check() FROM PUBLIC;

CREATE FUNCTION cfeed._reference_cascade() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_reference_cascade';
COMMENT ON FUNCTION cfeed._reference_cascade() IS 'internal: the foreign key of a cfeed table, ON DELETE CASCADE: deletes the rows that referenced the deleted ones (a serialization failure for one committed since a REPEATABLE READ snapshot), truncates the referencing table with the referenced one';
REVOKE ALL ON FUNCTION cfeed._reference_cascade() FROM PUBLIC;

CREATE FUNCTION cfeed._reference_restrict() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	-- TG_ARGV: the reference's name, the referencing table, the key's columns
	v_name text := TG_ARGV[0];
	v_child text := TG_ARGV[1];
	v_columns text[] := TG_ARGV[2:TG_NARGS - 1];
	v_key text;
BEGIN
	IF TG_TABLE_SCHEMA <> 'cfeed' THEN
		RAISE EXCEPTION 'function cfeed._reference_restrict() must be fired on a table of cfeed' USING ERRCODE = '39P01';
	END IF;
	EXECUTE format('SELECT concat_ws(%L, %s) FROM cfeed.%I c WHERE %s LIMIT 1 FOR KEY SHARE',
				   ', ', (SELECT string_agg(format('c.%I', c), ', ') FROM unnest(v_columns) c), v_child,
				   (SELECT string_agg(format('c.%1$I = $1.%1$I', c), ' AND ') FROM unnest(v_columns) c))
		INTO v_key USING OLD;
	IF v_key IS NOT NULL THEN
		RAISE EXCEPTION 'update or delete on table "%" violates foreign key constraint "%" on table "%"',
						TG_TABLE_NAME, v_name, v_child
			USING ERRCODE = '23503', SCHEMA = 'cfeed', TABLE = v_child, CONSTRAINT = v_name,
				  DETAIL = format('Key (%s)=(%s) is still referenced from table "%s".',
								  array_to_string(v_columns, ', '), v_key, v_child);
	END IF;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._reference_restrict() IS 'internal: the foreign key of a cfeed table, ON UPDATE NO ACTION: a referenced key does not change while rows reference it (23503)';
REVOKE ALL ON FUNCTION cfeed._reference_restrict() FROM PUBLIC;

/*
 * cfeed._reference: replaces the foreign key name of child (its columns,
 * the same names in parent) by the triggers above.
 */
CREATE FUNCTION cfeed._reference(name text, child text, parent text, columns text[]) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_args text := format('%L, %L, %s', name, parent,
						  (SELECT string_agg(format('%L', c), ', ') FROM unnest(columns) c));
	v_child_args text := format('%L, %L, %s', name, child,
								(SELECT string_agg(format('%L', c), ', ') FROM unnest(columns) c));
	v_list text := (SELECT string_agg(format('%I', c), ', ') FROM unnest(columns) c);
	v_changed text := (SELECT string_agg(format('OLD.%1$I IS DISTINCT FROM NEW.%1$I', c), ' OR ') FROM unnest(columns) c);
BEGIN
	EXECUTE format('ALTER TABLE cfeed.%I DROP CONSTRAINT IF EXISTS %I', child, name);
	EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON cfeed.%I REFERENCING NEW TABLE AS new_rows'
				   ' FOR EACH STATEMENT EXECUTE FUNCTION cfeed._reference_check(%s)', name, child, v_args);
	EXECUTE format('CREATE TRIGGER %I AFTER UPDATE OF %s ON cfeed.%I FOR EACH ROW WHEN (%s)'
				   ' EXECUTE FUNCTION cfeed._reference_check(%s)', name || '_update', v_list, child, v_changed, v_args);
	EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON cfeed.%I REFERENCING OLD TABLE AS old_rows'
				   ' FOR EACH STATEMENT EXECUTE FUNCTION cfeed._reference_cascade(%s)', name || '_cascade', parent, v_child_args);
	EXECUTE format('CREATE TRIGGER %I AFTER UPDATE OF %s ON cfeed.%I FOR EACH ROW WHEN (%s)'
				   ' EXECUTE FUNCTION cfeed._reference_restrict(%s)', name || '_restrict', v_list, parent, v_changed, v_child_args);
	EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON cfeed.%I'
				   ' FOR EACH STATEMENT EXECUTE FUNCTION cfeed._reference_cascade(%s)', name || '_truncate', parent, v_child_args);
END
$fn$;
SELECT cfeed._reference('shard_config_feed_id_fkey', 'shard_config', 'feed', '{feed_id}');
SELECT cfeed._reference('read_grant_feed_id_fkey', 'read_grant', 'feed', '{feed_id}');
SELECT cfeed._reference('write_grant_feed_id_fkey', 'write_grant', 'feed', '{feed_id}');
SELECT cfeed._reference('failure_policy_feed_id_fkey', 'failure_policy', 'feed', '{feed_id}');
SELECT cfeed._reference('lease_shard_fkey', 'lease', 'shard_config', '{feed_id,shard}');
SELECT cfeed._reference('failed_change_lease_fkey', 'failed_change', 'lease', '{group_name,feed_id,shard}');
SELECT cfeed._reference('epoch_head_epoch_fkey', 'epoch_head', 'epoch', '{epoch}');
DROP FUNCTION cfeed._reference(text, text, text, text[]);

/*
 * 1.9: the consumer-group functions tell whether a feed exists without the
 * caller's SELECT on cfeed.feed (cfeed._check_feed read it as the caller,
 * so every consumer needed that privilege, which showed it every feed's
 * name, comment and retention: SPEC §8 lets no role learn of feeds it was
 * not granted).
 */
CREATE FUNCTION cfeed._feed_exists(feed_id int) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_feed_exists_sql';
COMMENT ON FUNCTION cfeed._feed_exists(int) IS 'internal: whether a feed the caller may read or write exists (false for the others, whether they exist or not)';

/*
 * 1.9: a reader, who has no SELECT on cfeed.feed, names its feed
 * (cfeed tail --feed NAME).
 */
CREATE FUNCTION cfeed._feed_id(name text) RETURNS int
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_feed_id_sql';
COMMENT ON FUNCTION cfeed._feed_id(text) IS 'internal: the id of the feed of that name when the caller may read or write it (null for the others, whether they exist or not)';

CREATE OR REPLACE FUNCTION cfeed._check_feed(feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF _check_feed.feed_id IS NOT NULL AND NOT cfeed._may_read(_check_feed.feed_id) THEN
		RAISE EXCEPTION 'permission denied for feed %', feed_id
			USING ERRCODE = '42501',
				  HINT = format('The extension''s owner grants it with cfeed.grant_read(%s, role).', feed_id);
	END IF;
	IF NOT cfeed._feed_exists(_check_feed.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
END
$fn$;

/*
 * 1.9: the group-0 sweeper lists the database's sweep groups every second
 * (src/sweeper.c, refresh_groups).  A sequential scan of cfeed.shard_config
 * made an idle sweeper's CPU grow with the shards (0.37% of a core with
 * 10,000, 4% with 131,072); the list is now a walk of this index, one probe
 * per group, and the index holds only the shards of groups other than 0.
 */
CREATE INDEX shard_config_sweep_group_idx ON cfeed.shard_config (sweep_group) WHERE sweep_group OPERATOR(pg_catalog.<>) 0;
